//! Token slices: the vocabulary split by what an unconstrained text context accepts wholesale.
//!
//! The slice language `L` is "text without `"`, `\` or control characters" (valid UTF-8), the body of
//! a JSON string and of most free-text terminals. Tokens whose bytes are prefixes of words of `L`
//! (so a token may end inside a multi-byte character) are grouped into buckets by byte length; every other token goes to the *rest* trie. Each bucket keeps a token trie
//! and a precomputed bitmask.
//!
//! For a terminal DFA state `s`, [`TokenIndex::slice_depth`] gives the length of the shortest byte string that
//! is a prefix of a word of `L` and kills the DFA from `s` (capped). Every token of a bucket whose
//! longest token is shorter than that keeps the terminal alive, hence (every Earley item being
//! completable) keeps the input completable: the bucket's bitmask is added without walking its trie.
//! This is exact, never an approximation: buckets that do not qualify are walked.

use std::sync::OnceLock;

use crate::dfa::{ByteSet, Dfa, DEAD};
use crate::vocab::{TokenTrie, Vocabulary};

/// Depth value meaning "no prefix of `L` kills this state within the cap".
pub const DEPTH_CAP: u8 = u8::MAX;

/// Upper bounds (bytes, inclusive) of the slice buckets; the last bucket takes the rest.
const BUCKET_BOUNDS: [usize; 3] = [6, 16, 48];

/// Per base state of a length-counted automaton: the base states its free text visits (see
/// [`TokenIndex::counted_tables`]), or `None`.
pub type CountedText = Option<Box<[u32]>>;

/// Length-counted automata whose base has more states than this get no counted-text shortcut.
const MAX_COUNTED_TEXT_STATES: usize = 512;

/// DFAs larger than this get no slice depths (their masks are always walked).
const MAX_STATES_FOR_DEPTHS: usize = 50_000;

/// The slice language: JSON-string-safe text.
const SLICE_REGEX: &str = r#"[^"\\\x00-\x1F\x7F]*"#;

pub struct SliceBucket {
    /// Longest token (bytes) in the bucket.
    pub max_len: usize,
    pub trie: TokenTrie,
    /// Bitmask words (`ceil(vocab_size / 32)`) of the bucket's tokens.
    pub mask: Vec<u32>,
}

/// The vocabulary arranged for mask computation. Depends only on the vocabulary.
pub struct TokenIndex {
    pub buckets: Vec<SliceBucket>,
    /// Union of all bucket masks.
    pub all_slices: Vec<u32>,
    pub rest: TokenTrie,
    /// The rest tokens keyed by what follows their longest prefix in `L` (see
    /// [`TokenIndex::slice_stable`]): several tokens share a node when their suffixes are equal.
    pub suffixes: TokenTrie,
    pub words: usize,
    slice_dfa: Dfa,
    /// Every slice token with the number of characters it starts (its bytes outside
    /// `0x80..=0xBF`), for length-counted terminals; ascending by that number.
    slice_leads: Vec<(u32, u32)>,
    /// The most characters any token starts.
    max_token_leads: usize,
    /// `leads_upto[r]`: the mask of slice tokens starting at most `r` characters, built on first
    /// use (`r` below the largest count; above it, `all_slices`).
    leads_upto: Vec<OnceLock<Vec<u32>>>,
    /// Tables for self-loop skipping (see [`super::loops`]), built with the index so that no
    /// mask pays for them.
    loops: super::loops::LoopIndex,
    /// Per node of `rest`: [`BREAK_INSIDE`] when the node's path is a prefix of a word of `L`,
    /// and then the classes ([`super::loops::class_of`]) of the bytes at which the tokens of its
    /// subtree leave `L` (see [`TokenIndex::rest_dies_below`]).
    rest_breaks: Vec<u64>,
}

/// [`TokenIndex::dead_classes`] gives up (0) on closures larger than this.
const MAX_DEAD_CLOSURE: usize = 256;

/// [`TokenIndex::uniform_room`] gives up (`None`) on character layers larger than this.
const MAX_ROOM_PAIRS: usize = 1024;

/// Flag of [`TokenIndex::rest_breaks`]: the node's path is a prefix of a word of `L`.
const BREAK_INSIDE: u64 = 1 << 63;

