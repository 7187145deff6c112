//! `pattern` → the string rule the Python translator prints, for anchored patterns of
//! characters JSON spells one way.
//!
//! The subset: `^…$` around a sequence of terms, each a printable ASCII character but `"`, `\`
//! and `/` (escaped or not), a class of them (`[…]`: characters, escapes, ranges; `\d`, `\w`),
//! `\d`, `\w` or a group `(…)`/`(?:…)` of such terms, optionally quantified (`*`, `+`, `?`,
//! `{n}`, `{n,}`, `{n,m}`, lazy or not). No alternation, no other anchors or assertions, no
//! `.`, negated classes or other escapes: those decline.
//!
//! Such a pattern's language is its body rebuilt by `_regex`'s simplifying constructors (the
//! anchors give its full-match language), and the Python translator prints it as `_json_text`
//! prints a string of self-spelled characters: `'"' json_len!(…) '"'` when one character
//! repetition is counted past 8 (`strings.counted_chars`), else one terminal of the quoted
//! regex (`plain_string_literals`), within its regex budgets.

use super::enums::set_text;
use super::numbers::{merge_counts, quant};

/// Longest pattern read (the Python translator's own limit is 16,384 characters).
const MAX_PATTERN: usize = 256;
/// Largest count of a quantifier read (products of nested ones stay far from overflow).
const MAX_COUNT: u64 = 1 << 20;
/// The Python translator's `SHORT_BOUND`: a longer counted repetition is `json_len!`.
const SHORT_BOUND: u64 = 8;
/// Most states and nesting of the printed regex (the Python translator's budgets for one
/// terminal are 3,000 and 100; kept below, so that the fast path never meets them).
const MAX_STATES: u64 = 2_000;
const MAX_DEPTH: usize = 64;

/// A regex over self-spelled characters, as `_regex`'s constructors build it.
#[derive(Clone, PartialEq, Eq, Debug)]
enum Rx {
    /// Characters, sorted and distinct (never empty).
    Set(Vec<u8>),
    /// At least two parts, none a `Cat` or `Eps`.
    Cat(Vec<Rx>),
    /// `x{lo,hi}` (`hi`: `None` for unbounded), not `{1}`, never of `Eps`.
    Rep(Box<Rx>, u64, Option<u64>),
    Eps,
}

/// `rx.cat`.
fn cat(items: Vec<Rx>) -> Rx {
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        match it {
            Rx::Eps => {}
            Rx::Cat(xs) => out.extend(xs),
            x => out.push(x),
        }
    }
    match out.len() {
        0 => Rx::Eps,
        1 => out.pop().unwrap_or(Rx::Eps),
        _ => Rx::Cat(out),
    }
}

/// `rx.rep` (`hi >= lo`: the parser declines the others).
fn rep(node: Rx, lo: u64, hi: Option<u64>) -> Rx {
    if node == Rx::Eps || hi == Some(0) {
        return Rx::Eps;
    }
    if lo == 1 && hi == Some(1) {
        return node;
    }
    if let Rx::Rep(inner, a, b) = &node {
        if let Some((lo, hi)) = merge_counts(*a, *b, lo, hi) {
            return rep((**inner).clone(), lo, hi);
        }
    }
    Rx::Rep(Box::new(node), lo, hi)
}

/// `rx.length_range`.
fn length_range(n: &Rx) -> (u64, Option<u64>) {
    match n {
        Rx::Eps => (0, Some(0)),
        Rx::Set(_) => (1, Some(1)),
        Rx::Cat(xs) => xs.iter().fold((0, Some(0)), |(lo, hi), x| {
            let (a, b): (u64, Option<u64>) = length_range(x);
            (
                lo.saturating_add(a),
                hi.zip(b).map(|(h, b)| h.saturating_add(b)),
            )
        }),
        Rx::Rep(x, lo, hi) => {
            let (a, b) = length_range(x);
            let top = match hi {
                None if b == Some(0) => Some(0),
                None => None,
                Some(hi) => b.map(|b| b.saturating_mul(*hi)),
            };
            (a.saturating_mul(*lo), top)
        }
    }
}

/// The pattern's rule alternative (see the module doc), or `None` outside the subset.
pub(super) fn pattern_rule(pattern: &str) -> Option<String> {
    if pattern.len() > MAX_PATTERN {
        return None;
    }
    let body = pattern.strip_prefix('^')?.strip_suffix('$')?;
    if body.ends_with('\\') {
        return None; // (an escaped `$`)
    }
    let mut p = Parser {
        s: body.as_bytes(),
        i: 0,
    };
    let node = p.sequence(0)?;
    if p.i != p.s.len() {
        return None;
    }
    if node == Rx::Eps {
        return None;
    }
    if let Some(text) = counted(&node) {
        return Some(text);
    }
    let (kind, text, states, depth) = print(&node);
    let (states, depth) = (
        states + 2,
        if kind == Kind::Cat { depth } else { depth + 1 },
    );
    if states > MAX_STATES || depth > MAX_DEPTH {
        return None;
    }
    Some(format!("#\"\\x22{text}\\x22\""))
}

