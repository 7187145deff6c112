//! Byte-level DFAs for regex terminals and `except!`.
//!
//! Patterns are parsed and determinized by `regex-automata` (with a size limit), then copied by a
//! breadth-first walk into our own flat table with these invariants:
//!
//! * state `0` is dead, and every state that cannot reach an accepting state is mapped to `0`, so
//!   "the next state is alive" means "the input so far can still be completed" (needed for exact
//!   token masks);
//! * `accept[s]` means the bytes read so far form a full match (no delayed-match bookkeeping);
//! * transitions are `trans[s * stride + classes[byte]]`, one contiguous buffer.
//!
//! A length-counted automaton (`len!` / `json_len!` too large to tabulate, see [`counted`]) keeps
//! the same interface and invariants with states that are (base state, count) pairs.

mod counted;
mod persist;
mod regular;
mod repeat;

pub use regular::RightLinear;

use std::collections::VecDeque;
use std::hash::Hasher;

use regex_automata::{
    dfa::{dense, Automaton, StartKind},
    nfa::thompson,
    util::syntax,
    Anchored, Input, MatchKind,
};
use regex_syntax::hir::{Hir, HirKind, Repetition};
use rustc_hash::FxHashMap;

/// The dead state: no continuation is possible.
pub const DEAD: u32 = 0;

/// Bounded repetitions `X{m,n}` with `n` at least this are built by unrolling `X`'s automaton when
/// `X` is prefix-free (see [`repeat`]).
const UNROLL_MIN: u32 = 4;

/// A set of bytes as a 256-bit bitmap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ByteSet(pub [u64; 4]);

