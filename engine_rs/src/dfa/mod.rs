//! Byte-level DFAs for regex terminals and `except!`.
//!
//! Patterns are parsed and determinized by `regex-automata` (with a size limit), then copied by a
//! breadth-first walk into our own flat table with these invariants:
//!
//! * state `0` is dead, and every state that cannot reach an accepting state is mapped to `0`, so
//!   "the next state is alive" means "the input so far can still be completed" (needed for exact
//!   token masks);
//! * `accept[s]` means the bytes read so far form a full match (no delayed-match bookkeeping);
//! * automata are minimal (no two states with the same language) where a construction can
//!   leave many equivalent states (see [`table`]): every later cost — merged copies, slice
//!   tables, the disk cache — is per state. Constructions from minimal parts whose states stay
//!   nearly distinct (literals around one automaton, disjoint unions, key complements) and a
//!   counted automaton's base skip it. Minimality is not a safety invariant: nothing indexes by
//!   it, so a decoded automaton need not be minimal;
//! * transitions are `trans[s * stride + classes[byte]]`, one contiguous buffer.
//!
//! A length-counted automaton (`len!` / `json_len!` too large to tabulate, see
//! [`length_counter`]) keeps the same interface and invariants with states that are (base state,
//! count) pairs.
//!
//! Layout: this module holds the [`Dfa`] type, its invariants and its accessors; [`build`] makes
//! automata from regex text (plain patterns parsed by [`syntax`]), [`combine`] concatenates and
//! unites them, [`length_bound`] and [`length_counter`] bound their strings' lengths, [`repeat`]
//! unrolls bounded repetitions, [`table`] turns any of these into the flat table (pruning to co-reachable
//! states, then [`minimize`]), [`regular`] flattens right-linear rules, [`words`] builds JSON
//! strings that avoid a set of words (object keys other than the named ones), [`prebuilt`] keeps
//! the automata of the translator's JSON lexemes (built once per process), [`persist`] encodes
//! automata for the disk cache; [`chars`] and [`utf8`] are small character automata.

mod build;
mod chars;
mod combine;
mod determinize;
mod length_bound;
mod length_counter;
mod minimize;
mod persist;
mod prebuilt;
mod regular;
mod repeat;
mod syntax;
mod table;
pub(crate) mod utf8;
mod words;

#[cfg(test)]
mod len_tests;
#[cfg(test)]
mod tests;

pub use build::{escape_bytes, PATTERN_BYTES_PER_LIMIT};
pub use combine::{CombineBudget, Part};
#[cfg(test)]
pub(crate) use length_bound::test_form;
pub use length_bound::CharCount;
#[cfg(test)]
pub(crate) use length_bound::CountForm;
#[cfg(feature = "python")]
pub use minimize::minimal_partition;
pub use prebuilt::{JSON_CHAR, JSON_INTEGER, JSON_NUMBER, PREBUILT_PATTERNS};
pub use regular::RightLinear;

use combine::part_classes;
use table::{
    classes_and_reps, explore, explore_into, explore_rows, product_classes, refine_classes,
    split_out, Explored, StateIds, StateIndex,
};

/// The dead state: no continuation is possible.
pub const DEAD: u32 = 0;

/// Bounded repetitions `X{m,n}` with `n` at least this are built by unrolling `X`'s automaton when
/// `X` is prefix-free (see [`repeat`]).
const UNROLL_MIN: u32 = 4;

/// A set of bytes as a 256-bit bitmap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ByteSet(pub [u64; 4]);

impl ByteSet {
    /// No byte.
    pub const EMPTY: ByteSet = ByteSet([0; 4]);
    /// Adds a byte.
    #[inline]
    pub fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1u64 << (b & 63);
    }
    /// Whether the byte is in the set.
    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[(b >> 6) as usize] & (1u64 << (b & 63)) != 0
    }
    /// Whether some byte is in both sets.
    #[inline]
    pub fn meets(&self, other: &ByteSet) -> bool {
        (0..4).any(|i| self.0[i] & other.0[i] != 0)
    }
    /// Adds every byte of `other`.
    #[inline]
    pub fn union_with(&mut self, other: &ByteSet) {
        for i in 0..4 {
            self.0[i] |= other.0[i];
        }
    }
    /// Whether no byte is in the set.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
    /// Number of bytes in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
    /// The bytes in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        (0..=255u8).filter(move |b| self.contains(*b))
    }
}