/// `strings.counted_chars`: `p c{a,b} s` with `b` past [`SHORT_BOUND`] (the largest such, the
/// first of equals), `c` one character and `p`, `s` of fixed lengths, as
/// `'"' json_len!(#"p c* s", a + |p| + |s|, b + |p| + |s|) '"'`.
fn counted(node: &Rx) -> Option<String> {
    let items = match node {
        Rx::Cat(xs) => xs.as_slice(),
        x => std::slice::from_ref(x),
    };
    let mut best: Option<(usize, u64)> = None;
    for (i, x) in items.iter().enumerate() {
        if let Rx::Rep(inner, _, Some(hi)) = x {
            if *hi > SHORT_BOUND
                && length_range(inner) == (1, Some(1))
                && best.is_none_or(|(_, b)| *hi > b)
            {
                best = Some((i, *hi));
            }
        }
    }
    let (i, _) = best?;
    let mut fixed = 0;
    for (j, x) in items.iter().enumerate() {
        if j != i {
            let (lo, hi) = length_range(x);
            if hi != Some(lo) {
                return None;
            }
            fixed = lo.saturating_add(fixed);
        }
    }
    let Rx::Rep(inner, lo, Some(hi)) = &items[i] else {
        unreachable!("a counted repetition");
    };
    let (lo, hi) = (lo.saturating_add(fixed), hi.saturating_add(fixed));
    if hi > MAX_COUNT {
        return None; // (the translator's MAX_ENGINE_LENGTH)
    }
    let mut parts = items.to_vec();
    parts[i] = rep((**inner).clone(), 0, None);
    let (_, body, _, _) = print(&cat(parts));
    Some(format!("'\"' json_len!(#\"{body}\", {lo}, {hi}) '\"'"))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Set,
    Cat,
    Rep,
}

/// `_json_text._plain_walk` (and `_print`, which prints such a node alike): the kind, the
/// text, the states and the nesting depth.
fn print(n: &Rx) -> (Kind, String, u64, usize) {
    match n {
        Rx::Set(cs) => {
            let mut s = String::new();
            set_text(cs, &mut s);
            (Kind::Set, s, 1, 0)
        }
        Rx::Cat(xs) => {
            let (mut text, mut states, mut depth) = (String::new(), 0u64, 0);
            for x in xs {
                let (_, t, s, d) = print(x);
                text.push_str(&t);
                states = states.saturating_add(s);
                depth = depth.max(d);
            }
            (Kind::Cat, text, states, depth + 1)
        }
        Rx::Rep(x, lo, hi) => {
            let (kind, text, s, d) = print(x);
            let text = if kind == Kind::Set {
                text
            } else {
                format!("(?:{text})")
            };
            let k = hi.unwrap_or(lo + 1).max(1);
            (
                Kind::Rep,
                text + &quant(*lo, *hi),
                s.saturating_mul(k),
                d + 1,
            )
        }
        Rx::Eps => (Kind::Cat, String::new(), 0, 0),
    }
}

/// A character JSON spells one way (printable ASCII but `"`, `\` and `/`).
fn self_spelled(c: u8) -> bool {
    (b' '..=b'~').contains(&c) && !matches!(c, b'"' | b'\\' | b'/')
}

/// `\d` and `\w`.
const DIGIT: &[u8] = b"0123456789";
const WORD: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";

/// The characters an escape `\c` stands for, where the subset reads it (`_regex`'s
/// `class_escape`): `\d`, `\w`, escaped syntax and punctuation characters.
fn escape(c: u8, in_class: bool) -> Option<Vec<u8>> {
    match c {
        b'd' => Some(DIGIT.to_vec()),
        b'w' => Some(WORD.to_vec()),
        b'-' if in_class => Some(vec![c]),
        _ if b"^$\\.*+?()[]{}|/".contains(&c) || b"-,:=!<>'\"#&~%@`;_ ".contains(&c) => {
            self_spelled(c).then(|| vec![c])
        }
        _ => None,
    }
}