impl ByteSet {
    pub const EMPTY: ByteSet = ByteSet([0; 4]);
    #[inline]
    pub fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1u64 << (b & 63);
    }
    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[(b >> 6) as usize] & (1u64 << (b & 63)) != 0
    }
    #[inline]
    pub fn union_with(&mut self, other: &ByteSet) {
        for i in 0..4 {
            self.0[i] |= other.0[i];
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
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
    counter: Option<Box<counted::Counter>>,
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
        let stride = self.stride as usize;
        let mut reps = vec![0u8; stride];
        for b in (0..=255u8).rev() {
            reps[self.classes[b as usize] as usize] = b;
        }
        let explored = Explored {
            stride,
            trans: self.trans.clone(),
            accept: self.accept.clone(),
            reps,
        };
        let base = explored.finish(self.classes);
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

    /// Compiles a regex (Rust `regex` syntax) matched in full against the input.
    pub fn from_regex(pattern: &str, size_limit: usize) -> Result<Dfa, DfaError> {
        let hir = parse(pattern, size_limit)?;
        if let Some(dfa) = Dfa::from_bounded_repetition(&hir, size_limit) {
            return Ok(dfa);
        }
        if let Some(dfa) = Dfa::from_segments(&hir, size_limit) {
            return Ok(dfa);
        }
        Dfa::from_hir(&hir, size_limit)
    }

    /// `X{m,n}` (`n >= UNROLL_MIN`) with a prefix-free `X`, unrolled from `X`'s automaton (see
    /// [`repeat`]); `None` for anything else, or when that construction fails.
    fn from_bounded_repetition(hir: &Hir, size_limit: usize) -> Option<Dfa> {
        let HirKind::Repetition(r) = hir.kind() else {
            return None;
        };
        let max = r.max.filter(|&n| n >= UNROLL_MIN)?;
        if !hir.properties().look_set().is_empty() {
            return None;
        }
        let body = Dfa::from_hir(&r.sub, size_limit).ok()?;
        repeat::bounded(&body, r.min, max, size_limit)
            .ok()
            .flatten()
    }

    /// Determinizes a (simplified) HIR with `regex-automata` and copies the result.
    fn from_hir(hir: &Hir, size_limit: usize) -> Result<Dfa, DfaError> {
        let ra = build_ra(hir, size_limit)?;
        let start = ra
            .start_state_forward(&Input::new("").anchored(Anchored::Yes))
            .map_err(|e| DfaError::Unsupported(e.to_string()))?;
        let (classes, reps) = ra_classes(&ra);
        let table = explore(
            start,
            &reps,
            |s, b| {
                let t = ra.next_state(*s, b);
                if ra.is_dead_state(t) {
                    Ok(None)
                } else if ra.is_quit_state(t) {
                    Err(DfaError::Unsupported(
                        "Unicode word boundaries `\\b` cannot be matched byte by byte; use `(?-u:\\b)`"
                            .into(),
                    ))
                } else {
                    Ok(Some(t))
                }
            },
            |s| ra.is_match_state(ra.next_eoi_state(*s)),
            size_limit,
        )?;
        Ok(table.finish(classes))
    }

    /// A top-level concatenation `A X* B Y+ C` (no look-around anywhere) as the concatenation of
    /// the automata of its segments `A`, `X*`, `B`, `Y+`, `C`, each unbounded repetition alone.
    ///
    /// Why: determinizing the whole at once gives `X* Y{n,}`-shaped patterns (every unanchored
    /// schema `pattern` is `.* P .*`) a DFA whose states each hold O(n) NFA states, so it takes
    /// O(n²); combining the segments' DFAs keeps only the largest count of `Y` (see
    /// [`Inclusion`]) and is linear.
    ///
    /// Cost bound: at most [`MAX_SEGMENTS`] segments, each built under `size_limit /
    /// MAX_SEGMENTS`, then combined under `size_limit` bytes and `size_limit / 4` steps; so a
    /// failed attempt costs about one more full-limit construction. `None` (more segments, a
    /// segment over its share, sets of incomparable states such as `X* a{n}` with a literal)
    /// sends the pattern to the ordinary construction.
    fn from_segments(hir: &Hir, size_limit: usize) -> Option<Dfa> {
        if !hir.properties().look_set().is_empty() {
            return None;
        }
        let HirKind::Concat(items) = hir.kind() else {
            return None;
        };
        // Unbounded repetitions, and bounded ones long enough to be worth unrolling.
        let unbounded = |h: &Hir| matches!(h.kind(), HirKind::Repetition(r) if r.max.is_none_or(|n| n >= UNROLL_MIN));
        let mut segments: Vec<&[Hir]> = Vec::new();
        let mut start = 0;
        for (i, item) in items.iter().enumerate() {
            if unbounded(item) {
                if start < i {
                    segments.push(&items[start..i]);
                }
                segments.push(&items[i..=i]);
                start = i + 1;
            }
        }
        if start < items.len() {
            segments.push(&items[start..]);
        }
        if segments.len() < 2 || segments.len() > MAX_SEGMENTS {
            return None;
        }
        let share = size_limit / MAX_SEGMENTS;
        let mut dfas: Vec<Option<Dfa>> = Vec::with_capacity(segments.len());
        for seg in &segments {
            if let [h] = seg {
                if let HirKind::Literal(_) = h.kind() {
                    dfas.push(None);
                    continue;
                }
            }
            if let [h] = seg {
                if let Some(d) = Dfa::from_bounded_repetition(h, share) {
                    dfas.push(Some(d));
                    continue;
                }
            }
            dfas.push(Some(Dfa::from_hir(&Hir::concat(seg.to_vec()), share).ok()?));
        }
        let parts: Vec<Part<'_>> = segments
            .iter()
            .zip(&dfas)
            .map(|(seg, d)| match (d, seg[0].kind()) {
                (Some(d), _) => Part::Dfa(d),
                (None, HirKind::Literal(lit)) => Part::Lit(&lit.0),
                (None, _) => unreachable!("only literal segments have no DFA"),
            })
            .collect();
        let mut budget = CombineBudget {
            size_limit,
            steps: size_limit as u64 / 4,
        };
        Dfa::concat(&parts, &mut budget).ok()
    }

    /// The DFA of `except!(X)`: non-empty-or-empty UTF-8 strings with no substring matching `x_regex`,
    /// optionally at most `max_len` bytes long (the bound is enforced by the recognizer using
    /// [`Dfa::min_to_accept`]).
    pub fn except(x_regex: &str, size_limit: usize) -> Result<Dfa, DfaError> {
        let pattern = format!("(?s-u:.)*(?:{x_regex})");
        let ra = build_ra(&parse(&pattern, size_limit)?, size_limit)?;
        let start = ra
            .start_state_forward(&Input::new("").anchored(Anchored::Yes))
            .map_err(|e| DfaError::Unsupported(e.to_string()))?;
        if ra.is_match_state(ra.next_eoi_state(start)) {
            // X matches the empty string, so every string contains it: empty language.
            return Ok(Dfa::empty());
        }
        let (ra_cls, _) = ra_classes(&ra);
        // Product classes: bytes equivalent for both the X-automaton and the UTF-8 validator.
        let (classes, reps) = product_classes(|b| (ra_cls[b as usize], utf8::class(b) as u32));
        let table = explore(
            (start, utf8::BOUNDARY),
            &reps,
            |(s, u), b| {
                let t = ra.next_state(*s, b);
                let v = utf8::next(*u, b);
                // A match of X ending here means X occurs: the except-string is dead.
                if v == utf8::INVALID || ra.is_match_state(ra.next_eoi_state(t)) {
                    Ok(None)
                } else if ra.is_quit_state(t) {
                    Err(DfaError::Unsupported(
                        "Unicode word boundaries `\\b` are not supported in except!".into(),
                    ))
                } else {
                    Ok(Some((t, v)))
                }
            },
            |(_, u)| *u == utf8::BOUNDARY,
            size_limit,
        )?;
        Ok(table.finish(classes))
    }

    /// The strings of `e` with between `min` and `max` characters, counted as `count` says.
    ///
    /// Tabulated as the product of `e`, a small character-boundary automaton ([`chars`]) and a
    /// counter `0..=max` when that fits in `size_limit / TABLE_SHARE` bytes; otherwise a
    /// length-counted automaton ([`counted`]) whose size does not grow with `max`.
    pub fn count_chars(
        e: &Dfa,
        count: CharCount,
        min: u32,
        max: u32,
        size_limit: usize,
    ) -> Result<Dfa, DfaError> {
        #[cfg(test)]
        let form = test_form::get();
        #[cfg(not(test))]
        let form = CountForm::Auto;
        Self::count_chars_as(e, count, min, max, size_limit, form)
    }

    /// [`Dfa::count_chars`] with the representation chosen by `form` (tests compare the two).
    pub fn count_chars_as(
        e: &Dfa,
        count: CharCount,
        min: u32,
        max: u32,
        size_limit: usize,
        form: CountForm,
    ) -> Result<Dfa, DfaError> {
        if e.start == DEAD || min > max {
            return Ok(Dfa::empty());
        }
        match form {
            CountForm::Table => Self::count_chars_table(e, count, min, max, size_limit),
            CountForm::Counted => counted::build(e, count, min, max, size_limit),
            CountForm::Auto => {
                match Self::count_chars_table(e, count, min, max, size_limit / TABLE_SHARE) {
                    Err(DfaError::TooBig { .. }) => counted::build(e, count, min, max, size_limit),
                    other => other,
                }
            }
        }
    }

    /// The product of `e`, the character-boundary automaton and a counter `0..=max` (a count over
    /// `max` is dead). Counts only grow along a string, so pruning at `max` is exact.
    fn count_chars_table(
        e: &Dfa,
        count: CharCount,
        min: u32,
        max: u32,
        size_limit: usize,
    ) -> Result<Dfa, DfaError> {
        let table = chars::Table::new(count);
        // Product classes: bytes equivalent for `e` and in every character-automaton state.
        let (classes, reps) = product_classes(|b| (e.classes[b as usize], table.class(b)));
        let explored = explore(
            (e.start, chars::START, 0u32),
            &reps,
            |&(s, c, n), b| {
                let t = e.next(s, b);
                if t == DEAD {
                    return Ok(None);
                }
                let (c2, inc) = table.step(c, b);
                let n2 = n.checked_add(u32::from(inc)).filter(|&n2| n2 <= max);
                Ok(n2.map(|n2| (t, c2, n2)))
            },
            |&(s, _, n)| e.is_accept(s) && n >= min,
            size_limit,
        )?;
        let (explored, classes) = explored.merge_equal_classes(classes);
        Ok(explored.finish(classes))
    }

    /// The DFA of the concatenation of `parts` (with no parts: the empty language).
    ///
    /// Built from the parts' automata, so its cost is independent of how the parts were written;
    /// fails with [`DfaError::TooBig`] or [`DfaError::TooSlow`] when `budget` runs out (callers
    /// use it for optional optimizations and keep the parts separate then).
    pub fn concat(parts: &[Part<'_>], budget: &mut CombineBudget) -> Result<Dfa, DfaError> {
        Combiner {
            parts,
            mode: Combine::Concat,
        }
        .explore(budget)
    }

    /// The DFA of the union of `parts` (see [`Dfa::concat`] for the budget).
    pub fn union(parts: &[Part<'_>], budget: &mut CombineBudget) -> Result<Dfa, DfaError> {
        Combiner {
            parts,
            mode: Combine::Union,
        }
        .explore(budget)
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

/// Budget for building one automaton out of others ([`Dfa::concat`], [`Dfa::union`]).
#[derive(Clone, Copy, Debug)]
pub struct CombineBudget {
    /// Memory for the automaton while it is built (table, state sets and their index), in bytes.
    pub size_limit: usize,
    /// Construction steps left (one step advances one part state over one byte class); each
    /// construction subtracts what it used, also when it fails.
    pub steps: u64,
}

/// One operand of [`Dfa::concat`] / [`Dfa::union`].
#[derive(Clone, Copy, Debug)]
pub enum Part<'a> {
    Dfa(&'a Dfa),
    /// A literal byte string (no table needed).
    Lit(&'a [u8]),
}

/// Part states: a DFA's own states; for a literal, `k + 1` after `k` bytes (`DEAD` = 0).
impl Part<'_> {
    #[inline]
    fn start(&self) -> u32 {
        match self {
            Part::Dfa(d) => d.start,
            Part::Lit(_) => 1,
        }
    }
    #[inline]
    fn next(&self, s: u32, b: u8) -> u32 {
        match self {
            Part::Dfa(d) => d.next(s, b),
            Part::Lit(l) => {
                let k = s as usize - 1;
                if k < l.len() && l[k] == b {
                    s + 1
                } else {
                    DEAD
                }
            }
        }
    }
    #[inline]
    fn is_accept(&self, s: u32) -> bool {
        match self {
            Part::Dfa(d) => d.is_accept(s),
            Part::Lit(l) => s as usize - 1 == l.len(),
        }
    }
    #[inline]
    fn is_live(&self, s: u32) -> bool {
        match self {
            Part::Dfa(d) => d.can_continue(s),
            Part::Lit(l) => (s as usize - 1) < l.len(),
        }
    }
}

/// The state-set entry for "a match has just ended and nothing can follow" (sorts last).
const SINK: u64 = u64::MAX;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Combine {
    Concat,
    Union,
}

/// Language inclusion between states of one part DFA, memoized: `L(s) ⊆ L(t)` means a set
/// holding `(i, t)` needs no `(i, s)` (for a concatenation, `L(s)·rest ⊆ L(t)·rest`). Keeping only
/// maximal states is what makes `X{a,} X{b,}` (e.g. `\w+` pieces split across terminals) linear:
/// without it, a set holds every count of the second piece reached so far.
///
/// Only proven inclusions prune; a check that is too long (or over budget) answers "not
/// included", which is always safe.
#[derive(Default)]
struct Inclusion {
    /// `(dfa address, s, t)` → proven `L(s) ⊆ L(t)` (false: not proven).
    memo: FxHashMap<(usize, u32, u32), bool>,
    /// `(dfa address, s)` → the last `t` with `L(s) ⊆ L(t)` proven.
    up: FxHashMap<(usize, u32), u32>,
    visited: rustc_hash::FxHashSet<(u32, u32)>,
    stack: Vec<(u32, u32)>,
}

/// Most pair visits one inclusion check may take.
const MAX_INCLUSION_PAIRS: usize = 1 << 16;
/// Most memoized inclusion answers kept with all their visited pairs (about 32 bytes each); beyond
/// it only the answers asked for are kept.
const MAX_MEMO: usize = 1 << 16;
/// Most states of one part in a set that are compared pairwise.
const MAX_PRUNE_GROUP: usize = 16;

impl Inclusion {
    /// Whether `L(s) ⊆ L(t)` in `d` is proven; charges one step per pair and byte class.
    fn included(&mut self, d: &Dfa, s: u32, t: u32, steps: &mut u64) -> bool {
        if s == t {
            return true;
        }
        let key = d as *const Dfa as usize;
        if let Some(&r) = self.memo.get(&(key, s, t)) {
            return r;
        }
        // Transitivity through the last proven superset of `s`: along a counter, the state
        // entered last is compared with a maximum that moved by one step since the previous
        // set, and `L(max - 1) ⊆ L(max)` is already known from one walk along the counter.
        if let Some(&u) = self.up.get(&(key, s)) {
            if u != t && self.walk(d, key, u, t, steps) {
                self.memo.insert((key, s, t), true);
                self.up.insert((key, s), t);
                return true;
            }
        }
        let ok = self.walk(d, key, s, t, steps);
        if ok {
            self.up.insert((key, s), t);
        }
        ok
    }

    /// The inclusion check proper: explores the pairs reachable from `(s, t)` looking for one
    /// where the first state accepts or continues and the second does not.
    fn walk(&mut self, d: &Dfa, key: usize, s: u32, t: u32, steps: &mut u64) -> bool {
        if s == t {
            return true;
        }
        if let Some(&r) = self.memo.get(&(key, s, t)) {
            return r;
        }
        let stride = d.stride as usize;
        self.visited.clear();
        self.stack.clear();
        self.visited.insert((s, t));
        self.stack.push((s, t));
        let mut ok = true;
        while let Some((p, q)) = self.stack.pop() {
            if p == q || self.memo.get(&(key, p, q)) == Some(&true) {
                continue;
            }
            let (lp, lq) = (d.live_bytes(p), d.live_bytes(q));
            if (d.is_accept(p) && !d.is_accept(q))
                || (0..4).any(|w| lp.0[w] & !lq.0[w] != 0)
                || self.visited.len() > MAX_INCLUSION_PAIRS
                || *steps < stride as u64
            {
                ok = false;
                break;
            }
            *steps -= stride as u64;
            for c in 0..stride {
                let p2 = d.trans[p as usize * stride + c];
                if p2 == DEAD {
                    continue;
                }
                // Live bytes of q cover those of p, so q2 is not dead here.
                let q2 = d.trans[q as usize * stride + c];
                if self.visited.insert((p2, q2)) {
                    self.stack.push((p2, q2));
                }
            }
        }
        if ok {
            // Every pair visited by a successful check is an inclusion too; keep them while the
            // memo is small (bounded memory: the walks along a long counter are the only thing
            // they speed up).
            if self.memo.len() + self.visited.len() <= MAX_MEMO {
                for &(p, q) in &self.visited {
                    self.memo.insert((key, p, q), true);
                }
            } else {
                self.memo.insert((key, s, t), true);
            }
        } else {
            self.memo.insert((key, s, t), false);
        }
        ok
    }

    /// Removes from the sorted set `out` the states of a part whose language is included in that
    /// of another state of the same part in `out` (of two equal ones, the smaller id goes).
    fn prune(&mut self, parts: &[Part<'_>], out: &mut Vec<u64>, steps: &mut u64) {
        // Usually every part has one state in the set: nothing to compare.
        if !out
            .windows(2)
            .any(|w| w[0] >> 32 == w[1] >> 32 && w[1] != SINK)
        {
            return;
        }
        let mut start = 0;
        let mut keep = vec![true; out.len()];
        let mut any = false;
        while start < out.len() {
            let piece = out[start] >> 32;
            let mut end = start + 1;
            while end < out.len() && out[end] != SINK && out[end] >> 32 == piece {
                end += 1;
            }
            let group = end - start;
            if out[start] != SINK && (2..=MAX_PRUNE_GROUP).contains(&group) {
                if let Part::Dfa(d) = parts[piece as usize] {
                    for a in start..end {
                        for b in start..end {
                            if a == b || !keep[b] {
                                continue;
                            }
                            let (sa, sb) = (out[a] as u32, out[b] as u32);
                            if self.included(d, sa, sb, steps)
                                && (b > a || !self.included(d, sb, sa, steps))
                            {
                                keep[a] = false;
                                any = true;
                                break;
                            }
                        }
                    }
                }
            }
            start = end;
        }
        if any {
            let mut k = 0;
            out.retain(|_| {
                k += 1;
                keep[k - 1]
            });
        }
    }
}

/// The automaton of a concatenation or union of parts, explored as sets of `(part, state)` pairs
/// (subset construction over the parts' DFAs, which are never re-derived from regex text).
struct Combiner<'a> {
    parts: &'a [Part<'a>],
    mode: Combine,
}

impl Combiner<'_> {
    /// Adds `(i, s)` (a live part state just reached) to `out`, with the states it leads to
    /// without reading a byte (concatenation: the start of the next parts while `s` accepts).
    /// Accepting states without continuation collapse into [`SINK`] (or vanish when they do not
    /// end the whole expression), which keeps equal languages in equal sets.
    fn push(&self, out: &mut Vec<u64>, i: usize, s: u32) {
        let last = self.mode == Combine::Union || i + 1 == self.parts.len();
        let p = &self.parts[i];
        let (accept, live) = (p.is_accept(s), p.is_live(s));
        if live {
            out.push(((i as u64) << 32) | s as u64);
        }
        if accept {
            if last {
                if !live {
                    out.push(SINK);
                }
            } else {
                let next = self.parts[i + 1].start();
                if next != DEAD {
                    self.push(out, i + 1, next);
                }
            }
        }
    }

    fn is_accept(&self, set: &[u64]) -> bool {
        let m = self.parts.len() as u64;
        set.iter().any(|&e| {
            if e == SINK {
                return true;
            }
            let (i, s) = (e >> 32, e as u32);
            (self.mode == Combine::Union || i + 1 == m) && self.parts[i as usize].is_accept(s)
        })
    }

    fn initial(&self) -> Vec<u64> {
        let mut out = Vec::new();
        match self.mode {
            Combine::Union => {
                for (i, p) in self.parts.iter().enumerate() {
                    if p.start() != DEAD {
                        self.push(&mut out, i, p.start());
                    }
                }
            }
            Combine::Concat => {
                if let Some(p) = self.parts.first() {
                    if p.start() != DEAD {
                        self.push(&mut out, 0, p.start());
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn step(&self, set: &[u64], b: u8, out: &mut Vec<u64>) {
        out.clear();
        for &e in set {
            if e == SINK {
                continue;
            }
            let (i, s) = ((e >> 32) as usize, e as u32);
            let t = self.parts[i].next(s, b);
            if t != DEAD {
                self.push(out, i, t);
            }
        }
        out.sort_unstable();
        out.dedup();
    }

    /// Byte classes refining every part's classes.
    fn classes(&self) -> ([u8; 256], Vec<u8>) {
        part_classes(self.parts)
    }

    /// Breadth-first exploration of the state sets under `budget`.
    fn explore(&self, budget: &mut CombineBudget) -> Result<Dfa, DfaError> {
        let (classes, reps) = self.classes();
        let stride = reps.len();
        let too_big = DfaError::TooBig {
            limit: budget.size_limit,
        };
        // Sets are stored back to back in `arena`; set of state id `k` (from 1) is
        // `arena[offsets[k - 1]..offsets[k]]`. `index` maps a set's hash to the newest state with
        // that hash; `chain[k - 1]` is the previous state with the same hash (0 = none).
        let mut arena: Vec<u64> = Vec::new();
        let mut offsets: Vec<usize> = vec![0];
        let mut index: FxHashMap<u64, u32> = FxHashMap::default();
        let mut chain: Vec<u32> = Vec::new();
        let mut trans = vec![DEAD; stride];
        let mut acc = vec![false];
        let mut memory = 0usize;
        let start_steps = budget.steps;
        // Per-state bytes besides its set: table row, accept flag, offset, chain, index entry.
        let per_state = stride * 4 + 1 + 8 + 4 + 16;
        let hash = |set: &[u64]| {
            use std::hash::BuildHasher;
            rustc_hash::FxBuildHasher.hash_one(set)
        };
        let mut inclusion = Inclusion::default();
        let mut initial = self.initial();
        inclusion.prune(self.parts, &mut initial, &mut budget.steps);
        if initial.is_empty() {
            return Ok(Dfa::empty());
        }
        // Interns a set; returns its state id and whether it is new.
        let mut intern = |set: &[u64],
                          arena: &mut Vec<u64>,
                          offsets: &mut Vec<usize>,
                          trans: &mut Vec<u32>,
                          acc: &mut Vec<bool>|
         -> Result<u32, DfaError> {
            let h = hash(set);
            let mut id = index.get(&h).copied().unwrap_or(0);
            while id != 0 {
                let k = id as usize;
                if &arena[offsets[k - 1]..offsets[k]] == set {
                    return Ok(id);
                }
                id = chain[k - 1];
            }
            memory += per_state + set.len() * 8;
            if memory > budget.size_limit {
                return Err(too_big.clone());
            }
            let id = offsets.len() as u32;
            arena.extend_from_slice(set);
            offsets.push(arena.len());
            chain.push(index.insert(h, id).unwrap_or(0));
            trans.extend(std::iter::repeat_n(DEAD, stride));
            acc.push(self.is_accept(set));
            Ok(id)
        };
        intern(&initial, &mut arena, &mut offsets, &mut trans, &mut acc)?;
        let mut current: Vec<u64> = Vec::new();
        let mut next: Vec<u64> = Vec::new();
        let mut id = 1usize;
        while id < offsets.len() {
            current.clear();
            current.extend_from_slice(&arena[offsets[id - 1]..offsets[id]]);
            let cost = (current.len() as u64 + 1) * stride as u64;
            if cost > budget.steps {
                return Err(DfaError::TooSlow { steps: start_steps });
            }
            budget.steps -= cost;
            for (c, &b) in reps.iter().enumerate() {
                self.step(&current, b, &mut next);
                inclusion.prune(self.parts, &mut next, &mut budget.steps);
                if next.is_empty() {
                    continue;
                }
                let t = intern(&next, &mut arena, &mut offsets, &mut trans, &mut acc)?;
                trans[id * stride + c] = t;
            }
            id += 1;
        }
        drop((arena, offsets));
        Ok(Explored {
            stride,
            trans,
            accept: acc,
            reps,
        }
        .finish(classes))
    }
}

/// Most segments [`Dfa::from_segments`] splits a pattern into.
const MAX_SEGMENTS: usize = 8;

/// Longest pattern, as a fraction of `size_limit`: parsing takes up to ~350 bytes of memory per
/// pattern byte (`regex-syntax`'s syntax tree and HIR, e.g. for `a?a?a?…`), before any of the
/// automaton budgets can be checked, so this bounds parsing to ~22 × `size_limit` (a 2 MiB
/// pattern at the default 32 MiB).
pub const PATTERN_BYTES_PER_LIMIT: usize = 16;

/// Parses and simplifies a pattern (refusing patterns too long to parse within the limit).
///
/// Parsing ourselves and compiling the simplified HIR (instead of letting `regex-automata` parse)
/// lets us rewrite shapes whose subset construction is quadratic into equivalent linear ones (see
/// [`simplify`] and [`Dfa::from_segments`]).
fn parse(pattern: &str, size_limit: usize) -> Result<Hir, DfaError> {
    let max = size_limit / PATTERN_BYTES_PER_LIMIT;
    if pattern.len() > max {
        return Err(DfaError::TooLong {
            len: pattern.len(),
            max,
            limit: size_limit,
        });
    }
    let hir = syntax::parse_with(pattern, &syntax::Config::new().utf8(false))
        .map_err(|e| DfaError::Syntax(clean_regex_message(&e.to_string())))?;
    Ok(simplify(hir))
}

/// Compiles and determinizes a parsed pattern, each stage under `size_limit` bytes.
fn build_ra(hir: &Hir, size_limit: usize) -> Result<dense::DFA<Vec<u32>>, DfaError> {
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .utf8(false)
                .nfa_size_limit(Some(size_limit)),
        )
        .build_from_hir(hir)
        .map_err(|e| build_error(&e, size_limit))?;
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .minimize(false)
                .unicode_word_boundary(true)
                .dfa_size_limit(Some(size_limit))
                .determinize_size_limit(Some(size_limit)),
        )
        .build_from_nfa(&nfa)
        .map_err(|e| build_error(&e, size_limit))
}

/// Maps an NFA or DFA construction error (the pattern already parsed) to a [`DfaError`].
fn build_error(e: &dyn std::error::Error, size_limit: usize) -> DfaError {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        msg.push_str(": ");
        msg.push_str(&inner.to_string());
        src = inner.source();
    }
    if msg.contains("exceeded") || msg.contains("limit") {
        DfaError::TooBig { limit: size_limit }
    } else {
        DfaError::Unsupported(clean_regex_message(&msg))
    }
}

/// Rewrites a pattern into an equivalent one (same language; we only ever ask whether the whole
/// input matches, so greediness and capture groups do not matter) that determinizes cheaply:
///
/// * capture groups are dropped;
/// * adjacent repetitions of the same expression are merged: `X{a,b} X{c,d}` is `X{a+c,b+d}`
///   (a plain `X` counts as `X{1,1}`), so `\w+\w+\w+` becomes `\w{3,}`. Without this, every
///   DFA state of `\w+` repeated n times holds O(n) NFA states and determinization is O(n²).
///
/// Recursion depth is bounded by the parser's nesting limit.
fn simplify(hir: Hir) -> Hir {
    match hir.into_kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => Hir::literal(lit.0),
        HirKind::Class(c) => Hir::class(c),
        HirKind::Look(l) => Hir::look(l),
        HirKind::Capture(c) => simplify(*c.sub),
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(simplify(*r.sub)),
            ..r
        }),
        HirKind::Alternation(subs) => Hir::alternation(subs.into_iter().map(simplify).collect()),
        HirKind::Concat(subs) => {
            // (expression, min, max) per item; max `None` is unbounded.
            let mut out: Vec<(Hir, u32, Option<u32>)> = Vec::with_capacity(subs.len());
            for sub in subs {
                let (h, min, max) = match simplify(sub).into_kind() {
                    HirKind::Repetition(r) => (*r.sub, r.min, r.max),
                    kind => (rebuild(kind), 1, Some(1)),
                };
                if let Some((prev, pmin, pmax)) = out.last_mut() {
                    if *prev == h {
                        if let Some(m) = pmin.checked_add(min) {
                            let merged_max = match (*pmax, max) {
                                (Some(a), Some(b)) => a.checked_add(b).map(Some),
                                _ => Some(None),
                            };
                            if let Some(mm) = merged_max {
                                *pmin = m;
                                *pmax = mm;
                                continue;
                            }
                        }
                    }
                }
                out.push((h, min, max));
            }
            Hir::concat(
                out.into_iter()
                    .map(|(h, min, max)| {
                        if min == 1 && max == Some(1) {
                            h
                        } else {
                            Hir::repetition(Repetition {
                                min,
                                max,
                                greedy: true,
                                sub: Box::new(h),
                            })
                        }
                    })
                    .collect(),
            )
        }
    }
}

/// An HIR from its (already simplified) kind.
fn rebuild(kind: HirKind) -> Hir {
    match kind {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => Hir::literal(lit.0),
        HirKind::Class(c) => Hir::class(c),
        HirKind::Look(l) => Hir::look(l),
        HirKind::Capture(c) => Hir::capture(c),
        HirKind::Repetition(r) => Hir::repetition(r),
        HirKind::Alternation(subs) => Hir::alternation(subs),
        HirKind::Concat(subs) => Hir::concat(subs),
    }
}

fn clean_regex_message(msg: &str) -> String {
    // regex-syntax renders multi-line messages with the pattern; keep the last meaningful line.
    let lines: Vec<&str> = msg
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match lines.iter().rev().find(|l| l.starts_with("error:")) {
        Some(l) => l.trim_start_matches("error:").trim().to_owned(),
        None => lines.join(" "),
    }
}

fn ra_classes(ra: &dense::DFA<Vec<u32>>) -> ([u8; 256], Vec<u8>) {
    let bc = ra.byte_classes();
    let mut classes = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut seen: FxHashMap<u8, u8> = FxHashMap::default();
    for b in 0..=255u8 {
        let c = bc.get(b);
        let next = seen.len() as u8;
        let id = *seen.entry(c).or_insert_with(|| {
            reps.push(b);
            next
        });
        classes[b as usize] = id;
    }
    (classes, reps)
}

/// A DFA explored from its start state, before pruning.
struct Explored {
    stride: usize,
    /// `trans[s * stride + c]`, with `DEAD` for missing transitions; explored state ids start at 1.
    trans: Vec<u32>,
    accept: Vec<bool>,
    reps: Vec<u8>,
}

/// Byte classes (and one representative byte each) that every part treats alike.
fn part_classes(parts: &[Part<'_>]) -> ([u8; 256], Vec<u8>) {
    let mut cls = [0u16; 256];
    let mut lit_bytes = ByteSet::EMPTY;
    let mut seen: rustc_hash::FxHashSet<*const Dfa> = Default::default();
    let refine = |cls: &mut [u16; 256], part_class: &dyn Fn(u8) -> u16| {
        let mut map: FxHashMap<(u16, u16), u16> = FxHashMap::default();
        for b in 0..=255u8 {
            let n = map.len() as u16;
            cls[b as usize] = *map.entry((cls[b as usize], part_class(b))).or_insert(n);
        }
    };
    for p in parts {
        match p {
            Part::Dfa(d) => {
                // Parts often repeat one DFA (a run of the same terminal): refine once.
                if seen.insert(*d as *const Dfa) {
                    refine(&mut cls, &|b| d.classes[b as usize] as u16);
                }
            }
            Part::Lit(l) => l.iter().for_each(|&b| lit_bytes.insert(b)),
        }
    }
    if !lit_bytes.is_empty() {
        refine(&mut cls, &|b| {
            if lit_bytes.contains(b) {
                b as u16 + 1
            } else {
                0
            }
        });
    }
    let mut classes = [0u8; 256];
    let mut reps = Vec::new();
    for b in 0..=255u8 {
        let c = cls[b as usize];
        if c as usize == reps.len() {
            reps.push(b);
        }
        classes[b as usize] = c as u8;
    }
    (classes, reps)
}

/// Byte classes of a product automaton: bytes with equal `key` (their classes in each factor)
/// share a class. Returns the classes and one representative byte per class.
fn product_classes(key: impl Fn(u8) -> (u8, u32)) -> ([u8; 256], Vec<u8>) {
    let mut key_to_class: FxHashMap<(u8, u32), u8> = FxHashMap::default();
    let mut classes = [0u8; 256];
    let mut reps = Vec::new();
    for b in 0..=255u8 {
        let next = key_to_class.len() as u8;
        let c = *key_to_class.entry(key(b)).or_insert_with(|| {
            reps.push(b);
            next
        });
        classes[b as usize] = c;
    }
    (classes, reps)
}

impl Explored {
    /// Merges byte classes whose transitions agree in every state (a product's classes may
    /// distinguish bytes that no reachable state does), narrowing the table.
    fn merge_equal_classes(self, classes: [u8; 256]) -> (Explored, [u8; 256]) {
        let n = self.accept.len();
        let (trans_in, stride_in) = (&self.trans, self.stride);
        let column = |c: usize| (0..n).map(move |s| trans_in[s * stride_in + c]);
        // Columns are compared in full only when their hashes agree: linear in the table.
        let hash: Vec<u64> = (0..self.stride)
            .map(|c| {
                let mut h = rustc_hash::FxHasher::default();
                column(c).for_each(|t| h.write_u32(t));
                h.finish()
            })
            .collect();
        let mut kept: Vec<usize> = Vec::new();
        let mut map = vec![0u8; self.stride];
        for c in 0..self.stride {
            match kept
                .iter()
                .position(|&k| hash[k] == hash[c] && column(k).eq(column(c)))
            {
                Some(i) => map[c] = i as u8,
                None => {
                    map[c] = kept.len() as u8;
                    kept.push(c);
                }
            }
        }
        if kept.len() == self.stride {
            return (self, classes);
        }
        let stride = kept.len();
        let mut trans = Vec::with_capacity(n * stride);
        for s in 0..n {
            trans.extend(kept.iter().map(|&c| self.trans[s * self.stride + c]));
        }
        let reps = kept.iter().map(|&c| self.reps[c]).collect();
        let classes = classes.map(|c| map[c as usize]);
        (
            Explored {
                stride,
                trans,
                accept: self.accept,
                reps,
            },
            classes,
        )
    }
}

fn explore<K, N, A>(
    start: K,
    reps: &[u8],
    mut next: N,
    accept: A,
    size_limit: usize,
) -> Result<Explored, DfaError>
where
    K: Clone + Eq + std::hash::Hash,
    N: FnMut(&K, u8) -> Result<Option<K>, DfaError>,
    A: Fn(&K) -> bool,
{
    let stride = reps.len();
    let mut ids: FxHashMap<K, u32> = FxHashMap::default();
    let mut keys: Vec<K> = Vec::new();
    let mut queue = VecDeque::new();
    // Row 0 is the dead state.
    let mut trans = vec![DEAD; stride];
    let mut acc = vec![false];
    ids.insert(start.clone(), 1);
    keys.push(start);
    trans.extend(std::iter::repeat_n(DEAD, stride));
    acc.push(false);
    queue.push_back(1u32);
    while let Some(id) = queue.pop_front() {
        let key = keys[id as usize - 1].clone();
        acc[id as usize] = accept(&key);
        for (c, &b) in reps.iter().enumerate() {
            let Some(t) = next(&key, b)? else { continue };
            let tid = match ids.get(&t) {
                Some(&tid) => tid,
                None => {
                    let tid = keys.len() as u32 + 1;
                    if (tid as usize + 1) * (stride * 4 + 40) > size_limit {
                        return Err(DfaError::TooBig { limit: size_limit });
                    }
                    ids.insert(t.clone(), tid);
                    keys.push(t);
                    trans.extend(std::iter::repeat_n(DEAD, stride));
                    acc.push(false);
                    queue.push_back(tid);
                    tid
                }
            };
            trans[id as usize * stride + c] = tid;
        }
    }
    Ok(Explored {
        stride,
        trans,
        accept: acc,
        reps: reps.to_vec(),
    })
}

impl Explored {
    /// Prunes states that cannot reach acceptance, renumbers densely and fills derived tables.
    fn finish(self, classes: [u8; 256]) -> Dfa {
        let n = self.accept.len();
        let stride = self.stride;
        // Reverse BFS from accepting states gives co-reachability and distance to acceptance.
        let mut rev_start = vec![0u32; n + 1];
        for s in 1..n {
            for c in 0..stride {
                let t = self.trans[s * stride + c] as usize;
                if t != 0 {
                    rev_start[t + 1] += 1;
                }
            }
        }
        for i in 0..n {
            rev_start[i + 1] += rev_start[i];
        }
        let mut fill = rev_start.clone();
        let mut rev = vec![0u32; rev_start[n] as usize];
        for s in 1..n {
            for c in 0..stride {
                let t = self.trans[s * stride + c] as usize;
                if t != 0 {
                    rev[fill[t] as usize] = s as u32;
                    fill[t] += 1;
                }
            }
        }
        let mut dist = vec![u32::MAX; n];
        let mut queue = VecDeque::new();
        for (s, d) in dist.iter_mut().enumerate().skip(1) {
            if self.accept[s] {
                *d = 0;
                queue.push_back(s);
            }
        }
        while let Some(t) = queue.pop_front() {
            for &s in &rev[rev_start[t] as usize..rev_start[t + 1] as usize] {
                if dist[s as usize] == u32::MAX {
                    dist[s as usize] = dist[t] + 1;
                    queue.push_back(s as usize);
                }
            }
        }
        let mut new_id = vec![DEAD; n];
        let mut count = 1u32;
        for s in 1..n {
            if dist[s] != u32::MAX {
                new_id[s] = count;
                count += 1;
            }
        }
        let m = count as usize;
        let mut trans = vec![DEAD; m * stride];
        let mut accept = vec![false; m];
        let mut live_bytes = vec![ByteSet::EMPTY; m];
        let mut min_to_accept = vec![u32::MAX; m];
        for s in 1..n {
            let ns = new_id[s] as usize;
            if ns == 0 {
                continue;
            }
            accept[ns] = self.accept[s];
            min_to_accept[ns] = dist[s];
            for c in 0..stride {
                trans[ns * stride + c] = new_id[self.trans[s * stride + c] as usize];
            }
        }
        // Live bytes: the union of the byte sets of the classes with a transition.
        let mut class_bytes = vec![ByteSet::EMPTY; stride];
        for b in 0..=255u8 {
            class_bytes[classes[b as usize] as usize].insert(b);
        }
        for ns in 1..m {
            let row = &trans[ns * stride..(ns + 1) * stride];
            for (set, &t) in class_bytes.iter().zip(row) {
                if t != DEAD {
                    live_bytes[ns].union_with(set);
                }
            }
        }
        debug_assert_eq!(self.reps.len(), stride);
        Dfa {
            classes,
            stride: stride as u32,
            trans,
            accept,
            live_bytes,
            min_to_accept,
            start: new_id[1],
            counter: None,
        }
    }
}

/// Escapes a byte string as a regex matching exactly those bytes.
pub fn escape_bytes(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => regex_syntax::escape(s),
        Err(_) => {
            let mut out = String::new();
            for &b in bytes {
                if b.is_ascii_alphanumeric() {
                    out.push(b as char);
                } else {
                    out.push_str(&format!("(?-u:\\x{b:02X})"));
                }
            }
            out
        }
    }
}

/// A length-bounded automaton is tabulated when its table takes at most `dfa_size_limit /
/// TABLE_SHARE` bytes (tables are faster and combine with neighbouring terminals), else counted.
pub const TABLE_SHARE: usize = 8;

/// The representation [`Dfa::count_chars_as`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountForm {
    /// A table when small enough (see [`TABLE_SHARE`]), else counted.
    Auto,
    /// Always a table of (state, count) pairs.
    Table,
    /// Always a length-counted automaton.
    Counted,
}

/// Unit tests run the whole pipeline with each representation of `len!` / `json_len!`.
#[cfg(test)]
pub(crate) mod test_form {
    use super::CountForm;
    use std::cell::Cell;

    thread_local! {
        static FORM: Cell<CountForm> = const { Cell::new(CountForm::Auto) };
    }

    pub fn get() -> CountForm {
        FORM.with(|f| f.get())
    }

    /// Runs `f` with [`super::Dfa::count_chars`] building `form` on this thread.
    pub fn with<R>(form: CountForm, f: impl FnOnce() -> R) -> R {
        let old = FORM.with(|c| c.replace(form));
        let r = f();
        FORM.with(|c| c.set(old));
        r
    }
}

/// How [`Dfa::count_chars`] counts characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CharCount {
    /// UTF-8 code points, each counted at its lead byte (every byte outside `0x80..=0xBF`).
    Utf8,
    /// Code points of the decoded body of a JSON string literal: an escape counts one at its last
    /// byte, and a `\uDC00`-`\uDFFF` escape right after a `\uD800`-`\uDBFF` escape counts zero
    /// (the pair is one code point).
    JsonBody,
}

