//! The reference recognizer shared by the integration tests and the fuzz targets
//! (`engine_rs/fuzz` includes this file by path): a small grammar AST that renders to KBNF text,
//! a tiny regex engine, and an independent recognizer over that AST. Standard library only.
//!
//! # Reference semantics
//!
//! For an input `w` of length `n` (at most 62 bytes), the reference computes for every expression
//! node `E` and start position `i` the set `ends(E, i) ⊆ {i..=n} ∪ {∞}`:
//! * `j ∈ ends(E, i)` iff `w[i..j] ∈ L(E)`;
//! * `∞ ∈ ends(E, i)` iff some `u ∈ L(E)` has `w[i..n]` as a *proper* prefix.
//!
//! Sets are 64-bit masks (bit `j` for position `j`, bit 63 for `∞`). The equations are monotone, so
//! they are solved as a least fixpoint, one start position at a time from `n` down to `0` (a set at
//! position `i` only depends on sets at positions `>= i`). This handles left recursion, nullable
//! cycles and mutual recursion without any grammar transformation. Then:
//! * `w` is complete iff `n ∈ ends(start, 0)`;
//! * `w` is a viable prefix iff it is complete or `∞ ∈ ends(start, 0)`.
//!
//! Terminal semantics: a literal is its bytes; a regex terminal (Unicode mode) matches whole UTF-8
//! scalar values, except its raw-byte atoms (`(?-u:\xHH)`), which match one byte each;
//! `except!(X, n)` is any valid UTF-8 string of at most `n` bytes in which no substring is in
//! `L(X)`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt::Write as _;

/// Result of decoding one UTF-8 scalar at the start of a byte slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A complete scalar and its encoded length.
    Char(char, usize),
    /// The slice ends inside a sequence that can still be completed.
    Partial,
    /// Not valid UTF-8 here.
    Invalid,
}

pub fn utf8_width(b: u8) -> usize {
    match b {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 0,
    }
}

pub fn decode(bytes: &[u8]) -> Decoded {
    let Some(&b0) = bytes.first() else {
        return Decoded::Partial;
    };
    let w = utf8_width(b0);
    if w == 0 {
        return Decoded::Invalid;
    }
    if bytes.len() < w {
        return match std::str::from_utf8(bytes) {
            Err(e) if e.error_len().is_none() => Decoded::Partial,
            _ => Decoded::Invalid,
        };
    }
    match std::str::from_utf8(&bytes[..w]) {
        Ok(s) => Decoded::Char(s.chars().next().unwrap(), w),
        Err(_) => Decoded::Invalid,
    }
}

