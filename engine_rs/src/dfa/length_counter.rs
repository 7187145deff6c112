//! Length-counted automata for `len!` / `json_len!` whose product with the counter is too large
//! to tabulate.
//!
//! The language is `{ w ∈ L(base) : min <= chars(w) <= max }`. Instead of a table over
//! `(base state, count)` pairs (whose size is `|base| × (max + 1)` rows), the automaton keeps the
//! base table (the product of the argument's DFA and the character-boundary automaton, with a
//! per-transition "completes a character" flag) and answers "can `(t, n)` still reach
//! acceptance?" from *layers*: the set `C_n` of base states that are co-reachable with count `n`.
//!
//! Invariants:
//!
//! * a state id is `t * width + n` with `width = max + 1`, `t` a base state (`1..`), `n <= max`
//!   the characters completed so far; id `0` is dead (`t = 0`), so [`super::DEAD`] keeps its meaning;
//! * every id that [`Counter::next`] returns is co-reachable (`t ∈ C_n`), so "the next state is
//!   alive" still means "the input can still be completed", as for tabulated DFAs.
//!
//! Layers: `C_n = closure₀(A_n ∪ pre₁(C_{n+1}))` with `C_{max+1} = ∅`, `A_n` the accepting base
//! states when `n >= min` (else none), `pre₁` the sources of character-completing transitions into
//! the set and `closure₀` the closure under the other transitions (backwards). For `n >= min` the
//! sequence (downwards from `max`) only grows, so it reaches a fixpoint within `|base| + 1` steps;
//! below `min` it is a deterministic iteration over finitely many sets, hence ultimately periodic.
//! Only the distinct layers are stored, with the index arithmetic of that shape.

use rustc_hash::FxHashMap;

use super::{chars, product_classes, ByteSet, CharCount, Dfa, DfaError, DEAD};

/// The counter layer of a length-counted [`Dfa`] (the `Dfa`'s table is the base automaton).
#[derive(Clone, Debug)]
pub(super) struct Counter {
    min: u32,
    max: u32,
    /// `max + 1`: the id stride of one base state.
    width: u32,
    /// `inc[t * stride + class]`: 1 when that transition completes a character.
    inc: Vec<u8>,
    /// `u64` words per layer (one bit per base state).
    words: usize,
    /// Distinct layers, flat: layer `k` is `layers[k * words..(k + 1) * words]`.
    layers: Vec<u64>,
    /// Layer index of `n = max, max - 1, …`; the last entry also holds for every `n >= min` below.
    high: Vec<u32>,
    /// Layer index of `n = min - 1, min - 2, …`: `low[j]` for `j < low_prefix`, then periodic with
    /// period `low.len() - low_prefix` (no period needed when `low` covers every `n < min`).
    low: Vec<u32>,
    low_prefix: usize,
    /// Per distinct layer: whether it holds every base state (the count does not matter there).
    full: Vec<bool>,
    /// The bytes of each byte class, and one representative byte of each.
    class_bytes: Vec<ByteSet>,
    reps: Vec<u8>,
}

/// Most edge visits spent computing layers, per byte of `dfa_size_limit` (the computation is
/// `O(layers × transitions)`; this keeps it to about a second at the default limit).
const WORK_PER_LIMIT_BYTE: u64 = 4;

impl Counter {
    /// `(base state, count)` of a state id.
    #[inline]
    pub(super) fn parts(&self, state: u32) -> (u32, u32) {
        (state / self.width, state % self.width)
    }

    fn layer_index(&self, n: u32) -> usize {
        if n >= self.min {
            let j = (self.max - n) as usize;
            self.high[j.min(self.high.len() - 1)] as usize
        } else {
            let j = (self.min - 1 - n) as usize;
            let k = if j < self.low.len() {
                j
            } else {
                let period = self.low.len() - self.low_prefix;
                self.low_prefix + (j - self.low_prefix) % period
            };
            self.low[k] as usize
        }
    }

    /// Whether base state `t` with count `n` can still reach acceptance.
    #[inline]
    fn live(&self, t: u32, n: u32) -> bool {
        let k = self.layer_index(n);
        let w = self.layers[k * self.words + (t as usize >> 6)];
        w >> (t & 63) & 1 == 1
    }

