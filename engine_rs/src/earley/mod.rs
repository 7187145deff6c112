//! Byte-level Earley recognizer with Leo's optimization over the flat LNF.
//!
//! Invariants:
//! * All Earley sets live in one contiguous item buffer; set `i` is
//!   `items[sets[i].start..sets[i].end]`, its *scan* items (dot before a terminal) first, then its
//!   *wait* items (dot before a nonterminal). Completed items are never stored: completion happens
//!   while the set is built.
//! * An item is `(pos, start, state)`: `pos` indexes [`Lnf::syms`] (the symbol after the dot),
//!   `start` is the origin set, `state` the progress inside the terminal at `pos` (byte offset for a
//!   literal, DFA state for a regex or `except!`).
//! * Because LNF has no empty productions, an item completing in set `i` started before `i`, so
//!   sets before `i` are final when set `i` is built, and Leo items can be computed eagerly when a
//!   set is finished.
//! * Every item in a set can be completed to a full sentence (productive LNF, co-reachable DFAs),
//!   so [`Recognizer::allowed_bytes`] is exact.
//! * Rolling back to an earlier length is truncation of the buffers: O(1) amortized.
//! * Set indices are positions in `sets`, not byte offsets: [`Recognizer::forget_before`] drops
//!   sets that can no longer influence the future and renumbers the rest, so every set records
//!   its byte offset in `at`. The sets from `window_start` on are contiguous (`at` increases by
//!   one per set) and are exactly the lengths [`Recognizer::rollback_to`] can return to.

mod build;
#[cfg(test)]
mod tests;
pub mod unique;

use build::Build;
use unique::{Interner, Mark};

use std::sync::Arc;

use rustc_hash::FxHashSet;

use crate::dfa::{ByteSet, DEAD};
use crate::error::EngineError;
use crate::grammar::Grammar;
use crate::lnf::{LSym, Lnf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Item {
    pos: u32,
    start: u32,
    state: u32,
}

/// A scan item of the current set, as seen from outside the recognizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanItem {
    /// The terminal being scanned.
    pub sym: LSym,
    /// Dotted position in the LNF.
    pub pos: u32,
    /// Origin set.
    pub start: u32,
    /// Progress inside the terminal.
    pub state: u32,
}

#[derive(Clone, Copy, Debug)]
struct SetInfo {
    /// Byte offset of the set (input length when it was built).
    at: u32,
    start: u32,
    wait: u32,
    end: u32,
    leo_end: u32,
    complete: bool,
    /// The `unique!` interner's size once the set was built (what a rollback to it keeps).
    mark: Mark,
}

/// A Leo entry of a set: completing `nt` with this set as origin is equivalent to completing
/// `top_nt` with origin `top_start` (the topmost item of the deterministic reduction chain).
#[derive(Clone, Copy, Debug)]
struct LeoEntry {
    nt: u32,
    top_nt: u32,
    top_start: u32,
}

/// Sets with more items than this deduplicate through a hash set instead of a linear scan.
const LINEAR_DEDUP: usize = 24;

/// Recognizes a byte string incrementally against a [`Grammar`].
#[derive(Clone, Debug)]
pub struct Recognizer {
    grammar: Arc<Grammar>,
    items: Vec<Item>,
    sets: Vec<SetInfo>,
    leo: Vec<LeoEntry>,
    /// Index of the first set rollback can return to; sets from here on are contiguous.
    window_start: u32,
    /// Number of sets right after the last compaction (amortizes [`Recognizer::forget_before`]).
    sets_after_compaction: u32,
    /// With `unique!`: every byte read (the texts of items are compared), and the interned sets
    /// of their values (see [`unique`]). Without, both stay empty.
    input: Vec<u8>,
    keeps_input: bool,
    /// With `unique!` or `any_order!` member sets: the interner grows while sets are built (a
    /// rollback or a refused byte truncates it).
    interns: bool,
    interner: Interner,
    scratch: Scratch,
}

