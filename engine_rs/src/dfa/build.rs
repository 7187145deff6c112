//! Building automata from regex text: parsing and simplifying patterns, determinizing with
//! `regex-automata`, and the cheaper constructions tried first (bounded repetitions unrolled,
//! top-level concatenations combined segment by segment).

use regex_automata::{
    dfa::{dense, Automaton, StartKind},
    nfa::thompson,
    util::syntax,
    Anchored, Input, MatchKind,
};
use std::cell::RefCell;

use regex_syntax::hir::{Class, Hir, HirKind, Repetition};
use rustc_hash::FxHashMap;

use super::{
    classes_and_reps, determinize, explore, prebuilt, product_classes, repeat, utf8, CombineBudget,
    Dfa, DfaError, Explored, Part, DEAD, UNROLL_MIN,
};

impl Dfa {
    /// Compiles a regex (Rust `regex` syntax) matched in full against the input.
    pub fn from_regex(pattern: &str, size_limit: usize) -> Result<Dfa, DfaError> {
        if let Some(dfa) = prebuilt::known(pattern, size_limit) {
            return Ok(dfa);
        }
        Dfa::build_regex(pattern, size_limit)
    }

    /// [`Dfa::from_regex`] without the [`prebuilt`] table.
    pub(super) fn build_regex(pattern: &str, size_limit: usize) -> Result<Dfa, DfaError> {
        let hir = parse(pattern, size_limit)?;
        if let Some(dfa) = Dfa::from_literal_set(&hir, size_limit) {
            return dfa;
        }
        if let Some(dfa) = Dfa::from_bounded_repetition(&hir, size_limit) {
            return Ok(dfa);
        }
        if let Some(dfa) = Dfa::from_segments(&hir, size_limit) {
            return Ok(dfa);
        }
        Dfa::from_hir(&hir, size_limit)
    }