    #[inline]
    pub(super) fn next(&self, base: &Dfa, state: u32, byte: u8) -> u32 {
        let (t, n) = self.parts(state);
        let i = (t * base.stride + u32::from(base.classes[byte as usize])) as usize;
        let t2 = base.trans[i];
        if t2 == DEAD {
            return DEAD;
        }
        let n2 = n + u32::from(self.inc[i]);
        if n2 > self.max || !self.live(t2, n2) {
            return DEAD;
        }
        t2 * self.width + n2
    }

    #[inline]
    pub(super) fn is_accept(&self, base: &Dfa, state: u32) -> bool {
        let (t, n) = self.parts(state);
        t != DEAD && base.accept[t as usize] && n >= self.min
    }

    pub(super) fn live_bytes(&self, base: &Dfa, state: u32) -> ByteSet {
        let mut out = ByteSet::EMPTY;
        if state == DEAD {
            return out;
        }
        for (bytes, &rep) in self.class_bytes.iter().zip(&self.reps) {
            if self.next(base, state, rep) != DEAD {
                out.union_with(bytes);
            }
        }
        out
    }

    pub(super) fn can_continue(&self, base: &Dfa, state: u32) -> bool {
        state != DEAD && self.reps.iter().any(|&b| self.next(base, state, b) != DEAD)
    }

    /// How many consecutive counts from `n` on (at most `cap`) have a full layer: below that many
    /// more characters, only the base automaton can kill a state.
    pub(super) fn slack(&self, n: u32, cap: u32) -> u32 {
        let mut k = 0;
        while k < cap && n + k <= self.max && self.full[self.layer_index(n + k)] {
            k += 1;
        }
        k
    }

    /// Whether `n` characters are enough (`n >= min`).
    pub(super) fn reaches_min(&self, n: u32) -> bool {
        n >= self.min
    }

    /// Whether `(t, n)` is a live state: `n <= max` and `t` can still reach acceptance from `n`.
    pub(super) fn is_live(&self, t: u32, n: u32) -> bool {
        t != DEAD && n <= self.max && self.live(t, n)
    }

    /// Whether the base transition from `t` on `byte` completes a character.
    pub(super) fn increments(&self, base: &Dfa, t: u32, byte: u8) -> bool {
        let i = (t * base.stride + u32::from(base.classes[byte as usize])) as usize;
        self.inc[i] == 1
    }

    pub(super) fn state_count(&self, base_states: usize) -> usize {
        base_states * self.width as usize
    }

    pub(super) fn memory_usage(&self) -> usize {
        self.inc.len()
            + self.layers.len() * 8
            + (self.high.len() + self.low.len()) * 4
            + self.class_bytes.len() * 32
            + self.reps.len()
    }
}

