//! Token masks: a grammar bound to a vocabulary, and per-sequence matchers that compute which
//! tokens keep the output completable.
//!
//! [`CompiledGrammar`] = grammar + vocabulary + the vocabulary's [`TokenIndex`] (token tries split
//! into slices) + per-DFA slice tables, each built the first time a mask needs it (a grammar pays
//! only for the terminals its sequences reach). It is immutable to its users (the lazily built
//! tables are write-once) and shared; compiled grammars are cached by
//! (grammar text, options, vocabulary fingerprint) in [`grammar_cache`]. A [`Matcher`] holds one sequence's
//! recognizer and computes bitmasks by walking the token tries with recognizer push/pop, except
//! inside free text: a terminal state that all slice text leaves alive and in place takes every
//! slice token wholesale, and a length-counted one (or a short text whose bound is in a tabulated
//! automaton) the slice tokens that start few enough characters; only the other tokens are
//! walked. In restricted free text (a URI, a pattern's
//! character class) the tokens a terminal state keeps alive whatever they contain come from one
//! bitmask and the walk skips their subtrees ([`loops`]).

mod apply;
mod batch;
mod disk;
pub mod disk_writer;
pub mod grammar_cache;
mod loops;
mod matcher;
pub mod slices;

use std::sync::{Arc, Mutex, OnceLock};

use rustc_hash::FxHashMap;

pub use apply::{apply_bitmask, Logit};
pub use batch::fill_next_token_bitmasks;
pub use matcher::Matcher;
pub use slices::TokenIndex;

use crate::dfa::Dfa;
use crate::earley::ScanItem;
use crate::grammar::Grammar;
use crate::lnf::LSym;
use crate::vocab::Vocabulary;

/// A grammar bound to a vocabulary. Immutable, `Send + Sync`.
pub struct CompiledGrammar {
    grammar: Arc<Grammar>,
    vocab: Arc<Vocabulary>,
    index: Arc<TokenIndex>,
    /// Slice tables per LNF DFA, built on first use (see [`CompiledGrammar::slice_tables`]).
    tables: Vec<OnceLock<Box<SliceTables>>>,
    /// Masks of expensive states, keyed by [`crate::Recognizer::state_key`].
    mask_cache: Mutex<MaskCache>,
}

/// Counters and size of one compiled grammar's mask cache (see
/// [`crate::CompileOptions::mask_cache_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MaskCacheStats {
    /// Masks answered from the cache.
    pub hits: u64,
    /// Masks computed (and then stored when they fit).
    pub misses: u64,
    /// Masks held.
    pub entries: usize,
    /// Bytes of keys and masks held; never more than `mask_cache_bytes`.
    pub bytes: usize,
}

/// Trie nodes a mask's walks must examine for the mask to be cached (see
/// [`CompiledGrammar::work_worth_caching`]).
const MIN_WORK_TO_CACHE: usize = 512;

/// Longest state key worth caching (deeper parse stacks are recomputed).
pub const MASK_CACHE_MAX_KEY: usize = 4096;

#[derive(Default)]
struct MaskCache {
    map: FxHashMap<Box<[u32]>, StoredMask>,
    /// Hashes of the keys whose mask was computed once and not stored (see
    /// [`CompiledGrammar::store_mask`]).
    computed_once: rustc_hash::FxHashSet<u64>,
    bytes: usize,
    hits: u64,
    misses: u64,
}

/// The positions of the set bits of `words` (`count` of them), ascending.
fn set_positions(count: usize, words: impl Iterator<Item = u32>) -> Box<[u32]> {
    let mut out = Vec::with_capacity(count);
    for (i, mut w) in words.enumerate() {
        while w != 0 {
            out.push((i * 32) as u32 + w.trailing_zeros());
            w &= w - 1;
        }
    }
    out.into_boxed_slice()
}

