//! Combining automata: concatenation and union of DFAs and literals by subset construction over
//! the parts' own automata, with language-inclusion pruning.

use rustc_hash::FxHashMap;

use super::{classes_and_reps, refine_classes, ByteSet, Dfa, DfaError, Explored, DEAD};

impl Dfa {
    /// The DFA of the concatenation of `parts` (with no parts: the empty language).
    ///
    /// Built from the parts' automata, so its cost is independent of how the parts were written;
    /// fails with [`DfaError::TooBig`] or [`DfaError::TooSlow`] when `budget` runs out (callers
    /// use it for optional optimizations and keep the parts separate then).
    pub fn concat(parts: &[Part<'_>], budget: &mut CombineBudget) -> Result<Dfa, DfaError> {
        if let Some(dfa) = literals_around(parts, budget) {
            return dfa;
        }
        Combiner {
            parts,
            mode: Combine::Concat,
        }
        .explore(budget)
    }

    /// The DFA of the union of `parts` (see [`Dfa::concat`] for the budget).
    pub fn union(parts: &[Part<'_>], budget: &mut CombineBudget) -> Result<Dfa, DfaError> {
        if let Some(dfa) = disjoint_union(parts, budget) {
            return dfa;
        }
        Combiner {
            parts,
            mode: Combine::Union,
        }
        .explore(budget)
    }
}

/// The most common concatenation, `'lit' … X 'lit' …` (literals around one tabulated DFA, e.g.
/// `', "age": ' integer` or `key ': '`), built directly: a chain of states for the prefix, a copy
/// of `X`'s table, and a chain for the suffix entered from `X`'s accepting states — which must
/// then not continue with the suffix's first byte (a JSON string's closing quote has no
/// continuation; an object's member list may continue with `,` but not with `}`), so that no
/// state is ever a set. `None` for other shapes (the subset construction handles them).
fn literals_around(
    parts: &[Part<'_>],
    budget: &mut CombineBudget,
) -> Option<Result<Dfa, DfaError>> {
    let at = parts.iter().position(|p| matches!(p, Part::Dfa(_)))?;
    let Part::Dfa(d) = parts[at] else {
        return None;
    };
    let literal = |ps: &[Part<'_>]| -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for p in ps {
            match p {
                Part::Lit(l) => out.extend_from_slice(l),
                Part::Dfa(_) => return None,
            }
        }
        Some(out)
    };
    let (prefix, suffix) = (literal(&parts[..at])?, literal(&parts[at + 1..])?);
    // (Ids below put X's start at `p + 1` when there is no prefix: X's own start must be 1, as
    // `Explored::finish` numbers it.)
    if d.is_counted() || (prefix.is_empty() && (suffix.is_empty() || d.start != 1)) {
        return None;
    }
    if d.start == DEAD {
        return Some(Ok(Dfa::empty()));
    }
    let n = d.state_count();
    if let Some(&first) = suffix.first() {
        if (1..n as u32).any(|s| d.is_accept(s) && d.live_bytes(s).contains(first)) {
            return None;
        }
    }
    let (p, m) = (prefix.len(), suffix.len());
    // Classes: X's, with each byte of the literals that shares its class in X with other bytes
    // split out into a class of its own, numbered after X's (so X's rows are copied column for
    // column, then one column per split byte); a class of literal bytes alone keeps one of them
    // (no class is left empty).
    let old_stride = d.stride as usize;
    let mut classes = d.classes;
    let mut bytes_in = [0u16; 256];
    for &c in &d.classes {
        bytes_in[c as usize] += 1;
    }
    let mut split_from: Vec<u8> = Vec::new(); // X's class of each new class
    let mut seen = ByteSet::EMPTY;
    for &b in prefix.iter().chain(&suffix) {
        let c = d.classes[b as usize];
        if !seen.contains(b) && bytes_in[c as usize] > 1 {
            bytes_in[c as usize] -= 1;
            classes[b as usize] = (old_stride + split_from.len()) as u8;
            split_from.push(c);
        }
        seen.insert(b);
    }
    let stride = old_stride + split_from.len();
    // Ids: 0 dead; 1..=p the prefix (`k` bytes read: id k + 1, the last one leading into X);
    // X's state s at p + s; the suffix after k >= 1 bytes at p + n - 1 + k.
    let states = 1 + p + (n - 1) + m;
    if states.saturating_mul(stride * 4 + 40) > budget.size_limit {
        return Some(Err(DfaError::TooBig {
            limit: budget.size_limit,
        }));
    }
    let work = (states * stride) as u64;
    if work > budget.steps {
        return Some(Err(DfaError::TooSlow {
            steps: budget.steps,
        }));
    }
    budget.steps -= work;
    let x = |s: u32| if s == DEAD { DEAD } else { (p as u32) + s };
    let chain_end = (p + n - 1 + m) as u32;
    // Rows in id order: the dead state's and the prefix's, X's, the suffix's.
    let mut trans = Vec::with_capacity(states * stride);
    trans.resize((1 + p) * stride, DEAD);
    for k in 0..p {
        let next = if k + 1 < p { k as u32 + 2 } else { x(d.start) };
        trans[(k + 1) * stride + classes[prefix[k] as usize] as usize] = next;
    }
    let mut accept = vec![false; states];
    // X's rows, ids shifted by `p` but for the dead state (X is not counted: its table is its
    // transitions).
    for s in 1..n {
        let from = &d.trans[s * old_stride..(s + 1) * old_stride];
        trans.extend(from.iter().map(|&t| x(t)));
        trans.extend(split_from.iter().map(|&c| x(from[c as usize])));
        if d.is_accept(s as u32) {
            if m == 0 {
                accept[p + s] = true;
            } else {
                let first = if m == 1 { chain_end } else { (p + n) as u32 };
                trans[(p + s) * stride + classes[suffix[0] as usize] as usize] = first;
            }
        }
    }
    trans.resize(states * stride, DEAD);
    for k in 1..m {
        let id = p + n - 1 + k;
        let next = if k + 1 < m { id as u32 + 1 } else { chain_end };
        trans[id * stride + classes[suffix[k] as usize] as usize] = next;
    }
    if m > 0 {
        accept[chain_end as usize] = true;
    }
    // The derived tables directly, without `Explored::finish`'s reverse search: every state is
    // co-reachable (X's are, X being pruned; the prefix leads into X's start, the suffix to the
    // end), and every way to acceptance passes the prefix, an accepting state of X, then the
    // suffix.
    let mut live_bytes = vec![ByteSet::EMPTY; states];
    let mut min_to_accept = vec![u32::MAX; states];
    let to_end = |x_rest: u32| x_rest.saturating_add(m as u32);
    for (k, &b) in prefix.iter().enumerate() {
        live_bytes[k + 1].insert(b);
        min_to_accept[k + 1] = to_end(d.min_to_accept(d.start)).saturating_add((p - k) as u32);
    }
    for s in 1..n as u32 {
        let id = p + s as usize;
        live_bytes[id] = d.live_bytes(s);
        if m > 0 && d.is_accept(s) {
            live_bytes[id].insert(suffix[0]);
        }
        min_to_accept[id] = to_end(d.min_to_accept(s));
    }
    // The suffix after k >= 1 bytes: the next byte live, m - k to go (the end: none, 0).
    for k in 1..=m {
        let id = p + n - 1 + k;
        if let Some(&b) = suffix.get(k) {
            live_bytes[id].insert(b);
        }
        min_to_accept[id] = (m - k) as u32;
    }
    Some(Ok(Dfa {
        classes,
        stride: stride as u32,
        trans,
        accept,
        live_bytes,
        min_to_accept,
        start: 1,
        counter: None,
    }))
}

/// A union whose parts begin with pairwise different bytes (the scalars of a JSON value: `"`,
/// `-` and digits, `t`, `f`, `n`), explored with one part state per DFA state instead of sets:
/// a start state that dispatches on the first byte, then the part's own states, its accepting
/// states without continuation merged into one as the subset construction's [`SINK`] does (the
/// two give the same table). `None` for other unions.
fn disjoint_union(parts: &[Part<'_>], budget: &mut CombineBudget) -> Option<Result<Dfa, DfaError>> {
    // `owner[b]`: 1 + the part whose first byte `b` is (0: none).
    let mut owner = [0u8; 256];
    let mut accepts_empty = false;
    if parts.len() < 2 || parts.len() > usize::from(u8::MAX) {
        return None;
    }
    for (i, p) in parts.iter().enumerate() {
        let first = match p {
            Part::Lit(l) => {
                let mut set = ByteSet::EMPTY;
                set.insert(*l.first()?);
                set
            }
            Part::Dfa(d) if d.is_counted() => return None,
            Part::Dfa(d) if d.start == DEAD => continue,
            Part::Dfa(d) => {
                accepts_empty |= d.is_accept(d.start);
                d.live_bytes(d.start)
            }
        };
        for b in 0..=255u8 {
            if first.contains(b) {
                if owner[b as usize] != 0 {
                    return None;
                }
                owner[b as usize] = i as u8 + 1;
            }
        }
    }
    // Breadth-first over the union's states, numbered on discovery (as `explore` numbers them,
    // so the table is the subset construction's): 1 the start, then part states, whose ids are
    // looked up in per-part arrays (no hashing: this is the whole cost of the construction).
    let (classes, reps) = part_classes(parts);
    let stride = reps.len();
    let mut ids: Vec<Vec<u32>> = parts.iter().map(|p| vec![DEAD; p.state_count()]).collect();
    let mut sink = DEAD;
    // `queue[k - 1]`: the part and part state of state `k` (`u32::MAX` part: start or sink).
    let mut queue: Vec<(u32, u32)> = vec![(u32::MAX, 0)];
    let mut trans = vec![DEAD; 2 * stride];
    let mut accept = vec![false, accepts_empty];
    // Distances to acceptance, as the construction knows them: a part state's is the part's
    // (every part state is co-reachable, the parts being pruned), the start's is set below.
    let mut dist = vec![u32::MAX, u32::MAX];
    let per_state = stride * 4 + 40;
    let mut k = 1;
    while k <= queue.len() {
        let (i, s) = queue[k - 1];
        if budget.steps < stride as u64 {
            return Some(Err(DfaError::TooSlow {
                steps: budget.steps,
            }));
        }
        budget.steps -= stride as u64;
        for (c, &b) in reps.iter().enumerate() {
            let (part, t) = match (i, s) {
                (u32::MAX, 0) => match owner[b as usize] {
                    0 => continue,
                    o => {
                        let o = usize::from(o - 1);
                        (o, parts[o].next(parts[o].start(), b))
                    }
                },
                (u32::MAX, _) => continue,
                _ => (i as usize, parts[i as usize].next(s, b)),
            };
            if t == DEAD {
                continue;
            }
            let p = &parts[part];
            let is_sink = p.is_accept(t) && !p.is_live(t);
            let slot = if is_sink {
                &mut sink
            } else {
                &mut ids[part][t as usize]
            };
            if *slot == DEAD {
                if (queue.len() + 2) * per_state > budget.size_limit {
                    return Some(Err(DfaError::TooBig {
                        limit: budget.size_limit,
                    }));
                }
                *slot = queue.len() as u32 + 1;
                queue.push(if is_sink {
                    (u32::MAX, 1)
                } else {
                    (part as u32, t)
                });
                trans.extend(std::iter::repeat_n(DEAD, stride));
                accept.push(is_sink || p.is_accept(t));
                dist.push(if is_sink { 0 } else { p.min_to_accept(t) });
            }
            trans[k * stride + c] = *slot;
        }
        k += 1;
    }
    dist[1] = if accepts_empty {
        0
    } else {
        let first = trans[stride..2 * stride].iter().filter(|&&t| t != DEAD);
        first
            .map(|&t| dist[t as usize])
            .min()
            .map_or(u32::MAX, |d| d + 1)
    };
    let explored = Explored {
        stride,
        trans,
        accept,
        reps,
    };
    #[cfg(test)]
    assert_eq!(dist, explored.distances(), "the reverse search's");
    // Each state is one (minimal) part's state: not minimized again (measured: it would cost
    // twice the construction to merge the few states that different parts' tails share).
    Some(Ok(explored.finish_as_explored_with_distances(classes, dist)))
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
    pub(super) fn start(&self) -> u32 {
        match self {
            Part::Dfa(d) => d.start,
            Part::Lit(_) => 1,
        }
    }
    #[inline]
    pub(super) fn next(&self, s: u32, b: u8) -> u32 {
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
    pub(super) fn is_accept(&self, s: u32) -> bool {
        match self {
            Part::Dfa(d) => d.is_accept(s),
            Part::Lit(l) => s as usize - 1 == l.len(),
        }
    }
    #[inline]
    pub(super) fn is_live(&self, s: u32) -> bool {
        match self {
            Part::Dfa(d) => d.can_continue(s),
            Part::Lit(l) => (s as usize - 1) < l.len(),
        }
    }
    /// Fewest further bytes from live state `s` to acceptance (for a length-counted DFA only
    /// a lower bound, see [`Dfa::min_to_accept`]).
    #[inline]
    pub(super) fn min_to_accept(&self, s: u32) -> u32 {
        match self {
            Part::Dfa(d) => d.min_to_accept(s),
            Part::Lit(l) => (l.len() + 1 - s as usize) as u32,
        }
    }
    /// One more than the largest state id (`DEAD` included): the size of a per-state table.
    #[inline]
    pub(super) fn state_count(&self) -> usize {
        match self {
            Part::Dfa(d) => d.state_count(),
            Part::Lit(l) => l.len() + 2,
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
        // Sets of one part state (most of them once the parts' first bytes are read) are found
        // by a flat array, `single[first[i] + s]` for part `i` in state `s`, not by hashing.
        let mut first = Vec::with_capacity(self.parts.len());
        let mut slots = 0usize;
        for p in self.parts {
            first.push(slots);
            slots += p.state_count();
        }
        let mut single: Vec<u32> = Vec::new();
        let slot = |set: &[u64]| match set {
            &[e] if e != SINK => Some(first[(e >> 32) as usize] + (e as u32) as usize),
            _ => None,
        };
        // Interns a set; returns its state id.
        let mut intern = |set: &[u64],
                          arena: &mut Vec<u64>,
                          offsets: &mut Vec<usize>,
                          trans: &mut Vec<u32>,
                          acc: &mut Vec<bool>|
         -> Result<u32, DfaError> {
            let one = slot(set);
            let h = match one {
                Some(k) => match single.get(k) {
                    Some(&id) if id != 0 => return Ok(id),
                    _ => 0,
                },
                None => {
                    let h = hash(set);
                    let mut id = index.get(&h).copied().unwrap_or(0);
                    while id != 0 {
                        let k = id as usize;
                        if &arena[offsets[k - 1]..offsets[k]] == set {
                            return Ok(id);
                        }
                        id = chain[k - 1];
                    }
                    h
                }
            };
            memory += per_state + set.len() * 8;
            if memory > budget.size_limit {
                return Err(too_big.clone());
            }
            let id = offsets.len() as u32;
            arena.extend_from_slice(set);
            offsets.push(arena.len());
            match one {
                Some(k) => {
                    if single.is_empty() {
                        single = vec![0; slots];
                    }
                    single[k] = id;
                    chain.push(0);
                }
                None => chain.push(index.insert(h, id).unwrap_or(0)),
            }
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

/// Byte classes (and one representative byte each) that every part treats alike.
pub(super) fn part_classes(parts: &[Part<'_>]) -> ([u8; 256], Vec<u8>) {
    let mut cls = [0u16; 256];
    let mut lit_bytes = ByteSet::EMPTY;
    let mut seen: rustc_hash::FxHashSet<*const Dfa> = Default::default();
    for p in parts {
        match p {
            Part::Dfa(d) => {
                // Parts often repeat one DFA (a run of the same terminal): refine once.
                if seen.insert(*d as *const Dfa) {
                    refine_classes(&mut cls, |b| u32::from(d.classes[b as usize]));
                }
            }
            Part::Lit(l) => l.iter().for_each(|&b| lit_bytes.insert(b)),
        }
    }
    if !lit_bytes.is_empty() {
        refine_classes(&mut cls, |b| {
            if lit_bytes.contains(b) {
                u32::from(b) + 1
            } else {
                0
            }
        });
    }
    classes_and_reps(&cls)
}

#[cfg(test)]
mod literals_around_tests {
    use super::*;

    /// Every string over `alphabet` up to `len` bytes.
    fn strings(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
        let mut out = vec![Vec::new()];
        let mut layer = vec![Vec::new()];
        for _ in 0..len {
            layer = layer
                .iter()
                .flat_map(|w: &Vec<u8>| {
                    alphabet.iter().map(move |&b| {
                        let mut v = w.clone();
                        v.push(b);
                        v
                    })
                })
                .collect();
            out.extend(layer.iter().cloned());
        }
        out
    }

    #[test]
    fn equals_the_subset_construction() {
        let regexes = [
            r#""[ab]*""#,
            r"-?(?:0|[1-9][0-9]*)",
            r"[ab]*c",
            r"(?:ab)+",
            r"a?",
            r"[0-9]",
            r#""(?:[^"\\]|\\.)*""#,
        ];
        let literals: [&[u8]; 4] = [b"a", b": ", b"\"", b"1b"];
        let alphabet = b"ab\"c-01: 9";
        let inputs = strings(alphabet, 6);
        let budget = || CombineBudget {
            size_limit: 1 << 24,
            steps: 1 << 30,
        };
        let mut fast_paths = 0;
        for re in regexes {
            let d = Dfa::from_regex(re, 1 << 20).unwrap();
            for (before, after) in [(1, 0), (2, 0), (0, 1), (1, 1), (2, 2), (0, 2)] {
                let mut parts = Vec::new();
                parts.extend(literals.iter().take(before).map(|l| Part::Lit(l)));
                parts.push(Part::Dfa(&d));
                parts.extend(literals.iter().rev().take(after).map(|l| Part::Lit(l)));
                let general = Combiner {
                    parts: &parts,
                    mode: Combine::Concat,
                }
                .explore(&mut budget())
                .unwrap();
                if let Some(fast) = literals_around(&parts, &mut budget()) {
                    let fast = fast.unwrap();
                    fast_paths += 1;
                    for w in &inputs {
                        assert_eq!(
                            fast.matches(w),
                            general.matches(w),
                            "{re} {before} {after} {w:?}"
                        );
                    }
                    // The same invariants: every live state can still reach acceptance.
                    for s in 1..fast.state_count() as u32 {
                        assert!(fast.min_to_accept(s) != u32::MAX);
                    }
                    // Every class has a byte (a literal byte alone in its class keeps it).
                    let mut used = vec![false; fast.stride as usize];
                    fast.classes.iter().for_each(|&c| used[c as usize] = true);
                    assert!(used.iter().all(|&u| u), "{re} {before} {after}");
                }
            }
        }
        // Prefixes always take the direct construction; suffixes only after dead-end accepts.
        assert!(fast_paths >= 30, "{fast_paths}");
    }

    /// The derived tables written directly (live bytes, distances) are those of the general
    /// construction, state for state along every path.
    #[test]
    fn derived_tables_equal_the_subset_construction() {
        let budget = || CombineBudget {
            size_limit: 1 << 24,
            steps: 1 << 30,
        };
        let d = Dfa::from_regex(r#""(?:[^"\\]|\\.)*""#, 1 << 20).unwrap();
        let e = Dfa::from_regex(r"[0-9]+(?:\.[0-9]*)?", 1 << 20).unwrap();
        let cases: [&[Part<'_>]; 6] = [
            &[Part::Lit(b", "), Part::Lit(b"\"k\": "), Part::Dfa(&d)],
            &[Part::Lit(b"{"), Part::Dfa(&d), Part::Lit(b": ")],
            &[Part::Dfa(&d), Part::Lit(b"}")],
            &[Part::Lit(b"x="), Part::Dfa(&e)],
            // Accepting states that go on (digits), but not with the suffix.
            &[Part::Dfa(&e), Part::Lit(b"}")],
            &[Part::Lit(b"["), Part::Dfa(&d), Part::Lit(b"]]")],
        ];
        for parts in cases {
            let fast = literals_around(parts, &mut budget()).unwrap().unwrap();
            let general = Combiner {
                parts,
                mode: Combine::Concat,
            }
            .explore(&mut budget())
            .unwrap();
            if let Err(e) = crate::dfa::tests::same_language(&fast, &general) {
                panic!("{e}");
            }
        }
    }

    /// Unions of parts with different first bytes take the direct construction and give the
    /// subset construction's table exactly.
    #[test]
    fn disjoint_unions_equal_the_subset_construction() {
        let regexes = [
            r#""(?:[^"\\]|\\.)*""#,
            r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?",
            r"a?",
            r"[xy]+z?",
            r"",
        ];
        let dfas: Vec<Dfa> = regexes
            .iter()
            .map(|r| Dfa::from_regex(r, 1 << 20).unwrap())
            .collect();
        let literals: [&[u8]; 4] = [b"true", b"false", b"null", b"b"];
        let budget = || CombineBudget {
            size_limit: 1 << 24,
            steps: 1 << 30,
        };
        let mut fast_paths = 0;
        // Every subset of the parts (some share first bytes: then no fast path).
        let all: Vec<Part<'_>> = dfas
            .iter()
            .map(Part::Dfa)
            .chain(literals.iter().map(|l| Part::Lit(l)))
            .collect();
        for mask in 1u32..(1 << all.len()) {
            let parts: Vec<Part<'_>> = (0..all.len())
                .filter(|i| mask >> i & 1 == 1)
                .map(|i| all[i])
                .collect();
            let general = Combiner {
                parts: &parts,
                mode: Combine::Union,
            }
            .explore(&mut budget())
            .unwrap();
            if let Some(fast) = disjoint_union(&parts, &mut budget()) {
                // The fast path's table is the subset construction's before minimization.
                let fast = fast.unwrap();
                let fast = fast.as_explored().finish(fast.classes);
                fast_paths += 1;
                crate::dfa::assert_same_table(&fast, &general, &format!("{mask:b}"));
            }
        }
        assert!(fast_paths >= 100, "{fast_paths}");
    }
}