/// Number of bytes still needed to complete `bytes` into valid UTF-8: `Some(0)` when already valid,
/// `Some(k)` when it ends with an incomplete but completable sequence, `None` when invalid.
pub fn utf8_completion(bytes: &[u8]) -> Option<usize> {
    match std::str::from_utf8(bytes) {
        Ok(_) => Some(0),
        Err(e) if e.error_len().is_none() => {
            let tail = &bytes[e.valid_up_to()..];
            Some(utf8_width(tail[0]) - tail.len())
        }
        Err(_) => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Regex AST, rendering and a Thompson-NFA matcher over UTF-8 scalars.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
pub enum Rx {
    Char(char),
    /// `[...]`: one of these scalars (never empty).
    Set(Vec<char>),
    /// `[^...]`: any scalar except these.
    NotSet(Vec<char>),
    /// `.`: any scalar except `\n`.
    Dot,
    /// `[a-z...]` over inclusive ranges (`true`: negated, `[^...]`; never empty).
    Class(Vec<(char, char)>, bool),
    /// `(?-u:\d)`: an ASCII digit.
    AsciiDigit,
    /// `(?-u:\xHH)`: one raw byte, possibly not UTF-8.
    Byte(u8),
    Seq(Vec<Rx>),
    Alt(Vec<Rx>),
    Star(Box<Rx>),
    Plus(Box<Rx>),
    Opt(Box<Rx>),
    /// `{m}` when `max == Some(m)`, `{m,}` when `None`, `{m,n}` otherwise.
    Rep(Box<Rx>, u32, Option<u32>),
}

fn rx_char(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' | '\\'
        | '-' | '"' => {
            out.push('\\');
            out.push(c);
        }
        _ => out.push(c),
    }
}

impl Rx {
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.render_into(&mut s, 0);
        s
    }

    /// `level`: 0 = alternation context, 1 = concatenation item, 2 = postfix operand.
    fn render_into(&self, out: &mut String, level: u8) {
        match self {
            Rx::Char(c) => rx_char(*c, out),
            Rx::Set(cs) | Rx::NotSet(cs) => {
                out.push('[');
                if matches!(self, Rx::NotSet(_)) {
                    out.push('^');
                }
                for c in cs {
                    rx_char(*c, out);
                }
                out.push(']');
            }
            Rx::Dot => out.push('.'),
            Rx::Class(ranges, negated) => {
                out.push('[');
                if *negated {
                    out.push('^');
                }
                for &(a, b) in ranges {
                    rx_char(a, out);
                    if b != a {
                        out.push('-');
                        rx_char(b, out);
                    }
                }
                out.push(']');
            }
            Rx::AsciiDigit => out.push_str("(?-u:\\d)"),
            Rx::Byte(b) => {
                let _ = write!(out, "(?-u:\\x{b:02X})");
            }
            Rx::Seq(items) => {
                let paren = level >= 2;
                if paren {
                    out.push_str("(?:");
                }
                for it in items {
                    it.render_into(out, 1);
                }
                if paren {
                    out.push(')');
                }
            }
            Rx::Alt(items) => {
                let paren = level >= 1;
                if paren {
                    out.push('(');
                }
                for (k, it) in items.iter().enumerate() {
                    if k > 0 {
                        out.push('|');
                    }
                    it.render_into(out, 0);
                }
                if paren {
                    out.push(')');
                }
            }
            Rx::Star(x) | Rx::Plus(x) | Rx::Opt(x) | Rx::Rep(x, _, _) => {
                let atomic = matches!(
                    **x,
                    Rx::Char(_)
                        | Rx::Set(_)
                        | Rx::NotSet(_)
                        | Rx::Dot
                        | Rx::Class(..)
                        | Rx::AsciiDigit
                        | Rx::Byte(_)
                );
                if atomic {
                    x.render_into(out, 2);
                } else {
                    out.push('(');
                    x.render_into(out, 0);
                    out.push(')');
                }
                match self {
                    Rx::Star(_) => push_postfix(out, Postfix::Star),
                    Rx::Plus(_) => push_postfix(out, Postfix::Plus),
                    Rx::Opt(_) => push_postfix(out, Postfix::Opt),
                    Rx::Rep(_, m, n) => push_postfix(out, Postfix::Rep(*m, *n)),
                    _ => unreachable!(),
                }
            }
        }
    }

    /// Every scalar the regex mentions explicitly (every scalar of a range of up to 1,024).
    pub fn chars(&self, out: &mut Vec<char>) {
        match self {
            Rx::Char(c) => out.push(*c),
            Rx::Set(cs) | Rx::NotSet(cs) => out.extend(cs),
            Rx::Dot => out.push('\n'),
            Rx::Class(ranges, _) => {
                for &(a, b) in ranges {
                    if b as u32 - a as u32 <= 1024 {
                        out.extend(a..=b);
                    } else {
                        out.extend([a, b]);
                    }
                }
            }
            Rx::AsciiDigit => out.extend('0'..='9'),
            Rx::Byte(_) => {}
            Rx::Seq(xs) | Rx::Alt(xs) => xs.iter().for_each(|x| x.chars(out)),
            Rx::Star(x) | Rx::Plus(x) | Rx::Opt(x) | Rx::Rep(x, _, _) => x.chars(out),
        }
    }

    /// Whether a class range holds more scalars than [`Rx::chars`] lists.
    pub fn has_wide_range(&self) -> bool {
        match self {
            Rx::Class(ranges, _) => ranges.iter().any(|&(a, b)| b as u32 - a as u32 > 1024),
            Rx::Seq(xs) | Rx::Alt(xs) => xs.iter().any(|x| x.has_wide_range()),
            Rx::Star(x) | Rx::Plus(x) | Rx::Opt(x) | Rx::Rep(x, _, _) => x.has_wide_range(),
            _ => false,
        }
    }

    /// Raw bytes the regex mentions (its `(?-u:\xHH)` atoms).
    pub fn raw_bytes(&self, out: &mut Vec<u8>) {
        match self {
            Rx::Byte(b) => out.push(*b),
            Rx::Seq(xs) | Rx::Alt(xs) => xs.iter().for_each(|x| x.raw_bytes(out)),
            Rx::Star(x) | Rx::Plus(x) | Rx::Opt(x) | Rx::Rep(x, _, _) => x.raw_bytes(out),
            _ => {}
        }
    }

    /// Whether every scalar this regex can match is in `{a, b, c}` (used for `except!` arguments).
    pub fn only_abc(&self) -> bool {
        let abc = |c: &char| matches!(c, 'a' | 'b' | 'c');
        match self {
            Rx::Char(c) => abc(c),
            Rx::Set(cs) => cs.iter().all(abc),
            Rx::Class(ranges, false) => ranges.iter().all(|&(a, b)| abc(&a) && abc(&b)),
            Rx::NotSet(_) | Rx::Dot | Rx::Class(_, true) | Rx::AsciiDigit | Rx::Byte(_) => false,
            Rx::Seq(xs) | Rx::Alt(xs) => xs.iter().all(|x| x.only_abc()),
            Rx::Star(x) | Rx::Plus(x) | Rx::Opt(x) | Rx::Rep(x, _, _) => x.only_abc(),
        }
    }

    pub fn nullable(&self) -> bool {
        match self {
            Rx::Char(_)
            | Rx::Set(_)
            | Rx::NotSet(_)
            | Rx::Dot
            | Rx::Class(..)
            | Rx::AsciiDigit
            | Rx::Byte(_) => false,
            Rx::Seq(xs) => xs.iter().all(|x| x.nullable()),
            Rx::Alt(xs) => xs.iter().any(|x| x.nullable()),
            Rx::Star(_) | Rx::Opt(_) => true,
            Rx::Plus(x) => x.nullable(),
            Rx::Rep(x, m, _) => *m == 0 || x.nullable(),
        }
    }
}

/// What one NFA edge reads: a scalar matching a predicate, or one raw byte.
#[derive(Clone, Debug)]
enum CharPred {
    One(char),
    Set(Vec<char>),
    NotSet(Vec<char>),
    Dot,
    Ranges(Vec<(char, char)>, bool),
    AsciiDigit,
    Byte(u8),
}