impl TokenIndex {
    pub fn new(vocab: &Vocabulary) -> TokenIndex {
        let slice_dfa = Dfa::from_regex(SLICE_REGEX, 1 << 20).expect("fixed slice regex compiles");
        let words = vocab.size().div_ceil(32);
        let mut groups: Vec<Vec<(u32, &[u8])>> = vec![Vec::new(); BUCKET_BOUNDS.len() + 1];
        let mut slice_leads = Vec::new();
        let mut rest = Vec::new();
        let mut suffixes = Vec::new();
        let mut max_token_leads = 0;
        for (id, bytes) in vocab.text_tokens() {
            max_token_leads = max_token_leads.max(leads_of(bytes));
            // Members are prefixes of words of `L` (a trailing partial UTF-8 character is fine):
            // slice depths are defined over such prefixes.
            if is_slice_prefix(&slice_dfa, bytes) {
                slice_leads.push((id, leads_of(bytes) as u32));
                let b = BUCKET_BOUNDS
                    .iter()
                    .position(|&m| bytes.len() <= m)
                    .unwrap_or(BUCKET_BOUNDS.len());
                groups[b].push((id, bytes));
            } else {
                rest.push((id, bytes));
                suffixes.push((id, &bytes[longest_slice_prefix(&slice_dfa, bytes)..]));
            }
        }
        slice_leads.sort_unstable_by_key(|&(id, leads)| (leads, id));
        let max_leads = slice_leads.last().map(|&(_, k)| k as usize);
        let buckets: Vec<SliceBucket> = groups
            .into_iter()
            .filter(|g| !g.is_empty())
            .map(|g| {
                let mut mask = vec![0u32; words];
                for &(id, _) in &g {
                    mask[id as usize / 32] |= 1 << (id % 32);
                }
                SliceBucket {
                    max_len: g.iter().map(|(_, b)| b.len()).max().unwrap_or(0),
                    trie: TokenTrie::build(g).expect("subset of a valid vocabulary"),
                    mask,
                }
            })
            .collect();
        let mut all_slices = vec![0u32; words];
        for b in &buckets {
            for (o, m) in all_slices.iter_mut().zip(&b.mask) {
                *o |= m;
            }
        }
        let rest = TokenTrie::build(rest).expect("subset of a valid vocabulary");
        let rest_breaks = break_classes(&rest, &slice_dfa);
        TokenIndex {
            all_slices,
            buckets,
            rest,
            rest_breaks,
            suffixes: TokenTrie::build(suffixes).expect("suffixes of valid tokens"),
            words,
            slice_dfa,
            leads_upto: (0..=max_leads.unwrap_or(0))
                .map(|_| OnceLock::new())
                .collect(),
            slice_leads,
            max_token_leads,
            loops: super::loops::LoopIndex::new(vocab),
        }
    }

    /// The most characters any token starts (its bytes outside `0x80..=0xBF`).
    pub fn max_token_leads(&self) -> usize {
        self.max_token_leads
    }

    /// The position of the first byte of `bytes` outside the slice language's prefixes, if any.
    pub fn first_break(&self, bytes: &[u8]) -> Option<usize> {
        first_break(&self.slice_dfa, bytes)
    }

    /// Whether every token below node `i` of the rest trie dies, for a walk from the root whose
    /// terminals all had `dead` (see [`TokenIndex::dead_classes`]) at its start: `i`'s path is
    /// slice text and every token of the subtree leaves `L` at a byte of a dead class.
    #[inline]
    pub fn rest_dies_below(&self, i: usize, dead: u64) -> bool {
        let b = self.rest_breaks[i];
        b & BREAK_INSIDE != 0 && b & !dead & !BREAK_INSIDE == 0
    }

    /// The classes ([`super::loops::class_of`]) whose every byte kills `dfa` wherever slice text
    /// read from state `s` leads it, provided it never reaches an accepting state there (the
    /// terminal cannot end inside slice text); 0 otherwise, or over [`MAX_DEAD_CLOSURE`] pairs
    /// (it is asked for every state a mask starts in: large closures cost more than they save). A token that is slice text up to a byte of such a class dies there, whatever the
    /// text before it.
    pub fn dead_classes(&self, dfa: &Dfa, moves: &SliceMoves, s: u32) -> u64 {
        self.dead_classes_where(dfa, moves, s, true)
    }

    /// [`TokenIndex::dead_classes`], where the terminal may end inside slice text unless
    /// `no_ends`: the caller then accounts for what follows it.
    pub fn dead_classes_where(&self, dfa: &Dfa, moves: &SliceMoves, s: u32, no_ends: bool) -> u64 {
        let slice = &self.slice_dfa;
        let class_bytes = super::loops::class_bytes();
        let mut dead = (1u64 << super::loops::NUM_CLASSES) - 1;
        // The bytes some state of the closure so far lives on; `dead`: the classes none meets.
        let mut live = ByteSet::EMPTY;
        let mut seen: rustc_hash::FxHashSet<(u32, u32)> = Default::default();
        let mut stack = vec![(s, slice.start())];
        seen.insert((s, slice.start()));
        while let Some((t, u)) = stack.pop() {
            if no_ends && dfa.is_accept(t) {
                return 0;
            }
            let before = live;
            live.union_with(&dfa.live_bytes(t));
            if live != before {
                for (c, set) in class_bytes.iter().enumerate() {
                    if dead & (1 << c) != 0 && set.meets(&live) {
                        dead &= !(1 << c);
                    }
                }
                if dead == 0 {
                    return 0;
                }
            }
            for &(b, u2) in &moves[u as usize] {
                let t2 = dfa.next(t, b);
                if t2 != DEAD && seen.insert((t2, u2)) {
                    if seen.len() > MAX_DEAD_CLOSURE {
                        return 0;
                    }
                    stack.push((t2, u2));
                }
            }
        }
        dead
    }

