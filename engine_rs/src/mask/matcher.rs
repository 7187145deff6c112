//! Per-sequence matcher: token acceptance, rollback, forced bytes and exact bitmasks.

use std::sync::Arc;

use super::loops::{Inside, LoopSkip};
use super::{CompiledGrammar, TokenIndex};
use crate::dfa::{ByteSet, Dfa, DEAD};
use crate::earley::{Recognizer, ScanItem};
use crate::error::EngineError;
use crate::lnf::LSym;
use crate::vocab::TokenTrie;

/// Masks whose first byte has at most this many choices skip the self-loop search (see
/// [`super::loops`]): their walk prunes the vocabulary at its first level anyway.
const FEW_FIRST_BYTES: usize = 12;

/// Longest forced continuation reported by [`Matcher::forced_bytes`].
const MAX_FORCED: usize = 4096;

/// One generated sequence's parse state. Cloning forks it (cheap relative to a mask).
#[derive(Clone)]
pub struct Matcher {
    cg: Arc<CompiledGrammar>,
    rec: Recognizer,
    /// Recognizer length after each of the last accepted tokens (EOS repeats the previous
    /// length); the `dropped` tokens before them can no longer be rolled back.
    token_ends: Vec<u32>,
    /// Accepted tokens no longer in `token_ends` (`dropped <= floor`).
    dropped: usize,
    /// Steps at or below this count are final: rollback cannot go below it.
    floor: usize,
    /// Recognizer length before the first token of `token_ends`.
    base_len: u32,
    /// At most this many tokens can be rolled back (`None`: all of them). Bounds memory on long
    /// generations: history beyond the window is released.
    max_rollback: Option<usize>,
    /// An EOS token was accepted: nothing more may follow.
    stopped: bool,
    /// Reused buffer for mask-cache keys.
    key: Vec<u32>,
}

impl Matcher {
    /// A matcher at the start of `cg` (one per generated sequence).
    pub fn new(cg: Arc<CompiledGrammar>) -> Matcher {
        let rec = Recognizer::new(cg.grammar.clone());
        Matcher {
            cg,
            rec,
            token_ends: Vec::new(),
            dropped: 0,
            floor: 0,
            base_len: 0,
            max_rollback: None,
            stopped: false,
            key: Vec::new(),
        }
    }

    /// Limits rollback to the last `n` tokens (`None`: unlimited, the default) so memory stays
    /// bounded on long generations. Takes effect from the next accepted token.
    pub fn set_max_rollback_tokens(&mut self, n: Option<usize>) {
        self.max_rollback = n;
    }

    /// The rollback bound (None: unbounded).
    pub fn max_rollback_tokens(&self) -> Option<usize> {
        self.max_rollback
    }

    /// Heap bytes held by this matcher's parse state (not counting the shared compiled grammar).
    pub fn memory_usage(&self) -> usize {
        self.rec.memory_usage()
            + self.token_ends.capacity() * std::mem::size_of::<u32>()
            + self.key.capacity() * std::mem::size_of::<u32>()
    }

    /// Tokens that [`Matcher::rollback`] can undo now: the steps accepted after the floor.
    pub fn rollback_window(&self) -> usize {
        self.num_tokens() - self.floor
    }

    /// Recognizer length after the first `k` accepted steps (`k >= self.dropped`).
    fn end_of(&self, k: usize) -> u32 {
        if k == self.dropped {
            self.base_len
        } else {
            self.token_ends[k - self.dropped - 1]
        }
    }

    /// Records an accepted step and releases history beyond the rollback window.
    fn push_token_end(&mut self) {
        self.token_ends.push(self.rec.len() as u32);
        let Some(w) = self.max_rollback else {
            return;
        };
        // The floor only rises: once a step leaves the window it is final, even if later
        // rollbacks shorten the output again (so the window never depends on when the
        // recognizer happened to compact).
        let floor = self.num_tokens().saturating_sub(w);
        if floor <= self.floor {
            return;
        }
        self.floor = floor;
        let horizon = self.end_of(floor);
        self.rec.forget_before(horizon as usize);
        // Trim the bookkeeping in amortized O(1): entries before the floor are never read.
        let cut = floor - self.dropped;
        if cut > self.token_ends.len() / 2 + 64 {
            self.base_len = horizon;
            self.token_ends.drain(..cut);
            self.dropped = floor;
        }
    }

    /// The compiled grammar this matcher follows.
    pub fn compiled(&self) -> &Arc<CompiledGrammar> {
        &self.cg
    }

    /// The byte-level recognizer behind this matcher.
    pub fn recognizer(&self) -> &Recognizer {
        &self.rec
    }

    /// Whether an EOS token was accepted, or the output is complete and nothing can follow.
    pub fn is_finished(&self) -> bool {
        self.stopped || (self.rec.is_complete() && self.rec.is_dead())
    }

    /// Whether the output so far is a complete sentence (EOS is allowed now).
    pub fn can_finish(&self) -> bool {
        !self.stopped && self.rec.is_complete()
    }

    /// Number of tokens accepted (EOS and `accept_bytes` calls count as one each).
    pub fn num_tokens(&self) -> usize {
        self.dropped + self.token_ends.len()
    }

    /// Back to the start of the grammar.
    pub fn reset(&mut self) {
        self.rec.reset();
        self.token_ends.clear();
        self.dropped = 0;
        self.floor = 0;
        self.base_len = 0;
        self.stopped = false;
    }

    /// Accepts a token if it keeps the output completable; otherwise returns `false` unchanged.
    /// Special tokens other than EOS, padding ids and out-of-range ids are never accepted.
    pub fn accept_token(&mut self, id: u32) -> Result<bool, EngineError> {
        if self.stopped {
            return Ok(false);
        }
        let vocab = &self.cg.vocab;
        if vocab.eos_token_ids().contains(&id) {
            if self.rec.is_complete() {
                self.stopped = true;
                self.push_token_end();
                return Ok(true);
            }
            return Ok(false);
        }
        if !vocab.is_text_token(id) {
            return Ok(false);
        }
        let cg = self.cg.clone();
        let bytes = cg.vocab.token_bytes(id).unwrap_or_default();
        self.accept_bytes(bytes)
    }