/// Builds the counted automaton of `e`'s strings with `min..=max` characters (`min <= max`,
/// `e` not empty). Fails with [`DfaError::TooBig`] when the base table, the layers or the work to
/// compute them exceed `size_limit`, or when ids would not fit in 32 bits.
pub(super) fn build(
    e: &Dfa,
    count: CharCount,
    min: u32,
    max: u32,
    size_limit: usize,
) -> Result<Dfa, DfaError> {
    debug_assert!(min <= max && e.start != DEAD && e.counter.is_none());
    let too_big = || DfaError::TooBig { limit: size_limit };
    let table = chars::Table::of(count);
    let (classes, reps) = product_classes(|b| (e.classes[b as usize], table.class(b)));
    let stride = reps.len();

    // The base automaton: (e state, character-automaton state) pairs, row 0 dead.
    let mut ids: FxHashMap<(u32, u8), u32> = FxHashMap::default();
    let mut keys: Vec<(u32, u8)> = vec![(DEAD, 0), (e.start, chars::START)];
    ids.insert(keys[1], 1);
    let mut trans = vec![DEAD; 2 * stride];
    let mut inc = vec![0u8; 2 * stride];
    let mut accept = vec![false, e.is_accept(e.start)];
    let row_bytes = stride * 5 + 48;
    let mut id = 1;
    while id < keys.len() {
        let (s, c) = keys[id];
        for (k, &b) in reps.iter().enumerate() {
            let t = e.next(s, b);
            if t == DEAD {
                continue;
            }
            let (c2, i) = table.step(c, b);
            let tid = *ids.entry((t, c2)).or_insert_with(|| {
                keys.push((t, c2));
                keys.len() as u32 - 1
            });
            if tid as usize == trans.len() / stride {
                if keys.len() * row_bytes > size_limit {
                    return Err(too_big());
                }
                trans.extend(std::iter::repeat_n(DEAD, stride));
                inc.extend(std::iter::repeat_n(0, stride));
                accept.push(e.is_accept(t));
            }
            trans[id * stride + k] = tid;
            inc[id * stride + k] = i;
        }
        id += 1;
    }
    let nb = keys.len();
    let width = max as u64 + 1;
    if nb as u64 * width > u64::from(u32::MAX) {
        return Err(too_big());
    }

    // Reverse transitions, split by whether they complete a character (CSR layout).
    let (rev0, rev1) = reverse_edges(&trans, &inc, stride, nb);
    let words = nb.div_ceil(64);
    let mut work_left = (size_limit as u64).saturating_mul(WORK_PER_LIMIT_BYTE);
    let layer_cost = (nb + trans.len()) as u64;
    let fixed_bytes = nb * row_bytes;
    let mut store = LayerStore {
        words,
        layers: Vec::new(),
        index: FxHashMap::default(),
    };
    let mut step = |prev: Option<&[u64]>, accepting: bool| -> Result<Vec<u64>, DfaError> {
        work_left = work_left.checked_sub(layer_cost).ok_or_else(too_big)?;
        Ok(layer(prev, accepting, &accept, &rev0, &rev1, words))
    };

    // n = max, max - 1, …, min: growing until a fixpoint.
    let mut high = Vec::new();
    let mut cur = step(None, true)?;
    high.push(store.intern(&cur));
    for _ in min..max {
        let next = step(Some(&cur), true)?;
        if next == cur {
            break;
        }
        high.push(store.intern(&next));
        cur = next;
        if fixed_bytes + store.bytes() > size_limit {
            return Err(too_big());
        }
    }
    // n = min - 1, …, 0: until the sequence repeats.
    let mut low = Vec::new();
    let mut low_prefix = min as usize;
    let mut seen: FxHashMap<u32, usize> = FxHashMap::default();
    for j in 0..min as usize {
        let next = step(Some(&cur), false)?;
        let k = store.intern(&next);
        if fixed_bytes + store.bytes() > size_limit {
            return Err(too_big());
        }
        if let Some(&j0) = seen.get(&k) {
            low_prefix = j0;
            break;
        }
        seen.insert(k, j);
        low.push(k);
        cur = next;
    }

    // A full layer has every base state but the dead row 0.
    let full = (0..store.layers.len() / words)
        .map(|k| {
            let layer = &store.layers[k * words..(k + 1) * words];
            (1..nb).all(|t| layer[t >> 6] >> (t & 63) & 1 == 1)
        })
        .collect();
    let mut class_bytes = vec![ByteSet::EMPTY; stride];
    for b in 0..=255u8 {
        class_bytes[classes[b as usize] as usize].insert(b);
    }
    let counter = Counter {
        min,
        max,
        width: width as u32,
        inc,
        words,
        layers: store.layers,
        high,
        low,
        low_prefix,
        full,
        class_bytes,
        reps,
    };
    if !counter.live(1, 0) {
        return Ok(Dfa::empty());
    }
    Ok(Dfa {
        classes,
        stride: stride as u32,
        trans,
        accept,
        live_bytes: Vec::new(),
        min_to_accept: Vec::new(),
        start: counter.width,
        counter: Some(Box::new(counter)),
    })
}

/// Distinct layers, interned.
struct LayerStore {
    words: usize,
    layers: Vec<u64>,
    index: FxHashMap<Vec<u64>, u32>,
}

