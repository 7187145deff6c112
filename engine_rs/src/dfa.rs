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

use std::collections::VecDeque;

use regex_automata::{
    dfa::{dense, Automaton, StartKind},
    nfa::thompson,
    util::syntax,
    Anchored, Input, MatchKind,
};
use rustc_hash::FxHashMap;

/// The dead state: no continuation is possible.
pub const DEAD: u32 = 0;

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
        // SAFETY-free: indices are in range by construction (state < len, class < stride).
        self.trans[(state * self.stride + self.classes[byte as usize] as u32) as usize]
    }
    /// The equivalence class of a byte: bytes of one class move every state alike.
    #[inline]
    pub fn byte_class(&self, byte: u8) -> u8 {
        self.classes[byte as usize]
    }
    #[inline(always)]
    pub fn is_accept(&self, state: u32) -> bool {
        self.accept[state as usize]
    }
    #[inline]
    pub fn live_bytes(&self, state: u32) -> &ByteSet {
        &self.live_bytes[state as usize]
    }
    #[inline]
    pub fn min_to_accept(&self, state: u32) -> u32 {
        self.min_to_accept[state as usize]
    }
    pub fn state_count(&self) -> usize {
        self.accept.len()
    }
    /// Heap bytes used by the tables.
    pub fn memory_usage(&self) -> usize {
        self.trans.len() * 4 + self.accept.len() * (1 + 32 + 4)
    }
    /// Whether the empty string matches.
    pub fn matches_empty(&self) -> bool {
        self.start != DEAD && self.accept[self.start as usize]
    }
    /// Whether some non-empty string matches.
    pub fn matches_nonempty(&self) -> bool {
        self.start != DEAD && !self.live_bytes[self.start as usize].is_empty()
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
        let ra = build_ra(pattern, size_limit)?;
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

    /// The DFA of `except!(X)`: non-empty-or-empty UTF-8 strings with no substring matching `x_regex`,
    /// optionally at most `max_len` bytes long (the bound is enforced by the recognizer using
    /// [`Dfa::min_to_accept`]).
    pub fn except(x_regex: &str, size_limit: usize) -> Result<Dfa, DfaError> {
        let pattern = format!("(?s-u:.)*(?:{x_regex})");
        let ra = build_ra(&pattern, size_limit)?;
        let start = ra
            .start_state_forward(&Input::new("").anchored(Anchored::Yes))
            .map_err(|e| DfaError::Unsupported(e.to_string()))?;
        if ra.is_match_state(ra.next_eoi_state(start)) {
            // X matches the empty string, so every string contains it: empty language.
            return Ok(Dfa::empty());
        }
        let (ra_cls, _) = ra_classes(&ra);
        // Product classes: bytes equivalent for both the X-automaton and the UTF-8 validator.
        let mut key_to_class: FxHashMap<(u8, u8), u8> = FxHashMap::default();
        let mut classes = [0u8; 256];
        let mut reps = Vec::new();
        for b in 0..=255u8 {
            let key = (ra_cls[b as usize], utf8::class(b));
            let next = key_to_class.len() as u8;
            let c = *key_to_class.entry(key).or_insert_with(|| {
                reps.push(b);
                next
            });
            classes[b as usize] = c;
        }
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
        }
    }
}

fn build_ra(pattern: &str, size_limit: usize) -> Result<dense::DFA<Vec<u32>>, DfaError> {
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
        .syntax(syntax::Config::new().utf8(false))
        .thompson(
            thompson::Config::new()
                .utf8(false)
                .nfa_size_limit(Some(size_limit)),
        )
        .build(pattern)
        .map_err(|e| {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(inner) = src {
                msg.push_str(": ");
                msg.push_str(&inner.to_string());
                src = inner.source();
            }
            if msg.contains("exceeded") || msg.contains("limit") {
                DfaError::TooBig { limit: size_limit }
            } else if let Some(syn) = std::error::Error::source(&e) {
                DfaError::Syntax(clean_regex_message(&syn.to_string()))
            } else {
                DfaError::Syntax(clean_regex_message(&msg))
            }
        })
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
        for ns in 1..m {
            for b in 0..=255u8 {
                if trans[ns * stride + classes[b as usize] as usize] != DEAD {
                    live_bytes[ns].insert(b);
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
}