impl MaskCache {
    /// Empties the cache when `size` more bytes would exceed `limit`: a simple bound, rather
    /// than tracking recency on the hot path.
    fn make_room(&mut self, size: usize, limit: usize) {
        if self.bytes + size > limit {
            self.map.clear();
            self.computed_once.clear();
            self.bytes = 0;
        }
    }
}

/// A cached mask in the smallest of four exact forms: most cached states allow few tokens (a
/// key, a literal, a number), nearly all, or every slice token ([`TokenIndex::all_slices`]) give
/// or take a few (free text, a key after a name's prefix), so a list of the exceptions is far
/// smaller than the bitmask (`ceil(V / 32)` words, 16 KB for a 128k vocabulary).
///
/// Invariant: [`StoredMask::restore`] rewrites every bit of the row, padding bits included, as
/// they were when stored.
enum StoredMask {
    /// The words themselves.
    Bits(Box<[u32]>),
    /// The positions of the set bits, ascending.
    Ones(Box<[u32]>),
    /// The positions of the clear bits, ascending (every other bit is set).
    Zeros(Box<[u32]>),
    /// The positions where the mask differs from the slice tokens' mask, ascending.
    Flips(Box<[u32]>),
}

impl StoredMask {
    /// The smallest form of `mask`; `slices` is [`TokenIndex::all_slices`].
    fn store(mask: &[u32], slices: &[u32]) -> StoredMask {
        let (mut ones, mut flips) = (0usize, 0usize);
        for (&w, &s) in mask.iter().zip(slices) {
            ones += w.count_ones() as usize;
            flips += (w ^ s).count_ones() as usize;
        }
        let zeros = mask.len() * 32 - ones;
        let fewest = ones.min(zeros).min(flips);
        if fewest >= mask.len() {
            StoredMask::Bits(mask.into())
        } else if fewest == ones {
            StoredMask::Ones(set_positions(ones, mask.iter().copied()))
        } else if fewest == zeros {
            StoredMask::Zeros(set_positions(zeros, mask.iter().map(|&w| !w)))
        } else {
            let words = mask.iter().zip(slices).map(|(&w, &s)| w ^ s);
            StoredMask::Flips(set_positions(flips, words))
        }
    }

    fn restore(&self, out: &mut [u32], slices: &[u32]) {
        // The form's base row, then the listed bits flipped.
        let ids = match self {
            StoredMask::Bits(m) => {
                out.copy_from_slice(m);
                return;
            }
            StoredMask::Ones(ids) => {
                out.fill(0);
                ids
            }
            StoredMask::Zeros(ids) => {
                out.fill(u32::MAX);
                ids
            }
            StoredMask::Flips(ids) => {
                out.copy_from_slice(slices);
                ids
            }
        };
        for &i in ids.iter() {
            out[i as usize / 32] ^= 1 << (i % 32);
        }
    }

    /// Heap bytes.
    fn bytes(&self) -> usize {
        match self {
            StoredMask::Bits(v)
            | StoredMask::Ones(v)
            | StoredMask::Zeros(v)
            | StoredMask::Flips(v) => v.len() * 4,
        }
    }
}

/// What masks learned about one DFA state, each fact computed when a mask first asks.
#[derive(Debug, Default, Clone, Copy)]
struct StateFacts {
    /// [`TokenIndex::slice_depth`].
    depth: Option<u8>,
    /// [`TokenIndex::is_slice_stable`].
    stable: Option<bool>,
    /// [`TokenIndex::dead_classes`].
    dead: Option<u64>,
    /// [`loops::inside_classes`].
    inside: Option<loops::Inside>,
    /// [`TokenIndex::uniform_room`].
    room: Option<Option<usize>>,
}