/// A complete, co-reachable DFA over bytes. Immutable and `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Dfa {
    classes: [u8; 256],
    stride: u32,
    trans: Vec<u32>,
    accept: Vec<bool>,
    /// Bytes with a live transition, per state.
    live_bytes: Vec<ByteSet>,
    /// Fewest further bytes needed to reach an accepting state, per state (`u32::MAX` for dead).
    min_to_accept: Vec<u32>,
    start: u32,
    /// `Some` for a length-counted automaton: the table above is then its base automaton, and
    /// `live_bytes` / `min_to_accept` are empty (answered by the counter).
    counter: Option<Box<length_counter::Counter>>,
}

/// Why a DFA could not be built.
#[derive(Clone, Debug)]
pub enum DfaError {
    /// The pattern does not parse; the message comes from the regex parser.
    Syntax(String),
    /// Construction exceeded the configured memory limit (bytes).
    TooBig { limit: usize },
    /// The pattern uses a feature the engine cannot decide byte by byte.
    Unsupported(String),
    /// The pattern is longer than `max` = `limit` / [`PATTERN_BYTES_PER_LIMIT`] bytes (parsing
    /// alone would take memory far beyond the limit).
    TooLong {
        len: usize,
        max: usize,
        limit: usize,
    },
    /// Combining automata ([`Dfa::concat`], [`Dfa::union`]) needed more construction steps than
    /// its budget allowed.
    TooSlow { steps: u64 },
}

impl std::fmt::Display for DfaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DfaError::Syntax(m) => write!(f, "{m}"),
            DfaError::TooBig { limit } => {
                write!(
                    f,
                    "the automaton needs more than dfa_size_limit = {limit} bytes"
                )
            }
            DfaError::Unsupported(m) => write!(f, "{m}"),
            DfaError::TooLong { len, max, limit } => write!(
                f,
                "the pattern is {len} bytes long, over dfa_size_limit / {PATTERN_BYTES_PER_LIMIT} \
                 = {max} bytes (dfa_size_limit = {limit})"
            ),
            DfaError::TooSlow { steps } => {
                write!(f, "combining the automata needs more than {steps} steps")
            }
        }
    }
}