    /// The self-loop tables of the vocabulary this index was built from.
    pub fn loop_index(&self) -> &super::loops::LoopIndex {
        &self.loops
    }

    /// Whether some slice token starts with `byte`.
    pub fn starts_slice(&self, byte: u8) -> bool {
        self.slice_dfa.next(self.slice_dfa.start(), byte) != DEAD
    }

    /// The bytes some slice token starts with.
    pub fn slice_first_bytes(&self) -> ByteSet {
        self.slice_dfa.live_bytes(self.slice_dfa.start())
    }

    /// The most characters a slice token starts.
    pub fn max_slice_leads(&self) -> usize {
        self.leads_upto.len() - 1
    }

    /// The mask of the slice tokens that start at most `r` characters.
    pub fn slices_with_leads_upto(&self, r: usize) -> &[u32] {
        if r >= self.max_slice_leads() {
            return &self.all_slices;
        }
        self.leads_upto[r].get_or_init(|| {
            // Set the tokens that fit, or clear from every slice token those that do not:
            // whichever are fewer (a room of tens of characters excludes only a few long tokens).
            // Either way each listed bit flips (all of them are set in `all_slices`).
            let fit = self.slice_leads.partition_point(|&(_, k)| k as usize <= r);
            let (mut mask, flips) = match fit <= self.slice_leads.len() / 2 {
                true => (vec![0u32; self.words], &self.slice_leads[..fit]),
                false => (self.all_slices.clone(), &self.slice_leads[fit..]),
            };
            for &(id, _) in flips {
                mask[id as usize / 32] ^= 1 << (id % 32);
            }
            mask
        })
    }

    /// The slice depths of a length-counted automaton's base (see the module docs) and, per base
    /// state `t`, the base states that slice text read from `t` visits, when no slice text kills
    /// `t` and every such path counts each character at its first byte (as `len!` and `json_len!`
    /// do; `None` otherwise).
    ///
    /// From a counted state `(t, n)` with such a `t`, a slice token starting `k` characters
    /// visits counts `n ..= n + k` at states of that set and nothing else decides its fate: when
    /// the whole set is alive at each of those counts the token is allowed, and when the whole set
    /// is dead at one of them it is not — so the mask is the slice tokens starting few enough
    /// characters (see [`TokenIndex::slices_with_leads_upto`]).
    pub fn counted_tables(&self, base: &Dfa, counted: &Dfa) -> (Vec<u8>, Vec<CountedText>) {
        let slice = &self.slice_dfa;
        let moves = slice_moves(base, slice);
        let depths = depths_with(base, slice, &moves);
        let nu = slice.state_count();
        // Each state's walk visits at most every (base, slice) pair: bounded work per automaton.
        let small = base.state_count() <= MAX_COUNTED_TEXT_STATES;
        let reach = depths
            .iter()
            .enumerate()
            .map(|(t, &depth)| {
                // Only states no slice text kills within the cap (the walk checks the rest).
                if !small || t == DEAD as usize || depth != DEPTH_CAP {
                    return None;
                }
                let mut seen = rustc_hash::FxHashSet::default();
                let mut stack = vec![(t as u32, slice.start())];
                seen.insert(t * nu + slice.start() as usize);
                let mut states = vec![t as u32];
                while let Some((s, u)) = stack.pop() {
                    for &(b, u2) in &moves[u as usize] {
                        let s2 = base.next(s, b);
                        if s2 == DEAD || counted.counted_increments(s, b) == is_continuation(b) {
                            return None;
                        }
                        if seen.insert(s2 as usize * nu + u2 as usize) {
                            states.push(s2);
                            stack.push((s2, u2));
                        }
                    }
                }
                states.sort_unstable();
                states.dedup();
                Some(states.into_boxed_slice())
            })
            .collect();
        (depths, reach)
    }

    /// For state `s` of a tabulated `dfa` (e.g. a short string, `maxLength` folded into the
    /// automaton): `R` such that slice text read from `s` keeps `dfa` alive, without reaching an
    /// accepting state, while it starts at most `R` characters, and every lead byte of an
    /// `R + 1`-th character kills it. A slice token is then allowed exactly when it starts at most
    /// `R` characters (see [`TokenIndex::slices_with_leads_upto`]), as in counted text (see
    /// [`TokenIndex::counted_tables`]). `None` when the characters decide (some kill, some do
    /// not), when the terminal may end inside the text, or over [`MAX_ROOM_PAIRS`] pairs.
    pub fn uniform_room(&self, dfa: &Dfa, moves: &SliceMoves, s: u32) -> Option<usize> {
        self.room_by_layers(dfa, moves, s, true)
    }

