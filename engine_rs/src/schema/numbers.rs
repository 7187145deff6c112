//! Integers and numbers between integer bounds → the regex the Python translator prints for them.
//!
//! A port of the parts of `structout/schema/_numbers.py` (`interval_regex`: for integers written
//! as integer literals, and for any number with its exponent forms; `int_range`,
//! `_same_len_range`, `plain_positive`, `exp_positive`, `_exponent_range`, the `_digits_*`
//! helpers), `_regex.py` (the simplifying constructors `cat`, `alt`, `rep`) and `_json_text.py`
//! (`to_rust`) that a value with integer-valued bounds goes through, step for step, so that the
//! printed regex is byte for byte the Python translator's (`tests/test_schema_fast_path.py`
//! compares the two on random bounds). The bounds are integers; the decimals met on the way (a
//! bound over a power of ten, the mantissa of an exponent form) are [`Dec`]s, exact.
//! Also the translator's size estimate (`regex_rules.metrics`): a regex over its budgets is
//! split into rules there, which the fast path declines.

use std::rc::Rc;

/// A regex AST node (the Python translator's tuples).
#[derive(Debug, PartialEq, Eq)]
enum Rx {
    Eps,
    None,
    /// Code points: sorted, disjoint, non-touching inclusive ranges (never empty).
    Set(Vec<(u32, u32)>),
    Cat(Vec<Node>),
    Alt(Vec<Node>),
    Rep(Node, u64, Option<u64>),
}

type Node = Rc<Rx>;

fn eps() -> Node {
    Rc::new(Rx::Eps)
}

fn none() -> Node {
    Rc::new(Rx::None)
}

fn set(ranges: Vec<(u32, u32)>) -> Node {
    if ranges.is_empty() {
        none()
    } else {
        Rc::new(Rx::Set(ranges))
    }
}

fn ch(c: u8) -> Node {
    set(vec![(u32::from(c), u32::from(c))])
}

/// `rx.lit`: one set per character (a single character is the set itself).
fn lit(text: &str) -> Node {
    match text.len() {
        0 => eps(),
        1 => ch(text.as_bytes()[0]),
        _ => Rc::new(Rx::Cat(text.bytes().map(ch).collect())),
    }
}

fn digit() -> Node {
    set(vec![(0x30, 0x39)])
}

fn digit_set(a: u32, b: u32) -> Node {
    if a <= b {
        set(vec![(0x30 + a, 0x30 + b)])
    } else {
        none()
    }
}

/// `rx.cat`: drops empty strings, flattens, nothing for the empty language.
fn cat(items: Vec<Node>) -> Node {
    let mut out = Vec::new();
    for it in items {
        match &*it {
            Rx::None => return none(),
            Rx::Eps => {}
            Rx::Cat(xs) => out.extend(xs.iter().cloned()),
            _ => out.push(it),
        }
    }
    match out.len() {
        0 => eps(),
        1 => out.pop().expect("one item"),
        _ => Rc::new(Rx::Cat(out)),
    }
}