/// The character-boundary automata of [`Dfa::count_chars`]: a step reads one byte and says how
/// many characters it completes (0 or 1).
mod chars {
    use super::CharCount;

    /// The initial state (for JSON: outside any escape, no high surrogate just before).
    pub const START: u8 = 0;

    // JSON body states. `HIGH` means: the previous character was a high-surrogate escape.
    const NORMAL: u8 = 0;
    const HIGH: u8 = 1;
    /// After `\`; `+1` when a high surrogate preceded.
    const BACKSLASH: u8 = 2;
    /// After `\u` and `k` hex digits: `U_BASE + 2 * (k + 4 * kind) + high`, where `kind` is what
    /// the digits so far say about the code unit.
    const U_BASE: u8 = 4;
    const KIND_UNKNOWN: u8 = 0; // no digit yet
    const KIND_D: u8 = 1; // first digit `d`/`D`
    const KIND_HIGH: u8 = 2; // `D8`-`DB`
    const KIND_LOW: u8 = 3; // `DC`-`DF`
    const KIND_OTHER: u8 = 4; // any other code unit
    pub const STATES: usize = U_BASE as usize + 2 * 4 * 5;

    fn is_cont(b: u8) -> bool {
        (0x80..=0xBF).contains(&b)
    }

    /// One step of the JSON body automaton: (next state, characters completed).
    fn json_step(state: u8, b: u8) -> (u8, u8) {
        match state {
            NORMAL | HIGH => match b {
                b'\\' => (BACKSLASH + state, 0),
                _ if is_cont(b) => (NORMAL, 0),
                _ => (NORMAL, 1),
            },
            s if s == BACKSLASH || s == BACKSLASH + 1 => {
                let high = s - BACKSLASH;
                if b == b'u' {
                    (U_BASE + 2 * (4 * KIND_UNKNOWN) + high, 0)
                } else {
                    // `\"` `\\` `\/` `\b` ... (and, not valid JSON, any other byte) end here.
                    (NORMAL, 1)
                }
            }
            s => {
                let i = s - U_BASE;
                let high = i & 1;
                let k = (i >> 1) % 4;
                let kind = (i >> 1) / 4;
                if !b.is_ascii_hexdigit() {
                    // Not valid JSON: the broken escape counts as one character.
                    return (NORMAL, 1);
                }
                let d = b.to_ascii_lowercase();
                let kind = match (k, kind) {
                    (0, _) if d == b'd' => KIND_D,
                    (0, _) => KIND_OTHER,
                    (1, KIND_D) if matches!(d, b'8' | b'9' | b'a' | b'b') => KIND_HIGH,
                    (1, KIND_D) if matches!(d, b'c'..=b'f') => KIND_LOW,
                    (1, KIND_D) => KIND_OTHER,
                    (_, kind) => kind,
                };
                if k < 3 {
                    (U_BASE + 2 * (k + 1 + 4 * kind) + high, 0)
                } else {
                    match kind {
                        KIND_LOW if high == 1 => (NORMAL, 0),
                        KIND_HIGH => (HIGH, 1),
                        _ => (NORMAL, 1),
                    }
                }
            }
        }
    }