    /// A pattern whose language is a few literal strings (an enum's `\x22(?:a|b|c)\x22`): the
    /// trie of the strings, minimized, which is the table the subset construction of the
    /// pattern's NFA gives once minimized (both are the minimal automaton, numbered by first
    /// discovery in breadth-first order over the same byte classes: those `regex-automata`
    /// gives the NFA, split at the ends of each literal byte and class range of the pattern),
    /// without building the NFA or hashing state sets. `None` for other patterns.
    pub(super) fn from_literal_set(hir: &Hir, size_limit: usize) -> Option<Result<Dfa, DfaError>> {
        let mut words = Vec::new();
        let mut ends = [false; 256];
        if !literal_strings(hir, &mut words, &mut ends) || words.is_empty() {
            return None;
        }
        let (children, accept) = trie(&words);
        let (classes, reps) = classes_and_reps(&classes_at_ends(&ends));
        // Equivalent nodes merged bottom-up (children are numbered after their parents): a
        // node's class is its acceptance and its edges to classes of children, so `canon[n]`
        // names the minimal automaton's state of node `n`; with each node's distance to a
        // string's end.
        let nodes = children.len();
        let mut canon = vec![0u32; nodes];
        let mut dist = vec![0u32; nodes];
        let mut by_signature: FxHashMap<(bool, Vec<(u8, u32)>), u32> = FxHashMap::default();
        for n in (0..nodes).rev() {
            let mut edges: Vec<(u8, u32)> = children[n]
                .iter()
                .map(|&(b, t)| (b, canon[t as usize]))
                .collect();
            edges.sort_unstable();
            dist[n] = if accept[n] {
                0
            } else {
                children[n]
                    .iter()
                    .map(|&(_, t)| dist[t as usize] + 1)
                    .min()
                    .unwrap_or(u32::MAX)
            };
            let next = by_signature.len() as u32;
            canon[n] = *by_signature.entry((accept[n], edges)).or_insert(next);
        }
        // A representative node per state, then the table breadth-first from the root's state
        // over the classes in order, ids on discovery (as [`explore`] numbers them).
        let mut rep_node = vec![0usize; by_signature.len()];
        for n in (0..nodes).rev() {
            rep_node[canon[n] as usize] = n;
        }
        let stride = reps.len();
        let per_state = stride * 4 + 40;
        let mut id = vec![DEAD; by_signature.len()];
        let mut queue = vec![canon[0]];
        id[canon[0] as usize] = 1;
        let mut trans = vec![DEAD; stride];
        let mut acc = vec![false];
        let mut distances = vec![u32::MAX];
        let mut k = 0;
        while k < queue.len() {
            let n = rep_node[queue[k] as usize];
            acc.push(accept[n]);
            distances.push(dist[n]);
            for &b in &reps {
                let t = match children[n].iter().find(|&&(c, _)| c == b) {
                    Some(&(_, t)) => {
                        let state = canon[t as usize] as usize;
                        if id[state] == DEAD {
                            if (queue.len() + 2) * per_state > size_limit {
                                return Some(Err(DfaError::TooBig { limit: size_limit }));
                            }
                            queue.push(state as u32);
                            id[state] = queue.len() as u32;
                        }
                        id[state]
                    }
                    None => DEAD,
                };
                trans.push(t);
            }
            k += 1;
        }
        Some(Ok(Explored {
            stride,
            trans,
            accept: acc,
            reps,
        }
        .finish_as_explored_with_distances(classes, distances)))
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

    /// Determinizes a (simplified) HIR: its Thompson NFA by our subset construction (see
    /// [`determinize`]), or, with look-around, by `regex-automata`, whose table is then copied.
    pub(super) fn from_hir(hir: &Hir, size_limit: usize) -> Result<Dfa, DfaError> {
        let nfa = build_nfa(hir, size_limit)?;
        if let Some(dfa) = determinize::determinize(&nfa, size_limit) {
            return dfa;
        }
        Dfa::from_dense(&build_dense(&nfa, size_limit)?, size_limit)
    }

    /// Copies a dense `regex-automata` DFA (matched in full from its anchored start).
    pub(super) fn from_dense(
        ra: &dense::DFA<Vec<u32>>,
        size_limit: usize,
    ) -> Result<Dfa, DfaError> {
        let start = ra
            .start_state_forward(&Input::new("").anchored(Anchored::Yes))
            .map_err(|e| DfaError::Unsupported(e.to_string()))?;
        let (classes, reps) = ra_classes(ra);
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
        let splits = |h: &Hir| matches!(h.kind(), HirKind::Repetition(r) if r.max.is_none_or(|n| n >= UNROLL_MIN));
        let mut segments: Vec<&[Hir]> = Vec::new();
        let mut start = 0;
        for (i, item) in items.iter().enumerate() {
            if splits(item) {
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
        if let Some(dfa) = except_literal_set(x_regex, size_limit) {
            return dfa;
        }
        Dfa::except_general(x_regex, size_limit)
    }

    /// [`Dfa::except`] by `regex-automata`'s automaton of `(?s-u:.)*(?:X)`.
    pub(super) fn except_general(x_regex: &str, size_limit: usize) -> Result<Dfa, DfaError> {
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
}

/// [`Dfa::except`] of a literal set (a trigger such as `<tool_call>`): the automaton of
/// `(?s-u:.)*(?:X)` is then the Aho-Corasick automaton of the strings (its state after some
/// input: the longest string prefix that input ends with, one to one with the subset
/// construction's states), built directly instead of by `regex-automata`, and explored with the
/// UTF-8 validator over the same byte classes: the same table. `None` for other patterns.
pub(super) fn except_literal_set(
    x_regex: &str,
    size_limit: usize,
) -> Option<Result<Dfa, DfaError>> {
    // (a pattern that does not parse alone is reported as the general construction reports it)
    let hir = parse(x_regex, size_limit).ok()?;
    let mut words = Vec::new();
    let mut ends = [false; 256];
    if !literal_strings(&hir, &mut words, &mut ends) || words.is_empty() {
        return None;
    }
    if words.iter().any(Vec::is_empty) {
        // X matches the empty string, so every string contains it: empty language.
        return Some(Ok(Dfa::empty()));
    }
    // The trie, then failure links breadth-first; `found[n]`: a string ends at node `n` or at
    // a node its failure links reach.
    let (children, mut found) = trie(&words);
    let child = |n: usize, b: u8| {
        children[n]
            .iter()
            .find(|&&(c, _)| c == b)
            .map(|&(_, t)| t as usize)
    };
    let mut fail = vec![0usize; children.len()];
    let mut queue: Vec<usize> = children[0].iter().map(|&(_, t)| t as usize).collect();
    let mut k = 0;
    while k < queue.len() {
        let n = queue[k];
        k += 1;
        for &(b, t) in &children[n] {
            let t = t as usize;
            let mut f = fail[n];
            fail[t] = loop {
                if let Some(g) = child(f, b) {
                    break g;
                }
                if f == 0 {
                    break 0;
                }
                f = fail[f];
            };
            found[t] |= found[fail[t]];
            queue.push(t);
        }
    }
    let step = |mut n: usize, b: u8| loop {
        if let Some(t) = child(n, b) {
            return t;
        }
        if n == 0 {
            return 0;
        }
        n = fail[n];
    };
    let cls = classes_at_ends(&ends);
    let (classes, reps) = product_classes(|b| (cls[b as usize] as u8, utf8::class(b) as u32));
    let table = explore(
        (0usize, utf8::BOUNDARY),
        &reps,
        |&(n, u), b| {
            let t = step(n, b);
            let v = utf8::next(u, b);
            // A string of X ending here means X occurs: the except-string is dead.
            Ok((v != utf8::INVALID && !found[t]).then_some((t, v)))
        },
        |(_, u)| *u == utf8::BOUNDARY,
        size_limit,
    );
    Some(table.map(|t| t.finish(classes)))
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
pub(super) fn parse(pattern: &str, size_limit: usize) -> Result<Hir, DfaError> {
    let max = size_limit / PATTERN_BYTES_PER_LIMIT;
    if pattern.len() > max {
        return Err(DfaError::TooLong {
            len: pattern.len(),
            max,
            limit: size_limit,
        });
    }
    let hir = match super::syntax::parse_plain(pattern) {
        Some(hir) => hir,
        None => syntax::parse_with(pattern, &syntax::Config::new().utf8(false))
            .map_err(|e| DfaError::Syntax(clean_regex_message(&e.to_string())))?,
    };
    Ok(simplify(hir))
}

/// The trie of `words`: each node's (byte, child) edges, node 0 the root, and whether a word
/// ends at it.
fn trie(words: &[Vec<u8>]) -> (Vec<Vec<(u8, u32)>>, Vec<bool>) {
    let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
    let mut word_end = vec![false];
    for w in words {
        let mut n = 0usize;
        for &b in w {
            n = match children[n].iter().find(|&&(c, _)| c == b) {
                Some(&(_, t)) => t as usize,
                None => {
                    let t = children.len();
                    children[n].push((b, t as u32));
                    children.push(Vec::new());
                    word_end.push(false);
                    t
                }
            };
        }
        word_end[n] = true;
    }
    (children, word_end)
}

/// Byte classes that end where `ends` says (see [`literal_strings`]), numbered in byte order.
fn classes_at_ends(ends: &[bool; 256]) -> [u16; 256] {
    let mut cls = [0u16; 256];
    let mut c = 0u16;
    for b in 1..=255usize {
        if ends[b - 1] {
            c += 1;
        }
        cls[b] = c;
    }
    cls
}

/// Most strings (and bytes in all) [`Dfa::from_literal_set`] takes.
const LITERAL_SET_MAX_STRINGS: usize = 64;
const LITERAL_SET_MAX_BYTES: usize = 1024;

/// Whether `hir` matches exactly a finite set of strings, each a concatenation of literals,
/// byte alternatives and ASCII classes, with at most [`LITERAL_SET_MAX_STRINGS`] strings of
/// [`LITERAL_SET_MAX_BYTES`] bytes in all: then `out` holds them, and `ends[b]` says whether a
/// byte range of the pattern (a literal byte, a class range) ends at `b` or starts at `b + 1`
/// (the byte classes of the pattern's NFA end there).
fn literal_strings(hir: &Hir, out: &mut Vec<Vec<u8>>, ends: &mut [bool; 256]) -> bool {
    fn range(ends: &mut [bool; 256], start: u8, end: u8) {
        if start > 0 {
            ends[usize::from(start) - 1] = true;
        }
        ends[usize::from(end)] = true;
    }
    fn set(hir: &Hir, ends: &mut [bool; 256]) -> Option<Vec<Vec<u8>>> {
        let fits = |v: &Vec<Vec<u8>>| {
            v.len() <= LITERAL_SET_MAX_STRINGS
                && v.iter().map(Vec::len).sum::<usize>() <= LITERAL_SET_MAX_BYTES
        };
        let out = match hir.kind() {
            HirKind::Empty => vec![Vec::new()],
            HirKind::Literal(lit) => {
                for &b in lit.0.iter() {
                    range(ends, b, b);
                }
                vec![lit.0.to_vec()]
            }
            HirKind::Class(Class::Bytes(c)) => {
                let mut v = Vec::new();
                for r in c.ranges() {
                    if usize::from(r.end() - r.start()) >= LITERAL_SET_MAX_STRINGS {
                        return None;
                    }
                    range(ends, r.start(), r.end());
                    v.extend((r.start()..=r.end()).map(|b| vec![b]));
                }
                v
            }
            HirKind::Class(Class::Unicode(c)) => {
                let mut v = Vec::new();
                for r in c.ranges() {
                    if !r.end().is_ascii()
                        || (r.end() as u32 - r.start() as u32) as usize >= LITERAL_SET_MAX_STRINGS
                    {
                        return None;
                    }
                    range(ends, r.start() as u8, r.end() as u8);
                    v.extend((r.start() as u8..=r.end() as u8).map(|b| vec![b]));
                }
                v
            }
            HirKind::Capture(c) => set(&c.sub, ends)?,
            HirKind::Concat(items) => {
                let mut acc = vec![Vec::new()];
                for item in items {
                    let tails = set(item, ends)?;
                    if acc.len() * tails.len() > LITERAL_SET_MAX_STRINGS {
                        return None;
                    }
                    acc = acc
                        .iter()
                        .flat_map(|head| {
                            tails.iter().map(move |t| {
                                let mut w = head.clone();
                                w.extend_from_slice(t);
                                w
                            })
                        })
                        .collect();
                    if !fits(&acc) {
                        return None;
                    }
                }
                acc
            }
            HirKind::Alternation(alts) => {
                let mut v = Vec::new();
                for a in alts {
                    v.extend(set(a, ends)?);
                    if !fits(&v) {
                        return None;
                    }
                }
                v
            }
            HirKind::Look(_) | HirKind::Repetition(_) => return None,
        };
        fits(&out).then_some(out)
    }
    match set(hir, ends) {
        Some(v) => {
            *out = v;
            true
        }
        None => false,
    }
}

/// Compiles and determinizes a parsed pattern with `regex-automata`, each stage under
/// `size_limit` bytes.
fn build_ra(hir: &Hir, size_limit: usize) -> Result<dense::DFA<Vec<u32>>, DfaError> {
    build_dense(&build_nfa(hir, size_limit)?, size_limit)
}

/// The Thompson NFA of a parsed pattern, within `size_limit` bytes.
pub(super) fn build_nfa(hir: &Hir, size_limit: usize) -> Result<thompson::NFA, DfaError> {
    thread_local! {
        /// One Thompson compiler per thread and size limit, reused: a new one allocates and zeroes
        /// its UTF-8 suffix cache for every pattern, a quarter of building a small automaton.
        /// (Each build starts by clearing its state, so nothing carries over between patterns.)
        static COMPILER: RefCell<Option<(usize, thompson::Compiler)>> = const { RefCell::new(None) };
    }
    COMPILER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let compiler = match &mut *slot {
            Some((limit, compiler)) if *limit == size_limit => compiler,
            other => {
                let mut compiler = thompson::Compiler::new();
                compiler.configure(
                    thompson::Config::new()
                        .utf8(false)
                        .nfa_size_limit(Some(size_limit)),
                );
                &mut other.insert((size_limit, compiler)).1
            }
        };
        let nfa = compiler.build_from_hir(hir);
        // A large pattern leaves the compiler's buffers large: let them go rather than keep
        // them for the thread's life.
        if nfa
            .as_ref()
            .map_or(true, |n| n.memory_usage() > KEEP_COMPILER_BYTES)
        {
            *slot = None;
        }
        nfa.map_err(|e| build_error(&e, size_limit))
    })
}

/// The reused Thompson compiler is kept after patterns whose NFA is at most this large.
const KEEP_COMPILER_BYTES: usize = 256 << 10;

/// `regex-automata`'s dense DFA of an NFA, within `size_limit` bytes.
pub(super) fn build_dense(
    nfa: &thompson::NFA,
    size_limit: usize,
) -> Result<dense::DFA<Vec<u32>>, DfaError> {
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
        .build_from_nfa(nfa)
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