/// The union of character sets (`cs.make`: sorted, merged when touching).
fn union(sets: &[&Vec<(u32, u32)>]) -> Vec<(u32, u32)> {
    if sets.len() == 1 {
        return sets[0].clone();
    }
    let mut all: Vec<(u32, u32)> = sets.iter().flat_map(|s| s.iter().copied()).collect();
    all.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (lo, hi) in all {
        match out.last_mut() {
            Some(last) if lo <= last.1 + 1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// `rx.alt`: flattens one level, unites the character sets (first), turns `x?` and the empty
/// string into an optional whole. (The Python constructor also drops an alternative that is the
/// very same object twice: the nodes built here never are.)
fn alt(items: Vec<Node>) -> Node {
    let mut out: Vec<Node> = Vec::new();
    let mut sets: Vec<Node> = Vec::new();
    let mut has_eps = false;
    for it in items {
        if matches!(*it, Rx::None) {
            continue;
        }
        let parts = match &*it {
            Rx::Alt(xs) => xs.clone(),
            _ => vec![it.clone()],
        };
        for mut p in parts {
            if matches!(*p, Rx::Eps) {
                has_eps = true;
                continue;
            }
            if let Rx::Rep(inner, 0, Some(1)) = &*p {
                has_eps = true;
                p = inner.clone();
            }
            if matches!(*p, Rx::Set(_)) {
                sets.push(p);
                continue;
            }
            out.push(p);
        }
    }
    if !sets.is_empty() {
        let refs: Vec<&Vec<(u32, u32)>> = sets
            .iter()
            .map(|s| match &**s {
                Rx::Set(r) => r,
                _ => unreachable!("only sets"),
            })
            .collect();
        out.insert(0, set(union(&refs)));
    }
    if out.is_empty() {
        return if has_eps { eps() } else { none() };
    }
    let body = if out.len() == 1 {
        out.pop().expect("one item")
    } else {
        Rc::new(Rx::Alt(out))
    };
    if has_eps {
        rep(body, 0, Some(1))
    } else {
        body
    }
}

/// `rx.rep`.
fn rep(node: Node, lo: u64, hi: Option<u64>) -> Node {
    if hi.is_some_and(|h| h < lo) {
        return none();
    }
    if matches!(*node, Rx::None) {
        return if lo == 0 { eps() } else { none() };
    }
    if matches!(*node, Rx::Eps) || hi == Some(0) {
        return eps();
    }
    if lo == 1 && hi == Some(1) {
        return node;
    }
    if let Rx::Rep(inner, a, b) = &*node {
        if let Some((l, h)) = merge_counts(*a, *b, lo, hi) {
            return rep(inner.clone(), l, h);
        }
    }
    Rc::new(Rx::Rep(node, lo, hi))
}

/// `rx._merge_counts`: `(x{a,b}){c,d}` as `x{lo,hi}` when the counts form one interval
/// (`b >= a`). Products saturate: a count that large is past every budget of its users.
pub(super) fn merge_counts(
    a: u64,
    b: Option<u64>,
    c: u64,
    d: Option<u64>,
) -> Option<(u64, Option<u64>)> {
    if b == Some(a) {
        if a == 1 {
            return Some((c, d));
        }
        if d == Some(c) {
            let n = a.saturating_mul(c);
            return Some((n, Some(n)));
        }
        return None;
    }
    let n0 = c.max(1);
    if d.is_some_and(|d| d < n0) {
        return Some((0, Some(0)));
    }
    if c == 0 && a > 1 {
        return None;
    }
    if let Some(b) = b {
        if n0.saturating_mul(b - a) < a.saturating_sub(1) && d.is_none_or(|d| d > n0) {
            return None;
        }
    }
    Some((
        c.saturating_mul(a),
        d.zip(b).map(|(d, b)| d.saturating_mul(b)),
    ))
}

/// `nm.int_range`: numerals without leading zeros of the values in `[lo, hi]` (`lo >= 0`).
fn int_range(mut lo: u128, hi: Option<u128>) -> Node {
    if hi.is_some_and(|h| h < lo) {
        return none();
    }
    let mut parts = Vec::new();
    if lo == 0 {
        parts.push(lit("0"));
        lo = 1;
        if hi.is_some_and(|h| h < 1) {
            return alt(parts);
        }
    }
    let mut nd = lo.to_string().len() as u32;
    loop {
        let top = 10u128.pow(nd) - 1;
        if hi.is_some_and(|h| h < 10u128.pow(nd - 1)) {
            break;
        }
        let a = lo.max(10u128.pow(nd - 1));
        let b = hi.map_or(top, |h| h.min(top));
        if a <= b {
            parts.push(same_len_range(&a.to_string(), &b.to_string()));
        }
        if hi.is_some_and(|h| h <= top) {
            break;
        }
        if hi.is_none() {
            parts.push(cat(vec![
                digit_set(1, 9),
                rep(digit(), u64::from(nd), None),
            ]));
            break;
        }
        nd += 1;
    }
    alt(parts)
}

/// `nm._same_len_range`: numerals of `a.len()` digits from `a` to `b`.
fn same_len_range(a: &str, b: &str) -> Node {
    if a.is_empty() {
        return eps();
    }
    let (a0, b0) = (a.as_bytes()[0], b.as_bytes()[0]);
    if a0 == b0 {
        return cat(vec![lit(&a[..1]), same_len_range(&a[1..], &b[1..])]);
    }
    let rest = a.len() - 1;
    let mut parts = Vec::new();
    let mut first = u32::from(a0 - b'0');
    if a[1..].bytes().any(|c| c != b'0') {
        parts.push(cat(vec![
            lit(&a[..1]),
            same_len_range(&a[1..], &"9".repeat(rest)),
        ]));
        first += 1;
    }
    let mut last = u32::from(b0 - b'0');
    let mut tail = None;
    if b[1..].bytes().any(|c| c != b'9') {
        tail = Some(cat(vec![
            lit(&b[..1]),
            same_len_range(&"0".repeat(rest), &b[1..]),
        ]));
        last -= 1;
    }
    if first <= last {
        let r = rest as u64;
        parts.push(cat(vec![digit_set(first, last), rep(digit(), r, Some(r))]));
    }
    parts.extend(tail);
    alt(parts)
}

/// `nm.plain_positive` for integer-valued bounds and integers written as integer literals:
/// the numerals of the integers in the interval from `a >= 0`.
fn plain_positive(a: u128, a_incl: bool, b: Option<u128>, b_incl: bool) -> Node {
    let lo = if a_incl { a } else { a + 1 };
    let hi = match b {
        None => None,
        Some(b) if b_incl => Some(b),
        Some(0) => return none(), // (below any lower bound: no value)
        Some(b) => Some(b - 1),
    };
    int_range(lo, hi)
}

/// A bound: its value and whether it is included.
pub(super) type Bound = Option<(i64, bool)>;

/// A non-negative finite decimal: its integer part and its fraction digits, without trailing
/// zeros (`_dec_parts`); ordered as the values are (the digits compare as strings).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Dec {
    ip: u128,
    frac: String,
}

impl Dec {
    fn int(ip: u128) -> Dec {
        Dec {
            ip,
            frac: String::new(),
        }
    }

    /// `v / 10^e` for `10^e <= v < 10^(e+1)` (a value in [1, 10)).
    fn scaled(v: u128) -> Dec {
        let digits = v.to_string();
        Dec {
            ip: u128::from(digits.as_bytes()[0] - b'0'),
            frac: digits[1..].trim_end_matches('0').to_owned(),
        }
    }
}

fn digits0() -> Node {
    rep(digit(), 0, None)
}

fn digits1() -> Node {
    rep(digit(), 1, None)
}

/// `0*` (`rx.rep(rx.lit("0"), 0, None)`) and `0+`.
fn zeros(lo: u64) -> Node {
    rep(lit("0"), lo, None)
}

/// `nm.FRAC_OPT`: `(\.[0-9]+)?`.
fn frac_opt() -> Node {
    rep(cat(vec![lit("."), digits1()]), 0, Some(1))
}

/// Some digits of which one is not zero: `[0-9]*[1-9][0-9]*`.
fn nonzero_digits() -> Node {
    cat(vec![digits0(), digit_set(1, 9), digits0()])
}

/// `nm._digits_ge`: non-empty digit strings `g` with 0.g >= 0.d (> if strict).
fn digits_ge(d: &str, strict: bool) -> Node {
    if d.is_empty() {
        return if strict { nonzero_digits() } else { digits1() };
    }
    let d0 = u32::from(d.as_bytes()[0] - b'0');
    alt(vec![
        cat(vec![digit_set(d0 + 1, 9), digits0()]),
        first_digit_ge(d, strict),
    ])
}

/// The digit strings `g` that start with `d`'s first digit and have 0.g >= 0.d (> if strict).
fn first_digit_ge(d: &str, strict: bool) -> Node {
    let rest = match (d.len(), strict) {
        (1, true) => nonzero_digits(),
        (1, false) => digits0(),
        _ => digits_ge(&d[1..], strict),
    };
    cat(vec![lit(&d[..1]), rest])
}

/// The digit strings `g` that start with `d`'s first digit and have 0.g <= 0.d (< if strict).
fn first_digit_le(d: &str, strict: bool) -> Node {
    let rest = match (d.len(), strict) {
        (1, true) => return none(),
        (1, false) => zeros(0),
        _ => rep(digits_le(&d[1..], strict), 0, Some(1)),
    };
    cat(vec![lit(&d[..1]), rest])
}

/// `nm._digits_le`: non-empty digit strings `g` with 0.g <= 0.d (< if strict).
fn digits_le(d: &str, strict: bool) -> Node {
    if d.is_empty() {
        return if strict { none() } else { zeros(1) };
    }
    let d0 = u32::from(d.as_bytes()[0] - b'0');
    let below = d0.checked_sub(1).map_or_else(none, |t| digit_set(0, t));
    alt(vec![cat(vec![below, digits0()]), first_digit_le(d, strict)])
}

/// `nm._digits_between`: non-empty digit strings `g` with 0.a <(=) 0.g <(=) 0.b.
fn digits_between(a: &str, a_strict: bool, b: &str, b_strict: bool) -> Node {
    if a.is_empty() {
        if !a_strict {
            return digits_le(b, b_strict);
        }
        return and_nonzero(b, b_strict);
    }
    let a0 = u32::from(a.as_bytes()[0] - b'0');
    let b0 = b.bytes().next().map_or(0, |c| u32::from(c - b'0'));
    if !b.is_empty() && a0 == b0 {
        return cat(vec![
            lit(&a[..1]),
            rest_between(&a[1..], a_strict, &b[1..], b_strict),
        ]);
    }
    let mut parts = vec![first_digit_ge(a, a_strict)];
    let between = b0
        .checked_sub(1)
        .map_or_else(none, |t| digit_set(a0 + 1, t));
    parts.push(cat(vec![between, digits0()]));
    if !b.is_empty() {
        parts.push(first_digit_le(b, b_strict));
    }
    alt(parts)
}

/// `nm._rest_between`: possibly empty digit strings `r` with 0.a <(=) 0.r <(=) 0.b.
fn rest_between(a: &str, a_strict: bool, b: &str, b_strict: bool) -> Node {
    let mut empty_ok = a.is_empty() && !a_strict;
    if b.is_empty() && b_strict {
        empty_ok = false;
    }
    let nonempty = if b.is_empty() {
        if a.is_empty() && !a_strict && !b_strict {
            zeros(1)
        } else {
            none()
        }
    } else {
        digits_between(a, a_strict, b, b_strict)
    };
    if empty_ok {
        alt(vec![eps(), nonempty])
    } else {
        nonempty
    }
}

/// `nm._and_nonzero`: non-empty `g` with 0 < 0.g <(=) 0.b.
fn and_nonzero(b: &str, strict: bool) -> Node {
    if b.is_empty() {
        return none();
    }
    let b0 = u32::from(b.as_bytes()[0] - b'0');
    let mut parts = Vec::new();
    if b0 > 0 {
        parts.push(cat(vec![lit("0"), nonzero_digits()]));
    }
    if b0 > 1 {
        parts.push(cat(vec![digit_set(1, b0 - 1), digits0()]));
    }
    if b0 >= 1 {
        parts.push(first_digit_le(b, strict));
    } else {
        parts.push(cat(vec![lit("0"), and_nonzero(&b[1..], strict)]));
    }
    alt(parts)
}

/// `nm._frac_suffix`: `''` (when `empty_ok`) or `.` and digits of `node`.
fn frac_suffix(node: Node, empty_ok: bool) -> Node {
    let dotted = if matches!(*node, Rx::None) {
        none()
    } else {
        cat(vec![lit("."), node])
    };
    if empty_ok {
        alt(vec![eps(), dotted])
    } else {
        dotted
    }
}

/// `nm.plain_positive` (not only integers): plain numerals (no sign, no exponent) of the
/// values in the interval from `a >= 0`.
fn plain_positive_dec(a: &Dec, a_incl: bool, b: Option<&Dec>, b_incl: bool) -> Node {
    let point = |v: u128| int_range(v, Some(v));
    let empty_ok = a.frac.is_empty() && a_incl;
    if let Some(b) = b.filter(|b| b.ip == a.ip) {
        if a.frac == b.frac && !(a_incl && b_incl) {
            return none();
        }
        let frac = digits_between(&a.frac, !a_incl, &b.frac, !b_incl);
        return alt(vec![cat(vec![point(a.ip), frac_suffix(frac, empty_ok)])]);
    }
    let mut parts = vec![cat(vec![
        point(a.ip),
        frac_suffix(digits_ge(&a.frac, !a_incl), empty_ok),
    ])];
    let mid_hi = b.map(|b| b.ip - 1);
    if mid_hi.is_none_or(|m| m > a.ip) {
        parts.push(cat(vec![int_range(a.ip + 1, mid_hi), frac_opt()]));
    }
    if let Some(b) = b {
        if b.frac.is_empty() {
            if b_incl {
                let point_zeros = rep(cat(vec![lit("."), zeros(1)]), 0, Some(1));
                parts.push(cat(vec![point(b.ip), point_zeros]));
            }
        } else {
            let frac = frac_suffix(digits_le(&b.frac, !b_incl), true);
            parts.push(cat(vec![point(b.ip), frac]));
        }
    }
    alt(parts)
}

/// `nm._exponent_range`: exponent suffixes `[eE][+-]?digits` of a value in `[lo, hi]`.
fn exponent_range(lo: Option<i64>, hi: Option<i64>) -> Node {
    let mut parts = Vec::new();
    let nlo = lo.map_or(0, |l| l.max(0));
    if hi.is_none_or(|h| h >= nlo) {
        let body = int_range(nlo as u128, hi.map(|h| h as u128));
        let nonneg = cat(vec![zeros(0), body]);
        parts.push(cat(vec![rep(lit("+"), 0, Some(1)), nonneg]));
        if nlo == 0 {
            parts.push(cat(vec![lit("-"), zeros(1)]));
        }
    }
    if lo.is_none_or(|l| l < 0) {
        let mlo = match hi {
            Some(h) if h < -1 => -h,
            _ => 1,
        };
        let mhi = lo.map(|l| -l);
        if mhi.is_none_or(|m| m >= mlo) {
            let magnitude = int_range(mlo as u128, mhi.map(|m| m as u128));
            parts.push(cat(vec![lit("-"), zeros(0), magnitude]));
        }
    }
    if parts.is_empty() {
        return none();
    }
    cat(vec![set(vec![(0x45, 0x45), (0x65, 0x65)]), alt(parts)])
}

/// `nm._floor_log10` of a positive integer.
fn floor_log10(v: u128) -> i64 {
    v.to_string().len() as i64 - 1
}

/// `nm.exp_positive` for integer bounds: exponent-form numerals `m e x` (m in [1, 10)) of the
/// values in the interval from `a >= 0`.
fn exp_positive(a: u128, a_incl: bool, b: Option<u128>, b_incl: bool) -> Node {
    let mut parts = Vec::new();
    let e_lo = (a != 0).then(|| {
        let ea = floor_log10(a);
        if a != 10u128.pow(ea as u32) || !a_incl {
            ea + 1
        } else {
            ea
        }
    });
    let e_hi = b.map(|b| floor_log10(b) - 1);
    let whole = match (e_lo, e_hi) {
        (Some(l), Some(h)) => l <= h,
        _ => true,
    };
    if whole {
        let mant_any = cat(vec![digit_set(1, 9), frac_opt()]);
        parts.push(cat(vec![mant_any, exponent_range(e_lo, e_hi)]));
    }
    // The boundary decades, in order (a's before b's; one when the same).
    let mut edges = Vec::new();
    if a != 0 && e_lo.is_none_or(|l| floor_log10(a) < l) {
        edges.push(floor_log10(a));
    }
    if let Some(b) = b {
        if e_hi.is_none_or(|h| floor_log10(b) > h) && !edges.contains(&floor_log10(b)) {
            edges.push(floor_log10(b));
        }
    }
    edges.sort_unstable();
    for e in edges {
        // (the interval over 10^e, clamped to the mantissas' [1, 10))
        let (lo, lo_i) = if a != 0 && floor_log10(a) == e {
            (Dec::scaled(a), a_incl)
        } else {
            (Dec::int(1), true)
        };
        let (hi, hi_i) = match b {
            Some(b) if floor_log10(b) == e => (Dec::scaled(b), b_incl),
            _ => (Dec::int(10), false),
        };
        if lo > hi || (lo == hi && !(lo_i && hi_i)) {
            continue;
        }
        let mant = plain_positive_dec(&lo, lo_i, Some(&hi), hi_i);
        parts.push(cat(vec![mant, exponent_range(Some(e), Some(e))]));
    }
    alt(parts)
}

/// `nm.interval_regex(lo, lo_incl, hi, hi_incl, ...)`: of integers written as integer literals
/// (`exp_forms=False, integer=True, lexical=True`), or of any number, exponent forms included
/// (the defaults).
fn interval_regex(lo: Bound, hi: Bound, integer: bool) -> Node {
    // (the numerals of the values in the interval from `a >= 0`)
    let positive = |a: u128, ai: bool, b: Option<u128>, bi: bool| -> Vec<Node> {
        if integer {
            return vec![plain_positive(a, ai, b, bi)];
        }
        let b_dec = b.map(Dec::int);
        vec![
            plain_positive_dec(&Dec::int(a), ai, b_dec.as_ref(), bi),
            exp_positive(a, ai, b, bi),
        ]
    };
    let mut parts = Vec::new();
    let zero_in = lo.is_none_or(|(l, li)| l < 0 || (l == 0 && li))
        && hi.is_none_or(|(h, hi_i)| h > 0 || (h == 0 && hi_i));
    if zero_in {
        let frac = if integer {
            eps()
        } else {
            rep(cat(vec![lit("."), zeros(1)]), 0, Some(1))
        };
        parts.push(cat(vec![rep(lit("-"), 0, Some(1)), lit("0"), frac]));
    }
    if hi.is_none_or(|(h, _)| h > 0) {
        let (a, ai) = match lo {
            Some((l, li)) if l > 0 => (l as u128, li),
            _ => (0, false),
        };
        let (b, bi) = hi.map_or((None, false), |(h, hi_i)| (Some(h as u128), hi_i));
        parts.extend(positive(a, ai, b, bi));
    }
    if lo.is_none_or(|(l, _)| l < 0) {
        let (a, ai) = match hi {
            Some((h, hi_i)) if h < 0 => (h.unsigned_abs() as u128, hi_i),
            _ => (0, false),
        };
        let (b, bi) = lo.map_or((None, false), |(l, li)| {
            (Some(l.unsigned_abs() as u128), li)
        });
        parts.push(cat(vec![lit("-"), alt(positive(a, ai, b, bi))]));
    }
    alt(parts)
}

/// The tighter of two lower bounds (`n_and`'s merge: a larger value, or an equal one excluded).
pub(super) fn tighter_lo(a: Bound, b: Bound) -> Bound {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some((x, xi)), Some((y, yi))) => {
            if y > x || (y == x && !yi) {
                Some((y, yi))
            } else {
                Some((x, xi))
            }
        }
    }
}