    /// [`TokenIndex::uniform_room`], character layer by layer up to the cap; with
    /// `stop_at_repeat`, it stops at a layer that starts as the previous one did (every later
    /// layer repeats it, so the text goes on to the cap).
    fn room_by_layers(
        &self,
        dfa: &Dfa,
        moves: &SliceMoves,
        s: u32,
        stop_at_repeat: bool,
    ) -> Option<usize> {
        let slice = &self.slice_dfa;
        let cap = self.max_slice_leads();
        // `layer`: the (terminal, slice) pairs slice text starting exactly `k` characters
        // reaches, continuation bytes included.
        let mut layer = vec![(s, slice.start())];
        let mut seen: rustc_hash::FxHashSet<(u32, u32)> = Default::default();
        for k in 0..=cap {
            // The layer's start, sorted and deduplicated.
            let start_len = layer.len();
            seen.clear();
            seen.extend(layer.iter().copied());
            let mut next: Vec<(u32, u32)> = Vec::new();
            let (mut live, mut dead) = (false, false);
            let mut i = 0;
            while i < layer.len() {
                let (t, u) = layer[i];
                i += 1;
                for &(b, u2) in &moves[u as usize] {
                    let t2 = dfa.next(t, b);
                    if t2 != DEAD && dfa.is_accept(t2) {
                        return None;
                    }
                    if is_continuation(b) {
                        // Within the `k`-th character: a token may end on either side.
                        if t2 == DEAD {
                            return None;
                        }
                        if seen.insert((t2, u2)) {
                            layer.push((t2, u2));
                        }
                    } else if t2 == DEAD {
                        dead = true;
                    } else {
                        live = true;
                        next.push((t2, u2));
                    }
                }
                if layer.len() + next.len() > MAX_ROOM_PAIRS {
                    return None;
                }
            }
            match (live, dead) {
                (false, _) => return Some(k),
                (true, true) => return None,
                (true, false) => {}
            }
            next.sort_unstable();
            next.dedup();
            if stop_at_repeat && next[..] == layer[..start_len] {
                return Some(cap);
            }
            layer = next;
        }
        Some(cap)
    }

    /// The live moves of the (terminal, slice) pair, for [`TokenIndex::slice_depth`] and
    /// [`TokenIndex::is_slice_stable`].
    pub fn slice_moves(&self, dfa: &Dfa) -> SliceMoves {
        slice_moves(dfa, &self.slice_dfa)
    }

    /// The slice depth of state `s` of `dfa` (see the module docs): breadth first over the
    /// (terminal, slice) pairs that slice text reaches, up to the first that dies. Asked per
    /// state when a mask needs it; a search over [`MAX_STATES_FOR_DEPTHS`] pairs answers 0 (no
    /// bucket taken wholesale: always safe).
    pub fn slice_depth(&self, dfa: &Dfa, moves: &SliceMoves, s: u32) -> u8 {
        let slice = &self.slice_dfa;
        let mut seen: rustc_hash::FxHashSet<(u32, u32)> = Default::default();
        let mut layer = vec![(s, slice.start())];
        seen.insert((s, slice.start()));
        for depth in 1..DEPTH_CAP {
            let mut next = Vec::new();
            for &(t, u) in &layer {
                for &(b, u2) in &moves[u as usize] {
                    let t2 = dfa.next(t, b);
                    if t2 == DEAD {
                        return depth;
                    }
                    if seen.insert((t2, u2)) {
                        if seen.len() > MAX_STATES_FOR_DEPTHS {
                            return 0;
                        }
                        next.push((t2, u2));
                    }
                }
            }
            if next.is_empty() {
                return DEPTH_CAP;
            }
            layer = next;
        }
        DEPTH_CAP
    }

    /// Whether reading any word of `L` from state `s` of `dfa` never kills it, never passes an
    /// accepting state (the terminal cannot end inside the text) and ends in `s` or an
    /// equivalent state (e.g. the body loop of a JSON string; the automata are not minimal,
    /// so the state after the opening quote and the one after a character can differ while
    /// accepting the same continuations). `moves` from [`TokenIndex::slice_moves`]. Costs a walk
    /// of the states slice text reaches from `s`, so it is asked per state, when a mask needs it.
    ///
    /// When every scanned terminal is in such a state, every slice token is allowed and a rest
    /// token `w u` (`w` its longest prefix in `L`) is allowed exactly when `u` is: after `w` the
    /// parse is the same as before it, up to relabelled positions. The mask is then the slice
    /// buckets plus a walk of the (much smaller) suffix trie.
    pub fn is_slice_stable(&self, dfa: &Dfa, moves: &SliceMoves, s: u32) -> bool {
        let slice = &self.slice_dfa;
        let mut seen: rustc_hash::FxHashSet<(u32, u32)> = Default::default();
        let mut stack = vec![(s, slice.start())];
        seen.insert((s, slice.start()));
        let mut same: Vec<u32> = Vec::new();
        let mut equivalent = Equivalence::new(dfa);
        while let Some((t, u)) = stack.pop() {
            if dfa.is_accept(t) {
                // The terminal could end inside the text and the rest of it be read by what
                // follows: then text is not all the same.
                return false;
            }
            if slice.is_accept(u) && t != s && !same.contains(&t) {
                // A few duplicates of `s` are tested; more distinct states mean text that
                // changes the state (a word trie), which no test needs to confirm.
                if same.len() >= MAX_DUPLICATES || !equivalent.test(s, t) {
                    return false;
                }
                same.push(t);
            }
            for &(b, u2) in &moves[u as usize] {
                let t2 = dfa.next(t, b);
                if t2 == DEAD {
                    return false;
                }
                if seen.insert((t2, u2)) {
                    stack.push((t2, u2));
                }
            }
        }
        true
    }
}