/// The scalars whose UTF-8 encodings start with `tail` (a valid, incomplete, non-empty prefix of a
/// multi-byte encoding): one interval, since UTF-8 preserves the order of scalars.
fn prefix_interval(tail: &[u8]) -> (u32, u32) {
    let w = utf8_width(tail[0]);
    // Complete with the smallest (largest) continuation bytes; after some lead bytes (E0, ED,
    // F0, F4) only part of the second byte's range is valid, so that byte is searched.
    let scalar = |fill: u8, b1: u8| {
        let mut v = tail.to_vec();
        if v.len() == 1 {
            v.push(b1);
        }
        v.resize(w, fill);
        std::str::from_utf8(&v)
            .ok()
            .and_then(|s| s.chars().next())
            .map(|c| c as u32)
    };
    let lo = (0x80..=0xBFu8).find_map(|b1| scalar(0x80, b1));
    let hi = (0x80..=0xBFu8).rev().find_map(|b1| scalar(0xBF, b1));
    (
        lo.expect("a valid prefix has completions"),
        hi.expect("a valid prefix has completions"),
    )
}

impl CharPred {
    fn matches(&self, c: char) -> bool {
        match self {
            CharPred::One(x) => *x == c,
            CharPred::Set(cs) => cs.contains(&c),
            CharPred::NotSet(cs) => !cs.contains(&c),
            CharPred::Dot => c != '\n',
            CharPred::Ranges(rs, negated) => rs.iter().any(|&(a, b)| a <= c && c <= b) != *negated,
            CharPred::AsciiDigit => c.is_ascii_digit(),
            CharPred::Byte(_) => false,
        }
    }
    /// Whether some scalar accepted here has an encoding starting with `tail` (a valid, incomplete
    /// UTF-8 prefix). Negated classes exclude only a handful of scalars, so they always can.
    fn can_complete(&self, tail: &[u8]) -> bool {
        let starts = |c: &char| {
            let mut buf = [0u8; 4];
            c.encode_utf8(&mut buf).as_bytes().starts_with(tail)
        };
        match self {
            CharPred::One(c) => starts(c),
            CharPred::Set(cs) => cs.iter().any(starts),
            CharPred::NotSet(_) | CharPred::Dot => true,
            CharPred::Ranges(rs, negated) => {
                let (lo, hi) = prefix_interval(tail);
                let meets = |&(a, b): &(char, char)| (a as u32) <= hi && lo <= b as u32;
                if *negated {
                    // Some scalar of [lo, hi] lies outside every range.
                    let mut covered: Vec<(u32, u32)> =
                        rs.iter().map(|&(a, b)| (a as u32, b as u32)).collect();
                    covered.sort_unstable();
                    let mut next = lo;
                    for (a, b) in covered {
                        if a > next {
                            break;
                        }
                        next = next.max(b.saturating_add(1));
                    }
                    next <= hi
                } else {
                    rs.iter().any(meets)
                }
            }
            // Partial tails are multi-byte; raw-byte edges are simulated byte by byte.
            CharPred::AsciiDigit | CharPred::Byte(_) => false,
        }
    }
}

/// A Thompson NFA: every state is co-reachable to `accept` (no regex here has an empty language).
#[derive(Clone, Debug)]
pub struct Nfa {
    eps: Vec<Vec<usize>>,
    edges: Vec<Vec<(CharPred, usize)>>,
    start: usize,
    accept: usize,
}

impl Nfa {
    pub fn new(rx: &Rx) -> Nfa {
        let mut n = Nfa {
            eps: vec![vec![], vec![]],
            edges: vec![vec![], vec![]],
            start: 0,
            accept: 1,
        };
        n.build(rx, 0, 1);
        n
    }

    fn state(&mut self) -> usize {
        self.eps.push(vec![]);
        self.edges.push(vec![]);
        self.eps.len() - 1
    }

    fn build(&mut self, rx: &Rx, from: usize, to: usize) {
        match rx {
            Rx::Char(c) => self.edges[from].push((CharPred::One(*c), to)),
            Rx::Set(cs) => self.edges[from].push((CharPred::Set(cs.clone()), to)),
            Rx::NotSet(cs) => self.edges[from].push((CharPred::NotSet(cs.clone()), to)),
            Rx::Dot => self.edges[from].push((CharPred::Dot, to)),
            Rx::Class(rs, negated) => {
                self.edges[from].push((CharPred::Ranges(rs.clone(), *negated), to))
            }
            Rx::AsciiDigit => self.edges[from].push((CharPred::AsciiDigit, to)),
            Rx::Byte(b) => self.edges[from].push((CharPred::Byte(*b), to)),
            Rx::Seq(xs) => {
                let mut cur = from;
                for (k, x) in xs.iter().enumerate() {
                    let next = if k + 1 == xs.len() { to } else { self.state() };
                    self.build(x, cur, next);
                    cur = next;
                }
                if xs.is_empty() {
                    self.eps[from].push(to);
                }
            }
            Rx::Alt(xs) => xs.iter().for_each(|x| self.build(x, from, to)),
            Rx::Star(x) => {
                let m = self.state();
                self.eps[from].push(m);
                self.eps[m].push(to);
                let back = self.state();
                self.build(x, m, back);
                self.eps[back].push(m);
            }
            Rx::Plus(x) => {
                let m = self.state();
                self.build(x, from, m);
                self.build(&Rx::Star(x.clone()), m, to);
            }
            Rx::Opt(x) => {
                self.eps[from].push(to);
                self.build(x, from, to);
            }
            Rx::Rep(x, m, max) => {
                let mut cur = from;
                for _ in 0..*m {
                    let next = self.state();
                    self.build(x, cur, next);
                    cur = next;
                }
                match max {
                    None => self.build(&Rx::Star(x.clone()), cur, to),
                    Some(n) => {
                        for _ in *m..*n {
                            let next = self.state();
                            self.eps[cur].push(to);
                            self.build(x, cur, next);
                            cur = next;
                        }
                        self.eps[cur].push(to);
                    }
                }
            }
        }
    }