/// The slice tables of one terminal DFA.
#[derive(Debug, Default)]
struct SliceTables {
    /// For a length-counted automaton, the slice depth of each base state (see
    /// [`TokenIndex::slice_depth`]); empty otherwise.
    depths: Vec<u8>,
    /// The pair's live moves for [`TokenIndex::slice_depth`] and
    /// [`TokenIndex::is_slice_stable`]; empty for counted automata and bounded `except!`.
    moves: slices::SliceMoves,
    /// For a length-counted automaton: its base automaton, the base's live moves with the slice
    /// automaton, and per base state the classes that kill it after slice text, ends allowed
    /// (see [`CompiledGrammar::counted_rest_dead`]).
    base: Option<Dfa>,
    base_moves: slices::SliceMoves,
    base_dead: Mutex<FxHashMap<u32, u64>>,
    /// State → what masks learned about it (see [`CompiledGrammar::state_fact`]).
    per_state: Mutex<FxHashMap<u32, StateFacts>>,
    /// For a length-counted automaton, per base state: see [`TokenIndex::counted_tables`].
    counted_reach: Vec<slices::CountedText>,
}

impl CompiledGrammar {
    /// Binds `grammar` to `vocab` (slice tables are built on first use).
    pub fn new(grammar: Arc<Grammar>, vocab: Arc<Vocabulary>) -> CompiledGrammar {
        let index = grammar_cache::token_index(&vocab);
        let tables = (0..grammar.lnf().dfas.len())
            .map(|_| OnceLock::new())
            .collect();
        CompiledGrammar {
            grammar,
            vocab,
            index,
            tables,
            mask_cache: Mutex::new(MaskCache::default()),
        }
    }

    /// The slice tables of LNF DFA `d`, computed on first use (concurrent first uses wait for
    /// one computation). No slice tables for a bounded `except!` (its length bound is not in the
    /// automaton); a length-counted automaton gets the depths of its base automaton (see
    /// [`CompiledGrammar::slice_depth`]).
    fn slice_tables(&self, d: u32) -> &SliceTables {
        self.tables[d as usize].get_or_init(|| {
            let lnf = self.grammar.lnf();
            let dfa = &lnf.dfas[d as usize];
            if lnf.excepts.iter().any(|e| e.dfa == d && e.max != u32::MAX) {
                return Box::default();
            }
            if let Some(base) = dfa.counted_base() {
                let (depths, counted_reach) = self.index.counted_tables(&base, dfa);
                return Box::new(SliceTables {
                    depths,
                    counted_reach,
                    base_moves: self.index.slice_moves(&base),
                    base: Some(base),
                    ..SliceTables::default()
                });
            }
            Box::new(SliceTables {
                moves: self.index.slice_moves(dfa),
                ..SliceTables::default()
            })
        })
    }

    /// One fact about state `state` of LNF DFA `d`: `field` picks it from the state's
    /// [`StateFacts`], `compute` finds it the first time (from the automaton and its tables).
    fn state_fact<T: Copy>(
        &self,
        d: u32,
        state: u32,
        field: impl FnOnce(&mut StateFacts) -> &mut Option<T>,
        compute: impl FnOnce(&Dfa, &SliceTables) -> T,
    ) -> T {
        let tables = self.slice_tables(d);
        let mut facts = tables.per_state.lock().unwrap_or_else(|p| p.into_inner());
        *field(facts.entry(state).or_default())
            .get_or_insert_with(|| compute(&self.grammar.lnf().dfas[d as usize], tables))
    }

    /// What state `state` of LNF DFA `d` keeps alive (see [`loops::inside_classes`]; for a
    /// length-counted automaton the count is in the state ids, so its bound is found too).
    fn inside_classes(&self, d: u32, state: u32) -> loops::Inside {
        self.state_fact(
            d,
            state,
            |f| &mut f.inside,
            |dfa, _| loops::inside_classes(dfa, state),
        )
    }

    /// Masks whose walks examined fewer trie nodes than this are not cached: restoring one
    /// would cost about as much as computing it (scaled down for small vocabularies).
    fn work_worth_caching(&self) -> usize {
        (self.vocab.trie().len() / 64).min(MIN_WORK_TO_CACHE)
    }