/// `_regex._Parser` on the subset: terms as it reads them, rebuilt with the constructors as
/// `search_variants` rebuilds the core.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self, k: usize) -> Option<u8> {
        self.s.get(self.i + k).copied()
    }

    /// Terms up to the end or a `)`.
    fn sequence(&mut self, depth: usize) -> Option<Rx> {
        if depth > 8 {
            return None;
        }
        let mut items = Vec::new();
        while let Some(c) = self.peek(0) {
            match c {
                b')' => break,
                b'|' | b'^' | b'$' => return None,
                _ => {
                    let atom = self.atom(depth)?;
                    items.push(self.quantified(atom)?);
                }
            }
        }
        Some(cat(items))
    }

    fn atom(&mut self, depth: usize) -> Option<Rx> {
        let c = self.peek(0)?;
        match c {
            b'(' => {
                self.i += 1;
                if self.peek(0) == Some(b'?') {
                    if self.peek(1) != Some(b':') {
                        return None; // (look-arounds, named groups)
                    }
                    self.i += 2;
                }
                let inner = self.sequence(depth + 1)?;
                if self.peek(0) != Some(b')') || inner == Rx::Eps {
                    return None;
                }
                self.i += 1;
                Some(inner)
            }
            b'[' => self.class(),
            b'\\' => {
                let e = self.peek(1)?;
                self.i += 2;
                escape(e, false).map(Rx::Set)
            }
            b'*' | b'+' | b'?' | b'.' => None,
            b'{' if self.braces() != Some(None) => None, // (nothing to repeat, or declined)
            _ => {
                self.i += 1;
                self_spelled(c).then(|| Rx::Set(vec![c]))
            }
        }
    }

    /// A class `[…]` of characters, escapes and ranges of single characters, not negated.
    fn class(&mut self) -> Option<Rx> {
        self.i += 1;
        if self.peek(0) == Some(b'^') {
            return None;
        }
        let mut set = Vec::new();
        loop {
            let c = self.peek(0)?;
            if c == b']' {
                self.i += 1;
                break;
            }
            let a = self.class_atom()?;
            if self.peek(0) == Some(b'-') && !matches!(self.peek(1), Some(b']') | None) {
                self.i += 1;
                let b = self.class_atom()?;
                let (&[a], &[b]) = (a.as_slice(), b.as_slice()) else {
                    return None; // (Annex B: `\d-x` is three items)
                };
                if a > b || !(a..=b).all(self_spelled) {
                    return None;
                }
                set.extend(a..=b);
            } else {
                set.extend(a);
            }
        }
        set.sort_unstable();
        set.dedup();
        (!set.is_empty()).then_some(Rx::Set(set))
    }

    fn class_atom(&mut self) -> Option<Vec<u8>> {
        let c = self.peek(0)?;
        self.i += 1;
        if c == b'\\' {
            let e = self.peek(0)?;
            self.i += 1;
            return escape(e, true);
        }
        self_spelled(c).then(|| vec![c])
    }

    /// An optional quantifier (and its lazy `?`) after `atom`.
    fn quantified(&mut self, atom: Rx) -> Option<Rx> {
        let (lo, hi) = match self.peek(0) {
            Some(b'*') => (0, None),
            Some(b'+') => (1, None),
            Some(b'?') => (0, Some(1)),
            Some(b'{') => match self.braces()? {
                None => return Some(atom),
                Some((lo, hi, end)) => {
                    self.i = end - 1; // (at the `}`)
                    (lo, hi)
                }
            },
            _ => return Some(atom),
        };
        self.i += 1;
        if self.peek(0) == Some(b'?') {
            self.i += 1;
        }
        if matches!(self.peek(0), Some(b'*' | b'+' | b'?'))
            || (self.peek(0) == Some(b'{') && self.braces() != Some(None))
        {
            return None; // (nothing to repeat)
        }
        Some(rep(atom, lo, hi))
    }

    /// `{n}`, `{n,}` or `{n,m}` at the cursor (`_regex._Parser._braces`): `Some(Some(…))` the
    /// counts and the index after `}`, `Some(None)` when not a quantifier (a literal `{`),
    /// `None` for counts the subset does not read (out of order, past [`MAX_COUNT`]).
    fn braces(&self) -> Option<Option<(u64, Option<u64>, usize)>> {
        let s = self.s;
        let digits = |start: usize| {
            let mut k = start;
            while k < s.len() && s[k].is_ascii_digit() {
                k += 1;
            }
            k
        };
        let count = |a: usize, b: usize| -> Option<u64> {
            let n: u64 = std::str::from_utf8(&s[a..b]).ok()?.parse().ok()?;
            (n <= MAX_COUNT).then_some(n)
        };
        let j = self.i + 1;
        let mut k = digits(j);
        if k == j {
            return Some(None);
        }
        let lo_end = k;
        let mut hi_digits = Some((j, lo_end));
        if s.get(k) == Some(&b',') {
            let m = k + 1;
            k = digits(m);
            hi_digits = (k > m).then_some((m, k));
        }
        if s.get(k) != Some(&b'}') {
            return Some(None);
        }
        let lo = count(j, lo_end)?;
        let hi = match hi_digits {
            Some((a, b)) => Some(count(a, b)?),
            None => None,
        };
        if hi.is_some_and(|h| h < lo) {
            return None;
        }
        Some(Some((lo, hi, k + 1)))
    }
}