    fn close(&self, set: &mut [bool]) {
        let mut stack: Vec<usize> = (0..set.len()).filter(|&s| set[s]).collect();
        while let Some(s) = stack.pop() {
            for &t in &self.eps[s] {
                if !set[t] {
                    set[t] = true;
                    stack.push(t);
                }
            }
        }
    }

    fn start_set(&self) -> Vec<bool> {
        let mut set = vec![false; self.eps.len()];
        set[self.start] = true;
        self.close(&mut set);
        set
    }

    /// `ends` semantics (see the module docs) of this regex on `input` from position `i`.
    ///
    /// A scalar edge reads a whole UTF-8 scalar and a raw-byte edge one byte, so the simulation
    /// keeps one state set per position (edges only move forward).
    pub fn ends(&self, input: &[u8], i: usize) -> u64 {
        let n = input.len();
        let mut sets: Vec<Vec<bool>> = vec![vec![false; self.eps.len()]; n - i + 1];
        sets[0] = self.start_set();
        let mut out = 0u64;
        for pos in i..=n {
            let mut set = std::mem::take(&mut sets[pos - i]);
            self.close(&mut set);
            let on: Vec<usize> = (0..set.len()).filter(|&s| set[s]).collect();
            if on.is_empty() {
                continue;
            }
            if set[self.accept] {
                out |= 1 << pos;
            }
            if pos == n {
                if on.iter().any(|&s| !self.edges[s].is_empty()) {
                    out |= INF;
                }
                continue;
            }
            let scalar = decode(&input[pos..]);
            for &s in &on {
                for (p, t) in &self.edges[s] {
                    match (p, scalar) {
                        (CharPred::Byte(b), _) => {
                            if input[pos] == *b {
                                sets[pos + 1 - i][*t] = true;
                            }
                        }
                        (_, Decoded::Char(c, w)) => {
                            if p.matches(c) {
                                sets[pos + w - i][*t] = true;
                            }
                        }
                        (_, Decoded::Partial) => {
                            if p.can_complete(&input[pos..]) {
                                out |= INF;
                            }
                        }
                        (_, Decoded::Invalid) => {}
                    }
                }
            }
        }
        out
    }

    /// Full match of `input`.
    pub fn full_match(&self, input: &[u8]) -> bool {
        self.ends(input, 0) & (1 << input.len()) != 0
    }

    /// Whether some non-empty string matches.
    pub fn matches_nonempty(&self) -> bool {
        let set = self.start_set();
        set.iter()
            .enumerate()
            .any(|(s, on)| *on && !self.edges[s].is_empty())
    }
}

// ---------------------------------------------------------------------------------------------
// Grammar AST and KBNF rendering.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
pub enum ExceptArg {
    Lit(Vec<u8>),
    Regex(Rx),
    /// A nonterminal whose rules contain only literals, concatenation and alternation.
    Ref(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Lit(Vec<u8>),
    Regex(Rx),
    Except(ExceptArg, Option<u32>),
    Ref(usize),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    /// `( X )`
    Group(Box<Expr>),
    /// `X?`
    Opt(Box<Expr>),
    /// `[ X ]`
    Bracket(Box<Expr>),
    /// `X*`
    Star(Box<Expr>),
    /// `{ X }`
    Brace(Box<Expr>),
    /// `X+`
    Plus(Box<Expr>),
    /// `X{m}` (max == Some(m)), `X{m,}` (None), `X{m,n}`.
    Rep(Box<Expr>, u32, Option<u32>),
}

/// Builders for hand-written grammars.
pub fn lit(s: &str) -> Expr {
    Expr::Lit(s.as_bytes().to_vec())
}
pub fn nt(i: usize) -> Expr {
    Expr::Ref(i)
}
pub fn seq(xs: Vec<Expr>) -> Expr {
    Expr::Seq(xs)
}
pub fn alt(xs: Vec<Expr>) -> Expr {
    Expr::Alt(xs)
}

/// Rendering style knobs (all produce equivalent KBNF).
#[derive(Clone, Debug, Default)]
pub struct Style {
    /// Separate concatenated items with `, ` instead of a space.
    pub commas: bool,
    /// Write non-ASCII scalars in literals as `\u{...}` instead of raw UTF-8.
    pub unicode_escapes: bool,
    /// Put a comment before each rule and inside concatenations.
    pub comments: bool,
    /// Prefer double quotes for literals.
    pub double_quotes: bool,
}

#[derive(Clone, Debug)]
pub struct Gram {
    pub names: Vec<String>,
    /// `(lhs, rhs)` in source order; several rules may share a left-hand side.
    pub rules: Vec<(usize, Expr)>,
    pub start: usize,
    pub style: Style,
}

pub fn render_literal(bytes: &[u8], style: &Style) -> String {
    let quote = if style.double_quotes {
        if bytes.contains(&b'"') && !bytes.contains(&b'\'') {
            '\''
        } else {
            '"'
        }
    } else if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut s = String::new();
    s.push(quote);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            _ if b as char == quote => {
                s.push('\\');
                s.push(quote);
            }
            0x20..=0x7e => s.push(b as char),
            0x80..=0xff => {
                if let Decoded::Char(c, w) = decode(&bytes[i..]) {
                    if style.unicode_escapes {
                        let _ = write!(s, "\\u{{{:x}}}", c as u32);
                    } else {
                        s.push(c);
                    }
                    i += w;
                    continue;
                }
                let _ = write!(s, "\\x{b:02x}");
            }
            _ => {
                let _ = write!(s, "\\x{b:02X}");
            }
        }
        i += 1;
    }
    s.push(quote);
    s
}