impl Dfa {
    #[inline]
    pub fn start(&self) -> u32 {
        self.start
    }
    /// Next state after `byte` (`DEAD` when the byte cannot continue toward a match).
    #[inline(always)]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        if let Some(c) = &self.counter {
            return c.next(self, state, byte);
        }
        // Indices are in range by construction (state < len, class < stride).
        self.trans[(state * self.stride + self.classes[byte as usize] as u32) as usize]
    }
    /// The equivalence class of a byte: bytes of one class move every state alike.
    #[inline]
    pub fn byte_class(&self, byte: u8) -> u8 {
        self.classes[byte as usize]
    }
    #[inline(always)]
    pub fn is_accept(&self, state: u32) -> bool {
        match &self.counter {
            None => self.accept[state as usize],
            Some(c) => c.is_accept(self, state),
        }
    }
    /// The bytes with a live transition from `state`.
    #[inline]
    pub fn live_bytes(&self, state: u32) -> ByteSet {
        match &self.counter {
            None => self.live_bytes[state as usize],
            Some(c) => c.live_bytes(self, state),
        }
    }
    /// Whether some byte continues from `state` toward a match.
    #[inline]
    pub fn can_continue(&self, state: u32) -> bool {
        match &self.counter {
            None => !self.live_bytes[state as usize].is_empty(),
            Some(c) => c.can_continue(self, state),
        }
    }
    /// Fewest further bytes needed to reach an accepting state (`u32::MAX` for dead). For a
    /// length-counted automaton only a lower bound (0): those are never `except!` arguments, the
    /// only users of exact distances.
    #[inline]
    pub fn min_to_accept(&self, state: u32) -> u32 {
        match &self.counter {
            None => self.min_to_accept[state as usize],
            Some(_) if state == DEAD => u32::MAX,
            Some(_) => 0,
        }
    }
    /// Whether this is a length-counted automaton (not tabulated: not combined with others).
    pub fn is_counted(&self) -> bool {
        self.counter.is_some()
    }
    /// For a length-counted automaton: its base automaton as a table (the states of a pair's
    /// first component; every base state is co-reachable when counts are ignored).
    pub fn counted_base(&self) -> Option<Dfa> {
        self.counter.as_ref()?;
        let base = self.as_explored().finish_as_explored(self.classes);
        debug_assert_eq!(
            base.state_count(),
            self.accept.len(),
            "no base state is pruned"
        );
        Some(base)
    }
    /// For a length-counted automaton: `(base state, count)` of `state`, and how many more
    /// characters (at most `cap`) can certainly be read from it without the count killing it.
    pub fn counted_parts(&self, state: u32, cap: u32) -> Option<(u32, u32)> {
        let c = self.counter.as_ref()?;
        let (t, n) = c.parts(state);
        Some((t, c.slack(n, cap)))
    }
    /// For a length-counted automaton: the base state of `state` when the count cannot matter
    /// over the next `chars` characters: it is at least `min` (acceptance is the base's) and the
    /// layers of counts up to `chars` more hold every base state (liveness is the base's).
    pub fn count_indifferent(&self, state: u32, chars: u32) -> Option<u32> {
        let c = self.counter.as_ref()?;
        let (t, n) = c.parts(state);
        (c.reaches_min(n) && c.slack(n, chars + 1) > chars).then_some(t)
    }
    /// For a length-counted automaton: `(base state, count)` of `state`.
    pub fn counted_state(&self, state: u32) -> Option<(u32, u32)> {
        Some(self.counter.as_ref()?.parts(state))
    }
    /// For a length-counted automaton: whether base state `t` with `n` characters is alive.
    pub fn counted_live(&self, t: u32, n: u32) -> bool {
        self.counter.as_ref().is_some_and(|c| c.is_live(t, n))
    }
    /// For a length-counted automaton: whether the base transition from `t` on `byte` completes
    /// a character (`false` for other automata).
    pub fn counted_increments(&self, t: u32, byte: u8) -> bool {
        self.counter
            .as_ref()
            .is_some_and(|c| c.increments(self, t, byte))
    }
    /// Number of state ids (for a length-counted automaton, ids of (base state, count) pairs).
    pub fn state_count(&self) -> usize {
        match &self.counter {
            None => self.accept.len(),
            Some(c) => c.state_count(self.accept.len()),
        }
    }
    /// Heap bytes used by the tables.
    pub fn memory_usage(&self) -> usize {
        self.trans.len() * 4
            + self.accept.len() * (1 + 32 + 4)
            + self.counter.as_ref().map_or(0, |c| c.memory_usage())
    }
    /// Whether the empty string matches.
    pub fn matches_empty(&self) -> bool {
        self.start != DEAD && self.is_accept(self.start)
    }
    /// Whether some non-empty string matches.
    pub fn matches_nonempty(&self) -> bool {
        self.start != DEAD && self.can_continue(self.start)
    }
    /// Full-match test (used by tests and by the grammar checker).
    pub fn matches(&self, input: &[u8]) -> bool {
        let mut s = self.start;
        for &b in input {
            if s == DEAD {
                return false;
            }
            s = self.next(s, b);
        }
        s != DEAD && self.is_accept(s)
    }

    /// A DFA with the empty language.
    pub fn empty() -> Dfa {
        Dfa {
            classes: [0; 256],
            stride: 1,
            trans: vec![DEAD],
            accept: vec![false],
            live_bytes: vec![ByteSet::EMPTY],
            min_to_accept: vec![u32::MAX],
            start: DEAD,
            counter: None,
        }
    }
}

/// Asserts that two automata have the same table: classes, transitions, acceptance, start and
/// derived tables (a fast construction against the general one; `what` names the case).
#[cfg(test)]
pub(crate) fn assert_same_table(fast: &Dfa, general: &Dfa, what: &str) {
    assert_eq!(fast.classes, general.classes, "{what}");
    assert_eq!(fast.trans, general.trans, "{what}");
    assert_eq!(fast.accept, general.accept, "{what}");
    assert_eq!(fast.start, general.start, "{what}");
    assert_eq!(fast.live_bytes, general.live_bytes, "{what}");
    assert_eq!(fast.min_to_accept, general.min_to_accept, "{what}");
}