    /// The grammar.
    pub fn grammar(&self) -> &Arc<Grammar> {
        &self.grammar
    }

    /// The vocabulary it is bound to.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Sizes for diagnostics: (slice bucket token counts, rest token count, rest trie nodes).
    pub fn index_stats(&self) -> (Vec<usize>, usize, usize) {
        (
            self.index
                .buckets
                .iter()
                .map(|b| b.trie.num_tokens())
                .collect(),
            self.index.rest.num_tokens(),
            self.index.suffixes.len(),
        )
    }

    /// Heap bytes this grammar holds now (approximate): its automata and rules, the slice tables
    /// built so far and its mask cache (not the vocabulary and its token index, which every
    /// grammar of that vocabulary shares). Grows with first uses, up to the tables of every
    /// reached terminal plus `mask_cache_bytes`.
    pub fn memory_usage(&self) -> usize {
        let tables: usize = self
            .tables
            .iter()
            .filter_map(|t| t.get())
            .map(|t| {
                t.depths.len()
                    + t.moves.iter().map(|m| 24 + m.len() * 8).sum::<usize>()
                    + t.per_state
                        .lock()
                        .map_or(0, |m| m.len() * (4 + std::mem::size_of::<StateFacts>()))
                    + t.counted_reach
                        .iter()
                        .map(|r| 16 + r.as_ref().map_or(0, |r| r.len() * 4))
                        .sum::<usize>()
            })
            .sum();
        self.grammar.memory_usage()
            + self.tables.len() * std::mem::size_of::<OnceLock<Box<SliceTables>>>()
            + self.tables.iter().filter(|t| t.get().is_some()).count()
                * std::mem::size_of::<SliceTables>()
            + tables
            + self.mask_cache_stats().bytes
    }

    /// Number of 32-bit words in one bitmask row.
    pub fn mask_words(&self) -> usize {
        self.index.words
    }

    /// A new matcher at the start of the grammar.
    pub fn matcher(self: &Arc<Self>) -> Matcher {
        Matcher::new(self.clone())
    }

    /// Copies the cached mask for `key` into `out`; false on a miss.
    fn cached_mask(&self, key: &[u32], out: &mut [u32]) -> bool {
        let mut c = self.mask_cache.lock().unwrap_or_else(|p| p.into_inner());
        match c.map.get(key) {
            Some(m) => {
                m.restore(out, &self.index.all_slices);
                c.hits += 1;
                true
            }
            None => {
                c.misses += 1;
                false
            }
        }
    }

    /// Stores the mask of `key` the second time it is computed: most states a sequence meets
    /// occur once, and storing a mask costs about as much as a small walk.
    fn store_mask(&self, key: &[u32], mask: &[u32]) {
        if !self.may_store(key) {
            return;
        }
        let hash = std::hash::BuildHasher::hash_one(&rustc_hash::FxBuildHasher, key);
        {
            let mut c = self.mask_cache.lock().unwrap_or_else(|p| p.into_inner());
            if !c.computed_once.contains(&hash) {
                // (each hash counts as 8 bytes against the limit)
                c.make_room(8, self.grammar.options().mask_cache_bytes);
                c.computed_once.insert(hash);
                c.bytes += 8;
                return;
            }
        }
        self.store(key, StoredMask::store(mask, &self.index.all_slices));
    }

    /// Whether an entry for `key` can fit at all (the smallest form holds one word).
    fn may_store(&self, key: &[u32]) -> bool {
        (key.len() + 1) * 4 <= self.grammar.options().mask_cache_bytes
    }

    fn store(&self, key: &[u32], stored: StoredMask) {
        let limit = self.grammar.options().mask_cache_bytes;
        let size = key.len() * 4 + stored.bytes();
        if size > limit {
            return;
        }
        let mut c = self.mask_cache.lock().unwrap_or_else(|p| p.into_inner());
        c.make_room(size, limit);
        if c.map.insert(key.into(), stored).is_none() {
            c.bytes += size;
        }
    }