impl Gram {
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (k, (lhs, rhs)) in self.rules.iter().enumerate() {
            if self.style.comments {
                let _ = writeln!(out, "(* rule {k} *)");
            }
            let _ = write!(out, "{} ::= ", self.names[*lhs]);
            self.render_expr(rhs, 0, &mut out);
            out.push_str(";\n");
        }
        out
    }

    /// `level`: 0 = alternation context, 1 = concatenation item, 2 = postfix operand.
    fn render_expr(&self, e: &Expr, level: u8, out: &mut String) {
        match e {
            Expr::Lit(b) => out.push_str(&render_literal(b, &self.style)),
            Expr::Regex(rx) => {
                let _ = write!(out, "#\"{}\"", rx.render());
            }
            Expr::Except(arg, max) => {
                out.push_str("except!(");
                match arg {
                    ExceptArg::Lit(b) => out.push_str(&render_literal(b, &self.style)),
                    ExceptArg::Regex(rx) => {
                        let _ = write!(out, "#\"{}\"", rx.render());
                    }
                    ExceptArg::Ref(n) => out.push_str(&self.names[*n]),
                }
                if let Some(m) = max {
                    let _ = write!(out, ", {m}");
                }
                out.push(')');
            }
            Expr::Ref(n) => out.push_str(&self.names[*n]),
            Expr::Seq(xs) => {
                let paren = level >= 2;
                if paren {
                    out.push('(');
                }
                for (k, x) in xs.iter().enumerate() {
                    if k > 0 {
                        out.push_str(if self.style.commas { ", " } else { " " });
                        if self.style.comments && k == 1 {
                            out.push_str("(* item *) ");
                        }
                    }
                    self.render_expr(x, 1, out);
                }
                if paren {
                    out.push(')');
                }
            }
            Expr::Alt(xs) => {
                let paren = level >= 1;
                if paren {
                    out.push('(');
                }
                for (k, x) in xs.iter().enumerate() {
                    if k > 0 {
                        out.push_str(" | ");
                    }
                    self.render_expr(x, 0, out);
                }
                if paren {
                    out.push(')');
                }
            }
            Expr::Group(x) => {
                out.push('(');
                self.render_expr(x, 0, out);
                out.push(')');
            }
            Expr::Bracket(x) => {
                out.push('[');
                self.render_expr(x, 0, out);
                out.push(']');
            }
            Expr::Brace(x) => {
                out.push_str("{ ");
                self.render_expr(x, 0, out);
                out.push_str(" }");
            }
            Expr::Opt(x) | Expr::Star(x) | Expr::Plus(x) | Expr::Rep(x, _, _) => {
                if matches!(
                    **x,
                    Expr::Opt(_) | Expr::Star(_) | Expr::Plus(_) | Expr::Rep(..)
                ) {
                    // `x*?` is not KBNF: a postfix operand of a postfix operator is parenthesized
                    out.push('(');
                    self.render_expr(x, 0, out);
                    out.push(')');
                } else {
                    self.render_expr(x, 2, out);
                }
                match e {
                    Expr::Opt(_) => push_postfix(out, Postfix::Opt),
                    Expr::Star(_) => push_postfix(out, Postfix::Star),
                    Expr::Plus(_) => push_postfix(out, Postfix::Plus),
                    Expr::Rep(_, m, n) => push_postfix(out, Postfix::Rep(*m, *n)),
                    _ => unreachable!(),
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reference recognizer.
// ---------------------------------------------------------------------------------------------

/// Bit for "the input ends strictly inside some string of the language".
pub const INF: u64 = 1 << 63;
/// Longest input the reference accepts.
pub const MAX_REF_LEN: usize = 62;

#[derive(Clone, Debug)]
enum Forbid {
    Strings(Vec<Vec<u8>>),
    Regex(usize),
}

#[derive(Clone, Debug)]
enum Node {
    Eps,
    Lit(Vec<u8>),
    Regex(usize),
    Except(Forbid, Option<usize>),
    Ref(usize),
    Seq(Vec<usize>),
    Alt(Vec<usize>),
    Star(usize),
    /// Bounded repetition `{m,n}`.
    Rep(usize, u32, u32),
}

/// The reference recognizer for one grammar (see the module docs).
pub struct Reference {
    nodes: Vec<Node>,
    /// Root node of each nonterminal's alternatives (`usize::MAX` when it has no rules).
    nt_root: Vec<usize>,
    start: usize,
    nfas: Vec<Nfa>,
    prod: Vec<bool>,
    nonempty: Vec<bool>,
    terminals: Vec<usize>,
    memo: HashMap<Vec<u8>, (bool, bool)>,
    /// Whether viable-prefix answers are exact: the `except!` arguments are ASCII without `z`
    /// (strings) or over `{a, b, c}` (regexes), so one appended `z` extends any allowed string.
    /// Completeness answers are exact for every grammar.
    prefix_exact: bool,
    /// Bytes mentioned anywhere in the grammar, plus `\n` and `z`.
    special: [bool; 256],
}

/// The finite language of a literal-only expression.
pub fn literal_language(e: &Expr) -> Vec<Vec<u8>> {
    match e {
        Expr::Lit(b) => vec![b.clone()],
        Expr::Group(x) => literal_language(x),
        Expr::Alt(xs) => {
            let mut out: Vec<Vec<u8>> = xs.iter().flat_map(literal_language).collect();
            out.sort();
            out.dedup();
            out
        }
        Expr::Seq(xs) => {
            let mut acc = vec![Vec::new()];
            for x in xs {
                let l = literal_language(x);
                acc = acc
                    .iter()
                    .flat_map(|a| {
                        l.iter().map(move |b| {
                            let mut v = a.clone();
                            v.extend_from_slice(b);
                            v
                        })
                    })
                    .collect();
            }
            acc
        }
        other => panic!("not a literal-only expression: {other:?}"),
    }
}

pub fn nonterminal_literal_language(g: &Gram, n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (lhs, rhs) in &g.rules {
        if *lhs == n {
            out.extend(literal_language(rhs));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn mark_bytes(special: &mut [bool; 256], bytes: &[u8]) {
    for &b in bytes {
        special[b as usize] = true;
    }
}

fn mark_chars(special: &mut [bool; 256], cs: &[char]) {
    for c in cs {
        let mut buf = [0u8; 4];
        mark_bytes(special, c.encode_utf8(&mut buf).as_bytes());
    }
}

fn bits(mut m: u64) -> impl Iterator<Item = usize> {
    m &= !INF;
    std::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let j = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(j)
        }
    })
}

impl Reference {
    pub fn new(g: &Gram) -> Reference {
        let mut r = Reference {
            nodes: Vec::new(),
            nt_root: vec![usize::MAX; g.names.len()],
            start: 0,
            nfas: Vec::new(),
            prod: Vec::new(),
            nonempty: Vec::new(),
            terminals: Vec::new(),
            memo: HashMap::new(),
            prefix_exact: true,
            special: [false; 256],
        };
        r.special[b'\n' as usize] = true;
        r.special[b'z' as usize] = true;
        for n in 0..g.names.len() {
            let alts: Vec<usize> = g
                .rules
                .iter()
                .filter(|(lhs, _)| *lhs == n)
                .map(|(_, rhs)| rhs.clone())
                .collect::<Vec<_>>()
                .iter()
                .map(|rhs| r.flatten(g, rhs))
                .collect();
            if !alts.is_empty() {
                let root = r.push(Node::Alt(alts));
                r.nt_root[n] = root;
            }
        }
        r.start = r.nt_root[g.start];
        assert!(r.start != usize::MAX, "start symbol has no rules");
        r.terminals = (0..r.nodes.len())
            .filter(|&k| {
                matches!(
                    r.nodes[k],
                    Node::Eps | Node::Lit(_) | Node::Regex(_) | Node::Except(..)
                )
            })
            .collect();
        r.compute_prod();
        r
    }

    fn mark_regex(&mut self, rx: &Rx) {
        let mut cs = Vec::new();
        rx.chars(&mut cs);
        mark_chars(&mut self.special, &cs);
        if rx.has_wide_range() {
            // `chars` lists only the ends of such a range: keep every non-ASCII byte apart.
            self.special[0x80..].iter_mut().for_each(|s| *s = true);
        }
        let mut bs = Vec::new();
        rx.raw_bytes(&mut bs);
        mark_bytes(&mut self.special, &bs);
    }

    fn push(&mut self, n: Node) -> usize {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    fn flatten(&mut self, g: &Gram, e: &Expr) -> usize {
        match e {
            Expr::Lit(b) => {
                mark_bytes(&mut self.special, b);
                self.push(Node::Lit(b.clone()))
            }
            Expr::Regex(rx) => {
                self.mark_regex(rx);
                self.nfas.push(Nfa::new(rx));
                let id = self.nfas.len() - 1;
                self.push(Node::Regex(id))
            }
            Expr::Except(arg, max) => {
                let forbid = match arg {
                    ExceptArg::Lit(b) => Forbid::Strings(vec![b.clone()]),
                    ExceptArg::Ref(n) => Forbid::Strings(nonterminal_literal_language(g, *n)),
                    ExceptArg::Regex(rx) => {
                        assert!(!rx.nullable(), "an except! regex must not match \"\"");
                        self.prefix_exact &= rx.only_abc();
                        self.mark_regex(rx);
                        self.nfas.push(Nfa::new(rx));
                        Forbid::Regex(self.nfas.len() - 1)
                    }
                };
                if let Forbid::Strings(ss) = &forbid {
                    for s in ss {
                        assert!(!s.is_empty(), "an except! string must not be empty");
                        self.prefix_exact &= s.iter().all(|b| b.is_ascii() && *b != b'z');
                        mark_bytes(&mut self.special, s);
                    }
                }
                self.push(Node::Except(forbid, max.map(|m| m as usize)))
            }
            Expr::Ref(n) => self.push(Node::Ref(*n)),
            Expr::Seq(xs) => {
                let ids = xs.iter().map(|x| self.flatten(g, x)).collect();
                self.push(Node::Seq(ids))
            }
            Expr::Alt(xs) => {
                let ids = xs.iter().map(|x| self.flatten(g, x)).collect();
                self.push(Node::Alt(ids))
            }
            Expr::Group(x) => self.flatten(g, x),
            Expr::Opt(x) | Expr::Bracket(x) => {
                let eps = self.push(Node::Eps);
                let c = self.flatten(g, x);
                self.push(Node::Alt(vec![eps, c]))
            }
            Expr::Star(x) | Expr::Brace(x) => {
                let c = self.flatten(g, x);
                self.push(Node::Star(c))
            }
            Expr::Plus(x) => {
                let c = self.flatten(g, x);
                let s = self.push(Node::Star(c));
                self.push(Node::Seq(vec![c, s]))
            }
            Expr::Rep(x, m, max) => {
                let c = self.flatten(g, x);
                match max {
                    Some(n) => self.push(Node::Rep(c, *m, *n)),
                    None => {
                        let r = self.push(Node::Rep(c, *m, *m));
                        let s = self.push(Node::Star(c));
                        self.push(Node::Seq(vec![r, s]))
                    }
                }
            }
        }
    }

    fn root_of(&self, n: usize) -> Option<usize> {
        let r = self.nt_root[n];
        (r != usize::MAX).then_some(r)
    }

    fn compute_prod(&mut self) {
        let len = self.nodes.len();
        self.prod = vec![false; len];
        self.nonempty = vec![false; len];
        loop {
            let mut changed = false;
            for k in 0..len {
                let (p, ne) = match &self.nodes[k] {
                    Node::Eps => (true, false),
                    Node::Lit(b) => (true, !b.is_empty()),
                    Node::Regex(id) => (true, self.nfas[*id].matches_nonempty()),
                    Node::Except(_, max) => (true, *max != Some(0)),
                    Node::Ref(n) => match self.root_of(*n) {
                        Some(r) => (self.prod[r], self.nonempty[r]),
                        None => (false, false),
                    },
                    Node::Seq(xs) => {
                        let all = xs.iter().all(|&x| self.prod[x]);
                        (all, all && xs.iter().any(|&x| self.nonempty[x]))
                    }
                    Node::Alt(xs) => (
                        xs.iter().any(|&x| self.prod[x]),
                        xs.iter().any(|&x| self.nonempty[x]),
                    ),
                    Node::Star(x) => (true, self.nonempty[*x]),
                    Node::Rep(x, m, n) => (*m == 0 || self.prod[*x], *n >= 1 && self.nonempty[*x]),
                };
                if p != self.prod[k] || ne != self.nonempty[k] {
                    self.prod[k] |= p;
                    self.nonempty[k] |= ne;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// The language of the start symbol is non-empty.
    pub fn productive(&self) -> bool {
        self.prod[self.start]
    }

    /// The language of the start symbol contains a non-empty string.
    pub fn has_nonempty(&self) -> bool {
        self.nonempty[self.start]
    }

    fn terminal_ends(&self, k: usize, w: &[u8], i: usize) -> u64 {
        let n = w.len();
        match &self.nodes[k] {
            Node::Eps => 1 << i,
            Node::Lit(s) => {
                let rem = &w[i..];
                if s.len() <= rem.len() {
                    if rem.starts_with(s) {
                        1 << (i + s.len())
                    } else {
                        0
                    }
                } else if s.starts_with(rem) {
                    INF
                } else {
                    0
                }
            }
            Node::Regex(id) => self.nfas[*id].ends(w, i),
            Node::Except(forbid, max) => {
                // Earliest end of a forbidden occurrence lying entirely inside w[i..].
                let mut min_end = usize::MAX;
                for a in i..n {
                    for b in a + 1..=n {
                        let hit = match forbid {
                            Forbid::Strings(ss) => ss.iter().any(|s| &w[a..b] == s.as_slice()),
                            Forbid::Regex(id) => self.nfas[*id].full_match(&w[a..b]),
                        };
                        if hit {
                            min_end = min_end.min(b);
                        }
                    }
                }
                let max = max.unwrap_or(usize::MAX);
                let mut out = 0u64;
                for j in i..=n {
                    if j >= min_end || j - i > max {
                        break;
                    }
                    if std::str::from_utf8(&w[i..j]).is_ok() {
                        out |= 1 << j;
                    }
                }
                if n < min_end {
                    if let Some(need) = utf8_completion(&w[i..]) {
                        // A proper extension: complete the last scalar, or append one more
                        // scalar that no forbidden string contains ('z').
                        let need = need.max(1);
                        if n - i + need <= max {
                            out |= INF;
                        }
                    }
                }
                out
            }
            _ => unreachable!(),
        }
    }

    fn eval(&self, k: usize, i: usize, ends: &[u64], stride: usize) -> u64 {
        let at = |node: usize, j: usize| ends[node * stride + j];
        match &self.nodes[k] {
            Node::Ref(n) => match self.root_of(*n) {
                Some(r) => at(r, i),
                None => 0,
            },
            Node::Seq(xs) => {
                let mut cur = 1u64 << i;
                for &c in xs {
                    let mut next = 0u64;
                    for j in bits(cur) {
                        next |= at(c, j);
                    }
                    if cur & INF != 0 && self.prod[c] {
                        next |= INF;
                    }
                    cur = next;
                    if cur == 0 {
                        break;
                    }
                }
                cur
            }
            Node::Alt(xs) => xs.iter().fold(0, |acc, &c| acc | at(c, i)),
            Node::Star(c) => {
                let e = at(*c, i);
                let mut res = (1u64 << i) | (e & INF);
                for j in bits(e) {
                    if j > i {
                        res |= at(k, j);
                    }
                }
                res
            }
            Node::Rep(c, m, n) => {
                let mut cur = 1u64 << i;
                let mut res = if *m == 0 { cur } else { 0 };
                for copy in 1..=*n {
                    let mut next = 0u64;
                    for j in bits(cur) {
                        next |= at(*c, j);
                    }
                    res |= next & INF;
                    if copy >= *m {
                        res |= next & !INF;
                    }
                    cur = next & !INF;
                    if cur == 0 {
                        break;
                    }
                }
                res
            }
            _ => at(k, i),
        }
    }

    fn ends_all(&self, w: &[u8]) -> u64 {
        let n = w.len();
        assert!(n <= MAX_REF_LEN, "reference input too long");
        let stride = n + 1;
        let mut ends = vec![0u64; self.nodes.len() * stride];
        for i in (0..=n).rev() {
            for &k in &self.terminals {
                ends[k * stride + i] = self.terminal_ends(k, w, i);
            }
            loop {
                let mut changed = false;
                for k in 0..self.nodes.len() {
                    if matches!(
                        self.nodes[k],
                        Node::Eps | Node::Lit(_) | Node::Regex(_) | Node::Except(..)
                    ) {
                        continue;
                    }
                    let v = self.eval(k, i, &ends, stride);
                    let slot = &mut ends[k * stride + i];
                    if v != *slot {
                        debug_assert_eq!(v & *slot, *slot, "non-monotone reference equation");
                        *slot = v;
                        changed = true;
                    }
                }
                if !changed {
                    break;
                }
            }
        }
        ends[self.start * stride]
    }

    /// `(viable, complete)` for the whole input `w`.
    pub fn status(&mut self, w: &[u8]) -> (bool, bool) {
        assert!(
            self.prefix_exact,
            "viable prefixes need except! arguments over ASCII without 'z' (see prefix_exact)"
        );
        self.answers(w)
    }

    fn answers(&mut self, w: &[u8]) -> (bool, bool) {
        if let Some(v) = self.memo.get(w) {
            return *v;
        }
        let e = self.ends_all(w);
        let complete = e & (1 << w.len()) != 0;
        let v = (complete || e & INF != 0, complete);
        self.memo.insert(w.to_vec(), v);
        v
    }

    pub fn viable(&mut self, w: &[u8]) -> bool {
        self.status(w).0
    }

    pub fn complete(&mut self, w: &[u8]) -> bool {
        self.answers(w).1
    }

    /// Equivalence classes of bytes: two bytes in one class are interchangeable everywhere in the
    /// grammar (same literal/regex/except behaviour and same UTF-8 role). Returns, for each byte,
    /// the representative of its class.
    pub fn byte_classes(&self) -> [u8; 256] {
        fn utf8_role(b: u8) -> u8 {
            match b {
                0x00..=0x7f => 0,
                0x80..=0x8f => 1,
                0x90..=0x9f => 2,
                0xa0..=0xbf => 3,
                0xc0..=0xc1 => 4,
                0xc2..=0xdf => 5,
                0xe0 => 6,
                0xe1..=0xec => 7,
                0xed => 8,
                0xee..=0xef => 9,
                0xf0 => 10,
                0xf1..=0xf3 => 11,
                0xf4 => 12,
                0xf5..=0xff => 13,
            }
        }
        let mut rep_of_role = [None::<u8>; 14];
        let mut out = [0u8; 256];
        for b in 0..=255u8 {
            out[b as usize] = if self.special[b as usize] {
                b
            } else {
                let role = utf8_role(b) as usize;
                *rep_of_role[role].get_or_insert(b)
            };
        }
        out
    }

    /// The set of bytes `b` such that `prefix + b` is viable. With `exhaustive`, every byte is
    /// checked; otherwise one representative per byte class.
    pub fn allowed(&mut self, prefix: &[u8], classes: &[u8; 256], exhaustive: bool) -> [bool; 256] {
        let mut out = [false; 256];
        if prefix.len() >= MAX_REF_LEN {
            return out;
        }
        let mut w = prefix.to_vec();
        w.push(0);
        for b in 0..=255u8 {
            let rep = if exhaustive { b } else { classes[b as usize] };
            if rep != b {
                out[b as usize] = out[rep as usize];
                continue;
            }
            *w.last_mut().unwrap() = b;
            out[b as usize] = self.viable(&w);
        }
        out
    }
}

/// A postfix operator, written the same way in regexes and in KBNF.
#[derive(Clone, Copy)]
enum Postfix {
    Opt,
    Star,
    Plus,
    Rep(u32, Option<u32>),
}

fn push_postfix(out: &mut String, op: Postfix) {
    match op {
        Postfix::Opt => out.push('?'),
        Postfix::Star => out.push('*'),
        Postfix::Plus => out.push('+'),
        Postfix::Rep(m, Some(n)) if m == n => {
            let _ = write!(out, "{{{m}}}");
        }
        Postfix::Rep(m, Some(n)) => {
            let _ = write!(out, "{{{m},{n}}}");
        }
        Postfix::Rep(m, None) => {
            let _ = write!(out, "{{{m},}}");
        }
    }
}