    /// Accepts raw bytes as one step (rolled back as one token).
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> Result<bool, EngineError> {
        if self.stopped {
            return Ok(false);
        }
        if self.rec.try_feed(bytes)? {
            self.push_token_end();
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Undoes the last `n` accepted steps. Without a rollback limit, a larger `n` undoes all of
    /// them; with one, `n` beyond [`Matcher::rollback_window`] is an error and changes nothing.
    pub fn rollback(&mut self, n: usize) -> Result<(), EngineError> {
        if n == 0 {
            return Ok(());
        }
        let window = self.rollback_window();
        if n > window && self.max_rollback.is_some() {
            return Err(EngineError::Rollback {
                requested: n,
                available: window,
            });
        }
        let keep = self.num_tokens().saturating_sub(n);
        self.token_ends.truncate(keep - self.dropped);
        let len = self.end_of(keep) as usize;
        let back = self.rec.rollback_to(len);
        debug_assert!(
            back,
            "the rollback window is inside the recognizer's window"
        );
        self.stopped = false;
        Ok(())
    }

    /// The longest byte string that every valid continuation starts with (empty when EOS or
    /// several bytes are possible).
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        let base = self.rec.len();
        let mut out = Vec::new();
        if self.stopped {
            return out;
        }
        while out.len() < MAX_FORCED && !self.rec.is_complete() {
            let allowed = self.rec.allowed_bytes();
            if allowed.len() != 1 {
                break;
            }
            let b = allowed.iter().next().expect("one byte");
            if !self.rec.feed_byte(b) {
                break;
            }
            out.push(b);
        }
        let back = self.rec.rollback_to(base);
        debug_assert!(back);
        out
    }

    /// Writes the mask of allowed tokens into `out` (at least [`CompiledGrammar::mask_words`]
    /// words; bit `i` of word `i / 32` set ⇔ token `i` allowed).
    pub fn fill_next_token_bitmask(&mut self, out: &mut [u32]) -> Result<(), EngineError> {
        let words = self.cg.index.words;
        let out = &mut out[..words];
        // Each branch writes every word of `out` (a free-text copy and a cached mask overwrite
        // it; the others start from zeros), so no branch clears it twice.
        if self.stopped {
            out.fill(0);
            return Ok(());
        }
        let cg = self.cg.clone();
        let first = self.rec.allowed_bytes();
        // Free text: every scanned terminal (often one; the same one in several places of the
        // parse, too) is in a slice-stable state. Not inside a `unique!` item: whether a token
        // may end the item depends on its whole text, so a token's slice prefix matters too.
        let stable_text = !self.rec.in_unique_item()
            && self.rec.scan_terminals().next().is_some()
            && self
                .rec
                .scan_terminals()
                .all(|it| cg.is_slice_stable(it.sym, it.state));
        let counted_room = match stable_text {
            true => None,
            false => cg.counted_text_room(self.rec.scan_terminals()),
        };
        if stable_text {
            // Inside free text: every slice token, plus the rest decided by their suffixes. The
            // state recurs at every position of the text (and of texts in the same place), so
            // the mask is cached.
            let mut key = std::mem::take(&mut self.key);
            let keyed = self.rec.state_key(&mut key, super::MASK_CACHE_MAX_KEY);
            if !(keyed && cg.cached_mask(&key, out)) {
                out.copy_from_slice(&cg.index.all_slices);
                walk_subtree(
                    &mut self.rec,
                    &cg.index.suffixes,
                    0,
                    Some(&first),
                    out,
                    Skip::No,
                )?;
                self.add_eos(out);
                if keyed {
                    cg.store_mask(&key, out);
                }
            }
            self.key = key;
            return Ok(());
        } else if let Some(room) = counted_room {
            // Inside length-counted free text: the slice tokens that fit the count, plus the rest
            // walked (the count changes along a token, so no suffix shortcut). Far from its
            // bounds the count decides nothing: the mask is cached under the base states.
            let mut key = std::mem::take(&mut self.key);
            let keyed = cg.count_free_key(&self.rec, &mut key);
            if !(keyed && cg.cached_mask(&key, out)) {
                out.copy_from_slice(cg.index.slices_with_leads_upto(room));
                let dead = cg.counted_rest_dead(self.rec.scan_terminals());
                let skip = Skip::rest_dead(&cg.index, dead);
                walk_subtree(&mut self.rec, &cg.index.rest, 0, Some(&first), out, skip)?;
                self.add_eos(out);
                if keyed {
                    cg.store_mask(&key, out);
                }
            }
            self.key = key;
            return Ok(());
        } else if !first.is_empty() {
            let mut key = std::mem::take(&mut self.key);
            let keyed = self.rec.state_key(&mut key, super::MASK_CACHE_MAX_KEY);
            if keyed && cg.cached_mask(&key, out) {
                self.key = key;
                return Ok(());
            }
            // Short text bounded inside a tabulated automaton (e.g. a `maxLength: 3` string):
            // the slice tokens that start few enough characters, plus the rest walked.
            let room = match self.rec.in_unique_item() {
                true => None,
                false => cg.tabulated_text_room(self.rec.scan_terminals()),
            };
            let work = match room {
                Some(room) => {
                    out.copy_from_slice(cg.index.slices_with_leads_upto(room));
                    let rest = rest_skip(&self.rec, &cg);
                    let work =
                        walk_subtree(&mut self.rec, &cg.index.rest, 0, Some(&first), out, rest)?;
                    self.add_eos(out);
                    work
                }
                None => {
                    out.fill(0);
                    self.fill_by_walking(&cg, &first, out)?
                }
            };
            if keyed && work >= cg.work_worth_caching() {
                cg.store_mask(&key, out);
            }
            self.key = key;
            return Ok(());
        } else {
            out.fill(0);
        }
        self.add_eos(out);
        Ok(())
    }

    /// Sets the EOS bits when the input is complete.
    fn add_eos(&self, out: &mut [u32]) {
        if self.rec.is_complete() {
            for &e in self.cg.vocab.eos_token_ids() {
                if (e as usize) < out.len() * 32 {
                    out[e as usize / 32] |= 1 << (e % 32);
                }
            }
        }
    }

    /// The mask of a state that is not plain text (`out` all zeros on entry): slices where they
    /// apply, trie walks elsewhere, and EOS when the input is complete. Returns the trie nodes
    /// the walks examined (what the mask cost).
    fn fill_by_walking(
        &mut self,
        cg: &Arc<CompiledGrammar>,
        first: &ByteSet,
        out: &mut [u32],
    ) -> Result<usize, EngineError> {
        let mut work = 0usize;
        {
            // The deepest slice depth any scanned terminal offers.
            let depth = self
                .rec
                .scan_terminals()
                .map(|it| cg.slice_depth(it.sym, it.state))
                .max()
                .unwrap_or(0);
            let wholesale = cg.index.buckets.iter().any(|b| b.max_len < depth as usize);
            let all = cg.index.buckets.iter().all(|b| b.max_len < depth as usize);
            // A terminal's self-loop, unless every slice token is taken already: it is taken when
            // its bitmask holds at least the slice tokens taken wholesale (free text up to a stop
            // word takes the short slice tokens wholesale, but its self-loop takes nearly every
            // token and lets the walk skip all but those with a byte of the stop word). Few
            // first bytes (digits, a sign) prune the walk at once: no need to look.
            let loops = cg.index.loop_index();
            let inside = match all || first.len() <= FEW_FIRST_BYTES {
                true => None,
                false => self.inside_classes(cg).and_then(|inside| {
                    let (mask, count) = loops.inside_mask(&cg.vocab, inside)?;
                    let taken: usize = cg
                        .index
                        .buckets
                        .iter()
                        .filter(|b| b.max_len < depth as usize)
                        .map(|b| b.trie.num_tokens())
                        .sum();
                    (count as usize >= taken).then_some((inside, mask))
                }),
            };
            if let Some((inside, mask)) = inside {
                // One walk over the whole vocabulary's trie, skipping what the self-loop takes
                // wholesale.
                for (o, m) in out.iter_mut().zip(mask.iter()) {
                    *o |= m;
                }
                let skip = Skip::Loop(loops.skip(&cg.vocab, inside));
                work += walk_subtree(&mut self.rec, cg.vocab.trie(), 0, Some(first), out, skip)?;
            } else if all {
                // Every slice token: one copy (`out` is all zeros here).
                out.copy_from_slice(&cg.index.all_slices);
                let rest = rest_skip(&self.rec, cg);
                work += walk_subtree(&mut self.rec, &cg.index.rest, 0, Some(first), out, rest)?;
            } else if wholesale {
                for bucket in &cg.index.buckets {
                    if bucket.max_len < depth as usize {
                        for (o, m) in out.iter_mut().zip(&bucket.mask) {
                            *o |= m;
                        }
                    } else {
                        work += walk_subtree(
                            &mut self.rec,
                            &bucket.trie,
                            0,
                            Some(first),
                            out,
                            Skip::No,
                        )?;
                    }
                }
                let rest = rest_skip(&self.rec, cg);
                work += walk_subtree(&mut self.rec, &cg.index.rest, 0, Some(first), out, rest)?;
            } else {
                // No slice and no self-loop applies: one walk over the whole vocabulary's trie.
                work += walk_subtree(
                    &mut self.rec,
                    cg.vocab.trie(),
                    0,
                    Some(first),
                    out,
                    Skip::No,
                )?;
            }
        }
        self.add_eos(out);
        Ok(work)
    }

    /// The largest [`Inside`] of a scanned terminal (see [`super::loops`]); `None` when no
    /// terminal keeps a whole class alive.
    fn inside_classes(&self, cg: &CompiledGrammar) -> Option<Inside> {
        self.rec
            .scan_terminals()
            .filter_map(|it| match it.sym {
                LSym::Regex(d) => Some(cg.inside_classes(d, it.state)),
                _ => None,
            })
            .filter(|i| i.classes != 0)
            .max_by_key(|i| {
                let except = std::cmp::Reverse(i.except_len);
                (i.classes.count_ones(), i.max_len, except)
            })
    }

    /// Whether `id` is allowed now, by trying it (reference for tests; slow).
    pub fn is_token_allowed(&mut self, id: u32) -> Result<bool, EngineError> {
        let vocab = &self.cg.vocab;
        if self.stopped {
            return Ok(false);
        }
        if vocab.eos_token_ids().contains(&id) {
            return Ok(self.rec.is_complete());
        }
        if !vocab.is_text_token(id) {
            return Ok(false);
        }
        let cg = self.cg.clone();
        let base = self.rec.len();
        let ok = self
            .rec
            .try_feed(cg.vocab.token_bytes(id).unwrap_or_default())?;
        let back = self.rec.rollback_to(base);
        debug_assert!(back);
        Ok(ok)
    }
}

#[inline(always)]
fn set_token_bits(trie: &TokenTrie, i: usize, t: u32, out: &mut [u32]) {
    out[t as usize / 32] |= 1 << (t % 32);
    if trie.node(i).has_extra_tokens() {
        for &t in trie.extra_tokens(i) {
            out[t as usize / 32] |= 1 << (t % 32);
        }
    }
}

/// What a walk of a whole trie from its root may skip without looking at it.
#[derive(Clone, Copy)]
enum Skip<'a> {
    No,
    /// The vocabulary's trie: subtrees whose tokens are all in the inside bitmask already added
    /// to the mask (see [`super::loops`]).
    Loop(LoopSkip<'a>),
    /// The rest trie: subtrees whose tokens all die where they leave slice text, every scanned
    /// terminal being killed there by the dead classes (see [`TokenIndex::dead_classes`]).
    RestDead(&'a TokenIndex, u64),
}

/// The skip for a walk of the rest trie from the root: subtrees whose tokens all die where they
/// leave slice text (see [`TokenIndex::dead_classes`]).
fn rest_skip<'c>(rec: &Recognizer, cg: &'c CompiledGrammar) -> Skip<'c> {
    let dead = rec
        .scan_terminals()
        .map(|it| cg.dead_classes(it.sym, it.state))
        .fold(u64::MAX, |a, b| a & b);
    Skip::rest_dead(&cg.index, dead)
}