    /// Counters and current size of this grammar's mask cache.
    pub fn mask_cache_stats(&self) -> MaskCacheStats {
        let c = self.mask_cache.lock().unwrap_or_else(|p| p.into_inner());
        MaskCacheStats {
            hits: c.hits,
            misses: c.misses,
            entries: c.map.len(),
            bytes: c.bytes,
        }
    }

    /// Whether a scanned regex terminal is in a slice-stable state.
    #[inline]
    fn is_slice_stable(&self, sym: LSym, state: u32) -> bool {
        let LSym::Regex(d) = sym else {
            return false;
        };
        if self.slice_tables(d).moves.is_empty() {
            return false;
        }
        self.state_fact(
            d,
            state,
            |f| &mut f.stable,
            |dfa, tables| self.index.is_slice_stable(dfa, &tables.moves, state),
        )
    }

    /// The classes that kill a scanned terminal in `state` after any slice text (see
    /// [`TokenIndex::dead_classes`]); 0 when it might not die or end inside slice text.
    fn dead_classes(&self, sym: LSym, state: u32) -> u64 {
        match sym {
            LSym::Lit(l) => {
                // Slice text follows the literal up to its first byte outside `L`, which must
                // come (else the literal could end inside the text); only the bytes up to there
                // can be read.
                let rest = &self.grammar.lnf().literal(l)[state as usize..];
                let Some(p) = self.index.first_break(rest) else {
                    return 0;
                };
                let read = rest[..=p]
                    .iter()
                    .fold(0u64, |a, &b| a | 1 << loops::class_of(b));
                !read & ((1u64 << loops::NUM_CLASSES) - 1)
            }
            LSym::Regex(d) => {
                if self.slice_tables(d).moves.is_empty() {
                    return 0;
                }
                self.state_fact(
                    d,
                    state,
                    |f| &mut f.dead,
                    |dfa, tables| self.index.dead_classes(dfa, &tables.moves, state),
                )
            }
            _ => 0,
        }
    }

    /// Inside length-counted free text (see [`CompiledGrammar::counted_text_room`]): the classes
    /// at which every rest token dies where it leaves slice text. The counted terminal must be
    /// able to end now, so that what follows its end is among the scanned literals (whose next
    /// bytes start no slice token, so they read nothing before the byte leaving slice text):
    /// the classes dead in every base state slice text reaches, minus those literals' next
    /// bytes (of the regexes there: every byte they can read). 0 when none.
    fn counted_rest_dead(&self, scanned: impl Iterator<Item = ScanItem>) -> u64 {
        let lnf = self.grammar.lnf();
        let (mut dead, mut follow) = (0u64, 0u64);
        for it in scanned {
            match it.sym {
                LSym::Lit(l) => follow |= 1 << loops::class_of(lnf.literal(l)[it.state as usize]),
                LSym::Regex(d) if !self.reads_slice_first(d, it.state) => {
                    let live = lnf.dfas[d as usize].live_bytes(it.state);
                    follow |= live.iter().fold(0, |a, b| a | 1 << loops::class_of(b));
                }
                LSym::Regex(_) if dead != 0 => return 0,
                LSym::Regex(d) => {
                    let dfa = &lnf.dfas[d as usize];
                    let tables = self.slice_tables(d);
                    let (Some(base), Some((t, _))) = (&tables.base, dfa.counted_state(it.state))
                    else {
                        return 0;
                    };
                    if !dfa.is_accept(it.state) {
                        return 0;
                    }
                    let mut cache = tables.base_dead.lock().unwrap_or_else(|p| p.into_inner());
                    dead = *cache.entry(t).or_insert_with(|| {
                        self.index
                            .dead_classes_where(base, &tables.base_moves, t, false)
                    });
                }
                _ => return 0,
            }
        }
        dead & !follow
    }