/// Per-build working memory, reused between bytes.
#[derive(Clone, Debug, Default)]
struct Scratch {
    scan: Vec<Item>,
    wait: Vec<Item>,
    /// Pending completions `(lhs, origin, value)`: `value` is the set of members an `any_order!`
    /// nonterminal read (0 for every other nonterminal).
    completions: Vec<(u32, u32, u32)>,
    done: Vec<(u32, u32, u32)>,
    /// Pending completions from one origin, `(lhs, value)`, handled in one pass over its set.
    batch: Vec<(u32, u32)>,
    predict_stack: Vec<u32>,
    /// `predicted[nt] == stamp` iff nt was predicted in the set being built.
    predicted: Vec<u32>,
    /// Per-nonterminal counters for Leo detection, valid when `count_stamp[nt] == stamp`.
    count: Vec<u32>,
    count_stamp: Vec<u32>,
    stamp: u32,
    scan_set: FxHashSet<Item>,
    wait_set: FxHashSet<Item>,
    done_set: FxHashSet<(u32, u32, u32)>,
    /// `unique!`: the origin of the completions being applied, the value of the item text from
    /// there to the set being built (computed once per origin and set), a buffer for canonical
    /// forms, and a limit error met while completing.
    item_origin: u32,
    item_value: Option<(u32, u32)>,
    canon: Vec<u8>,
    error: Option<EngineError>,
    /// `any_order!` member sets: the `(nonterminal, set)` whose members `member_bits` holds, and
    /// whether that nonterminal may end with them (see `Build::advance_over_members`).
    member_value: Option<(u32, u32)>,
    member_bits: Vec<u64>,
    member_closes: bool,
}

impl Recognizer {
    /// A recognizer at the start of `grammar` (no bytes read).
    pub fn new(grammar: Arc<Grammar>) -> Recognizer {
        let n = grammar.lnf.nt_count();
        let grammar_has_unique = grammar.lnf.has_unique();
        let interns = grammar_has_unique || grammar.lnf.has_member_sets();
        let mut r = Recognizer {
            grammar,
            items: Vec::new(),
            sets: Vec::new(),
            leo: Vec::new(),
            window_start: 0,
            sets_after_compaction: 1,
            input: Vec::new(),
            keeps_input: grammar_has_unique,
            interns,
            interner: Interner::default(),
            scratch: Scratch {
                predicted: vec![0; n],
                count: vec![0; n],
                count_stamp: vec![0; n],
                ..Scratch::default()
            },
        };
        r.reset();
        r
    }

    /// The grammar this recognizer reads.
    pub fn grammar(&self) -> &Arc<Grammar> {
        &self.grammar
    }

    /// Back to the empty input.
    pub fn reset(&mut self) {
        self.items.clear();
        self.sets.clear();
        self.leo.clear();
        self.window_start = 0;
        self.sets_after_compaction = 1;
        self.input.clear();
        self.interner.clear();
        self.begin_set();
        if !self.grammar.lnf.productions(0).is_empty() {
            let Recognizer {
                grammar,
                items,
                sets,
                leo,
                scratch,
                interner,
                ..
            } = self;
            Build {
                lnf: &grammar.lnf,
                opts: &grammar.options,
                items,
                sets,
                leo,
                s: scratch,
                input: &[],
                interner,
            }
            .predict(0, 0);
        }
        let complete = self.grammar.lnf.start_nullable;
        self.finish_set(0, 0, complete)
            .expect("the initial set is bounded by the grammar size");
    }

    /// Number of bytes consumed.
    #[inline]
    pub fn len(&self) -> usize {
        self.sets.last().expect("at least one set").at as usize
    }

    /// The smallest length [`Recognizer::rollback_to`] can return to (0 until
    /// [`Recognizer::forget_before`] drops history).
    pub fn horizon(&self) -> usize {
        self.sets[self.window_start as usize].at as usize
    }

    /// Index of the set at byte offset `len`, if it is in the rollback window.
    fn set_index(&self, len: usize) -> Option<usize> {
        let last = self.sets.len() - 1;
        let back = self.len().checked_sub(len)?;
        let idx = last.checked_sub(back)?;
        (idx >= self.window_start as usize).then_some(idx)
    }

    /// Whether no byte has been read yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the input so far is a complete sentence of the grammar.
    #[inline]
    pub fn is_complete(&self) -> bool {
        self.sets.last().is_some_and(|s| s.complete)
    }

    /// Whether no further byte can be accepted (then the input is complete, or the state is the
    /// empty language's).
    pub fn is_dead(&self) -> bool {
        let s = self.sets.last().expect("at least one set");
        s.start == s.wait
    }