/// Per slice-automaton state, its live moves over representative bytes (see [`slice_moves`]).
pub type SliceMoves = Vec<Vec<(u8, u32)>>;

/// A slice-stable state may have at most this many duplicates (equivalent states) that slice text
/// leads to.
const MAX_DUPLICATES: usize = 4;

/// Language equivalence of two states of one DFA, decided by walking state pairs in lock step
/// (every state is co-reachable, so two states are equivalent exactly when no byte string leads
/// one to acceptance or death and not the other). Pairs beyond [`Equivalence::MAX_PAIRS`] count
/// as not equivalent (a stability test then fails safe). Answers are memoised.
struct Equivalence<'a> {
    dfa: &'a Dfa,
    /// One byte per byte class of `dfa`.
    reps: Vec<u8>,
    known: rustc_hash::FxHashMap<(u32, u32), bool>,
}

impl<'a> Equivalence<'a> {
    const MAX_PAIRS: usize = 256;

    fn new(dfa: &'a Dfa) -> Equivalence<'a> {
        let mut seen = [false; 256];
        let reps = (0..=255u8)
            .filter(|&b| !std::mem::replace(&mut seen[dfa.byte_class(b) as usize], true))
            .collect();
        Equivalence {
            dfa,
            reps,
            known: Default::default(),
        }
    }

    fn test(&mut self, a: u32, b: u32) -> bool {
        let key = (a.min(b), a.max(b));
        if let Some(&k) = self.known.get(&key) {
            return k;
        }
        let d = self.dfa;
        let mut seen: rustc_hash::FxHashSet<(u32, u32)> = Default::default();
        let mut stack = vec![key];
        seen.insert(key);
        let mut same = true;
        'walk: while let Some((x, y)) = stack.pop() {
            if d.is_accept(x) != d.is_accept(y) {
                same = false;
                break;
            }
            for &c in &self.reps {
                let (x2, y2) = (d.next(x, c), d.next(y, c));
                if (x2 == DEAD) != (y2 == DEAD) {
                    same = false;
                    break 'walk;
                }
                let pair = (x2.min(y2), x2.max(y2));
                if x2 != y2 && seen.insert(pair) {
                    if seen.len() > Self::MAX_PAIRS {
                        same = false;
                        break 'walk;
                    }
                    stack.push(pair);
                }
            }
        }
        self.known.insert(key, same);
        same
    }
}

/// The slice automaton's live moves per state, over representative bytes of the joint byte
/// classes of `t` and `slice` (bytes no automaton of the pair tells apart): `moves[u]` lists
/// `(byte, next slice state)`. Most slice states (inside a UTF-8 character) have few live bytes,
/// so walking the pair visits only those instead of every joint class.
fn slice_moves(t: &Dfa, slice: &Dfa) -> SliceMoves {
    let mut reps: Vec<u8> = Vec::new();
    // Bit `256 * class in t + class in slice`: that joint class has its representative.
    let mut seen = [0u64; 1024];
    for b in 0..=255u8 {
        let joint = usize::from(t.byte_class(b)) << 8 | usize::from(slice.byte_class(b));
        if seen[joint / 64] & 1 << (joint % 64) == 0 {
            seen[joint / 64] |= 1 << (joint % 64);
            reps.push(b);
        }
    }
    (0..slice.state_count() as u32)
        .map(|u| {
            reps.iter()
                .filter_map(|&b| {
                    let u2 = slice.next(u, b);
                    (u != DEAD && u2 != DEAD).then_some((b, u2))
                })
                .collect()
        })
        .collect()
}

/// [`TokenIndex::rest_breaks`] of a trie: per node, whether its path is a prefix of a word of
/// the slice language and, then, the classes of the first bytes outside it of its subtree's
/// tokens.
fn break_classes(trie: &TokenTrie, slice: &Dfa) -> Vec<u64> {
    let nodes = trie.nodes();
    let parent = trie.parents();
    let mut state = vec![slice.start(); nodes.len()];
    for i in 1..nodes.len() {
        state[i] = match state[parent[i] as usize] {
            DEAD => DEAD,
            ps => slice.next(ps, nodes[i].byte()),
        };
    }
    let mut out: Vec<u64> = state
        .iter()
        .map(|&u| if u == DEAD { 0 } else { BREAK_INSIDE })
        .collect();
    for i in (1..nodes.len()).rev() {
        let p = parent[i] as usize;
        if state[p] == DEAD {
            continue;
        }
        // A child inside `L` passes its breaks up; the first byte outside it is a break itself.
        out[p] |= if state[i] == DEAD {
            1 << super::loops::class_of(nodes[i].byte())
        } else {
            out[i] & !BREAK_INSIDE
        };
    }
    out
}

/// The characters `bytes` starts: its bytes that are not UTF-8 continuation bytes.
fn leads_of(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| !is_continuation(b)).count()
}