    /// The automaton as a flat table `next[state * 256 + byte]`, with byte classes.
    pub struct Table {
        next: Vec<(u8, u8)>,
        class: [u32; 256],
    }

    impl Table {
        pub fn new(count: CharCount) -> Table {
            let states = match count {
                CharCount::Utf8 => 1,
                CharCount::JsonBody => STATES,
            };
            let mut next = Vec::with_capacity(states * 256);
            for s in 0..states as u8 {
                for b in 0..=255u8 {
                    next.push(match count {
                        CharCount::Utf8 => (START, u8::from(!is_cont(b))),
                        CharCount::JsonBody => json_step(s, b),
                    });
                }
            }
            // Bytes with equal columns (over all states) share a class.
            let mut class = [0u32; 256];
            let mut seen: Vec<u8> = Vec::new();
            for b in 0..=255u8 {
                let same = |a: u8| {
                    (0..states).all(|s| next[s * 256 + a as usize] == next[s * 256 + b as usize])
                };
                class[b as usize] = match seen.iter().position(|&a| same(a)) {
                    Some(i) => i as u32,
                    None => {
                        seen.push(b);
                        (seen.len() - 1) as u32
                    }
                };
            }
            Table { next, class }
        }

        #[inline]
        pub fn class(&self, b: u8) -> u32 {
            self.class[b as usize]
        }