/// The tighter of two upper bounds.
pub(super) fn tighter_hi(a: Bound, b: Bound) -> Bound {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some((x, xi)), Some((y, yi))) => {
            if y < x || (y == x && !yi) {
                Some((y, yi))
            } else {
                Some((x, xi))
            }
        }
    }
}

/// The printed regex of the integers between `lo` and `hi` (at least one bound), as the Python
/// translator writes it for one terminal; `None` when no integer is in between (the translator
/// then drops the value) or the regex is over the translator's budgets for one terminal.
pub(super) fn integer_regex(lo: Bound, hi: Bound) -> Option<String> {
    bounded_regex(lo, hi, true)
}

/// The printed regex of the numbers (any, not only integers) between `lo` and `hi`, as
/// [`integer_regex`] for integers.
pub(super) fn number_regex(lo: Bound, hi: Bound) -> Option<String> {
    bounded_regex(lo, hi, false)
}

fn bounded_regex(lo: Bound, hi: Bound, integer: bool) -> Option<String> {
    debug_assert!(lo.is_some() || hi.is_some());
    if let (Some((l, li)), Some((h, hi_i))) = (lo, hi) {
        if l > h || (l == h && !(li && hi_i)) {
            return None; // (`n_iv`: no value)
        }
    }
    let mut node = interval_regex(lo, hi, integer);
    if !integer {
        node = alt(vec![node]); // (`nm.realize` of one interval: `rx.alt` of it alone)
    }
    if matches!(*node, Rx::None) {
        return None;
    }
    let (states, depth) = metrics(&node);
    if states > STATE_BUDGET || depth > NEST_BUDGET {
        return None;
    }
    let mut out = String::new();
    print(&node, &mut out);
    Some(out)
}