/// Whether `b` continues a UTF-8 character (`0x80..=0xBF`) rather than starting one.
fn is_continuation(b: u8) -> bool {
    (0x80..=0xBF).contains(&b)
}

fn is_slice_prefix(slice: &Dfa, bytes: &[u8]) -> bool {
    first_break(slice, bytes).is_none()
}

/// The position of the first byte of `bytes` at which the slice automaton dies, if any.
fn first_break(slice: &Dfa, bytes: &[u8]) -> Option<usize> {
    let mut u = slice.start();
    bytes.iter().position(|&b| {
        u = slice.next(u, b);
        u == DEAD
    })
}

/// Length of the longest prefix of `bytes` that is a complete word of the slice language.
fn longest_slice_prefix(slice: &Dfa, bytes: &[u8]) -> usize {
    let mut s = slice.start();
    let mut best = 0;
    for (i, &b) in bytes.iter().enumerate() {
        s = slice.next(s, b);
        if s == DEAD {
            break;
        }
        if slice.is_accept(s) {
            best = i + 1;
        }
    }
    best
}

/// For each state `s` of `t`: the length of the shortest byte string `w` such that `w` is a prefix of
/// a word of `slice`'s language and `t` dies reading `w` from `s`, capped at [`DEPTH_CAP`]
/// (state 0, dead, gets 0). The whole-automaton fixpoint, the reference for the per-state search.
#[cfg(test)]
pub fn slice_depths(t: &Dfa, slice: &Dfa) -> Vec<u8> {
    depths_with(t, slice, &slice_moves(t, slice))
}