    /// Drops bytes so that `len` remain. No-op if `len >= self.len()`; returns `false` (state
    /// unchanged) if `len` is below [`Recognizer::horizon`].
    pub fn rollback_to(&mut self, len: usize) -> bool {
        if len >= self.len() {
            return true;
        }
        let Some(idx) = self.set_index(len) else {
            return false;
        };
        self.sets.truncate(idx + 1);
        let last = self.sets[idx];
        self.items.truncate(last.end as usize);
        self.leo.truncate(last.leo_end as usize);
        if self.keeps_input {
            self.input.truncate(len);
        }
        if self.interns {
            self.interner.truncate(last.mark);
        }
        true
    }

    /// Feeds one byte; on `false` the state is unchanged.
    #[inline]
    pub fn feed_byte(&mut self, byte: u8) -> bool {
        self.try_feed_byte(byte).unwrap_or(false)
    }

    /// Feeds bytes atomically: on `false` (or a limit error) the state is unchanged.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        self.try_feed(bytes).unwrap_or(false)
    }

    /// Reads `bytes`; `Ok(false)` (state unchanged) when they cannot continue a sentence, an
    /// error (state unchanged) when a limit is hit.
    pub fn try_feed(&mut self, bytes: &[u8]) -> Result<bool, EngineError> {
        let len = self.len();
        // Growing by doubling would copy the buffers repeatedly on long inputs; the reservation is
        // capped so a rejected huge input does not leave a huge allocation behind.
        let hint = bytes.len().min(1 << 12);
        self.sets.reserve(hint);
        self.items.reserve(hint * 2);
        for &b in bytes {
            match self.try_feed_byte(b) {
                Ok(true) => {}
                other => {
                    let back = self.rollback_to(len);
                    debug_assert!(back, "a length reached in this call is in the window");
                    return other;
                }
            }
        }
        Ok(true)
    }

    /// The bytes that can come next while keeping the input completable.
    pub fn allowed_bytes(&self) -> ByteSet {
        self.allowed_bytes_filtered(|_| true)
    }

    fn allowed_bytes_filtered(&self, keep: impl Fn(&Item) -> bool) -> ByteSet {
        let lnf = &self.grammar.lnf;
        let cur = self.len() as u32;
        let set = *self.sets.last().expect("at least one set");
        let sets = &self.sets;
        let mut out = ByteSet::EMPTY;
        for it in self.items[set.start as usize..set.wait as usize]
            .iter()
            .filter(|it| keep(it))
        {
            match lnf.syms[it.pos as usize] {
                LSym::Lit(l) => out.insert(lnf.literal(l)[it.state as usize]),
                LSym::Regex(d) => out.union_with(&lnf.dfas[d as usize].live_bytes(it.state)),
                LSym::Except(x) => {
                    let info = lnf.excepts[x as usize];
                    let dfa = &lnf.dfas[info.dfa as usize];
                    if info.max == u32::MAX {
                        out.union_with(&dfa.live_bytes(it.state));
                    } else {
                        let consumed = cur - sets[it.start as usize].at;
                        for b in dfa.live_bytes(it.state).iter() {
                            let t = dfa.next(it.state, b);
                            if (consumed + 1).saturating_add(dfa.min_to_accept(t)) <= info.max {
                                out.insert(b);
                            }
                        }
                    }
                }
                LSym::Nt(_) | LSym::End(_) => {}
            }
        }
        out
    }

    /// Feeds one byte, reporting limit errors; on `Ok(false)` or `Err` the state is unchanged.
    pub fn try_feed_byte(&mut self, byte: u8) -> Result<bool, EngineError> {
        let set = self.sets[self.sets.len() - 1];
        if set.at == u32::MAX - 1 {
            return Err(EngineError::Limit {
                limit: "input length (4 GiB)",
                value: u32::MAX as usize - 1,
            });
        }
        if set.end == set.start + 1 && set.wait == set.end {
            if let Some(accepted) = self.feed_inside_terminal(set, byte) {
                return Ok(accepted);
            }
        }
        if self.interns {
            return self.feed_keeping_input(set, byte);
        }
        self.build_next(set, byte)
    }

    /// [`Recognizer::try_feed_byte`] in a grammar with `unique!` or member sets: the byte joins
    /// the input (with `unique!`) while the set is built, and leaves it (the interner back at
    /// `set`'s mark) on failure.
    #[inline(never)]
    fn feed_keeping_input(&mut self, set: SetInfo, byte: u8) -> Result<bool, EngineError> {
        if self.keeps_input {
            self.input.push(byte);
        }
        let result = self.build_next(set, byte);
        if !matches!(result, Ok(true)) {
            if self.keeps_input {
                self.input.pop();
            }
            self.interner.truncate(set.mark);
        }
        result
    }

    /// Builds the set after `set` (the last one) from `byte`; on `Ok(false)` or `Err` nothing is
    /// appended (a `unique!` grammar's input and interner are the caller's to restore).
    #[inline(always)]
    fn build_next(&mut self, set: SetInfo, byte: u8) -> Result<bool, EngineError> {
        let next = self.sets.len() as u32;
        let next_at = set.at + 1;
        self.begin_set();
        let Recognizer {
            grammar,
            items,
            sets,
            leo,
            scratch,
            input,
            interner,
            ..
        } = self;
        let lnf = &grammar.lnf;
        let mut b = Build {
            lnf,
            opts: &grammar.options,
            items,
            sets,
            leo,
            s: scratch,
            input,
            interner,
        };
        for k in set.start as usize..set.wait as usize {
            let it = b.items[k];
            match lnf.syms[it.pos as usize] {
                LSym::Lit(l) => {
                    let lit = lnf.literal(l);
                    if lit[it.state as usize] == byte {
                        if it.state as usize + 1 == lit.len() {
                            b.advance(it.pos + 1, it.start, 0, next);
                        } else {
                            b.add_scan(Item {
                                state: it.state + 1,
                                ..it
                            });
                        }
                    }
                }
                LSym::Regex(d) => {
                    let dfa = &lnf.dfas[d as usize];
                    let t = dfa.next(it.state, byte);
                    if t != DEAD {
                        if dfa.is_accept(t) {
                            b.advance(it.pos + 1, it.start, 0, next);
                        }
                        if dfa.can_continue(t) {
                            b.add_scan(Item { state: t, ..it });
                        }
                    }
                }
                LSym::Except(x) => {
                    let info = lnf.excepts[x as usize];
                    let dfa = &lnf.dfas[info.dfa as usize];
                    let t = dfa.next(it.state, byte);
                    let consumed = next_at - b.sets[it.start as usize].at;
                    if t != DEAD && consumed.saturating_add(dfa.min_to_accept(t)) <= info.max {
                        if dfa.is_accept(t) {
                            b.advance(it.pos + 1, it.start, 0, next);
                        }
                        if consumed < info.max && dfa.can_continue(t) {
                            b.add_scan(Item { state: t, ..it });
                        }
                    }
                }
                LSym::Nt(_) | LSym::End(_) => {
                    unreachable!("scan items have a terminal after the dot")
                }
            }
        }
        let complete = b.run_completions(next)?;
        if b.s.scan.is_empty() && b.s.wait.is_empty() && !complete {
            return Ok(false);
        }
        self.finish_set(next, next_at, complete)?;
        Ok(true)
    }

    /// Fast path for a set holding a single scan item in the middle of a terminal (e.g. inside a
    /// JSON string): when the byte neither ends the terminal nor kills it, the next set is that item
    /// with a new state, with no prediction, completion or Leo work. `None` defers to the full path.
    #[inline]
    fn feed_inside_terminal(&mut self, set: SetInfo, byte: u8) -> Option<bool> {
        let lnf = &self.grammar.lnf;
        let it = self.items[set.start as usize];
        let state = match lnf.syms[it.pos as usize] {
            LSym::Lit(l) => {
                let lit = lnf.literal(l);
                if lit[it.state as usize] != byte {
                    return Some(false);
                }
                if it.state as usize + 1 == lit.len() {
                    return None;
                }
                it.state + 1
            }
            LSym::Regex(d) => {
                let dfa = &lnf.dfas[d as usize];
                let t = dfa.next(it.state, byte);
                if t == DEAD {
                    return Some(false);
                }
                if dfa.is_accept(t) {
                    return None;
                }
                t
            }
            _ => return None,
        };
        if self.items.len() >= self.grammar.options.max_total_items {
            return None;
        }
        let start = self.items.len() as u32;
        self.items.push(Item { state, ..it });
        let prev = self.sets[self.sets.len() - 1];
        let leo_end = prev.leo_end;
        self.sets.push(SetInfo {
            at: prev.at + 1,
            start,
            wait: start + 1,
            end: start + 1,
            leo_end,
            complete: false,
            mark: prev.mark,
        });
        if self.keeps_input {
            self.input.push(byte);
        }
        Some(true)
    }

    fn begin_set(&mut self) {
        let s = &mut self.scratch;
        s.scan.clear();
        s.wait.clear();
        s.done.clear();
        s.completions.clear();
        s.item_value = None;
        s.member_value = None;
        s.error = None;
        s.stamp = s.stamp.wrapping_add(1);
        if s.stamp == 0 {
            // Wrapped: old stamps could collide, so clear them.
            s.predicted.iter_mut().for_each(|x| *x = 0);
            s.count_stamp.iter_mut().for_each(|x| *x = 0);
            s.stamp = 1;
        }
        if !s.scan_set.is_empty() {
            s.scan_set.clear();
        }
        if !s.wait_set.is_empty() {
            s.wait_set.clear();
        }
        if !s.done_set.is_empty() {
            s.done_set.clear();
        }
    }

    /// Appends the built set, then computes its Leo entries: a nonterminal `B` that is the postdot
    /// symbol of exactly one item of the set, where that item is `X -> α . B` (B last).
    fn finish_set(&mut self, index: u32, at: u32, complete: bool) -> Result<(), EngineError> {
        let total = self.items.len() + self.scratch.scan.len() + self.scratch.wait.len();
        let opts = &self.grammar.options;
        // The initial set is bounded by the grammar's size; limits apply to input-driven sets.
        let limited = index > 0;
        if limited && self.scratch.scan.len() + self.scratch.wait.len() > opts.max_items_per_set {
            return Err(EngineError::Limit {
                limit: "max_items_per_set",
                value: opts.max_items_per_set,
            });
        }
        if limited && total > opts.max_total_items {
            return Err(EngineError::Limit {
                limit: "max_total_items",
                value: opts.max_total_items,
            });
        }
        let start = self.items.len() as u32;
        self.items.extend_from_slice(&self.scratch.scan);
        let wait = self.items.len() as u32;
        self.items.extend_from_slice(&self.scratch.wait);
        let end = self.items.len() as u32;
        debug_assert_eq!(index as usize, self.sets.len());
        // Push the set first so that leo_lookup on earlier sets works; fix leo_end after.
        let leo_begin = self.leo.len() as u32;
        self.sets.push(SetInfo {
            at,
            start,
            wait,
            end,
            leo_end: leo_begin,
            complete,
            mark: self.interner.mark(),
        });
        if wait == end {
            return Ok(());
        }
        let lnf = &self.grammar.lnf;
        let stamp = self.scratch.stamp;
        for k in wait as usize..end as usize {
            if let LSym::Nt(b) = lnf.syms[self.items[k].pos as usize] {
                let s = &mut self.scratch;
                if s.count_stamp[b as usize] != stamp {
                    s.count_stamp[b as usize] = stamp;
                    s.count[b as usize] = 0;
                }
                s.count[b as usize] += 1;
            }
        }
        for k in wait as usize..end as usize {
            let it = self.items[k];
            let LSym::Nt(b) = lnf.syms[it.pos as usize] else {
                continue;
            };
            if self.scratch.count[b as usize] != 1 {
                continue;
            }
            // Completions of `any_order!` nonterminals carry the members read, which a Leo
            // entry would drop: no entry waits on one or passes through one.
            if !lnf.nt_any_order.is_empty()
                && (lnf.any_order(b).is_some() || lnf.param_pos(it.pos).is_some())
            {
                continue;
            }
            if let LSym::End(lhs) = lnf.syms[it.pos as usize + 1] {
                let entry = match self.leo_lookup_before(it.start, lhs, index) {
                    Some(e) => LeoEntry { nt: b, ..e },
                    None => LeoEntry {
                        nt: b,
                        top_nt: lhs,
                        top_start: it.start,
                    },
                };
                self.leo.push(entry);
            }
        }
        let leo_end = self.leo.len() as u32;
        self.sets[index as usize].leo_end = leo_end;
        Ok(())
    }

    /// Leo lookup usable while set `current` is being finished (its own entries are excluded).
    fn leo_lookup_before(&self, set: u32, nt: u32, current: u32) -> Option<LeoEntry> {
        if set >= current {
            return None;
        }
        leo_lookup(&self.sets, &self.leo, set, nt)
    }

    /// The terminals the current set is scanning.
    pub fn scan_terminals(&self) -> impl Iterator<Item = ScanItem> + '_ {
        let set = *self.sets.last().expect("at least one set");
        let lnf = &self.grammar.lnf;
        self.items[set.start as usize..set.wait as usize]
            .iter()
            .map(move |it| ScanItem {
                sym: lnf.syms[it.pos as usize],
                pos: it.pos,
                start: it.start,
                state: it.state,
            })
    }

    /// [`Recognizer::allowed_bytes`] ignoring the scan items listed in `skip` (matched on position,
    /// origin and state).
    pub fn allowed_bytes_without(&self, skip: &[ScanItem]) -> ByteSet {
        self.allowed_bytes_filtered(|it| {
            !skip
                .iter()
                .any(|s| s.pos == it.pos && s.start == it.start && s.state == it.state)
        })
    }

    /// Writes a canonical description of everything that determines the recognizer's future into
    /// `key`: the items of the current set and, recursively, what every origin set they can
    /// complete into contributes (its wait items and Leo entries; a wait item superseded by a Leo
    /// entry of its set is never advanced, so it is left out), with origins renumbered in
    /// discovery order (positions themselves do not matter, only which set is which, except that
    /// set 0 is distinguished because completing the start symbol there completes the input;
    /// `except!` items also record their byte count). Two recognizers with equal keys accept
    /// exactly the same continuations, whether or not history was dropped by
    /// [`Recognizer::forget_before`]. Returns `false` (key unusable) when the description would
    /// exceed `max_len` values.
    pub fn state_key(&self, key: &mut Vec<u32>, max_len: usize) -> bool {
        self.state_key_with(key, max_len, |_, state| state)
    }

    /// [`Recognizer::state_key`], with the state of each regex item of the current set written
    /// as `scan_state(terminal, state)`: for callers that know some states to act alike.
    pub fn state_key_with(
        &self,
        key: &mut Vec<u32>,
        max_len: usize,
        scan_state: impl Fn(u32, u32) -> u32,
    ) -> bool {
        key.clear();
        let lnf = &self.grammar.lnf;
        let cur = (self.sets.len() - 1) as u32;
        let cur_at = self.len() as u32;
        let mut origins: Vec<u32> = vec![cur];
        // Canonical number of an origin: 0 for set 0, else discovery order from 1.
        let canon = |origins: &mut Vec<u32>, o: u32| -> u32 {
            if o == 0 {
                return 0;
            }
            match origins.iter().position(|&x| x == o) {
                Some(c) => c as u32 + 1,
                None => {
                    origins.push(o);
                    origins.len() as u32
                }
            }
        };
        key.push(self.is_complete() as u32);
        // `unique!` sets met so far, numbered in discovery order (ids depend on history).
        let mut sets_seen: Vec<u32> = Vec::new();
        // `any_order!` member sets likewise (the items of one object mostly share one set).
        let mut members_seen: Vec<u32> = Vec::new();
        let mut q = 0;
        while q < origins.len() {
            let j = origins[q];
            let set = self.sets[j as usize];
            let leo = self.leo_entries(j);
            key.push(u32::MAX);
            if j == cur {
                for it in &self.items[set.start as usize..set.wait as usize] {
                    let c = canon(&mut origins, it.start);
                    let state = match lnf.syms[it.pos as usize] {
                        LSym::Regex(d) => scan_state(d, it.state),
                        _ => it.state,
                    };
                    key.extend_from_slice(&[it.pos, state, c]);
                    if let LSym::Except(_) = lnf.syms[it.pos as usize] {
                        key.push(cur_at - self.sets[it.start as usize].at);
                    }
                }
            }
            for it in &self.items[set.wait as usize..set.end as usize] {
                if superseded(lnf, it, leo) {
                    continue;
                }
                let c = canon(&mut origins, it.start);
                key.extend_from_slice(&[it.pos, c]);
                if let Some(p) = lnf.param_pos(it.pos) {
                    let ao = lnf.any_order(p.lhs);
                    if ao.is_some_and(|a| a.sets.is_some()) {
                        self.member_key(key, &mut members_seen, it.state);
                    } else if lnf.unique(p.lhs).is_none() {
                        // (the members an `any_order!` item has read; the position says it has
                        // them)
                        key.push(it.state);
                    } else {
                        self.unique_key(key, &mut sets_seen, it.state);
                        if lnf.syms[it.pos as usize + 1] == LSym::End(p.lhs) {
                            // (the text of the item being read decides whether it may end)
                            let from = set.at as usize;
                            push_bytes(key, &self.input[from..]);
                        }
                    }
                }
            }
            for e in leo {
                let c = canon(&mut origins, e.top_start);
                key.extend_from_slice(&[u32::MAX - 1, e.nt, e.top_nt, c]);
            }
            if key.len() > max_len {
                return false;
            }
            q += 1;
        }
        true
    }

    /// Whether a `unique!` item is being read: some wait item the current set can complete into
    /// (through origin sets) is before the item of a `unique!` production. Otherwise no byte
    /// from here ends an item begun before here, so the text read so far decides nothing about
    /// uniqueness (masks then take the shortcuts of grammars without `unique!`).
    pub fn in_unique_item(&self) -> bool {
        let lnf = &self.grammar.lnf;
        if !self.keeps_input {
            return false;
        }
        let cur = self.sets.len() - 1;
        let set = self.sets[cur];
        let mut todo: Vec<u32> = self.items[set.start as usize..set.wait as usize]
            .iter()
            .map(|it| it.start)
            .chain([cur as u32])
            .collect();
        let mut seen = FxHashSet::default();
        while let Some(j) = todo.pop() {
            if !seen.insert(j) {
                continue;
            }
            let s = self.sets[j as usize];
            for it in &self.items[s.wait as usize..s.end as usize] {
                if let Some(p) = lnf.param_pos(it.pos) {
                    let last = lnf.syms[it.pos as usize + 1] == LSym::End(p.lhs);
                    if last && lnf.unique(p.lhs).is_some() {
                        return true;
                    }
                }
                todo.push(it.start);
            }
            todo.extend(self.leo_entries(j).iter().map(|e| e.top_start));
        }
        false
    }

    /// Writes the `unique!` set `set` into a state key: its number among the sets of the key
    /// so far, and at its first mention its values' canonical forms, sorted.
    fn unique_key(&self, key: &mut Vec<u32>, seen: &mut Vec<u32>, set: u32) {
        if !first_mention(key, seen, set) {
            return;
        }
        let mut forms: Vec<&[u8]> = self
            .interner
            .values(set)
            .map(|v| self.interner.value(v))
            .collect();
        forms.sort_unstable();
        key.push(forms.len() as u32);
        for f in forms {
            push_bytes(key, f);
        }
    }

    /// Writes the `any_order!` member set `set` into a state key: its number among the member
    /// sets of the key so far, and at its first mention the count of members read and the
    /// members, sorted (ids depend on history, sets do not).
    fn member_key(&self, key: &mut Vec<u32>, seen: &mut Vec<u32>, set: u32) {
        if !first_mention(key, seen, set) {
            return;
        }
        let mut members: Vec<u32> = self.interner.members(set).collect();
        members.sort_unstable();
        key.push(self.interner.member_count(set));
        key.push(members.len() as u32);
        key.extend_from_slice(&members);
    }

    /// The Leo entries of set `j`.
    fn leo_entries(&self, j: u32) -> &[LeoEntry] {
        let from = if j == 0 {
            0
        } else {
            self.sets[j as usize - 1].leo_end
        };
        &self.leo[from as usize..self.sets[j as usize].leo_end as usize]
    }

    /// Promises that the recognizer will not be rolled back below `len` (clamped to the current
    /// length), so memory that only served such rollbacks may be released: the sets before `len`
    /// that no live item can complete into are dropped and the rest renumbered (seed 000,
    /// "compacting Earley sets"). Afterwards [`Recognizer::horizon`] is at most `len`. Amortized
    /// O(1) per byte: compaction runs only once the sets have doubled since the last one, so
    /// memory stays proportional to the live sets plus the window above `len`.
    pub fn forget_before(&mut self, len: usize) {
        let len = len.min(self.len());
        if len <= self.horizon() {
            return;
        }
        if self.sets.len() >= 2 * self.sets_after_compaction as usize + 64 {
            self.compact_before(len);
        }
    }

    /// [`Recognizer::forget_before`] without amortization: compacts now (O(live items + window)).
    /// A no-op when `len` is not above the horizon.
    pub fn compact_before(&mut self, len: usize) {
        let len = len.min(self.len());
        if len <= self.horizon() {
            return;
        }
        let w = self.set_index(len).expect("horizon < len <= self.len()");
        self.compact(w);
    }

    /// Drops every set before `w` (except set 0) that no kept item or Leo entry refers to; from
    /// the kept sets before `w` also drops scan items and wait items superseded by Leo entries.
    fn compact(&mut self, w: usize) {
        let lnf = &self.grammar.lnf;
        let n = self.sets.len();
        let mut keep = vec![false; n];
        keep[0] = true;
        keep[w..].iter_mut().for_each(|k| *k = true);
        // References only point to the same or earlier sets, so one descending pass suffices.
        for j in (0..n).rev() {
            if !keep[j] {
                continue;
            }
            let set = self.sets[j];
            let leo = self.leo_entries(j as u32);
            let from = if j >= w { set.start } else { set.wait };
            for it in &self.items[from as usize..set.end as usize] {
                if j >= w || !superseded(lnf, it, leo) {
                    keep[it.start as usize] = true;
                }
            }
            for e in leo {
                keep[e.top_start as usize] = true;
            }
        }
        let mut renum = vec![u32::MAX; n];
        let mut next = 0u32;
        for (j, r) in renum.iter_mut().enumerate() {
            if keep[j] {
                *r = next;
                next += 1;
            }
        }
        // In place: kept sets keep their order and only move down, so writes never overtake reads.
        let (mut item_w, mut leo_w, mut set_w) = (0usize, 0usize, 0usize);
        let mut leo_from = 0usize;
        for (j, &kept) in keep.iter().enumerate() {
            let set = self.sets[j];
            let leo_to = set.leo_end as usize;
            if kept {
                let new_start = item_w as u32;
                if j >= w {
                    for k in set.start as usize..set.end as usize {
                        let it = self.items[k];
                        self.items[item_w] = Item {
                            start: renum[it.start as usize],
                            ..it
                        };
                        item_w += 1;
                    }
                } else {
                    for k in set.wait as usize..set.end as usize {
                        let it = self.items[k];
                        if !superseded(lnf, &it, &self.leo[leo_from..leo_to]) {
                            self.items[item_w] = Item {
                                start: renum[it.start as usize],
                                ..it
                            };
                            item_w += 1;
                        }
                    }
                }
                for k in leo_from..leo_to {
                    let e = self.leo[k];
                    self.leo[leo_w] = LeoEntry {
                        top_start: renum[e.top_start as usize],
                        ..e
                    };
                    leo_w += 1;
                }
                let wait = if j >= w {
                    new_start + (set.wait - set.start)
                } else {
                    new_start
                };
                self.sets[set_w] = SetInfo {
                    start: new_start,
                    wait,
                    end: item_w as u32,
                    leo_end: leo_w as u32,
                    ..set
                };
                set_w += 1;
            }
            leo_from = leo_to;
        }
        self.items.truncate(item_w);
        self.leo.truncate(leo_w);
        self.sets.truncate(set_w);
        self.window_start = renum[w];
        self.sets_after_compaction = set_w as u32;
    }

    /// Heap bytes held by the recognizer's buffers.
    pub fn memory_usage(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<Item>()
            + self.sets.capacity() * std::mem::size_of::<SetInfo>()
            + self.leo.capacity() * std::mem::size_of::<LeoEntry>()
    }

    /// Number of items in the current set (for diagnostics and benchmarks).
    pub fn current_set_size(&self) -> usize {
        let s = self.sets.last().expect("at least one set");
        (s.end - s.start) as usize
    }
}