impl<'a> Skip<'a> {
    /// [`Skip::RestDead`] for `dead` classes, nothing when there are none.
    fn rest_dead(index: &'a TokenIndex, dead: u64) -> Skip<'a> {
        match dead {
            0 => Skip::No,
            dead => Skip::RestDead(index, dead),
        }
    }

    /// Whether the walk skips node `i` (depth `r` below the root, reached by `byte`) and its
    /// subtree (the nodes before `end`). `in_loop[r]` (`in_loop[0]` true) is set: whether the first `r` bytes all have
    /// inside classes.
    #[inline]
    fn skips(&self, i: usize, end: usize, byte: u8, r: usize, in_loop: &mut Vec<bool>) -> bool {
        match *self {
            Skip::No => false,
            Skip::Loop(l) => {
                if in_loop.len() <= r {
                    in_loop.resize(r + 1, false);
                }
                // A path inside the loop with only inside bytes below: every token of the subtree
                // is in the inside bitmask already.
                in_loop[r] = in_loop[r - 1] && l.byte_inside(byte);
                in_loop[r] && l.subtree_inside(i, end)
            }
            Skip::RestDead(index, dead) => index.rest_dies_below(i, dead),
        }
    }
}

/// One terminal being scanned in the base set, as the lexer-mode walk sees it.
#[derive(Clone, Copy)]
enum Lexeme<'a> {
    Lit(&'a [u8]),
    Dfa(&'a Dfa),
}

/// Marks the tokens of `start`'s subtree (the recognizer holds `start`'s path) that keep the input
/// completable.
///
/// Lexer mode: the terminals scanned by the base set ("lexemes") are advanced on a small stack of
/// states per trie depth, without building Earley sets. A token is allowed where some lexeme is
/// still alive or can end (every item is completable). Where lexemes can end, the bytes that the
/// parse allows *after* them (`follow`) are computed once per set of ending lexemes by a real
/// Earley step: the items created by ending a lexeme are the same at every position up to
/// relabelling, because no Earley set exists between the base and that position. A child byte in
/// `follow` hands that child's subtree to the recognizer; any other child stays in lexer mode.
fn walk_subtree(
    rec: &mut Recognizer,
    trie: &TokenTrie,
    start: usize,
    first: Option<&ByteSet>,
    out: &mut [u32],
    skip_by: Skip<'_>,
) -> Result<usize, EngineError> {
    let grammar = rec.grammar().clone();
    let lnf = grammar.lnf();
    let base_items: Vec<ScanItem> = rec.scan_terminals().collect();
    if base_items.is_empty() {
        return Ok(0);
    }
    // One lexeme per distinct (terminal, state): items that scan the same terminal from the
    // same state (in several places of the parse) live and end together. `lexeme_of[b]`: the
    // lexeme of base item `b`.
    let mut lexemes: Vec<Lexeme<'_>> = Vec::with_capacity(base_items.len());
    let mut states: Vec<u32> = Vec::with_capacity(base_items.len() * 8);
    let mut keys: Vec<(LSym, u32)> = Vec::with_capacity(base_items.len());
    let mut lexeme_of: Vec<u8> = Vec::with_capacity(base_items.len());
    for it in &base_items {
        if let Some(j) = keys.iter().position(|&key| key == (it.sym, it.state)) {
            lexeme_of.push(j as u8);
            continue;
        }
        if keys.len() == 64 {
            // More than 64 lexemes do not fit the end mask: use the recognizer.
            return walk_recognizer(rec, trie, start, first, out, skip_by);
        }
        // Lexer states use 0 (`DEAD`) for "dead", so literal offsets are stored plus one.
        match it.sym {
            LSym::Lit(l) => {
                lexemes.push(Lexeme::Lit(lnf.literal(l)));
                states.push(it.state + 1);
            }
            LSym::Regex(d) => {
                lexemes.push(Lexeme::Dfa(&lnf.dfas[d as usize]));
                states.push(it.state);
            }
            // `except!` carries a length bound tied to positions: use the recognizer.
            _ => return walk_recognizer(rec, trie, start, first, out, skip_by),
        }
        lexeme_of.push(keys.len() as u8);
        keys.push((it.sym, it.state));
    }
    let k = lexemes.len();
    let nodes = trie.nodes();
    let base_depth = nodes[start].depth();
    let end = nodes[start].subtree_end();
    let base_len = rec.len();
    // `states[r * k..(r + 1) * k]`: lexeme states after the first `r` bytes below `start`;
    // `follow[r]`, `path[r - 1]`: likewise per depth. All grow with the depth actually reached.
    let mut follow: Vec<ByteSet> = vec![ByteSet::EMPTY];
    // Bit j of `alive_at[r]`: lexeme j is alive after `r` bytes.
    let mut alive_at: Vec<u64> = vec![if k == 64 { u64::MAX } else { (1u64 << k) - 1 }];
    let mut follow_cache: Vec<(u64, ByteSet)> = Vec::new();
    let mut path: Vec<u8> = Vec::new();
    // The recognizer holds the first `fed` bytes of the current path.
    let mut fed = 0usize;
    let mut skip: Vec<ScanItem> = Vec::with_capacity(k);
    // `in_loop[r]`: the first `r` bytes below `start` all have inside classes (see `loops`).
    let mut in_loop: Vec<bool> = vec![true];
    let skipping = !matches!(skip_by, Skip::No);
    // See the `exact_ends` branch below.
    let exact_ends = rec.in_unique_item();
    let mut work = 0usize;
    let mut i = start + 1;
    while i < end {
        work += 1;
        let n = &nodes[i];
        let r = n.depth() - base_depth;
        let byte = n.byte();
        if r == 1 && first.is_some_and(|f| !f.contains(byte)) {
            i = n.subtree_end();
            continue;
        }
        if path.len() < r {
            path.resize(r, 0);
            follow.resize(r + 1, ByteSet::EMPTY);
            alive_at.resize(r + 1, 0);
            states.resize((r + 1) * k, DEAD);
        }
        if skipping && skip_by.skips(i, n.subtree_end(), byte, r, &mut in_loop) {
            i = n.subtree_end();
            continue;
        }
        path[r - 1] = byte;
        // The recognizer's bytes beyond the parent are from another branch now.
        fed = fed.min(r - 1);
        if follow[r - 1].contains(byte) {
            // The parse after a lexeme that ended at the parent takes this byte: the recognizer
            // decides this node and walks its subtree.
            rec.rollback_to(base_len + fed);
            match rec.try_feed(&path[fed..r]) {
                Ok(true) => {
                    fed = r;
                    if let Some(t) = n.token() {
                        set_token_bits(trie, i, t, out);
                    }
                    if n.subtree_end() > i + 1 {
                        work += walk_subtree(rec, trie, i, None, out, Skip::No)?;
                    }
                }
                Ok(false) => {}
                Err(e) => {
                    rec.rollback_to(base_len);
                    return Err(e);
                }
            }
            i = n.subtree_end();
            continue;
        }
        let (prev, next) = states.split_at_mut(r * k);
        let prev = &prev[(r - 1) * k..];
        let mut live = 0u64;
        let mut ends = 0u64;
        // Only lexemes alive at the parent are stepped; the others stay dead.
        let mut todo = alive_at[r - 1];
        while todo != 0 {
            let j = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            let s = prev[j];
            let t = match lexemes[j] {
                Lexeme::Lit(lit) => {
                    // `s - 1` is the offset into the literal.
                    if lit[s as usize - 1] != byte {
                        DEAD
                    } else if s as usize == lit.len() {
                        ends |= 1 << j;
                        DEAD
                    } else {
                        s + 1
                    }
                }
                Lexeme::Dfa(d) => {
                    let t = d.next(s, byte);
                    if t != DEAD && d.is_accept(t) {
                        ends |= 1 << j;
                    }
                    t
                }
            };
            if t != DEAD {
                live |= 1 << j;
            }
            next[j] = t;
        }
        alive_at[r] = live;
        let alive = live != 0;
        if !alive && ends == 0 {
            i = n.subtree_end();
            continue;
        }
        follow[r] = ByteSet::EMPTY;
        if ends != 0 && exact_ends {
            // With `unique!`, ending a lexeme may end an item equal to an earlier one, which
            // the parse refuses: the recognizer decides the ending here, at every node.
            let ending = Ending {
                path: &path[..r],
                live,
                next,
                lexemes: &lexemes,
                base_items: &base_items,
                lexeme_of: &lexeme_of,
            };
            let (allowed, now_fed) = ending.decide(rec, base_len, fed, &mut skip)?;
            fed = now_fed;
            match allowed {
                None => i = n.subtree_end(),
                Some(f) => {
                    follow[r] = f;
                    if let Some(t) = n.token() {
                        set_token_bits(trie, i, t, out);
                    }
                    i += 1;
                }
            }
            continue;
        }
        if let Some(t) = n.token() {
            set_token_bits(trie, i, t, out);
        }
        if ends != 0 && n.subtree_end() > i + 1 {
            follow[r] = match follow_cache.iter().find(|(key, _)| *key == ends) {
                Some(&(_, f)) => f,
                None => {
                    rec.rollback_to(base_len + fed);
                    if !rec.try_feed(&path[fed..r])? {
                        unreachable!("a lexeme that can end keeps the input completable");
                    }
                    fed = r;
                    skip.clear();
                    skip.extend(continuing(live, next, &lexemes, &base_items, &lexeme_of));
                    let f = rec.allowed_bytes_without(&skip);
                    follow_cache.push((ends, f));
                    f
                }
            };
        }
        i += 1;
    }
    rec.rollback_to(base_len);
    Ok(work)
}

/// Lexemes of a lexer-mode walk that end at a node (`path`: the bytes below the walk's root),
/// in a grammar with `unique!`.
struct Ending<'w, 'g> {
    path: &'w [u8],
    live: u64,
    next: &'w [u32],
    lexemes: &'w [Lexeme<'g>],
    base_items: &'w [ScanItem],
    lexeme_of: &'w [u8],
}

impl Ending<'_, '_> {
    /// Whether the node is allowed, by the recognizer, which holds the first `fed` bytes of the
    /// path on entry and the returned count on return: `None` when no lexeme takes another byte
    /// and the parse refuses the endings, else the bytes the parse takes after the endings.
    /// Out of the walk's hot loop (which keeps `fed` in a register).
    #[cold]
    #[inline(never)]
    fn decide(
        &self,
        rec: &mut Recognizer,
        base_len: usize,
        fed: usize,
        skip: &mut Vec<ScanItem>,
    ) -> Result<(Option<ByteSet>, usize), EngineError> {
        let r = self.path.len();
        let lnf = rec.grammar().clone();
        let lnf = lnf.lnf();
        // (`live` also holds DFAs in a final state, which take no further byte)
        let goes_on = continuing(
            self.live,
            self.next,
            self.lexemes,
            self.base_items,
            self.lexeme_of,
        )
        .any(|it| match it.sym {
            LSym::Regex(d) => lnf.dfas[d as usize].can_continue(it.state),
            _ => true,
        });
        rec.rollback_to(base_len + fed);
        if !rec.try_feed(&self.path[fed..])? {
            return Ok((goes_on.then_some(ByteSet::EMPTY), fed));
        }
        skip.clear();
        skip.extend(continuing(
            self.live,
            self.next,
            self.lexemes,
            self.base_items,
            self.lexeme_of,
        ));
        let follow = rec.allowed_bytes_without(skip);
        let ended = rec.is_complete() || !follow.is_empty();
        Ok(((goes_on || ended).then_some(follow), r))
    }
}

/// The scan items whose lexemes are alive in `live` (bit `j`: lexeme `j`; base item `b` is
/// lexeme `lexeme_of[b]`), in their states `next` (lexer states: literal offsets plus one).
fn continuing<'s>(
    live: u64,
    next: &'s [u32],
    lexemes: &'s [Lexeme<'_>],
    base_items: &'s [ScanItem],
    lexeme_of: &'s [u8],
) -> impl Iterator<Item = ScanItem> + 's {
    base_items
        .iter()
        .zip(lexeme_of)
        .filter(move |&(_, &j)| live & (1 << j) != 0)
        .map(move |(it, &j)| {
            let j = j as usize;
            ScanItem {
                state: match lexemes[j] {
                    Lexeme::Lit(_) => next[j] - 1,
                    Lexeme::Dfa(_) => next[j],
                },
                ..*it
            }
        })
}