/// The slice depths of every state of `t`, given the pair's live moves (see [`slice_moves`]).
fn depths_with(t: &Dfa, slice: &Dfa, moves: &[Vec<(u8, u32)>]) -> Vec<u8> {
    let nt = t.state_count();
    if nt > MAX_STATES_FOR_DEPTHS {
        return vec![0; nt];
    }
    let nu = slice.state_count();
    // die[s * nu + u], relaxed to a fixpoint (values only decrease, bounded by the cap). States
    // are numbered in discovery order from the start, so successors mostly have larger ids:
    // sweeping from the last state down settles chains (`x{0,n}`) in one sweep instead of n.
    //
    // Stopping rule: another sweep is needed only when some pair changed *after* this sweep had
    // read it (`read[p] == sweep`). Otherwise every value read was final, so each pair satisfies
    // `die(p) <= 1 + die(successor)` for all successors with the end-of-sweep values: that is the
    // fixpoint (relaxation never goes below it). Chains thus take one sweep, not two.
    let idx = |s: u32, u: u32| s as usize * nu + u as usize;
    let mut die = vec![DEPTH_CAP; nt * nu];
    let mut read = vec![0u32; nt * nu];
    let mut sweep = 0u32;
    loop {
        sweep += 1;
        let mut again = false;
        for s in (1..nt as u32).rev() {
            for u in 1..nu as u32 {
                let mut best = die[idx(s, u)];
                for &(b, u2) in &moves[u as usize] {
                    let s2 = t.next(s, b);
                    let d = if s2 == DEAD {
                        1
                    } else {
                        read[idx(s2, u2)] = sweep;
                        die[idx(s2, u2)].saturating_add(1)
                    };
                    best = best.min(d);
                }
                if best < die[idx(s, u)] {
                    die[idx(s, u)] = best;
                    again |= read[idx(s, u)] == sweep;
                }
            }
        }
        if !again {
            break;
        }
    }
    let u0 = slice.start();
    let mut out = vec![0u8; nt];
    for s in 1..nt as u32 {
        out[s as usize] = die[idx(s, u0)];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn json_string_body_is_unbounded_but_max_length_is_not() {
        let slice = Dfa::from_regex(SLICE_REGEX, 1 << 20).unwrap();
        let t = Dfa::from_regex(r#""([^"\\\x00-\x1F]|\\["\\/bfnrt])*""#, 1 << 20).unwrap();
        let d = slice_depths(&t, &slice);
        let inside = t.next(t.start(), b'"');
        assert_eq!(d[inside as usize], DEPTH_CAP);
        // Before the opening quote, any slice text kills immediately.
        assert_eq!(d[t.start() as usize], 1);
        let t = Dfa::from_regex(r#""[^"\\\x00-\x1F]{0,5}""#, 1 << 20).unwrap();
        let d = slice_depths(&t, &slice);
        let inside = t.next(t.start(), b'"');
        assert_eq!(d[inside as usize], 6);
        // Digits only: killed by a letter at once.
        let t = Dfa::from_regex("[0-9]+", 1 << 20).unwrap();
        let d = slice_depths(&t, &slice);
        assert_eq!(d[t.start() as usize], 1);
    }

    /// Moore's partition refinement: the classes of language-equivalent states.
    fn moore_classes(t: &Dfa) -> Vec<u32> {
        let n = t.state_count();
        let mut class: Vec<u32> = (0..n as u32)
            .map(|s| {
                if s == DEAD {
                    0
                } else {
                    1 + t.is_accept(s) as u32
                }
            })
            .collect();
        loop {
            let mut ids: HashMap<Vec<u32>, u32> = HashMap::new();
            let next: Vec<u32> = (0..n as u32)
                .map(|s| {
                    let mut sig = vec![class[s as usize]];
                    sig.extend((0..=255u8).map(|b| class[t.next(s, b) as usize]));
                    let k = ids.len() as u32;
                    *ids.entry(sig).or_insert(k)
                })
                .collect();
            let count = |c: &[u32]| c.iter().collect::<std::collections::HashSet<_>>().len();
            if count(&next) == count(&class) {
                return next;
            }
            class = next;
        }
    }

    #[test]
    fn rest_breaks_equal_brute_force() {
        let words: [&[u8]; 10] = [
            b"ab\n",
            b"ab\"",
            b"a\"b",
            b"\n",
            b"x\ty\n",
            b"x\\",
            b"\xC3\xA9\n",
            b"\xC3a",
            b"\x7F",
            b"abc",
        ];
        let toks: Vec<Option<Vec<u8>>> = words.iter().map(|w| Some(w.to_vec())).collect();
        let vocab = crate::vocab::Vocabulary::from_byte_tokens(&toks, &[], None).unwrap();
        let index = TokenIndex::new(&vocab);
        let nodes = index.rest.nodes();
        let slice = &index.slice_dfa;
        let path = |k: usize| index.rest.path_of(k);
        for (i, n) in nodes.iter().enumerate().skip(1) {
            let inside = is_slice_prefix(slice, &path(i));
            assert_eq!(
                index.rest_breaks[i] & BREAK_INSIDE != 0,
                inside,
                "{:?}",
                path(i)
            );
            if !inside {
                continue;
            }
            let mut want = 0u64;
            for k in (i..n.subtree_end()).filter(|&k| nodes[k].token().is_some()) {
                let p = path(k);
                let at = index.first_break(&p).expect("rest tokens leave L");
                assert!(at >= path(i).len());
                want |= 1 << super::super::loops::class_of(p[at]);
            }
            assert_eq!(index.rest_breaks[i] & !BREAK_INSIDE, want, "{:?}", path(i));
        }
        assert!(index.rest.num_tokens() == 9, "`abc` is a slice token");
    }

    /// `uniform_room` (which stops at a layer that repeats the previous one) equals the room
    /// found by reading every character layer up to the cap, for every state of automata with
    /// unbounded, bounded and character-dependent text.
    #[test]
    fn uniform_room_matches_reading_every_layer() {
        let mut toks: Vec<Option<Vec<u8>>> = vec![None];
        for n in 1..=12usize {
            toks.push(Some("a".repeat(n).into_bytes()));
            toks.push(Some("\u{e9}".repeat(n).into_bytes()));
        }
        let vocab = crate::vocab::Vocabulary::from_byte_tokens(&toks, &[], None).unwrap();
        let index = TokenIndex::new(&vocab);
        assert_eq!(index.max_slice_leads(), 12);
        let mut capped = 0;
        for re in [
            r#""[^"\\\x00-\x1F]*""#,
            r#""[^"\\\x00-\x1F]{0,5}""#,
            r#""[^"\\\x00-\x1F]{3,20}x""#,
            r#""a[^"\\]*|b[\u{e9}]{2,}c""#,
            r#"(ab|[^"a])*"|abc"#,
            r#""([^"\\\x00-\x1F]|\\["\\/bfnrt])*""#,
        ] {
            let dfa = Dfa::from_regex(re, 1 << 20).unwrap();
            let moves = index.slice_moves(&dfa);
            for s in 1..dfa.state_count() as u32 {
                let want = index.room_by_layers(&dfa, &moves, s, false);
                assert_eq!(index.uniform_room(&dfa, &moves, s), want, "{re} state {s}");
                capped += (want == Some(12)) as usize;
            }
        }
        assert!(capped > 0, "some state has text up to the cap");
    }

    /// `slices_with_leads_upto(r)` is exactly the slice tokens starting at most `r` characters,
    /// whichever way it is built (set from empty for small rooms, cleared from every slice token
    /// for large ones).
    #[test]
    fn slices_with_leads_upto_match_counting_every_token() {
        let mut toks: Vec<Option<Vec<u8>>> = vec![None];
        for n in 0..12usize {
            toks.push(Some("a".repeat(n + 1).into_bytes()));
            toks.push(Some("\u{e9}".repeat(n / 2 + 1).into_bytes())); // two bytes, one character
            toks.push(Some(format!("{}\"", "b".repeat(n)).into_bytes())); // not a slice token
        }
        toks.push(Some(vec![0xC3])); // a partial character: one lead byte
        toks.push(Some(vec![0xA9, b'x'])); // a continuation byte first: not a slice token
        let vocab = crate::vocab::Vocabulary::from_byte_tokens(&toks, &[], None).unwrap();
        let index = TokenIndex::new(&vocab);
        let slice = |t: &[u8]| is_slice_prefix(&index.slice_dfa, t);
        let leads = |t: &[u8]| t.iter().filter(|&&b| !is_continuation(b)).count();
        assert_eq!(index.max_slice_leads(), 12);
        for r in 0..=index.max_slice_leads() + 2 {
            let got = index.slices_with_leads_upto(r);
            for (id, t) in toks.iter().enumerate() {
                let want = t.as_deref().is_some_and(|t| slice(t) && leads(t) <= r);
                assert_eq!(
                    got[id / 32] >> (id % 32) & 1 == 1,
                    want,
                    "room {r}, token {t:?}"
                );
            }
        }
    }

    #[test]
    fn equivalence_equals_partition_refinement() {
        for pattern in [
            r#""[^"\\]*""#,
            r#""([^"\\\x00-\x1F]|\\["\\/bfnrt])*""#,
            r#"(?:ab|a)*b{0,3}|c+"#,
            r#"[a-c]{2,5}x?|[ab]+y"#,
        ] {
            let t = Dfa::from_regex(pattern, 1 << 20).unwrap();
            let moore = moore_classes(&t);
            let mut eq = Equivalence::new(&t);
            for a in 1..t.state_count() as u32 {
                for b in 1..t.state_count() as u32 {
                    assert_eq!(
                        eq.test(a, b),
                        moore[a as usize] == moore[b as usize],
                        "{pattern}: states {a} and {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn string_bodies_are_stable_in_every_equivalent_state() {
        let vocab = crate::vocab::Vocabulary::from_byte_tokens(
            &[Some(b"a".to_vec()), Some(b"\"".to_vec())],
            &[],
            None,
        )
        .unwrap();
        let index = TokenIndex::new(&vocab);
        for pattern in [r#""[^"\\]*""#, r#""([^"\\\x00-\x1F]|\\["\\/bfnrt])*""#] {
            let t = Dfa::from_regex(pattern, 1 << 20).unwrap();
            let moves = index.slice_moves(&t);
            let stable = |s: u32| index.is_slice_stable(&t, &moves, s);
            let open = t.next(t.start(), b'"');
            let after = t.next(open, b'a');
            let after2 = t.next(after, b'a');
            for s in [open, after, after2] {
                assert!(stable(s), "{pattern}: state {s}");
            }
            assert!(!stable(t.start()), "{pattern}: before the quote");
        }
        // A bounded body is not stable (text changes what may follow).
        let t = Dfa::from_regex(r#""[^"\\]{0,5}""#, 1 << 20).unwrap();
        let moves = index.slice_moves(&t);
        assert!(!index.is_slice_stable(&t, &moves, t.next(t.start(), b'"')));
    }

    /// Per state, the shortest killing prefix of the slice language by breadth-first search over
    /// (terminal state, slice state) pairs: the definition, without the fixpoint.
    fn reference_depths(t: &Dfa, slice: &Dfa) -> Vec<u8> {
        (0..t.state_count() as u32)
            .map(|s| {
                if s == DEAD {
                    return 0;
                }
                let mut seen = std::collections::HashSet::new();
                let mut layer = vec![(s, slice.start())];
                seen.insert((s, slice.start()));
                for depth in 1..DEPTH_CAP {
                    let mut next = Vec::new();
                    for &(a, u) in &layer {
                        for b in 0..=255u8 {
                            let u2 = slice.next(u, b);
                            if u2 == DEAD {
                                continue;
                            }
                            let a2 = t.next(a, b);
                            if a2 == DEAD {
                                return depth;
                            }
                            if seen.insert((a2, u2)) {
                                next.push((a2, u2));
                            }
                        }
                    }
                    layer = next;
                }
                DEPTH_CAP
            })
            .collect()
    }

    /// The one-sweep stopping rule gives the exact fixpoint, also with back edges, loops and
    /// multi-byte characters.
    #[test]
    fn fixpoint_equals_breadth_first_definition() {
        let slice = Dfa::from_regex(SLICE_REGEX, 1 << 20).unwrap();
        for pattern in [
            r#""[^"\\\x00-\x1F]{0,5}""#,
            r#"(?:ab|c)*d{0,7}"#,
            r#"(?:x[a-z]{2,4}y)*z"#,
            r#"[a-c]{3,9}|é{2,6}|(?:ab)+"#,
            r#""(?:[^"\\]|\\.){1,12}":\s*(?:true|false|[0-9]{1,5})"#,
            r#"(?:[a-z]+,)*[a-z]{1,3}"#,
        ] {
            let t = Dfa::from_regex(pattern, 1 << 20).unwrap();
            let reference = reference_depths(&t, &slice);
            assert_eq!(slice_depths(&t, &slice), reference, "{pattern}");
            // The per-state search gives the same depths.
            let index = TokenIndex::new(
                &crate::vocab::Vocabulary::from_byte_tokens(&[Some(b"a".to_vec())], &[], None)
                    .unwrap(),
            );
            let moves = index.slice_moves(&t);
            for s in 1..t.state_count() as u32 {
                assert_eq!(
                    index.slice_depth(&t, &moves, s),
                    reference[s as usize],
                    "{pattern} at {s}"
                );
            }
        }
    }
}