impl LayerStore {
    fn intern(&mut self, layer: &[u64]) -> u32 {
        if let Some(&k) = self.index.get(layer) {
            return k;
        }
        let k = (self.layers.len() / self.words) as u32;
        self.layers.extend_from_slice(layer);
        self.index.insert(layer.to_vec(), k);
        k
    }

    fn bytes(&self) -> usize {
        self.layers.len() * 8 * 2
    }
}

/// Reverse adjacency (compressed rows): `(rev0, rev1)`, each `(row starts, sources)`, for
/// transitions that do not / do complete a character.
type Csr = (Vec<u32>, Vec<u32>);

fn reverse_edges(trans: &[u32], inc: &[u8], stride: usize, nb: usize) -> (Csr, Csr) {
    let mut starts = [vec![0u32; nb + 1], vec![0u32; nb + 1]];
    for s in 1..nb {
        for k in 0..stride {
            let t = trans[s * stride + k] as usize;
            if t != DEAD as usize {
                starts[inc[s * stride + k] as usize][t + 1] += 1;
            }
        }
    }
    for st in starts.iter_mut() {
        for i in 0..nb {
            st[i + 1] += st[i];
        }
    }
    let mut fill = starts.clone();
    let mut srcs = [
        vec![0u32; starts[0][nb] as usize],
        vec![0u32; starts[1][nb] as usize],
    ];
    for s in 1..nb {
        for k in 0..stride {
            let t = trans[s * stride + k] as usize;
            if t != DEAD as usize {
                let which = inc[s * stride + k] as usize;
                srcs[which][fill[which][t] as usize] = s as u32;
                fill[which][t] += 1;
            }
        }
    }
    let [s0, s1] = starts;
    let [r0, r1] = srcs;
    ((s0, r0), (s1, r1))
}

/// One layer: `closure₀(A ∪ pre₁(prev))` (see the module docs).
fn layer(
    prev: Option<&[u64]>,
    accepting: bool,
    accept: &[bool],
    rev0: &Csr,
    rev1: &Csr,
    words: usize,
) -> Vec<u64> {
    let mut out = vec![0u64; words];
    let mut queue: Vec<u32> = Vec::new();
    let add = |s: u32, out: &mut Vec<u64>, queue: &mut Vec<u32>| {
        let (w, bit) = (s as usize >> 6, 1u64 << (s & 63));
        if out[w] & bit == 0 {
            out[w] |= bit;
            queue.push(s);
        }
    };
    if accepting {
        for (s, &a) in accept.iter().enumerate().skip(1) {
            if a {
                add(s as u32, &mut out, &mut queue);
            }
        }
    }
    if let Some(prev) = prev {
        for (w, &bits) in prev.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let t = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                for &s in &rev1.1[rev1.0[t] as usize..rev1.0[t + 1] as usize] {
                    add(s, &mut out, &mut queue);
                }
            }
        }
    }
    while let Some(t) = queue.pop() {
        let t = t as usize;
        for &s in &rev0.1[rev0.0[t] as usize..rev0.0[t + 1] as usize] {
            add(s, &mut out, &mut queue);
        }
    }
    out
}

/// Disk-cache codec of the counter layer; decoding checks what [`Counter`]'s lookups index by
/// (table sizes against the base automaton's, layer indices in range, a period where one is used).
impl Counter {
    pub(super) fn encode(&self, w: &mut crate::persist::Writer) {
        w.u32(self.min);
        w.u32(self.max);
        w.u32(self.width);
        w.bytes(&self.inc);
        w.usize(self.words);
        w.u64s(&self.layers);
        w.u32s(&self.high);
        w.u32s(&self.low);
        w.usize(self.low_prefix);
        w.bools(&self.full);
        super::persist::encode_byte_sets(w, &self.class_bytes);
        w.bytes(&self.reps);
    }