/// `regex_rules.REGEX_STATE_BUDGET` and `REGEX_NEST_BUDGET`.
const STATE_BUDGET: u64 = 3000;
const NEST_BUDGET: u64 = 100;

/// `regex_rules.metrics`: (estimated DFA states, nesting), saturated past the budgets.
fn metrics(n: &Rx) -> (u64, u64) {
    let (states, depth) = match n {
        Rx::Set(r) => (
            if r.last().is_some_and(|l| l.1 < 0x80) {
                1
            } else {
                4
            },
            0,
        ),
        Rx::Cat(xs) | Rx::Alt(xs) => {
            let (mut states, mut depth) = (0u64, 0u64);
            for x in xs {
                let (s, d) = metrics(x);
                states = states.saturating_add(s);
                depth = depth.max(d);
                if states > STATE_BUDGET || depth >= NEST_BUDGET {
                    break;
                }
            }
            (states, depth + 1)
        }
        Rx::Rep(x, lo, hi) => {
            let k = hi.unwrap_or(lo + 1);
            let (s, d) = metrics(x);
            (s.saturating_mul(k.max(1)), 1 + d)
        }
        Rx::Eps | Rx::None => (1, 0),
    };
    if states > STATE_BUDGET || depth > NEST_BUDGET {
        (STATE_BUDGET + 1, NEST_BUDGET + 1)
    } else {
        (states, depth)
    }
}

