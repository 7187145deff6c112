//! Building one Earley set: prediction, scanning, completion (with Leo items) into the scratch
//! buffers of the new set, reading the finished sets only.

use super::unique::{canonical, Interner};
use super::{leo_lookup, Item, LeoEntry, Scratch, SetInfo, LINEAR_DEDUP};
use crate::error::EngineError;
use crate::kbnf::ast::MemberKind;
use crate::lnf::{AnyOrder, LSym, Lnf, MemberSets, Unique};
use crate::options::CompileOptions;

/// The state needed while one set is being built: the grammar, the finished sets (read-only) and
/// the scratch buffers of the new set.
pub(super) struct Build<'a> {
    pub(super) lnf: &'a Lnf,
    pub(super) opts: &'a CompileOptions,
    pub(super) items: &'a [Item],
    pub(super) sets: &'a [SetInfo],
    pub(super) leo: &'a [LeoEntry],
    pub(super) s: &'a mut Scratch,
    /// For `unique!`: the input read so far, the byte of the set being built included (empty
    /// when the grammar has no `unique!`), and the interned sets of values.
    pub(super) input: &'a [u8],
    pub(super) interner: &'a mut Interner,
}

impl Build<'_> {
    /// Moves the dot past a fully matched symbol: item `(pos, start, state)` in set `here` (`state`
    /// is 0 outside `any_order!` productions, where it is the set of members read).
    #[inline]
    pub(super) fn advance(&mut self, pos: u32, start: u32, state: u32, here: u32) {
        let lnf = self.lnf;
        match lnf.syms[pos as usize] {
            LSym::End(lhs) => {
                // Completing an `any_order!` nonterminal yields the members read, its own
                // included; completing a `unique!` one the set of its items.
                let value = match lnf.param_pos(pos) {
                    None => 0,
                    Some(p) => match lnf.any_order(p.lhs) {
                        Some(AnyOrder {
                            unique: Some(_), ..
                        }) => state,
                        Some(AnyOrder { sets: Some(m), .. }) => self.member_read(m, state, p.bit),
                        _ => state | p.bit,
                    },
                };
                self.s.completions.push((lhs, start, value));
            }
            LSym::Nt(b) => {
                if self.add_wait(Item { pos, start, state }) {
                    self.predict(b, here);
                }
            }
            _ => {
                let state = lnf.init_state[pos as usize];
                self.add_scan(Item { pos, start, state });
            }
        }
    }

    pub(super) fn add_scan(&mut self, it: Item) {
        let s = &mut self.s;
        if s.scan.len() < LINEAR_DEDUP {
            if s.scan.contains(&it) {
                return;
            }
        } else {
            if s.scan_set.is_empty() {
                s.scan_set.extend(s.scan.iter().copied());
            }
            if !s.scan_set.insert(it) {
                return;
            }
        }
        s.scan.push(it);
    }

    pub(super) fn add_wait(&mut self, it: Item) -> bool {
        let s = &mut self.s;
        if s.wait.len() < LINEAR_DEDUP {
            if s.wait.contains(&it) {
                return false;
            }
        } else {
            if s.wait_set.is_empty() {
                s.wait_set.extend(s.wait.iter().copied());
            }
            if !s.wait_set.insert(it) {
                return false;
            }
        }
        s.wait.push(it);
        true
    }

    /// Predicts `nt` and, transitively, nonterminals at the start of its productions. Predicted
    /// items start in the set being built, so they cannot collide with scanned or completed items
    /// (which start earlier) and need no deduplication beyond the per-nonterminal stamp.
    pub(super) fn predict(&mut self, nt: u32, here: u32) {
        let lnf = self.lnf;
        let s = &mut self.s;
        if s.predicted[nt as usize] == s.stamp {
            return;
        }
        s.predicted[nt as usize] = s.stamp;
        s.predict_stack.push(nt);
        while let Some(n) = s.predict_stack.pop() {
            for &p in lnf.productions(n) {
                match lnf.syms[p as usize] {
                    LSym::Nt(c) => {
                        s.wait.push(Item {
                            pos: p,
                            start: here,
                            state: 0,
                        });
                        if s.predicted[c as usize] != s.stamp {
                            s.predicted[c as usize] = s.stamp;
                            s.predict_stack.push(c);
                        }
                    }
                    _ => s.scan.push(Item {
                        pos: p,
                        start: here,
                        state: lnf.init_state[p as usize],
                    }),
                }
            }
        }
        // The hash sets, if active, must learn about the pushed items.
        if !s.scan_set.is_empty() {
            s.scan_set.extend(s.scan.iter().copied());
        }
        if !s.wait_set.is_empty() {
            s.wait_set.extend(s.wait.iter().copied());
        }
    }

    /// Processes pending completions in the set `here`; returns whether the start symbol completed
    /// from origin 0.
    pub(super) fn run_completions(&mut self, here: u32) -> Result<bool, EngineError> {
        let mut complete = false;
        let max_items = self.opts.max_items_per_set;
        let max_work = self.opts.max_work_per_byte;
        let mut work = 0usize;
        while let Some((lhs, origin, value)) = self.s.completions.pop() {
            if !self.first_completion(lhs, origin, value) {
                continue;
            }
            if lhs == 0 && origin == 0 {
                complete = true;
            }
            if let Some(e) = self.leo_lookup(origin, lhs) {
                self.s.completions.push((e.top_nt, e.top_start, 0));
                continue;
            }
            let set = self.sets[origin as usize];
            work += (set.end - set.wait) as usize + 1;
            if work > max_work {
                return Err(EngineError::Limit {
                    limit: "max_work_per_byte",
                    value: max_work,
                });
            }
            if self.lnf.nt_any_order.is_empty() {
                // (no `any_order!`: every completion is plain)
                for k in set.wait as usize..set.end as usize {
                    let it = self.items[k];
                    if self.lnf.syms[it.pos as usize] == LSym::Nt(lhs) {
                        self.advance(it.pos + 1, it.start, it.state, here);
                    }
                }
            } else {
                complete |= self.complete_parametric(lhs, origin, value, here);
            }
            if self.s.scan.len() + self.s.wait.len() > max_items {
                return Err(EngineError::Limit {
                    limit: "max_items_per_set",
                    value: max_items,
                });
            }
        }
        // (only `unique!` items set it: their interner's size over `max_total_items`)
        if let Some(e) = self.s.error.take() {
            return Err(e);
        }
        Ok(complete)
    }

    /// Moves `it` (in a finished set, waiting on `lhs`) past `lhs`, completed with `value`. For
    /// an `any_order!` nonterminal, `X ::= . X sep m_i` goes on with the members read when `m_i`
    /// may occur again, and any other item only once every required member is read.
    #[inline]
    fn advance_over(&mut self, it: Item, lhs: u32, value: u32, here: u32) {
        let Some(ao) = self.lnf.any_order(lhs) else {
            match self.lnf.param_pos(it.pos) {
                Some(p) if self.lnf.syms[it.pos as usize + 1] == LSym::End(p.lhs) => {
                    if let Some(u) = self.lnf.unique(p.lhs) {
                        self.advance_over_item(it, u, here);
                        return;
                    }
                    self.advance(it.pos + 1, it.start, it.state, here);
                }
                _ => self.advance(it.pos + 1, it.start, it.state, here),
            }
            return;
        };
        if let Some(u) = ao.unique {
            self.advance_over_unique(it, lhs, u, value, here);
            return;
        }
        if let Some(m) = ao.sets {
            self.advance_over_members(it, lhs, m, value, here);
            return;
        }
        match self.lnf.param_pos(it.pos) {
            Some(p) if p.lhs == lhs => {
                if value & p.bit & ao.once == 0 {
                    self.advance(it.pos + 1, it.start, value, here);
                }
            }
            _ => {
                if value & ao.required == ao.required {
                    self.advance(it.pos + 1, it.start, it.state, here);
                }
            }
        }
    }

    /// Moves `it` (waiting on `lhs`, a `unique!` nonterminal) past `lhs`, completed with the set
    /// `value` of its items: `X ::= . X sep m_j` goes on (holding the set) when another item may
    /// follow and it is a `m_j`, any other item once there are enough items.
    #[inline]
    fn advance_over_unique(&mut self, it: Item, lhs: u32, u: Unique, value: u32, here: u32) {
        let n = self.interner.len(value);
        match self.lnf.param_pos(it.pos) {
            Some(p) if p.lhs == lhs => {
                if n < u.max && u.member_after(n) == p.bit {
                    self.advance(it.pos + 1, it.start, value, here);
                }
            }
            _ => {
                if n >= u.min {
                    self.advance(it.pos + 1, it.start, it.state, here);
                }
            }
        }
    }

    /// The member set `set` after member `index` of an `any_order!` with member sets `m` was
    /// read (see [`crate::lnf::MemberSets`]). A limit error is left in the scratch for
    /// [`Build::run_completions`].
    #[cold]
    fn member_read(&mut self, m: MemberSets, set: u32, index: u32) -> u32 {
        let kind = self.lnf.member_kind(m, index);
        let record = match kind {
            MemberKind::Many => false,
            // (`X ::= X . sep m_i` was reached only without it)
            MemberKind::Once | MemberKind::Optional => true,
            MemberKind::Some => !self.interner.has_member(set, index),
        };
        let required = matches!(kind, MemberKind::Once | MemberKind::Some);
        let out = self
            .interner
            .add_member(set, index, record, required, m.cap());
        if self.interner.size() > self.opts.max_total_items && self.s.error.is_none() {
            self.s.error = Some(EngineError::Limit {
                limit: "max_total_items (any_order! member sets)",
                value: self.opts.max_total_items,
            });
        }
        out
    }

    /// Moves `it` (waiting on `lhs`, an `any_order!` with member sets `m`) past `lhs`, completed
    /// with the member set `value`: `X ::= . X sep m_i` goes on (holding the set) when another
    /// member may be read and `m_i` may occur again, any other item once every required member
    /// is in the set and enough members were read.
    fn advance_over_members(&mut self, it: Item, lhs: u32, m: MemberSets, value: u32, here: u32) {
        if self.s.member_value != Some((lhs, value)) {
            let words = (m.members as usize).div_ceil(64);
            let mut bits = std::mem::take(&mut self.s.member_bits);
            self.interner.member_bits(value, words, &mut bits);
            let closes = self.interner.member_count(value) >= m.min
                && (0..m.members).all(|i| {
                    !matches!(
                        self.lnf.member_kind(m, i),
                        MemberKind::Once | MemberKind::Some
                    ) || bits[i as usize / 64] >> (i % 64) & 1 == 1
                });
            self.s.member_bits = bits;
            self.s.member_closes = closes;
            self.s.member_value = Some((lhs, value));
        }
        match self.lnf.param_pos(it.pos) {
            Some(p) if p.lhs == lhs => {
                let kind = self.lnf.member_kind(m, p.bit);
                let once = matches!(kind, MemberKind::Once | MemberKind::Optional);
                let read = self.s.member_bits[p.bit as usize / 64] >> (p.bit % 64) & 1 == 1;
                let sizes = self.interner.member_sizes(value);
                // (and no dead end: the members left can still end it within the counts)
                if sizes.0 < m.max && !(once && read) && m.completable_after(sizes, kind, read) {
                    self.advance(it.pos + 1, it.start, value, here);
                }
            }
            _ => {
                if self.s.member_closes {
                    self.advance(it.pos + 1, it.start, it.state, here);
                }
            }
        }
    }

    /// Moves `it`, the last position of a `unique!` production (its item, after `it.state`'s
    /// items), past the item just completed from origin `it`'s set: the item's text is the
    /// input from that set on; it goes on with the set grown by the text's value unless the
    /// set holds that value. A limit error is left in the scratch for
    /// [`Build::run_completions`].
    #[cold]
    fn advance_over_item(&mut self, it: Item, _u: Unique, here: u32) {
        let origin = self.s.item_origin;
        let v = match self.s.item_value {
            Some((o, v)) if o == origin => v,
            _ => {
                let from = self.sets[origin as usize].at as usize;
                let mut form = std::mem::take(&mut self.s.canon);
                canonical(&self.input[from..], &mut form);
                let v = self.interner.intern_value(&form);
                self.s.canon = form;
                self.s.item_value = Some((origin, v));
                v
            }
        };
        if self.interner.contains(it.state, v) {
            return;
        }
        let set = self.interner.insert(it.state, v);
        if self.interner.size() > self.opts.max_total_items && self.s.error.is_none() {
            self.s.error = Some(EngineError::Limit {
                limit: "max_total_items (unique! values)",
                value: self.opts.max_total_items,
            });
        }
        self.advance(it.pos + 1, it.start, set, here);
    }

    /// Puts `(lhs, value)` and every other pending completion from `origin` that is new and has
    /// no Leo entry into `batch` (taking them off the pending list; Leo shortcuts go back on it),
    /// so that one pass over the origin set completes them all: a union of many objects in any
    /// order that start together finishes a member, and each object, in all of them at once
    /// (one pass per completion made some schemas' bytes cost 100 times the work).
    /// Returns whether the start symbol completed from origin 0 among them.
    fn gather_same_origin(&mut self, lhs: u32, origin: u32, value: u32) -> bool {
        let mut complete = false;
        self.s.batch.clear();
        self.s.batch.push((lhs, value));
        let mut k = 0;
        while k < self.s.completions.len() {
            let (l, o, v) = self.s.completions[k];
            if o != origin {
                k += 1;
                continue;
            }
            self.s.completions.swap_remove(k);
            if !self.first_completion(l, o, v) {
                continue;
            }
            complete |= l == 0 && o == 0;
            match self.leo_lookup(o, l) {
                Some(e) => self.s.completions.push((e.top_nt, e.top_start, 0)),
                None => self.s.batch.push((l, v)),
            }
        }
        complete
    }

    /// In a grammar with `any_order!`: completes `lhs` with `value` from `origin`, with the other
    /// pending completions from there (see [`Build::gather_same_origin`]). Returns whether the
    /// start symbol completed from origin 0 among those.
    fn complete_parametric(&mut self, lhs: u32, origin: u32, value: u32, here: u32) -> bool {
        let complete = self.gather_same_origin(lhs, origin, value);
        // (the origin of every completion `advance_over` sees: see `advance_over_item`)
        self.s.item_origin = origin;
        if self.s.batch.len() == 1 {
            let set = self.sets[origin as usize];
            for k in set.wait as usize..set.end as usize {
                let it = self.items[k];
                if self.lnf.syms[it.pos as usize] == LSym::Nt(lhs) {
                    self.advance_over(it, lhs, value, here);
                }
            }
        } else {
            self.complete_batch(origin, here);
        }
        complete
    }

    /// Completes every `(lhs, value)` of `batch` from `origin` in one pass over the origin set.
    fn complete_batch(&mut self, origin: u32, here: u32) {
        let mut batch = std::mem::take(&mut self.s.batch);
        batch.sort_unstable();
        let set = self.sets[origin as usize];
        for k in set.wait as usize..set.end as usize {
            let it = self.items[k];
            let LSym::Nt(b) = self.lnf.syms[it.pos as usize] else {
                continue;
            };
            let from = batch.partition_point(|&(l, _)| l < b);
            for &(l, v) in batch[from..].iter().take_while(|&&(l, _)| l == b) {
                self.advance_over(it, l, v, here);
            }
        }
        self.s.batch = batch;
    }

    pub(super) fn first_completion(&mut self, lhs: u32, origin: u32, value: u32) -> bool {
        let s = &mut self.s;
        let key = (lhs, origin, value);
        if s.done.len() < LINEAR_DEDUP {
            if s.done.contains(&key) {
                return false;
            }
            s.done.push(key);
            true
        } else {
            if s.done_set.is_empty() {
                s.done_set.extend(s.done.iter().copied());
            }
            if s.done_set.insert(key) {
                s.done.push(key);
                true
            } else {
                false
            }
        }
    }

    #[inline]
    pub(super) fn leo_lookup(&self, set: u32, nt: u32) -> Option<LeoEntry> {
        leo_lookup(self.sets, self.leo, set, nt)
    }
}