    /// For the terminals scanned now: when one is a length-counted terminal in state `(t, n)`
    /// with `t` in free text (see [`TokenIndex::counted_tables`]) and every other is a literal or
    /// a regex whose next byte starts no slice token (the closing quote), how many more
    /// characters every state of that text accepts, provided the first count that kills one
    /// kills them all (then the slice tokens allowed are exactly those with at most that many
    /// lead bytes). `None` otherwise.
    fn counted_text_room(&self, scanned: impl Iterator<Item = ScanItem>) -> Option<usize> {
        let lnf = self.grammar.lnf();
        let mut room = None;
        for it in scanned {
            match it.sym {
                LSym::Lit(l) if !self.index.starts_slice(lnf.literal(l)[it.state as usize]) => {}
                LSym::Regex(d) if !self.reads_slice_first(d, it.state) => {}
                LSym::Regex(d) if room.is_none() => room = Some(self.counted_room(d, it.state)?),
                _ => return None,
            }
        }
        room
    }

    /// The state key of `rec` with each length-counted terminal written as its base state, when
    /// no token can make the count matter: every such terminal is at least at its minimum and
    /// stays below its maximum (and alive as its base) for as many characters as a token
    /// completes (the characters it starts, plus one begun before it). Masks then do not
    /// depend on the counts. Such keys start with 2 or 3 (plain keys with 0 or 1), so the two
    /// kinds never meet. `false` when some count may matter, there is no such terminal, or the
    /// key is too long.
    fn count_free_key(&self, rec: &crate::Recognizer, key: &mut Vec<u32>) -> bool {
        let dfas = &self.grammar.lnf().dfas;
        let chars = self.index.max_token_leads() as u32 + 1;
        let mut counted = false;
        for it in rec.scan_terminals() {
            if let LSym::Regex(d) = it.sym {
                let dfa = &dfas[d as usize];
                if dfa.counted_state(it.state).is_some() {
                    if dfa.count_indifferent(it.state, chars).is_none() {
                        return false;
                    }
                    counted = true;
                }
            }
        }
        // (every counted item was found indifferent above: its base state is the key's)
        let keyed = counted
            && rec.state_key_with(key, MASK_CACHE_MAX_KEY, |d, state| {
                dfas[d as usize]
                    .counted_state(state)
                    .map_or(state, |(base, _)| base)
            });
        if keyed {
            key[0] += 2;
        }
        keyed
    }

    /// Like [`CompiledGrammar::counted_text_room`], for tabulated terminals (see
    /// [`TokenIndex::uniform_room`]): when every scanned terminal is either in such a state or a
    /// literal or regex whose next byte starts no slice token, how many characters a slice token
    /// may start. `None` otherwise.
    fn tabulated_text_room(&self, scanned: impl Iterator<Item = ScanItem>) -> Option<usize> {
        let lnf = self.grammar.lnf();
        let mut room: Option<usize> = None;
        for it in scanned {
            match it.sym {
                LSym::Lit(l) if !self.index.starts_slice(lnf.literal(l)[it.state as usize]) => {}
                LSym::Regex(d) if !self.reads_slice_first(d, it.state) => {}
                // Several such terminals (or one in several places of the parse): a token is
                // allowed when one of them keeps it alive, so the largest room counts.
                LSym::Regex(d) if !self.slice_tables(d).moves.is_empty() => {
                    let r = self.state_fact(
                        d,
                        it.state,
                        |f| &mut f.room,
                        |dfa, tables| self.index.uniform_room(dfa, &tables.moves, it.state),
                    )?;
                    room = Some(room.map_or(r, |m| m.max(r)));
                }
                _ => return None,
            }
        }
        room
    }

    /// Whether state `state` of LNF DFA `d` can read a byte that starts a slice token.
    fn reads_slice_first(&self, d: u32, state: u32) -> bool {
        let live = self.grammar.lnf().dfas[d as usize].live_bytes(state);
        live.meets(&self.index.slice_first_bytes())
    }