/// `_json_text.to_rust`.
fn print(n: &Rx, out: &mut String) {
    match n {
        Rx::Eps => out.push_str("(?:)"),
        Rx::None => out.push_str("[^\\x00-\\U0010FFFF]"),
        Rx::Set(r) => set_text(r, out),
        Rx::Cat(xs) => {
            for x in xs {
                if matches!(**x, Rx::Alt(_)) {
                    out.push_str("(?:");
                    print(x, out);
                    out.push(')');
                } else {
                    print(x, out);
                }
            }
        }
        Rx::Alt(xs) => {
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                print(x, out);
            }
        }
        Rx::Rep(x, lo, hi) => {
            let group = matches!(**x, Rx::Cat(_) | Rx::Alt(_) | Rx::Rep(..) | Rx::Eps);
            if group {
                out.push_str("(?:");
            }
            print(x, out);
            if group {
                out.push(')');
            }
            out.push_str(&quant(*lo, *hi));
        }
    }
}

/// A quantifier as the translator prints it (`*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`), in regexes
/// and KBNF alike.
pub(super) fn quant(lo: u64, hi: Option<u64>) -> String {
    match (lo, hi) {
        (0, None) => "*".to_owned(),
        (1, None) => "+".to_owned(),
        (0, Some(1)) => "?".to_owned(),
        (lo, None) => format!("{{{lo},}}"),
        (lo, Some(hi)) if lo == hi => format!("{{{lo}}}"),
        (lo, Some(hi)) => format!("{{{lo},{hi}}}"),
    }
}