/// Walks a subtree with recognizer push (feed) and pop (rollback) at every node.
fn walk_recognizer(
    rec: &mut Recognizer,
    trie: &TokenTrie,
    start: usize,
    first: Option<&ByteSet>,
    out: &mut [u32],
    skip_by: Skip<'_>,
) -> Result<usize, EngineError> {
    let base = rec.len();
    let nodes = trie.nodes();
    let base_depth = nodes[start].depth();
    let end = nodes[start].subtree_end();
    // `in_loop[r]`: as in `walk_subtree`.
    let mut in_loop: Vec<bool> = vec![true];
    let skipping = !matches!(skip_by, Skip::No);
    let mut work = 0usize;
    let mut i = start + 1;
    while i < end {
        work += 1;
        let n = &nodes[i];
        let r = n.depth() - base_depth;
        if r == 1 && first.is_some_and(|f| !f.contains(n.byte())) {
            i = n.subtree_end();
            continue;
        }
        if skipping && skip_by.skips(i, n.subtree_end(), n.byte(), r, &mut in_loop) {
            i = n.subtree_end();
            continue;
        }
        rec.rollback_to(base + r - 1);
        match rec.try_feed_byte(n.byte()) {
            Ok(true) => {
                if let Some(t) = n.token() {
                    set_token_bits(trie, i, t, out);
                }
                i += 1;
            }
            Ok(false) => i = n.subtree_end(),
            Err(e) => {
                rec.rollback_to(base);
                return Err(e);
            }
        }
    }
    rec.rollback_to(base);
    Ok(work)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::CountForm;
    use crate::grammar::{CompileOptions, Grammar};
    use crate::vocab::Vocabulary;

    /// A vocabulary with every 1- and 2-byte string over an alphabet that exercises JSON, plus
    /// longer words (slice buckets), multi-byte UTF-8, partial UTF-8 and an EOS token.
    fn vocab() -> Arc<Vocabulary> {
        let alphabet: &[u8] = b"{}[]\":, \n\\ab01.-eEtrufalsn";
        let mut toks: Vec<Option<Vec<u8>>> = vec![None]; // id 0 = EOS
        for &a in alphabet {
            toks.push(Some(vec![a]));
            for &b in alphabet {
                toks.push(Some(vec![a, b]));
            }
        }
        for w in [
            "true",
            "false",
            "null",
            "\"a\"",
            "\": ",
            "\", \"",
            "hello world",
            "ab\"",
            "é",
            "\u{1F422}",
            "0123456789",
            "-1.5e",
            "\": {\"",
            "abcdefghijklmnopqrstuvwxyz",
            "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdef",
        ] {
            toks.push(Some(w.as_bytes().to_vec()));
        }
        toks.push(Some(vec![0xC3])); // partial UTF-8 (byte fallback)
        toks.push(Some(vec![0xA9]));
        toks.push(Some(b"e".to_vec())); // duplicate bytes
        Arc::new(Vocabulary::from_byte_tokens(&toks, &[0], Some(toks.len() + 5)).unwrap())
    }

    fn brute(m: &mut Matcher, words: usize) -> Vec<u32> {
        let mut out = vec![0u32; words];
        for id in 0..(m.cg.vocab.size() as u32) {
            if m.is_token_allowed(id).unwrap() {
                out[id as usize / 32] |= 1 << (id % 32);
            }
        }
        out
    }

    fn check(grammar: &str, inputs: &[&[u8]]) {
        check_with(vocab(), grammar, inputs);
    }

    /// Checks every mask along `inputs` against brute force; returns the compiled grammar (for
    /// its cache counters).
    fn check_with(vocab: Arc<Vocabulary>, grammar: &str, inputs: &[&[u8]]) -> Arc<CompiledGrammar> {
        let g = Arc::new(Grammar::compile(grammar, &CompileOptions::default()).unwrap());
        let cg = Arc::new(CompiledGrammar::new(g, vocab));
        let words = cg.mask_words();
        for input in inputs {
            let mut m = cg.matcher();
            for k in 0..=input.len() {
                if k > 0 {
                    assert!(
                        m.accept_bytes(&input[k - 1..k]).unwrap(),
                        "{input:?} at {k}"
                    );
                }
                let mut fast = vec![0u32; words];
                m.fill_next_token_bitmask(&mut fast).unwrap();
                let slow = brute(&mut m, words);
                assert_eq!(
                    fast,
                    slow,
                    "mask differs after {:?}",
                    String::from_utf8_lossy(&input[..k])
                );
            }
        }
        cg
    }

    #[test]
    fn json_masks_equal_brute_force() {
        check(
            crate::builtin_grammar("json").unwrap(),
            &[
                br#"{"ab": [1, -0.5e1, true, null], "e\n": {"x": "\u00e9\\"}}"#,
                b" [ \"\xc3\xa9\xf0\x9f\x90\xa2\" , false ] ",
            ],
        );
    }

    #[test]
    fn self_loop_masks_equal_brute_force() {
        // Restricted free text (URI-like, hexadecimal, word sets): the terminal's state loops on
        // a class set, its tokens come from one bitmask and the walk skips their subtrees; next
        // to it other lexemes stay alive, end, or hand over to what follows.
        check(
            r#"start ::= "\"" #"[a-z0-9.-]+(?:/[a-z0-9./-]*)?" "\"" (", " #"[0-9a-f]+" | "." #"[a-z]+" "." "e")? ;"#,
            &[
                b"\"sub.example-1.ne/at/b1\", 0e1f",
                b"\"0.1\".tru.e",
                b"\"a\"",
            ],
        );
        check(
            r#"start ::= "{" (json_string_except!("ab", "true") | #"\"[a-z]+\"") ": 1}" ;"#,
            &[b"{\"abe\": 1}", b"{\"true\": 1}", b"{\"tr\\n\": 1}"],
        );
        // Lengths counted outside the states (a counted automaton's ids carry the count).
        crate::dfa::test_form::with(CountForm::Counted, || {
            check(
                r#"start ::= "[" len!(#"[a-f0-9_-]*", 1, 40) "]" ;"#,
                &[b"[ab0-1_e]", b"[0123456789abcdef0123456789abcdef01234567]"],
            );
        });
        // UTF-8 text, and lengths bounded in the automaton's states.
        check(
            r#"start ::= "\"" #"[^\"\\\x00-\x1F]+:[0-9]+" "\"" | "[" #"[a-z]{2,9}|[a-f0-9]{20,30}" "]" ;"#,
            &[
                "\"a é\u{1F422}:b:01\"".as_bytes(),
                b"[abcdefgh]",
                b"[abe0123456789abe01234]",
            ],
        );
    }

    #[test]
    fn free_text_in_several_places_and_accepting_loops_equal_brute_force() {
        // The same string terminal scanned from two places of the parse (either branch may go
        // on), then a text loop that may end anywhere, followed by text (`ae\"` is `a` + `e\"`).
        check(
            r#"start ::= "[" (s ", " "1" | s ", " "ab" | s "]") ; s ::= #"\"[^\"\\\x00-\x1F]*\"" ;"#,
            &[b"[\"a b\xc3\xa9\", ab", b"[\"\"]"],
        );
        check(
            r#"start ::= t end ; end ::= "e\"" | "e\"" start ; t ::= #"[^\"\\\x00-\x1F]*" ;"#,
            &[b"ab ae\"", b"e\"e\""],
        );
    }

    #[test]
    fn rest_tokens_after_terminals_that_can_end_equal_brute_force() {
        // Text that may end inside slice text (after its third character), then a byte outside
        // it (nested between control bytes, so that no automaton merges them): from `ab`, the
        // rest token `b\n` lives although the text itself dies at `\n`.
        check(
            r#"start ::= "\x01" w end ; end ::= "\n\x02" | "\n" start "\x02" | "\"\x02" ; w ::= #"[^\"\\\x00-\x1F]{3,}" ;"#,
            &[b"\x01abb\n\x01bab\n\x02\x02", b"\x01eaea\"\x02"],
        );
        // A literal key that leaves slice text at its closing quote.
        check(
            r#"start ::= "{" ("\"ab\": " | "\"a\n\": ") "1}" ;"#,
            &[b"{\"ab\": 1}", b"{\"a\n\": 1}"],
        );
    }

    #[test]
    fn bounded_strings_and_except_masks_equal_brute_force() {
        check(
            r#"start ::= "\"" #"[a-z ]{0,5}" "\"" | "<" except!(">>", 12) ">>";"#,
            &[b"\"ab c\"", b"<a>b>\xc3\xa9 >>"],
        );
    }

    #[test]
    fn text_up_to_stop_words_equal_brute_force() {
        // Free text until a trigger, then a structured island, repeated (tool calls): the text's
        // self-loop keeps every byte but one of the trigger's (a punctuation class, or a single
        // letter when the trigger has none), inside partial matches of the trigger too.
        let mut toks: Vec<Option<Vec<u8>>> = vocab()
            .text_tokens()
            .map(|(_, b)| Some(b.to_vec()))
            .collect();
        toks.insert(0, None); // EOS
        for w in [
            "<",
            ">",
            "<tool_call>",
            "<tool",
            "_call",
            "_call>",
            "l>",
            "ol",
            "a<",
            " <tool_call>",
            "<tool_call>{",
            "}<",
            "}\n",
            "x",
            "tool",
            "TOOLCALL",
            "TOOL",
            "CALL",
            "L",
            "T",
            "LL",
            "CALLa",
            "aTOOLCAL",
            "[TOOL]",
            "[",
            "]",
            "]{",
            "a]",
            "Text",
            "Hello, world.",
        ] {
            toks.push(Some(w.as_bytes().to_vec()));
        }
        let vocab = Arc::new(Vocabulary::from_byte_tokens(&toks, &[0], None).unwrap());
        for trigger in ["<tool_call>", "TOOLCALL"] {
            check_with(
                vocab.clone(),
                &format!(
                    "start ::= (except!('{trigger}') '{trigger}' '{{' #\"[a-z]+\" '}}')* except!('{trigger}');"
                ),
                &[
                    format!("ab <tool <tool_ca TOOLCAL a{trigger}{{ab}}Hello, <tool TOOL").as_bytes(),
                    format!("{trigger}{{x}}{trigger}{{ab}}").as_bytes(),
                    b"<<tool_cal",
                ],
            );
        }
        check_with(
            vocab,
            "trig ::= '<tool_call>' | '[TOOL]'; start ::= (except!(trig) trig '{' #\"[a-z]+\" '}')* except!(trig);",
            &[b"a [TOO <tool[TOOL]{ab}Text<tool_call>{x}]"],
        );
    }

    #[test]
    fn short_tabulated_text_masks_equal_brute_force() {
        // Strings bounded inside their automaton: slice tokens decided by how many characters
        // they start (multi-byte and partial UTF-8 included), the same terminal in two places
        // of the parse, and terminals where the characters decide (no shortcut).
        check(
            r#"start ::= "{\"a\": " s ", \"b\": " (s | t) "}" ; s ::= #"\"[^\"\\\x00-\x1F]{0,3}\"" | "null" ; t ::= #"\"[^\"\\\x00-\x1F]{2,5}\"" ;"#,
            &[
                "{\"a\": \"ab\", \"b\": \"abcd\"}".as_bytes(),
                "{\"a\": \"é\u{1F422}\", \"b\": \"\"}".as_bytes(),
                "{\"a\": null, \"b\": \"a b\"}".as_bytes(),
            ],
        );
        check(
            r#"start ::= "[" (#"\"[a-e]{0,3}\"" | #"[^\"\\\x00-\x1F]{0,2}") "ab\"]" ;"#,
            &[b"[\"abc\"ab\"]", b"[abab\"]", b"[ab\"]"],
        );
        // The terminal can end inside slice text that the (not regular) rest goes on with: from
        // `[`, `true` is `tru` then `e`, so characters alone do not decide.
        check(
            r#"start ::= "[" #"[^\"\\\x00-\x1F]{2,3}" p ; p ::= "e" p "e" | "]" ;"#,
            &[b"[true]e", b"[ab]"],
        );
        // Two bounds at one place, in terminals that do not merge: the larger decides.
        check(
            r#"start ::= x | y ; x ::= "[" #"\"[^\"\\\x00-\x1F]{0,1}\"" p ; y ::= "[" #"\"[^\"\\\x00-\x1F]{0,3}\"" q ; p ::= "e" p "e" | "]" ; q ::= "f" q "f" | "]" ;"#,
            &[b"[\"abc\"]", b"[\"a\"e]e"],
        );
    }

    #[test]
    fn json_len_masks_equal_brute_force() {
        // Tabulated and length-counted forms of `json_len!` (the latter never merges with the
        // quotes and takes no slice shortcuts).
        for form in [CountForm::Table, CountForm::Counted] {
            crate::dfa::test_form::with(form, || {
                check(
                    r#"start ::= "[\"" json_len!(#"(?:[ab ]|\\u[0-9a-fA-F]{4}|\\[n\"])*", 1, 3) "\"]";"#,
                    &[
                        br#"["a\u0041b"]"#,
                        br#"["\ud83d\ude00ab"]"#,
                        br#"["\n\"a"]"#,
                        br#"["\ud83d\ud83d\ude00"]"#,
                    ],
                );
                check(
                    r#"start ::= "{\"e\": \"" json_len!(#"[a-z]+@[a-z]+(?:\.[a-z]+)*", 5, 9) "\"}";"#,
                    &[br#"{"e": "ab@cd.ef"}"#, br#"{"e": "a@b.c"}"#],
                );
                // Free text: slice buckets are taken wholesale while the count has room, and
                // walked near the maximum (the 26- and 58-byte tokens must not cross it).
                check(
                    r#"start ::= "[\"" json_len!(#"(?:[^\"\\\x00-\x1F]|\\[n\"])*", 2, 30) "\"]";"#,
                    &[
                        br#"["abcdefghijklmnopqrstuvwxyzab"]"#,
                        br#"["hello world, abcdefghijklmnop"]"#,
                        br#"["0123456789\n\"ab"]"#,
                    ],
                );
                // Free text that may end anywhere, followed by a literal or a regex that cannot
                // start slice text: rest tokens die where they leave slice text unless what
                // follows takes that byte (`b\n` here: the text ends, the regex reads `\n`).
                check(
                    r#"start ::= "{" json_len!(#"(?:[^\"\\\x00-\x1F]|\\n)*", 0, 4) tail ; tail ::= #"\n[0-9]" | "\"}" ;"#,
                    &[b"{ab\n5", b"{a\\nb\"}", b"{\"}", b"{ab e\n0"],
                );
            });
        }
    }

    /// Long length-counted text: far from its bounds the masks are cached under the base
    /// states and reused at other counts; near the minimum and the maximum they are computed.
    /// Every mask equals brute force, and the cache is used.
    #[test]
    fn count_free_text_masks_equal_brute_force_and_are_shared() {
        crate::dfa::test_form::with(CountForm::Counted, || {
            let grammar =
                r#"start ::= "[\"" json_len!(#"(?:[^\"\\\x00-\x1F]|\\[n\"])*", 3, 100) "\"]";"#;
            let long = "ab é\\n".repeat(12);
            let inputs = [format!("[\"{long}\"]"), format!("[\"{}\"]", "a".repeat(95))];
            let inputs: Vec<&[u8]> = inputs.iter().map(|s| s.as_bytes()).collect();
            let cg = check_with(vocab(), grammar, &inputs);
            assert!(
                cg.index.max_token_leads() + 10 < 100,
                "room for count-free text"
            );
            let stats = cg.mask_cache_stats();
            assert!(stats.hits > 20, "{stats:?}: count-free masks are shared");
        });
    }

    /// An object whose optional properties come in order: after `{` or a comma every later
    /// property name is a literal being scanned (with shared prefixes and names that are prefixes
    /// of others).
    #[test]
    fn many_literal_keys_equal_brute_force() {
        let names = [
            "a", "ab", "abc", "b", "ba", "bab", "e", "eb", "ee", "f", "fa", "ta", "tab",
        ];
        // `p{k}`: property k or a later one first; `q{k}`: what follows a property before k.
        let mut g = String::from("start ::= '{}' | '{' p0 '}';\nv ::= 'true' | 'false' | '1';\n");
        for (i, name) in names.iter().enumerate() {
            let tail = match i + 1 < names.len() {
                true => format!(" q{}", i + 1),
                false => String::new(),
            };
            let skip = match i + 1 < names.len() {
                true => format!(" | p{}", i + 1),
                false => String::new(),
            };
            g += &format!("p{i} ::= '\"{name}\": ' v{tail}{skip};\n");
            if i + 1 < names.len() {
                g += &format!("q{} ::= '' | ', ' p{};\n", i + 1, i + 1);
            }
        }
        check(
            &g,
            &[
                br#"{"a": 1, "abc": true, "tab": 1}"#,
                br#"{"ab": 1, "b": 1, "ba": false, "bab": 1, "e": 1, "eb": 1, "ee": 1, "f": 1}"#,
                br#"{"ee": 1, "fa": 1}"#,
                br#"{"tab": 1}"#,
                b"{}",
            ],
        );
    }

    #[test]
    fn more_than_64_lexemes_equal_brute_force() {
        // Keys that stay separate terminals (each production continues with a nonterminal),
        // with shared prefixes so that lexemes end at different depths; just over and far over
        // the 64 lexemes of a lexer-mode walk (the recognizer walks them).
        for n in [65, 150, 300] {
            let keys: Vec<String> = (0..n)
                .map(|i| format!("p{i} ::= '\"a{i}\": ' v;"))
                .collect();
            let alts: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
            let grammar = format!(
                "start ::= '{{' ({}) (', ' ({}))* '}}'; v ::= '0' | 'true' | '[' v ']'; {}",
                alts.join(" | "),
                alts.join(" | "),
                keys.join(" ")
            );
            let last = format!("{{\"a{}\": [[0]], \"a64\": 0}}", n - 1);
            check(
                &grammar,
                &[
                    br#"{"a1": 0, "a10": [true], "a6": 0}"#,
                    br#"{"a63": true}"#,
                    last.as_bytes(),
                ],
            );
        }
    }

    #[test]
    fn bare_literal_masks_equal_brute_force() {
        check(
            "start ::= 'a' start | 'bt' | 'b' 'e'*;",
            &[b"aabt", b"abee", b"b"],
        );
    }

    #[test]
    fn mask_cache_stays_within_its_limit_and_masks_stay_exact() {
        let json = crate::builtin_grammar("json").unwrap();
        let input = br#"[{"a": [1, 2, [3]], "b": {"a": [true, [false]]}}, [[1], [2]], "ab"]"#;
        let masks = |mask_cache_bytes: usize| {
            let opts = CompileOptions {
                mask_cache_bytes,
                ..CompileOptions::default()
            };
            let g = Arc::new(Grammar::compile(json, &opts).unwrap());
            let cg = Arc::new(CompiledGrammar::new(g, vocab()));
            let mut m = cg.matcher();
            let mut all = Vec::new();
            let mut peak = 0;
            for k in 0..=input.len() {
                if k > 0 {
                    assert!(m.accept_bytes(&input[k - 1..k]).unwrap());
                }
                let mut out = vec![0u32; cg.mask_words()];
                m.fill_next_token_bitmask(&mut out).unwrap();
                all.push(out);
                let s = cg.mask_cache_stats();
                assert!(s.bytes <= mask_cache_bytes, "{s:?} over {mask_cache_bytes}");
                peak = peak.max(s.entries);
            }
            (all, peak, cg.mask_cache_stats())
        };
        let (reference, peak, stats) = masks(64 << 20);
        assert!(
            peak > 4 && stats.hits > 0,
            "{stats:?}: the input must exercise the cache"
        );
        // Every entry holds a mask and a key of at least one word.
        let entry = (reference[0].len() + 1) * 4;
        for limit in [0, entry, 3 * entry + 7] {
            let (got, peak, _) = masks(limit);
            assert_eq!(got, reference, "mask_cache_bytes = {limit}");
            assert!(
                peak <= limit / entry.max(1) + 1,
                "{peak} entries under {limit} bytes"
            );
        }
    }

    #[test]
    fn unique_item_masks_equal_brute_force() {
        // Masks refuse the token that would end an item equal to an earlier one, wherever the
        // walk decides it (lexer mode, slices, the rest trie, the mask cache).
        check(
            "start ::= '[' unique!(', ', s) ']' | '[]'; s ::= json_string_except!();",
            &[br#"["a", "ab", "b", "ba", "\u0061a"]"#],
        );
        check(
            r#"start ::= '[' unique!(', ', v) ']';
               v ::= #"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?" | 'true' | '"' #"[ab]*" '"';"#,
            &[br#"[1, 10, 0.1, -0, 1e-2, 1e2, true, "a", "ab"]"#],
        );
        // Text outside the items takes the free-text shortcuts; inside an item it does not.
        check(
            "start ::= '{' s ': [' unique!(', ', s) '], ' s '}'; s ::= json_string_except!();",
            &[br#"{"ab": ["ab", "a", "b"], "a"}"#],
        );
    }

    #[test]
    fn rollback_and_fork_match_replay() {
        let g = Arc::new(
            Grammar::compile(
                crate::builtin_grammar("json").unwrap(),
                &CompileOptions::default(),
            )
            .unwrap(),
        );
        let cg = Arc::new(CompiledGrammar::new(g, vocab()));
        let v = cg.vocab().clone();
        let id = |s: &[u8]| {
            (0..v.size() as u32)
                .find(|&i| v.token_bytes(i) == Some(s))
                .unwrap()
        };
        let toks = [
            id(b"{"),
            id(b"\"a"),
            id(b"\":"),
            id(b" ["),
            id(b"1"),
            id(b"]}"),
        ];
        let mut m = cg.matcher();
        for &t in &toks {
            assert!(m.accept_token(t).unwrap());
        }
        assert!(m.can_finish());
        let forked = m.clone();
        m.rollback(3).unwrap();
        let mut replay = cg.matcher();
        for &t in &toks[..3] {
            replay.accept_token(t).unwrap();
        }
        let (mut a, mut b) = (vec![0; cg.mask_words()], vec![0; cg.mask_words()]);
        m.fill_next_token_bitmask(&mut a).unwrap();
        replay.fill_next_token_bitmask(&mut b).unwrap();
        assert_eq!(a, b);
        assert!(forked.can_finish());
        assert!(
            m.accept_token(0).is_ok_and(|ok| !ok),
            "EOS refused before completion"
        );
        let mut f = forked;
        assert!(f.accept_token(0).unwrap() && f.is_finished());
    }

    #[test]
    fn forced_bytes() {
        let g = Arc::new(
            Grammar::compile(
                r#"start ::= "{\"name\": " #"[a-z]+" "}";"#,
                &CompileOptions::default(),
            )
            .unwrap(),
        );
        let cg = Arc::new(CompiledGrammar::new(g, vocab()));
        let mut m = cg.matcher();
        assert_eq!(m.forced_bytes(), b"{\"name\": ".to_vec());
        assert!(m.accept_bytes(b"{\"name\": ab").unwrap());
        assert_eq!(m.forced_bytes(), Vec::<u8>::new());
        assert_eq!(m.num_tokens(), 1);
    }
}
