//! One DFA for a right-linear part of a grammar (a regular language written as rules).
//!
//! A nonterminal is right-linear when each of its productions is a run of terminals optionally
//! followed by one right-linear nonterminal (`s ::= '' | 'a' s | [0-9] t;`, the rules the
//! translator writes for automata, right-recursive lists, ...). Its language is regular, and
//! scanning it as one terminal lets the recognizer and the token-mask walk treat it as a single
//! lexeme (a DFA step per byte) instead of an Earley set per piece.
//!
//! Construction: the subset construction over items `(production, terminal index, terminal
//! state)`, closed under "a terminal that can end moves on to the next one" and "a finished
//! production enters the productions of its tail nonterminal"; a set holding a finished
//! production without tail accepts. Bounded like every combination of automata: the table by
//! `size_limit`, the work by the budget's steps, and the sets themselves by `size_limit` too.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{explore_rows, part_classes, CombineBudget, Dfa, DfaError, Part, StateIndex};

/// A right-linear grammar, flattened once for the automata of all its entry nonterminals.
pub struct RightLinear<'a> {
    /// Productions of all nonterminals, in order: terminals and an optional tail nonterminal.
    prods: Vec<(Vec<Part<'a>>, Option<u32>)>,
    /// `slots[p][i]`: where the states of terminal `i` of production `p` begin in the index of
    /// single-item sets (see [`SetIndex`]).
    slots: Vec<Vec<u32>>,
    /// `prods[first_prod[nt]..first_prod[nt + 1]]` are the productions of nonterminal `nt`.
    first_prod: Vec<u32>,
}

/// An item: production (flat index), terminal index, state of that terminal.
type Item = (u32, u32, u32);