    /// Decodes the counter of a base automaton with `states` states and `stride` classes.
    pub(super) fn decode(
        r: &mut crate::persist::Reader<'_>,
        states: usize,
        stride: usize,
    ) -> Result<Counter, crate::persist::DecodeError> {
        use crate::persist::ensure;
        let min = r.u32()?;
        let max = r.u32()?;
        let width = r.u32()?;
        ensure(
            min <= max && max < u32::MAX && width == max + 1,
            "counter bounds",
        )?;
        ensure(
            states
                .checked_mul(width as usize)
                .is_some_and(|n| n <= u32::MAX as usize + 1),
            "counted state ids beyond 32 bits",
        )?;
        let inc = r.bytes()?;
        ensure(
            inc.len() == states * stride && inc.iter().all(|&i| i <= 1),
            "character increments",
        )?;
        let words = r.usize()?;
        ensure(words == states.div_ceil(64), "layer width")?;
        let layers = r.u64s()?;
        let high = r.u32s()?;
        let low = r.u32s()?;
        let low_prefix = r.usize()?;
        let full = r.bools()?;
        let distinct = full.len();
        ensure(
            distinct >= 1 && layers.len() == distinct * words,
            "layer table size",
        )?;
        ensure(
            !high.is_empty() && high.iter().chain(&low).all(|&k| (k as usize) < distinct),
            "layer indices",
        )?;
        ensure(
            low_prefix <= low.len() && (low.len() >= min as usize || low.len() > low_prefix),
            "low layers without a period",
        )?;
        let class_bytes = super::persist::decode_byte_sets(r)?;
        let reps = r.bytes()?;
        ensure(
            class_bytes.len() == stride && reps.len() == stride,
            "class tables of the counter",
        )?;
        Ok(Counter {
            min,
            max,
            width,
            inc,
            words,
            layers,
            high,
            low,
            low_prefix,
            full,
            class_bytes,
            reps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CharCount, CountForm, Dfa, DEAD};

    const LIMIT: usize = 64 << 20;

    fn both(pattern: &str, count: CharCount, min: u32, max: u32) -> (Dfa, Dfa) {
        let e = Dfa::from_regex(pattern, LIMIT).unwrap();
        let table = Dfa::count_chars_as(&e, count, min, max, LIMIT, CountForm::Table).unwrap();
        let counted = Dfa::count_chars_as(&e, count, min, max, LIMIT, CountForm::Counted).unwrap();
        (table, counted)
    }

    /// Walks every string over `alphabet` up to `depth` bytes in both automata at once: the same
    /// liveness, acceptance and live bytes everywhere. Returns how many strings were accepted.
    fn same(a: &Dfa, b: &Dfa, alphabet: &[u8], depth: usize, what: &str) -> usize {
        #[allow(clippy::too_many_arguments)]
        fn go(
            a: &Dfa,
            b: &Dfa,
            sa: u32,
            sb: u32,
            alphabet: &[u8],
            depth: usize,
            path: &mut Vec<u8>,
            what: &str,
        ) -> usize {
            assert_eq!(sa == DEAD, sb == DEAD, "{what}: liveness after {path:?}");
            if sa == DEAD {
                return 0;
            }
            assert_eq!(
                a.is_accept(sa),
                b.is_accept(sb),
                "{what}: accept after {path:?}"
            );
            assert_eq!(
                a.live_bytes(sa),
                b.live_bytes(sb),
                "{what}: live after {path:?}"
            );
            assert_eq!(a.can_continue(sa), b.can_continue(sb), "{what}: {path:?}");
            let mut n = usize::from(a.is_accept(sa));
            if depth == 0 {
                return n;
            }
            for &c in alphabet {
                path.push(c);
                n += go(
                    a,
                    b,
                    a.next(sa, c),
                    b.next(sb, c),
                    alphabet,
                    depth - 1,
                    path,
                    what,
                );
                path.pop();
            }
            n
        }
        assert_eq!(a.matches_empty(), b.matches_empty(), "{what}");
        assert_eq!(a.matches_nonempty(), b.matches_nonempty(), "{what}");
        go(
            a,
            b,
            a.start(),
            b.start(),
            alphabet,
            depth,
            &mut Vec::new(),
            what,
        )
    }

    #[test]
    fn counted_equals_table_on_every_short_string() {
        let patterns = [
            "(?:ab)*",
            "(?:abc)*a?",
            "a*b?a*",
            "(?:a|bc)*",
            "(?:aa|b)+c",
            "[ab]{2,5}",
            "(?:a{3})*|(?:b{5})*",
            "(?:ab|ba)*(?:c|)",
        ];
        let mut accepted = 0;
        for p in patterns {
            for (min, max) in [
                (0, 0),
                (0, 3),
                (1, 1),
                (2, 4),
                (3, 3),
                (4, 7),
                (5, 9),
                (0, 40),
            ] {
                let (t, c) = both(p, CharCount::Utf8, min, max);
                assert!(c.is_counted() || c.start() == DEAD);
                accepted += same(&t, &c, b"abcd", 10, &format!("{p} {min}..={max}"));
            }
        }
        assert!(accepted > 500, "{accepted}");
    }

    #[test]
    fn counted_json_bodies_equal_tables() {
        let alphabet: Vec<u8> = b"\\uD8C0an\"".to_vec();
        let patterns = [
            r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9A-Fa-f]{4})*"#,
            r#"(?:[a\u00e9]|\\u[dD][0-9a-fA-F]{3}|\\n)*"#,
        ];
        for p in patterns {
            for (min, max) in [(0, 1), (1, 2), (2, 3), (3, 3)] {
                let (t, c) = both(p, CharCount::JsonBody, min, max);
                same(&t, &c, &alphabet, 8, &format!("{p} {min}..={max}"));
            }
        }
    }

