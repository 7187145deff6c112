//! Determinizing a Thompson NFA without look-around straight into our table: the subset
//! construction over the NFA's byte classes, a DFA state being the sorted set of the NFA states
//! that read a byte or match, closed under the NFA's ε-moves.
//!
//! Why not `regex-automata`'s dense determinizer: it prepares what a search needs (a start state
//! per look-behind context, premultiplied ids, match and acceleration bookkeeping, a SipHash state
//! map) and its table is then copied into ours; for the small patterns schemas use (a number, a
//! date, a string with a length bound) that overhead is most of the construction. Patterns with
//! look-around (`^`, `$`, `\b`, …) still go through it. Both give automata of the same language
//! over the same byte classes; ours has no more states (its sets hold only the NFA states that
//! read a byte or match, so sets differing only in ε-states are one state), as the tests check.

use std::cell::Cell;

use regex_automata::nfa::thompson::{State, NFA};
use regex_automata::util::primitives::StateID;
use rustc_hash::FxHashMap;

use super::{explore_into, Dfa, DfaError, StateIndex};

/// The automaton of `nfa` matched in full from its anchored start, within `size_limit` bytes
/// (table and state sets); `None` when the NFA has look-around assertions.
pub(super) fn determinize(nfa: &NFA, size_limit: usize) -> Option<Result<Dfa, DfaError>> {
    if !nfa.look_set_any().is_empty() {
        return None;
    }
    // The NFA's byte classes, numbered densely in byte order (as for the dense DFA).
    let byte_classes = nfa.byte_classes();
    let mut classes = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut dense = [u16::MAX; 256];
    for b in 0..=255u8 {
        let c = byte_classes.get(b) as usize;
        if dense[c] == u16::MAX {
            dense[c] = reps.len() as u16;
            reps.push(b);
        }
        classes[b as usize] = dense[c] as u8;
    }
    let mut closure = Closure::new(nfa);
    let mut seeds = vec![nfa.start_anchored()];
    let mut start = Vec::new();
    closure.of(&seeds, &mut start);
    // Bytes of the states found so far, their sets (as the index stores them) and their table
    // rows together: bounded by `size_limit`.
    let held = Cell::new(0usize);
    let mut index = CountingIndex {
        ids: FxHashMap::default(),
        held: &held,
        row_bytes: reps.len() * 4,
    };
    let table = explore_into(
        start,
        &reps,
        |set: &Vec<u32>, b, next: &mut Vec<u32>| {
            if held.get() > size_limit {
                return Err(DfaError::TooBig { limit: size_limit });
            }
            seeds.clear();
            for &s in set {
                let next = match nfa.state(StateID::new_unchecked(s as usize)) {
                    State::ByteRange { trans } => trans.matches_byte(b).then_some(trans.next),
                    State::Sparse(t) => t.matches_byte(b),
                    State::Dense(t) => t.matches_byte(b),
                    _ => None,
                };
                seeds.extend(next);
            }
            if seeds.is_empty() {
                return Ok(false);
            }
            closure.of(&seeds, next);
            Ok(!next.is_empty())
        },
        |set| {
            set.iter().any(|&s| {
                matches!(
                    nfa.state(StateID::new_unchecked(s as usize)),
                    State::Match { .. }
                )
            })
        },
        size_limit,
        &mut index,
    );
    Some(table.map(|t| t.finish(classes)))
}

/// Bytes a stored set costs beside its ids: the vector and the index entry.
const SET_OVERHEAD: usize = 48;

/// The state sets' ids, counting the bytes of each stored set (ids, vector, map entry) and of its
/// state's table row.
struct CountingIndex<'c> {
    ids: FxHashMap<Vec<u32>, u32>,
    held: &'c Cell<usize>,
    row_bytes: usize,
}

impl StateIndex<Vec<u32>> for CountingIndex<'_> {
    fn get(&self, set: &Vec<u32>) -> Option<u32> {
        self.ids.get(set).copied()
    }
    fn insert(&mut self, set: &Vec<u32>, id: u32) {
        self.held
            .set(self.held.get() + set.len() * 4 + SET_OVERHEAD + self.row_bytes);
        self.ids.insert(set.clone(), id);
    }
}

/// ε-closure with reused scratch space: a stamp per NFA state marks those visited by the current
/// call, so nothing is cleared between calls.
struct Closure<'a> {
    nfa: &'a NFA,
    stamp: Vec<u32>,
    round: u32,
    stack: Vec<StateID>,
}

impl<'a> Closure<'a> {
    fn new(nfa: &'a NFA) -> Closure<'a> {
        Closure {
            nfa,
            stamp: vec![0; nfa.states().len()],
            round: 0,
            stack: Vec::new(),
        }
    }

    /// Sets `set` to the states reachable from `seeds` by ε-moves that read a byte or match,
    /// sorted.
    fn of(&mut self, seeds: &[StateID], set: &mut Vec<u32>) {
        self.round += 1;
        set.clear();
        self.stack.extend(seeds.iter().rev());
        while let Some(s) = self.stack.pop() {
            if self.stamp[s.as_usize()] == self.round {
                continue;
            }
            self.stamp[s.as_usize()] = self.round;
            match self.nfa.state(s) {
                State::ByteRange { .. }
                | State::Sparse(_)
                | State::Dense(_)
                | State::Match { .. } => set.push(s.as_u32()),
                State::Union { alternates } => self.stack.extend(alternates.iter().rev()),
                State::BinaryUnion { alt1, alt2 } => self.stack.extend([*alt2, *alt1]),
                State::Capture { next, .. } => self.stack.push(*next),
                // No look-around here (checked by the caller); `Fail` matches nothing.
                State::Look { .. } | State::Fail => {}
            }
        }
        set.sort_unstable();
    }
}