impl<'a> RightLinear<'a> {
    /// `rules[nt]`: the productions of nonterminal `nt`, as terminals and an optional tail (an
    /// index into `rules`).
    pub fn new(rules: Vec<Vec<(Vec<Part<'a>>, Option<u32>)>>) -> RightLinear<'a> {
        let mut prods = Vec::new();
        let mut first_prod = Vec::with_capacity(rules.len() + 1);
        for alts in rules {
            first_prod.push(prods.len() as u32);
            prods.extend(alts);
        }
        first_prod.push(prods.len() as u32);
        let mut slot_count = 0usize;
        let slots = prods
            .iter()
            .map(|(parts, _)| {
                parts
                    .iter()
                    .map(|p| {
                        let first = slot_count as u32;
                        slot_count += p.state_count();
                        first
                    })
                    .collect()
            })
            .collect();
        RightLinear {
            prods,
            slots,
            first_prod,
        }
    }

    /// The productions reachable from nonterminal `entry` (through tails), and the range of
    /// item slots of their terminals.
    fn reachable(&self, entry: u32) -> (Vec<u32>, std::ops::Range<usize>) {
        let mut seen: FxHashSet<u32> = FxHashSet::default();
        let mut stack = vec![entry];
        let mut prods = Vec::new();
        let (mut lo, mut hi) = (usize::MAX, 0);
        seen.insert(entry);
        while let Some(nt) = stack.pop() {
            for p in self.first_prod[nt as usize]..self.first_prod[nt as usize + 1] {
                prods.push(p);
                let (parts, tail) = &self.prods[p as usize];
                if let Some(last) = parts.last() {
                    // (a production's slots are consecutive, in terminal order)
                    let slots = &self.slots[p as usize];
                    lo = lo.min(slots[0] as usize);
                    hi = hi.max(slots[parts.len() - 1] as usize + last.state_count());
                }
                if let Some(t) = *tail {
                    if seen.insert(t) {
                        stack.push(t);
                    }
                }
            }
        }
        (prods, lo.min(hi)..hi)
    }

    /// The DFA of the language of nonterminal `entry`.
    ///
    /// Its byte classes are those of the terminals reachable from `entry` alone, and its index
    /// of single-item sets spans their slots alone: work and memory grow with the part of the
    /// grammar the entry uses, not with all of it (a grammar of many tools has many entries).
    pub fn dfa(&self, entry: u32, budget: &mut CombineBudget) -> Result<Dfa, DfaError> {
        let (prods, slot_range) = self.reachable(entry);
        let parts: Vec<Part<'a>> = prods
            .iter()
            .flat_map(|&p| self.prods[p as usize].0.iter().copied())
            .collect();
        let (classes, reps) = part_classes(&parts);
        let size_limit = budget.size_limit;
        let steps = std::cell::Cell::new(budget.steps);
        // Items of every set produced (rediscovered ones included): an upper bound on the
        // memory of the set index.
        let held = std::cell::Cell::new(0usize);
        let mut scratch = Closure::default();
        let mut start = Set::default();
        self.enter(entry, &mut start, &mut scratch);
        start.normalize();
        // Counts `n` more items of the sets produced against the size limit.
        let hold = |n: usize| {
            held.set(held.get() + n);
            if held.get() * 16 > size_limit {
                return Err(DfaError::TooBig { limit: size_limit });
            }
            Ok(())
        };
        // One set's successor on byte `b`, into `next`; false when dead.
        let mut step = |set: &Set, b: u8, next: &mut Set| -> Result<bool, DfaError> {
            next.items.clear();
            next.accept = false;
            scratch.entered.clear();
            for &(p, i, s) in &set.items {
                let t = self.prods[p as usize].0[i as usize].next(s, b);
                if t != super::DEAD {
                    self.at(p, i, t, next, &mut scratch);
                }
            }
            if next.items.is_empty() && !next.accept {
                return Ok(false);
            }
            next.normalize();
            hold(next.items.len())?;
            Ok(true)
        };
        let mut next = Set::default();
        let result = explore_rows(
            start,
            &reps,
            |set: &Set, row, ids| {
                let cost = (set.items.len() as u64 + 1) * reps.len() as u64;
                let left = steps.get();
                if left < cost {
                    return Err(DfaError::TooSlow { steps: left });
                }
                steps.set(left - cost);
                // Inside one terminal (most sets): the successor is that terminal's next state
                // alone, unless it can end there (then the closure decides).
                let single = match (set.items.as_slice(), set.accept) {
                    (&[(p, i, s)], false) => Some((p, i, s, &self.prods[p as usize].0[i as usize])),
                    _ => None,
                };
                for (c, &b) in reps.iter().enumerate() {
                    if let Some((p, i, s, part)) = single {
                        let t = part.next(s, b);
                        if t == super::DEAD {
                            continue;
                        }
                        if !part.is_accept(t) {
                            if part.is_live(t) {
                                next.items.clear();
                                next.items.push((p, i, t));
                                next.accept = false;
                                hold(1)?;
                                row[c] = ids.id(&next)?;
                            }
                            continue;
                        }
                    }
                    if step(set, b, &mut next)? {
                        row[c] = ids.id(&next)?;
                    }
                }
                Ok(())
            },
            |set: &Set| set.accept,
            size_limit,
            &mut SetIndex {
                grammar: self,
                single: Vec::new(),
                slots: slot_range,
                sets: FxHashMap::default(),
            },
        );
        budget.steps = steps.get();
        let explored = result?;
        let (explored, classes) = explored.merge_equal_classes(classes);
        Ok(explored.finish(classes))
    }

    fn enter(&self, nt: u32, set: &mut Set, scratch: &mut Closure) {
        scratch.entered.clear();
        scratch.stack.push(Work::Enter(nt));
        self.run(set, scratch);
    }

    /// Terminal `i` of production `p` in (live) state `s`: kept while it can go on, and the next
    /// terminal begins where it can end.
    fn at(&self, p: u32, i: u32, s: u32, set: &mut Set, scratch: &mut Closure) {
        self.visit(p, i, s, set, &mut scratch.stack);
        self.run(set, scratch);
    }

    fn visit(&self, p: u32, i: u32, s: u32, set: &mut Set, stack: &mut Vec<Work>) {
        let part = &self.prods[p as usize].0[i as usize];
        if part.is_live(s) {
            set.items.push((p, i, s));
        }
        if part.is_accept(s) {
            stack.push(Work::Begin(p, i + 1));
        }
    }

    /// Closes `set` under the work on the scratch stack.
    fn run(&self, set: &mut Set, scratch: &mut Closure) {
        while let Some(w) = scratch.stack.pop() {
            match w {
                Work::Enter(nt) => {
                    if scratch.entered.insert(nt) {
                        let (lo, hi) = (
                            self.first_prod[nt as usize],
                            self.first_prod[nt as usize + 1],
                        );
                        scratch.stack.extend((lo..hi).map(|p| Work::Begin(p, 0)));
                    }
                }
                Work::Begin(p, i) => {
                    let (parts, tail) = &self.prods[p as usize];
                    match parts.get(i as usize) {
                        Some(part) => {
                            let s = part.start();
                            if s != super::DEAD {
                                self.visit(p, i, s, set, &mut scratch.stack);
                            }
                        }
                        None => match tail {
                            Some(nt) => scratch.stack.push(Work::Enter(*nt)),
                            None => set.accept = true,
                        },
                    }
                }
            }
        }
    }
}

/// Ids of the sets explored: a set of one item that does not accept (inside one terminal of one
/// production: most states, e.g. all of a string value's in an object's member list) by a flat
/// array indexed by the item, other sets by hashing.
struct SetIndex<'g, 'a> {
    grammar: &'g RightLinear<'a>,
    /// Per item slot in `slots` (see [`RightLinear::slots`]), from its start: the id of its
    /// single-item set, or 0.
    single: Vec<u32>,
    /// The slots of the terminals reachable from the entry.
    slots: std::ops::Range<usize>,
    sets: FxHashMap<Set, u32>,
}

impl SetIndex<'_, '_> {
    /// The slot of a single-item, non-accepting set.
    fn slot(&self, set: &Set) -> Option<usize> {
        match set.items.as_slice() {
            &[(p, i, s)] if !set.accept => Some(
                self.grammar.slots[p as usize][i as usize] as usize + s as usize - self.slots.start,
            ),
            _ => None,
        }
    }
}

impl StateIndex<Set> for SetIndex<'_, '_> {
    fn get(&self, set: &Set) -> Option<u32> {
        match self.slot(set) {
            Some(k) => self.single.get(k).copied().filter(|&id| id != 0),
            None => self.sets.get(set).copied(),
        }
    }
    fn insert(&mut self, set: &Set, id: u32) {
        match self.slot(set) {
            Some(k) => {
                if self.single.is_empty() {
                    self.single = vec![0; self.slots.len()];
                }
                self.single[k] = id;
            }
            None => {
                self.sets.insert(set.clone(), id);
            }
        }
    }
}

/// A DFA state: sorted, deduplicated items, and whether a production without tail finished.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
struct Set {
    items: Vec<Item>,
    accept: bool,
}

impl Set {
    /// Sorted and deduplicated: equal sets are equal keys.
    fn normalize(&mut self) {
        self.items.sort_unstable();
        self.items.dedup();
    }
}

/// Scratch space of the closure: the work stack and the nonterminals entered in the set being
/// built (entering one twice adds nothing).
#[derive(Default)]
struct Closure {
    stack: Vec<Work>,
    entered: FxHashSet<u32>,
}

/// Closure work, done with an explicit stack (chains of rules can be long).
enum Work {
    /// Enter the productions of a nonterminal (once per set).
    Enter(u32),
    /// Production `p` about to read its terminal `i` (finished when `i` is past the end).
    Begin(u32, u32),
}