const MAX_CP: u32 = 0x10_FFFF;

/// `_json_text._set_text`.
fn set_text(s: &[(u32, u32)], out: &mut String) {
    if s.len() == 1 && s[0].0 == s[0].1 {
        out.push_str(&cp_text(s[0].0, false));
        return;
    }
    let mut comp = Vec::new();
    let mut prev = 0u32;
    for &(lo, hi) in s {
        if lo > prev {
            comp.push((prev, lo - 1));
        }
        prev = hi + 1;
    }
    if prev <= MAX_CP {
        comp.push((prev, MAX_CP));
    }
    let (neg, body) = if comp.len() < s.len() && !comp.is_empty() {
        (true, &comp[..])
    } else {
        (false, s)
    };
    out.push('[');
    if neg {
        out.push('^');
    }
    for &(lo, hi) in body {
        out.push_str(&cp_text(lo, true));
        if hi == lo + 1 {
            out.push_str(&cp_text(hi, true));
        } else if hi != lo {
            out.push('-');
            out.push_str(&cp_text(hi, true));
        }
    }
    out.push(']');
}

/// `_json_text._cp`.
fn cp_text(cp: u32, in_class: bool) -> String {
    match cp {
        0x22 => "\\x22".to_owned(),
        0x5C => "\\x5C".to_owned(),
        0x21..=0x7E => {
            let c = char::from(cp as u8);
            if "\\.+*?()|[]{}^$#&-~".contains(c) || (in_class && "[]^-&~".contains(c)) {
                format!("\\{c}")
            } else {
                c.to_string()
            }
        }
        0x20 => " ".to_owned(),
        0..=0xFF => format!("\\x{cp:02X}"),
        0x100..=0xFFFF => format!("\\u{cp:04X}"),
        _ => format!("\\U{cp:08X}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_the_python_translator() {
        assert_eq!(
            integer_regex(Some((0, true)), Some((100, true))).as_deref(),
            Some(r"[1-9]|\-?0|[1-9][0-9]|100")
        );
        assert_eq!(
            integer_regex(Some((-7, false)), Some((1234, true))).as_deref(),
            Some(
                r"[1-9]|\-?0|[1-9][0-9]|[1-9][0-9]{2}|1(?:[01][0-9]{2}|2(?:[0-2][0-9]|3[0-4]))|\-[1-6]"
            )
        );
        assert_eq!(integer_regex(Some((3, false)), Some((4, false))), None);
        assert_eq!(integer_regex(Some((5, true)), Some((4, true))), None);
    }
}