        #[inline]
        pub fn step(&self, state: u8, b: u8) -> (u8, u8) {
            self.next[state as usize * 256 + b as usize]
        }
    }
}

/// A tiny UTF-8 validator automaton (used for `except!`, whose strings must be valid UTF-8).
mod utf8 {
    pub const BOUNDARY: u8 = 0;
    const NEED1: u8 = 1;
    const NEED2: u8 = 2;
    const NEED3: u8 = 3;
    const AFTER_E0: u8 = 4;
    const AFTER_ED: u8 = 5;
    const AFTER_F0: u8 = 6;
    const AFTER_F4: u8 = 7;
    pub const INVALID: u8 = 8;

    /// Bytes with the same class behave the same in every validator state.
    pub fn class(b: u8) -> u8 {
        match b {
            0x00..=0x7F => 0,
            0x80..=0x8F => 1,
            0x90..=0x9F => 2,
            0xA0..=0xBF => 3,
            0xC2..=0xDF => 4,
            0xE0 => 5,
            0xE1..=0xEC | 0xEE..=0xEF => 6,
            0xED => 7,
            0xF0 => 8,
            0xF1..=0xF3 => 9,
            0xF4 => 10,
            _ => 11,
        }
    }

    pub fn next(state: u8, b: u8) -> u8 {
        let cont = (0x80..=0xBF).contains(&b);
        match state {
            BOUNDARY => match b {
                0x00..=0x7F => BOUNDARY,
                0xC2..=0xDF => NEED1,
                0xE0 => AFTER_E0,
                0xE1..=0xEC | 0xEE..=0xEF => NEED2,
                0xED => AFTER_ED,
                0xF0 => AFTER_F0,
                0xF1..=0xF3 => NEED3,
                0xF4 => AFTER_F4,
                _ => INVALID,
            },
            NEED1 if cont => BOUNDARY,
            NEED2 if cont => NEED1,
            NEED3 if cont => NEED2,
            AFTER_E0 if (0xA0..=0xBF).contains(&b) => NEED1,
            AFTER_ED if (0x80..=0x9F).contains(&b) => NEED1,
            AFTER_F0 if (0x90..=0xBF).contains(&b) => NEED2,
            AFTER_F4 if (0x80..=0x8F).contains(&b) => NEED2,
            _ => INVALID,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 10 << 20;

    #[test]
    fn full_match_semantics() {
        let d = Dfa::from_regex("a|ab", LIMIT).unwrap();
        assert!(d.matches(b"a") && d.matches(b"ab") && !d.matches(b"abb") && !d.matches(b""));
        let d = Dfa::from_regex("[0-9]+(\\.[0-9]+)?", LIMIT).unwrap();
        assert!(d.matches(b"12.5") && !d.matches(b"12.") && !d.matches(b"x"));
        let d = Dfa::from_regex("^ab$", LIMIT).unwrap();
        assert!(d.matches(b"ab"));
    }

    #[test]
    fn pruned_states_are_dead() {
        // `a` followed by something impossible: only dead states after `a`.
        let d = Dfa::from_regex("a(?-u:[^\\x00-\\xff])|b", LIMIT).unwrap();
        assert_eq!(d.next(d.start(), b'a'), DEAD);
        assert!(d.matches(b"b"));
        assert!(
            Dfa::from_regex("[^\\x00-\\x{10FFFF}]", LIMIT)
                .unwrap()
                .start()
                == DEAD
        );
    }

    #[test]
    fn unicode_classes_are_utf8() {
        let d = Dfa::from_regex("[^a]", LIMIT).unwrap();
        assert!(d.matches("é".as_bytes()));
        assert!(!d.matches(b"\xff"));
        let s1 = d.next(d.start(), 0xC3);
        assert_ne!(s1, DEAD);
        assert!(!d.is_accept(s1));
        assert_eq!(d.min_to_accept(s1), 1);
    }

    #[test]
    fn except_excludes_substring() {
        let d = Dfa::except(&escape_bytes(b"\n\n"), LIMIT).unwrap();
        assert!(d.matches(b"ab\ncd") && d.matches(b"") && d.matches(b"x\n"));
        assert!(!d.matches(b"a\n\nb") && !d.matches(b"\n\n"));
        assert!(!d.matches(b"\xff"));
        assert!(d.matches("día".as_bytes()));
        assert!(Dfa::except("a*", LIMIT).unwrap().start() == DEAD);
    }

    #[test]
    fn errors_are_reported() {
        assert!(matches!(
            Dfa::from_regex("(", LIMIT),
            Err(DfaError::Syntax(_))
        ));
        assert!(matches!(
            Dfa::from_regex("(a|b)*a(a|b){20}", 1 << 16),
            Err(DfaError::TooBig { .. })
        ));
    }

    #[test]
    fn escape_round_trips() {
        for lit in [&b"a.b*"[..], b"\xff\x00x", "é(".as_bytes()] {
            let d = Dfa::from_regex(&escape_bytes(lit), LIMIT).unwrap();
            assert!(d.matches(lit));
        }
    }

    // --- Simplification and combination: differential checks against regex text -------------

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// Strings over `alphabet` of length at most `max_len`.
    fn strings(alphabet: &[u8], max_len: usize) -> Vec<Vec<u8>> {
        let mut out = vec![Vec::new()];
        let mut layer = vec![Vec::new()];
        for _ in 0..max_len {
            let mut next = Vec::new();
            for s in &layer {
                for &b in alphabet {
                    let mut t: Vec<u8> = s.clone();
                    t.push(b);
                    next.push(t);
                }
            }
            out.extend(next.iter().cloned());
            layer = next;
        }
        out
    }

    /// `a` and `b` agree on every string over `alphabet` up to `max_len`: same matches and the
    /// same viable prefixes (both tables map non-viable prefixes to `DEAD`).
    fn assert_same(a: &Dfa, b: &Dfa, alphabet: &[u8], max_len: usize, what: &str) {
        for s in strings(alphabet, max_len) {
            let (mut x, mut y) = (a.start(), b.start());
            for (k, &byte) in s.iter().enumerate() {
                assert_eq!(x == DEAD, y == DEAD, "{what}: viability of {:?}", &s[..k]);
                if x == DEAD {
                    break;
                }
                x = a.next(x, byte);
                y = b.next(y, byte);
            }
            assert_eq!(a.matches(&s), b.matches(&s), "{what}: {s:?}");
        }
    }

    /// A random small pattern over `a`, `b`, `é` with many adjacent repeated items.
    fn random_pattern(rng: &mut SmallRng, depth: u32) -> String {
        if depth == 0 || rng.gen_bool(0.3) {
            return ["a", "b", "[ab]", "(a)", "é", "(?:a|bb)", "[^a]"][rng.gen_range(0..7)].into();
        }
        let sub = random_pattern(rng, depth - 1);
        match rng.gen_range(0..6) {
            0 => format!("(?:{sub})*"),
            1 => format!("(?:{sub})+"),
            2 => format!("(?:{sub})?"),
            3 => {
                let m = rng.gen_range(0..3);
                match rng.gen_range(0..2) {
                    0 => format!("(?:{sub}){{{m},}}"),
                    _ => format!("(?:{sub}){{{m},{}}}", m + rng.gen_range(0..3)),
                }
            }
            4 => {
                // Adjacent copies of one item, in different spellings, bounded or not.
                let other = random_pattern(rng, depth - 1);
                match rng.gen_range(0..3) {
                    0 => format!("{sub}(?:{sub})+{sub}?(?:{other})|{other}{other}*"),
                    1 => format!("(?:{sub})?{sub}(?:{sub}){{0,2}}(?:{other}){{1,2}}{other}?"),
                    _ => format!("(?:{sub}){{2}}(?:{sub}){{1,3}}|(?:{other})?(?:{other})?"),
                }
            }
            _ => {
                let other = random_pattern(rng, depth - 1);
                format!("(?:{sub})(?:{other})")
            }
        }
    }

    #[test]
    fn simplified_patterns_keep_their_language() {
        let alphabet = [b'a', b'b', b'c', 0xC3, 0xA9];
        let mut rng = SmallRng::seed_from_u64(7);
        let mut patterns: Vec<String> = vec![
            r"\w+\w+\w+".into(),
            "a+a+a*a?a{2}a{1,3}".into(),
            "(a)(a)+(?:a){2,}b".into(),
            "a*a*".into(),
            "a?a?a?".into(),
            // Look-around keeps the pattern in one piece (segments would lose the context).
            r"a*(?-u:\b)b*".into(),
            r"(?-u:\B)a+(?-u:\b)b*c".into(),
            "^a*b+$".into(),
            "a{1,2}a{0,3}b?b{2}".into(),
            "(?:ab)+(?:ab)+".into(),
        ];
        patterns.extend((0..300).map(|_| random_pattern(&mut rng, 3)));
        let mut too_big = 0;
        for p in &patterns {
            let ours = match Dfa::from_regex(p, LIMIT) {
                Ok(d) => d,
                Err(DfaError::TooBig { .. }) => {
                    too_big += 1;
                    continue;
                }
                Err(e) => panic!("{p}: {e}"),
            };
            let reference = regex_automata::meta::Regex::new(&format!("^(?:{p})$")).unwrap();
            for s in strings(&alphabet, 6) {
                assert_eq!(ours.matches(&s), reference.is_match(&s), "{p} on {s:?}");
            }
        }
        assert!(too_big < 10, "{too_big} patterns over the limit");
        // `\w+` repeated is linear after merging: 2,000 copies build in a few thousand states.
        let d = Dfa::from_regex(&"[a-z]+".repeat(2000), LIMIT).unwrap();
        assert!(d.state_count() < 2100, "{}", d.state_count());
        assert!(d.matches("x".repeat(2000).as_bytes()) && !d.matches("x".repeat(1999).as_bytes()));
    }

    #[test]
    fn concat_and_union_agree_with_regex_text() {
        let alphabet = [b'a', b'b', 0xC3, 0xA9];
        let mut rng = SmallRng::seed_from_u64(11);
        let lits: [&[u8]; 3] = [b"a", b"ab", "é".as_bytes()];
        for round in 0..200 {
            let n = rng.gen_range(1..=4);
            let mut dfas = Vec::new();
            let mut texts = Vec::new();
            let mut is_lit = Vec::new();
            for _ in 0..n {
                if rng.gen_bool(0.3) {
                    let l = lits[rng.gen_range(0..lits.len())];
                    texts.push(escape_bytes(l));
                    is_lit.push(Some(l));
                    dfas.push(Dfa::empty());
                } else {
                    let p = random_pattern(&mut rng, 2);
                    dfas.push(Dfa::from_regex(&p, LIMIT).unwrap());
                    texts.push(p);
                    is_lit.push(None);
                }
            }
            let parts: Vec<Part<'_>> = (0..n)
                .map(|i| match is_lit[i] {
                    Some(l) => Part::Lit(l),
                    None => Part::Dfa(&dfas[i]),
                })
                .collect();
            let mut budget = CombineBudget {
                size_limit: LIMIT,
                steps: 1 << 24,
            };
            let cat = Dfa::concat(&parts, &mut budget).unwrap();
            let cat_text: String = texts.iter().map(|t| format!("(?:{t})")).collect();
            let expect = Dfa::from_regex(&cat_text, LIMIT).unwrap();
            assert_same(&cat, &expect, &alphabet, 6, &format!("#{round} {cat_text}"));
            // `from_regex` may itself combine segments: check against an independent matcher.
            let reference = regex_automata::meta::Regex::new(&format!("^(?:{cat_text})$")).unwrap();
            for s in strings(&alphabet, 6) {
                assert_eq!(
                    cat.matches(&s),
                    reference.is_match(&s),
                    "{cat_text} on {s:?}"
                );
            }
            let uni = Dfa::union(&parts, &mut budget).unwrap();
            let uni_text = texts.iter().map(|t| format!("(?:{t})")).collect::<Vec<_>>();
            let expect = Dfa::from_regex(&uni_text.join("|"), LIMIT).unwrap();
            assert_same(
                &uni,
                &expect,
                &alphabet,
                6,
                &format!("#{round} {uni_text:?}"),
            );
        }
        // Equal languages collapse: a union of two literals needs three states like the regex.
        let mut budget = CombineBudget {
            size_limit: LIMIT,
            steps: 1 << 20,
        };
        let u = Dfa::union(&[Part::Lit(b"a"), Part::Lit(b"b")], &mut budget).unwrap();
        assert_eq!(u.state_count(), 3);
    }

    #[test]
    fn unanchored_counters_are_linear() {
        // The shape of every unanchored schema pattern: `"X* P X*"` with P = `[a-z]+` × 3000.
        // Determinized at once, each state holds O(n) NFA states (seconds); by segments, ms.
        let x = r#"(?:[^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;
        let p = format!(r#""{x}*{}{x}*""#, "[a-z]+".repeat(3000));
        let t0 = std::time::Instant::now();
        let d = Dfa::from_regex(&p, LIMIT).unwrap();
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
        let word = "q".repeat(3000);
        for (s, ok) in [
            (format!("\"{word}\""), true),
            (format!("\"a\\n-{word}\\u00e9 \""), true),
            (format!("\"{}\"", &word[1..]), false),
            (format!("\"{} {}\"", &word[..1500], &word[..1500]), false),
            (format!("\"\\x{word}\""), false),
        ] {
            assert_eq!(d.matches(s.as_bytes()), ok, "{}", &s[..20]);
        }
    }

    #[test]
    fn counters_split_across_pieces_combine_in_linear_steps() {
        // `[a-z]{500,}` three times: without inclusion pruning every set would hold every count
        // of the later pieces reached so far (~n²/2 pairs).
        let piece = Dfa::from_regex("[a-z]{500,}", LIMIT).unwrap();
        let parts = [Part::Dfa(&piece), Part::Dfa(&piece), Part::Dfa(&piece)];
        let steps = 1u64 << 24;
        let mut budget = CombineBudget {
            size_limit: LIMIT,
            steps,
        };
        let d = Dfa::concat(&parts, &mut budget).unwrap();
        let used = steps - budget.steps;
        assert!(used < 200_000, "{used} steps");
        assert!(d.state_count() < 1600, "{}", d.state_count());
        assert!(d.matches("q".repeat(1500).as_bytes()) && d.matches("q".repeat(4000).as_bytes()));
        assert!(!d.matches("q".repeat(1499).as_bytes()));
    }

    #[test]
    fn combine_budgets_are_enforced() {
        // `[ab]*a` then 1,000 literal `a`s: each set holds every literal position reached.
        let any_a = Dfa::from_regex("[ab]*a", LIMIT).unwrap();
        let lit = vec![b'a'; 1000];
        let parts = [Part::Dfa(&any_a), Part::Lit(&lit)];
        let mut budget = CombineBudget {
            size_limit: LIMIT,
            steps: 100_000,
        };
        let t0 = std::time::Instant::now();
        let r = Dfa::concat(&parts, &mut budget);
        assert!(
            matches!(r, Err(DfaError::TooSlow { steps: 100_000 })),
            "{r:?}"
        );
        assert!(budget.steps < 1000);
        let mut budget = CombineBudget {
            size_limit: 1 << 16,
            steps: u64::MAX,
        };
        let r = Dfa::concat(&parts, &mut budget);
        assert!(matches!(r, Err(DfaError::TooBig { limit: 65536 })), "{r:?}");
        assert!(t0.elapsed() < std::time::Duration::from_secs(2));
        // A generous budget builds it.
        let mut budget = CombineBudget {
            size_limit: LIMIT,
            steps: 1 << 30,
        };
        let d = Dfa::concat(&parts, &mut budget).unwrap();
        let mut ok = b"b".to_vec();
        ok.extend(std::iter::repeat_n(b'a', 1001));
        assert!(d.matches(&ok) && !d.matches(&ok[..1001]));
    }

    #[test]
    fn pattern_length_is_bounded_by_the_limit() {
        let limit = 1 << 20;
        let max = limit / PATTERN_BYTES_PER_LIMIT;
        // A character class: long to write, tiny automaton.
        let class = |len: usize| format!("[{}]", "a".repeat(len - 2));
        assert!(Dfa::from_regex(&class(max), limit).is_ok());
        let r = Dfa::from_regex(&class(max + 1), limit);
        assert!(matches!(r, Err(DfaError::TooLong { .. })), "{r:?}");
        assert!(r.unwrap_err().to_string().contains("dfa_size_limit"));
    }
}

/// Brute-force checks of `len!` / `json_len!` (through the whole grammar pipeline) against
/// independently written character counts.
#[cfg(test)]
mod len_tests {
    use std::sync::Arc;

    use super::{test_form, CountForm};
    use crate::earley::Recognizer;
    use crate::grammar::{CompileOptions, Grammar};

    /// Code points of the JSON string `"body"` as Python's `json.loads` decodes it (surrogate
    /// escape pairs combined), or `None` when the body is not valid JSON string content.
    fn json_decoded_len(body: &[u8]) -> Option<usize> {
        let s = std::str::from_utf8(body).ok()?;
        // (code unit or scalar, came from a `\u` escape)
        let mut units: Vec<(u32, bool)> = Vec::new();
        let mut it = s.chars();
        while let Some(c) = it.next() {
            match c {
                '"' | '\u{0}'..='\u{1f}' => return None,
                '\\' => match it.next()? {
                    '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => units.push((0, false)),
                    'u' => {
                        let hex: String = (0..4).map(|_| it.next()).collect::<Option<_>>()?;
                        if !hex.chars().all(|h| h.is_ascii_hexdigit()) {
                            return None;
                        }
                        units.push((u32::from_str_radix(&hex, 16).ok()?, true));
                    }
                    _ => return None,
                },
                c => units.push((c as u32, false)),
            }
        }
        let mut n = 0;
        let mut i = 0;
        while i < units.len() {
            let (u, esc) = units[i];
            let pair = esc
                && (0xD800..0xDC00).contains(&u)
                && units
                    .get(i + 1)
                    .is_some_and(|&(v, e)| e && (0xDC00..0xE000).contains(&v));
            i += if pair { 2 } else { 1 };
            n += 1;
        }
        Some(n)
    }

    /// Characters for `len!`: code points of valid UTF-8, else bytes that are not continuations.
    fn utf8_len(s: &[u8]) -> usize {
        match std::str::from_utf8(s) {
            Ok(s) => s.chars().count(),
            Err(_) => s.iter().filter(|&&b| !(0x80..=0xBF).contains(&b)).count(),
        }
    }

    /// Every concatenation of up to `depth` chunks: the grammar's verdict (through the
    /// recognizer) must equal `want` where that says `Some`. Returns how many were accepted.
    fn brute(
        grammar: &str,
        chunks: &[&[u8]],
        depth: usize,
        want: &mut dyn FnMut(&[u8]) -> Option<bool>,
    ) -> usize {
        // An empty language is a compile error; then nothing may be wanted.
        let (mut r, alive) = match Grammar::compile(grammar, &CompileOptions::default()) {
            Ok(g) => (Recognizer::new(Arc::new(g)), true),
            Err(e) if e.to_string().contains("is empty") => (recognizer("start ::= 'x';"), false),
            Err(e) => panic!("{grammar}: {e}"),
        };
        let mut buf = Vec::new();
        let mut accepted = 0;
        walk(
            &mut r,
            alive,
            &mut buf,
            chunks,
            depth,
            want,
            grammar,
            &mut accepted,
        );
        accepted
    }

    #[allow(clippy::too_many_arguments)]
    fn walk(
        r: &mut Recognizer,
        alive: bool,
        buf: &mut Vec<u8>,
        chunks: &[&[u8]],
        depth: usize,
        want: &mut dyn FnMut(&[u8]) -> Option<bool>,
        grammar: &str,
        accepted: &mut usize,
    ) {
        let got = alive && r.is_complete();
        if let Some(w) = want(buf) {
            assert_eq!(got, w, "{grammar} on {:?}", String::from_utf8_lossy(buf));
        }
        *accepted += usize::from(got);
        if depth == 0 {
            return;
        }
        let len = r.len();
        for c in chunks {
            let fed = alive && r.feed(c);
            buf.extend_from_slice(c);
            walk(r, fed, buf, chunks, depth - 1, want, grammar, accepted);
            buf.truncate(buf.len() - c.len());
            if fed {
                assert!(r.rollback_to(len));
            }
        }
    }

    fn recognizer(grammar: &str) -> Recognizer {
        let g = Grammar::compile(grammar, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{grammar}: {e}"));
        Recognizer::new(Arc::new(g))
    }

    fn member(r: &mut Recognizer, s: &[u8]) -> bool {
        r.reset();
        r.feed(s) && r.is_complete()
    }

    const FINE: &[&[u8]] = &[
        b"\\",
        b"u",
        b"D",
        b"8",
        b"C",
        b"0",
        b"a",
        b"\"",
        "\u{e9}".as_bytes(),
    ];
    const COARSE: &[&[u8]] = &[
        b"\\uD83D",
        b"\\uDE00",
        b"\\ud800",
        b"\\udbff",
        b"\\uDC00",
        b"\\udfff",
        b"\\u0041",
        b"\\n",
        b"\\",
        b"u",
        b"a",
        "\u{e9}".as_bytes(),
    ];
    const RULES: &str =
        r"body ::= 'a\\uD83D\\uDE00' | '\\ud800\\udc00\\udc00' | '\u{e9}\\u0041' | '\\n' | '';";

    /// Runs `f` with `len!` / `json_len!` tabulated, then length-counted.
    fn each_form(f: impl Fn(CountForm)) {
        for form in [CountForm::Table, CountForm::Counted] {
            test_form::with(form, || f(form));
        }
    }

    #[test]
    fn json_len_equals_python_decoded_length() {
        each_form(|_| json_len_equals_python_decoded_length_in_form());
    }

    fn json_len_equals_python_decoded_length_in_form() {
        let bodies = [
            // The JSON string body.
            r#"#"(?:[^\"\\\x00-\x1F]|\\[\"\\/bfnrt]|\\u[0-9A-Fa-f]{4})*""#,
            // Surrogate escapes only, plus plain characters.
            r#"#"(?:[a\u00e98]|\\u[dD][0-9a-fA-F]{3}|\\n)*""#,
            // Anything: bodies that are not valid JSON are not compared.
            r#"#"(?s:.)*""#,
            // A nonterminal of literals.
            "body",
        ];
        for e in bodies {
            let mut in_e = recognizer(&format!("start ::= {e}; {RULES}"));
            for (lo, hi) in [(0, 0), (0, 2), (1, 3), (2, 2), (3, 6)] {
                let grammar = format!("start ::= json_len!({e}, {lo}, {hi}); {RULES}");
                let mut want = |s: &[u8]| {
                    if !member(&mut in_e, s) {
                        return Some(false);
                    }
                    json_decoded_len(s).map(|n| (lo..=hi).contains(&n))
                };
                let n = brute(&grammar, FINE, 5, &mut want) + brute(&grammar, COARSE, 4, &mut want);
                assert!(n > 0 || e == "body", "{grammar}: nothing accepted");
            }
        }
    }

    #[test]
    fn len_counts_code_points() {
        each_form(|_| len_counts_code_points_in_form());
    }

    fn len_counts_code_points_in_form() {
        let bytes: &[&[u8]] = &[
            b"a",
            b"\\",
            "\u{e9}".as_bytes(),
            "\u{1f600}".as_bytes(),
            b"\xC3",
            b"\xA9",
        ];
        let bodies = [
            r#"#"(?s-u:.)*""#,
            r#"#"[a\u00e9]*\\?""#,
            r#"#"(?:\\u[0-9]{4}|\u00e9)+""#,
            "body",
        ];
        for e in bodies {
            let mut in_e = recognizer(&format!("start ::= {e}; {RULES}"));
            for (lo, hi) in [(0, 0), (0, 2), (1, 3), (2, 2), (3, 6)] {
                let grammar = format!("start ::= len!({e}, {lo}, {hi}); {RULES}");
                let mut want =
                    |s: &[u8]| Some(member(&mut in_e, s) && (lo..=hi).contains(&utf8_len(s)));
                brute(&grammar, bytes, 6, &mut want);
                brute(&grammar, FINE, 4, &mut want);
                brute(&grammar, COARSE, 3, &mut want);
            }
        }
    }

    #[test]
    fn surrogate_pairs_and_merging() {
        each_form(surrogate_pairs_and_merging_in_form);
    }

    fn surrogate_pairs_and_merging_in_form(form: CountForm) {
        let mut r =
            recognizer(r#"start ::= '"' json_len!(#"(?:[a-z]|\\u[0-9a-fA-F]{4})*", 1, 2) '"';"#);
        for (s, ok) in [
            (&br#""\uD83D\uDE00""#[..], true),
            (br#""\uD83D\uDE00a""#, true),
            (br#""\uD83D\uDE00ab""#, false),
            (br#""\ud800\ud800\udc00""#, true),
            (br#""\udc00\ud800""#, true),
            (br#""\udc00\udc00a""#, false),
            (br#""""#, false),
        ] {
            assert_eq!(member(&mut r, s), ok, "{}", String::from_utf8_lossy(s));
        }
        // A tabulated body merges with the quotes into one terminal, like regex terminals; a
        // length-counted one stays a terminal of its own between the quote literals.
        let g = Grammar::compile(
            r#"start ::= '"' json_len!(#"[a-z]+", 1, 3) '"';"#,
            &CompileOptions::default(),
        )
        .unwrap();
        let lnf = g.lnf_debug();
        assert_eq!(lnf.matches("#regex").count(), 1, "{lnf}");
        if form == CountForm::Table {
            assert!(!lnf.contains("\\\""), "{lnf}");
        } else {
            assert!(lnf.contains("\\\""), "{lnf}");
        }
    }
}