/// Writes the number of interned set `set` among those `seen` so far in a state key (a new
/// one joins them); returns whether this is its first mention (then its content follows).
fn first_mention(key: &mut Vec<u32>, seen: &mut Vec<u32>, set: u32) -> bool {
    if let Some(k) = seen.iter().position(|&x| x == set) {
        key.push(k as u32);
        return false;
    }
    seen.push(set);
    key.push(seen.len() as u32 - 1);
    true
}

/// Appends `bytes` to a key: their length, then four to a value.
fn push_bytes(key: &mut Vec<u32>, bytes: &[u8]) {
    key.push(bytes.len() as u32);
    key.extend(bytes.chunks(4).map(|c| {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        u32::from_le_bytes(w)
    }));
}

/// Whether wait item `it` of a set is superseded by one of the set's Leo entries `leo`: completing
/// its postdot nonterminal with that set as origin takes the Leo shortcut and never advances `it`.
#[inline]
fn superseded(lnf: &Lnf, it: &Item, leo: &[LeoEntry]) -> bool {
    match lnf.syms[it.pos as usize] {
        LSym::Nt(b) => leo.iter().any(|e| e.nt == b),
        _ => false,
    }
}

#[inline]
fn leo_lookup(sets: &[SetInfo], leo: &[LeoEntry], set: u32, nt: u32) -> Option<LeoEntry> {
    let from = if set == 0 {
        0
    } else {
        sets[set as usize - 1].leo_end
    };
    let to = sets[set as usize].leo_end;
    leo[from as usize..to as usize]
        .iter()
        .find(|e| e.nt == nt)
        .copied()
}