    #[test]
    fn periodic_counts_below_min() {
        // Lengths from the start are multiples of 3 (plus 1 with the final `a`): the layers below
        // `min` cycle with period 3.
        let (t, c) = both("(?:abc)*a?", CharCount::Utf8, 300, 302);
        let abc = "abc".repeat(100);
        for s in [
            abc.clone(),
            format!("{abc}a"),
            format!("{abc}ab"),
            "abc".repeat(99),
        ] {
            assert_eq!(
                t.matches(s.as_bytes()),
                c.matches(s.as_bytes()),
                "{}",
                s.len()
            );
        }
        assert!(c.matches(abc.as_bytes()) && c.matches(format!("{abc}a").as_bytes()));
        assert!(!c.matches(format!("{abc}ab").as_bytes()));
        // Only multiples of 3 in 301..=301: nothing but `(abc)^100 a`.
        let (_, c) = both("(?:abc)*", CharCount::Utf8, 301, 302);
        assert_eq!(c.start(), DEAD);
    }

    #[test]
    fn counted_size_does_not_grow_with_the_bound() {
        let e = Dfa::from_regex("[a-z]+(?:@[a-z]+)?", LIMIT).unwrap();
        let small =
            Dfa::count_chars_as(&e, CharCount::Utf8, 2, 1000, LIMIT, CountForm::Counted).unwrap();
        let large = Dfa::count_chars_as(&e, CharCount::Utf8, 2, 1 << 20, LIMIT, CountForm::Counted)
            .unwrap();
        assert!(large.memory_usage() <= small.memory_usage() * 2);
        assert!(large.memory_usage() < 64 << 10, "{}", large.memory_usage());
        let long = "a".repeat(1 << 20);
        assert!(large.matches(long.as_bytes()));
        assert!(!large.matches(format!("{long}a").as_bytes()));
        assert!(!small.matches(b"a"));
        // The automatic choice counts when the table would be large.
        let auto = Dfa::count_chars(&e, CharCount::Utf8, 2, 1 << 20, 32 << 20).unwrap();
        assert!(auto.is_counted());
        let auto = Dfa::count_chars(&e, CharCount::Utf8, 2, 10, 32 << 20).unwrap();
        assert!(!auto.is_counted());
    }

    #[test]
    fn ids_that_do_not_fit_are_a_size_error() {
        let e = Dfa::from_regex("(?:[a-z]{1,40}\\.){1,200}", LIMIT).unwrap();
        let r = Dfa::count_chars_as(
            &e,
            CharCount::Utf8,
            0,
            u32::MAX - 1,
            LIMIT,
            CountForm::Counted,
        );
        assert!(
            matches!(r, Err(super::super::DfaError::TooBig { .. })),
            "{r:?}"
        );
    }
}