    /// `K` such that every state of the text is alive at counts `n ..= n + K` and none at
    /// `n + K + 1` (or `K` reaches the most characters a slice token starts).
    fn counted_room(&self, d: u32, state: u32) -> Option<usize> {
        let dfa = &self.grammar.lnf().dfas[d as usize];
        let (t, n) = dfa.counted_state(state)?;
        let reach = self
            .slice_tables(d)
            .counted_reach
            .get(t as usize)?
            .as_deref()?;
        let cap = self.index.max_slice_leads();
        for k in 0..=cap {
            let count = n.saturating_add(k as u32);
            let live = reach
                .iter()
                .filter(|&&s| dfa.counted_live(s, count))
                .count();
            if live == 0 && k > 0 {
                return Some(k - 1);
            }
            if live < reach.len() {
                return None;
            }
        }
        Some(cap)
    }

    /// Slice depth of a scanned terminal in a given state (0 when it cannot take slices).
    #[inline]
    fn slice_depth(&self, sym: LSym, state: u32) -> u8 {
        let d = match sym {
            LSym::Regex(d) => d,
            LSym::Except(x) => self.grammar.lnf().excepts[x as usize].dfa,
            _ => return 0,
        };
        let dfa = &self.grammar.lnf().dfas[d as usize];
        // A counted state (t, n): the base automaton's depth at t, unless fewer characters than
        // that bring the count to where it matters (each byte adds at most one character).
        if let Some((t, slack)) = dfa.counted_parts(state, u32::from(slices::DEPTH_CAP)) {
            let base = self
                .slice_tables(d)
                .depths
                .get(t as usize)
                .copied()
                .unwrap_or(0);
            return base.min(slack as u8);
        }
        if self.slice_tables(d).moves.is_empty() {
            return 0;
        }
        self.state_fact(
            d,
            state,
            |f| &mut f.depth,
            |dfa, tables| self.index.slice_depth(dfa, &tables.moves, state),
        )
    }
}

#[cfg(test)]
mod stored_mask_tests {
    use super::StoredMask;

    /// Every form restores every bit (padding included), and the smallest form is chosen.
    #[test]
    fn stored_masks_restore_exactly() {
        let mut seed = 0x1234_5678_9ABC_DEF0u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for words in [1usize, 2, 7, 100] {
            for density in [0u64, 1, 3, 32, 61, 63, 64] {
                // Each bit set with probability density / 64.
                let mask: Vec<u32> = (0..words)
                    .map(|_| (0..32).fold(0u32, |w, b| w | (u32::from(rand() % 64 < density) << b)))
                    .collect();
                // Slice masks: unrelated, a subset of the mask, and the mask with a few changes.
                let subset: Vec<u32> = mask.iter().map(|&w| w & rand() as u32).collect();
                let near: Vec<u32> = mask
                    .iter()
                    .map(|&w| w ^ u32::from(rand() % 8 == 0) << (rand() % 32))
                    .collect();
                let other: Vec<u32> = mask.iter().map(|_| rand() as u32).collect();
                for slices in [&subset, &near, &other] {
                    let stored = StoredMask::store(&mask, slices);
                    let mut out = vec![0xA5A5_A5A5u32; words];
                    stored.restore(&mut out, slices);
                    assert_eq!(out, mask, "{words} words, density {density}/64");
                    let ones: usize = mask.iter().map(|w| w.count_ones() as usize).sum();
                    let flips: usize = mask
                        .iter()
                        .zip(slices.iter())
                        .map(|(m, s)| (m ^ s).count_ones() as usize)
                        .sum();
                    let smallest = ones.min(words * 32 - ones).min(flips).min(words);
                    assert_eq!(stored.bytes(), smallest * 4, "{words} words, {ones} ones");
                }
            }
        }
    }
}
