//! Shared helpers for the integration tests: a small grammar AST that renders to KBNF text, an
//! independent reference recognizer over that AST, a tiny regex engine for the reference, and thin
//! adapters over the engine API.
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
//! scalar values; `except!(X, n)` is any valid UTF-8 string of at most `n` bytes in which no
//! substring is in `L(X)`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::Rng;
use structout_engine::{CompileOptions, Grammar, Recognizer};

// ---------------------------------------------------------------------------------------------
// Engine adapters (the only place that touches the engine API).
// ---------------------------------------------------------------------------------------------

/// Compiles grammar text with default options; the error is rendered with `Display`.
pub fn compile(text: &str) -> Result<Arc<Grammar>, String> {
    Grammar::compile(text, &CompileOptions::default())
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// Compiles grammar text with another start symbol.
pub fn compile_with_start(text: &str, start: &str) -> Result<Arc<Grammar>, String> {
    compile_with(text, start, true)
}

/// Compiles grammar text with right-linear rules as rules (`regular_terminals: false`), so
/// that tests of the Earley machinery (Leo, right recursion) see them.
#[allow(dead_code)]
pub fn compile_as_rules(text: &str) -> Result<Arc<Grammar>, String> {
    compile_with(text, "start", false)
}

/// Compiles grammar text with a start symbol, right-linear rules collapsed or not.
pub fn compile_with(
    text: &str,
    start: &str,
    regular_terminals: bool,
) -> Result<Arc<Grammar>, String> {
    let opts = CompileOptions {
        start: start.to_string(),
        regular_terminals,
        ..CompileOptions::default()
    };
    Grammar::compile(text, &opts)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// The engine's allowed-next-bytes set as a plain array.
pub fn allowed(r: &Recognizer) -> [bool; 256] {
    let set = r.allowed_bytes();
    let mut out = [false; 256];
    for (b, slot) in out.iter_mut().enumerate() {
        *slot = set.contains(b as u8);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Byte helpers.
// ---------------------------------------------------------------------------------------------

/// `b"..."`-style rendering of bytes for failure messages.
pub fn esc(bytes: &[u8]) -> String {
    let mut s = String::from("b\"");
    for &b in bytes {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('"');
    s
}

/// Renders a byte set compactly, e.g. `{'a', 'b', 0x80-0xbf}`.
pub fn fmt_set(set: &[bool; 256]) -> String {
    let mut parts = Vec::new();
    let mut b = 0usize;
    while b < 256 {
        if set[b] {
            let start = b;
            while b + 1 < 256 && set[b + 1] {
                b += 1;
            }
            let one = |x: usize| {
                if (0x21..0x7f).contains(&x) && x != b'\'' as usize {
                    format!("'{}'", x as u8 as char)
                } else {
                    format!("0x{x:02x}")
                }
            };
            if start == b {
                parts.push(one(start));
            } else {
                parts.push(format!("{}-{}", one(start), one(b)));
            }
        }
        b += 1;
    }
    format!("{{{}}}", parts.join(", "))
}

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
                let atomic = matches!(**x, Rx::Char(_) | Rx::Set(_) | Rx::NotSet(_) | Rx::Dot);
                if atomic {
                    x.render_into(out, 2);
                } else {
                    out.push('(');
                    x.render_into(out, 0);
                    out.push(')');
                }
                match self {
                    Rx::Star(_) => out.push('*'),
                    Rx::Plus(_) => out.push('+'),
                    Rx::Opt(_) => out.push('?'),
                    Rx::Rep(_, m, Some(n)) if m == n => {
                        let _ = write!(out, "{{{m}}}");
                    }
                    Rx::Rep(_, m, Some(n)) => {
                        let _ = write!(out, "{{{m},{n}}}");
                    }
                    Rx::Rep(_, m, None) => {
                        let _ = write!(out, "{{{m},}}");
                    }
                    _ => unreachable!(),
                }
            }
        }
    }

    /// Every scalar the regex mentions explicitly.
    pub fn chars(&self, out: &mut Vec<char>) {
        match self {
            Rx::Char(c) => out.push(*c),
            Rx::Set(cs) | Rx::NotSet(cs) => out.extend(cs),
            Rx::Dot => out.push('\n'),
            Rx::Seq(xs) | Rx::Alt(xs) => xs.iter().for_each(|x| x.chars(out)),
            Rx::Star(x) | Rx::Plus(x) | Rx::Opt(x) | Rx::Rep(x, _, _) => x.chars(out),
        }
    }

    /// Whether every scalar this regex can match is in `{a, b, c}` (used for `except!` arguments).
    pub fn only_abc(&self) -> bool {
        let abc = |c: &char| matches!(c, 'a' | 'b' | 'c');
        match self {
            Rx::Char(c) => abc(c),
            Rx::Set(cs) => cs.iter().all(abc),
            Rx::NotSet(_) | Rx::Dot => false,
            Rx::Seq(xs) | Rx::Alt(xs) => xs.iter().all(|x| x.only_abc()),
            Rx::Star(x) | Rx::Plus(x) | Rx::Opt(x) | Rx::Rep(x, _, _) => x.only_abc(),
        }
    }

    pub fn nullable(&self) -> bool {
        match self {
            Rx::Char(_) | Rx::Set(_) | Rx::NotSet(_) | Rx::Dot => false,
            Rx::Seq(xs) => xs.iter().all(|x| x.nullable()),
            Rx::Alt(xs) => xs.iter().any(|x| x.nullable()),
            Rx::Star(_) | Rx::Opt(_) => true,
            Rx::Plus(x) => x.nullable(),
            Rx::Rep(x, m, _) => *m == 0 || x.nullable(),
        }
    }
}

#[derive(Clone, Debug)]
enum CharPred {
    One(char),
    Set(Vec<char>),
    NotSet(Vec<char>),
    Dot,
}

impl CharPred {
    fn matches(&self, c: char) -> bool {
        match self {
            CharPred::One(x) => *x == c,
            CharPred::Set(cs) => cs.contains(&c),
            CharPred::NotSet(cs) => !cs.contains(&c),
            CharPred::Dot => c != '\n',
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

    fn step(&self, set: &[bool], c: char) -> Vec<bool> {
        let mut next = vec![false; self.eps.len()];
        for (s, _) in set.iter().enumerate().filter(|(_, on)| **on) {
            for (p, t) in &self.edges[s] {
                if p.matches(c) {
                    next[*t] = true;
                }
            }
        }
        self.close(&mut next);
        next
    }

    /// `ends` semantics (see the module docs) of this regex on `input` from position `i`.
    pub fn ends(&self, input: &[u8], i: usize) -> u64 {
        let n = input.len();
        let mut set = self.start_set();
        let mut pos = i;
        let mut out = 0u64;
        loop {
            if !set.iter().any(|x| *x) {
                return out;
            }
            if set[self.accept] {
                out |= 1 << pos;
            }
            if pos == n {
                let has_edge = set
                    .iter()
                    .enumerate()
                    .any(|(s, on)| *on && !self.edges[s].is_empty());
                if has_edge {
                    out |= INF;
                }
                return out;
            }
            match decode(&input[pos..]) {
                Decoded::Char(c, w) => {
                    set = self.step(&set, c);
                    pos += w;
                }
                Decoded::Partial => {
                    let tail = &input[pos..];
                    let can = set.iter().enumerate().any(|(s, on)| {
                        *on && self.edges[s].iter().any(|(p, _)| p.can_complete(tail))
                    });
                    if can {
                        out |= INF;
                    }
                    return out;
                }
                Decoded::Invalid => return out,
            }
        }
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
                self.render_expr(x, 2, out);
                match e {
                    Expr::Opt(_) => out.push('?'),
                    Expr::Star(_) => out.push('*'),
                    Expr::Plus(_) => out.push('+'),
                    Expr::Rep(_, m, Some(n)) if m == n => {
                        let _ = write!(out, "{{{m}}}");
                    }
                    Expr::Rep(_, m, Some(n)) => {
                        let _ = write!(out, "{{{m},{n}}}");
                    }
                    Expr::Rep(_, m, None) => {
                        let _ = write!(out, "{{{m},}}");
                    }
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
                let mut cs = Vec::new();
                rx.chars(&mut cs);
                mark_chars(&mut self.special, &cs);
                self.nfas.push(Nfa::new(rx));
                let id = self.nfas.len() - 1;
                self.push(Node::Regex(id))
            }
            Expr::Except(arg, max) => {
                let forbid = match arg {
                    ExceptArg::Lit(b) => Forbid::Strings(vec![b.clone()]),
                    ExceptArg::Ref(n) => Forbid::Strings(nonterminal_literal_language(g, *n)),
                    ExceptArg::Regex(rx) => {
                        assert!(rx.only_abc() && !rx.nullable(), "unsupported except regex");
                        let mut cs = Vec::new();
                        rx.chars(&mut cs);
                        mark_chars(&mut self.special, &cs);
                        self.nfas.push(Nfa::new(rx));
                        Forbid::Regex(self.nfas.len() - 1)
                    }
                };
                if let Forbid::Strings(ss) = &forbid {
                    for s in ss {
                        assert!(
                            !s.is_empty() && s.iter().all(|b| b.is_ascii() && *b != b'z'),
                            "reference supports only non-empty ASCII except! strings without 'z'"
                        );
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
        self.status(w).1
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

// ---------------------------------------------------------------------------------------------
// Sampling strings from a grammar.
// ---------------------------------------------------------------------------------------------

/// Scalars used when a regex class or `except!` lets anything through.
pub const POOL: &[char] = &['a', 'b', 'c', 'z', '\n', 'é', '€', '😀', 'x'];

pub fn rx_sample(rx: &Rx, rng: &mut SmallRng, out: &mut Vec<u8>) {
    let push = |c: char, out: &mut Vec<u8>| {
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    };
    match rx {
        Rx::Char(c) => push(*c, out),
        Rx::Set(cs) => push(*cs.choose(rng).unwrap(), out),
        Rx::NotSet(cs) => {
            let ok: Vec<char> = POOL.iter().copied().filter(|c| !cs.contains(c)).collect();
            push(*ok.choose(rng).unwrap(), out)
        }
        Rx::Dot => {
            let ok: Vec<char> = POOL.iter().copied().filter(|c| *c != '\n').collect();
            push(*ok.choose(rng).unwrap(), out)
        }
        Rx::Seq(xs) => xs.iter().for_each(|x| rx_sample(x, rng, out)),
        Rx::Alt(xs) => rx_sample(xs.choose(rng).unwrap(), rng, out),
        Rx::Star(x) => {
            for _ in 0..rng.gen_range(0..3) {
                rx_sample(x, rng, out)
            }
        }
        Rx::Plus(x) => {
            for _ in 0..rng.gen_range(1..3) {
                rx_sample(x, rng, out)
            }
        }
        Rx::Opt(x) => {
            if rng.gen_bool(0.5) {
                rx_sample(x, rng, out)
            }
        }
        Rx::Rep(x, m, n) => {
            let hi = n.unwrap_or(m + 2);
            for _ in 0..rng.gen_range(*m..=hi) {
                rx_sample(x, rng, out)
            }
        }
    }
}

/// Shortest strings per nonterminal, by fixpoint (None: unproductive).
pub fn shortest_sentences(g: &Gram) -> Vec<Option<Vec<u8>>> {
    fn rx_short(rx: &Rx) -> Vec<u8> {
        let mut out = Vec::new();
        match rx {
            Rx::Char(c) => out.extend(c.to_string().bytes()),
            Rx::Set(cs) => out.extend(cs[0].to_string().bytes()),
            Rx::NotSet(cs) => {
                let c = POOL.iter().find(|c| !cs.contains(c)).unwrap();
                out.extend(c.to_string().bytes())
            }
            Rx::Dot => out.push(b'a'),
            Rx::Seq(xs) => xs.iter().for_each(|x| out.extend(rx_short(x))),
            Rx::Alt(xs) => {
                out = xs.iter().map(rx_short).min_by_key(|s| s.len()).unwrap();
            }
            Rx::Star(_) | Rx::Opt(_) => {}
            Rx::Plus(x) => out = rx_short(x),
            Rx::Rep(x, m, _) => {
                for _ in 0..*m {
                    out.extend(rx_short(x))
                }
            }
        }
        out
    }
    fn short(e: &Expr, sh: &[Option<Vec<u8>>]) -> Option<Vec<u8>> {
        match e {
            Expr::Lit(b) => Some(b.clone()),
            Expr::Regex(rx) => Some(rx_short(rx)),
            Expr::Except(..) => Some(Vec::new()),
            Expr::Ref(n) => sh[*n].clone(),
            Expr::Seq(xs) => {
                let mut out = Vec::new();
                for x in xs {
                    out.extend(short(x, sh)?);
                }
                Some(out)
            }
            Expr::Alt(xs) => xs
                .iter()
                .filter_map(|x| short(x, sh))
                .min_by_key(|s| s.len()),
            Expr::Group(x) | Expr::Plus(x) => short(x, sh),
            Expr::Opt(_) | Expr::Bracket(_) | Expr::Star(_) | Expr::Brace(_) => Some(Vec::new()),
            Expr::Rep(x, m, _) => {
                if *m == 0 {
                    return Some(Vec::new());
                }
                let one = short(x, sh)?;
                Some(one.repeat(*m as usize))
            }
        }
    }
    let mut sh: Vec<Option<Vec<u8>>> = vec![None; g.names.len()];
    for _ in 0..(g.names.len() + 2) * 4 {
        let mut changed = false;
        for (lhs, rhs) in &g.rules {
            if let Some(s) = short(rhs, &sh) {
                if sh[*lhs].as_ref().is_none_or(|old| s.len() < old.len()) {
                    sh[*lhs] = Some(s);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    sh
}

/// A random sentence generator; recursion deeper than `max_depth` falls back to shortest strings.
pub struct Sampler<'a> {
    pub g: &'a Gram,
    pub short: Vec<Option<Vec<u8>>>,
    pub max_depth: usize,
    pub budget: usize,
    /// Work counter: sampling gives up after `max_steps` expression visits.
    steps: std::cell::Cell<usize>,
    pub max_steps: usize,
}

impl<'a> Sampler<'a> {
    pub fn new(g: &'a Gram) -> Sampler<'a> {
        Sampler {
            g,
            short: shortest_sentences(g),
            max_depth: 6,
            budget: 24,
            steps: std::cell::Cell::new(0),
            max_steps: 3000,
        }
    }

    /// A random sentence of the start symbol (None when sampling failed).
    pub fn sentence(&self, rng: &mut SmallRng) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.steps.set(0);
        self.nonterminal(self.g.start, 0, rng, &mut out)
            .then_some(out)
    }

    fn nonterminal(&self, n: usize, depth: usize, rng: &mut SmallRng, out: &mut Vec<u8>) -> bool {
        self.steps.set(self.steps.get() + 1);
        if depth > self.max_depth || out.len() > self.budget || self.steps.get() > self.max_steps {
            return match &self.short[n] {
                Some(s) => {
                    out.extend_from_slice(s);
                    true
                }
                None => false,
            };
        }
        let rules: Vec<&Expr> = self
            .g
            .rules
            .iter()
            .filter(|(l, _)| *l == n)
            .map(|(_, r)| r)
            .collect();
        // Try a few random rules; unproductive ones fail.
        for _ in 0..4 {
            let r = rules.choose(rng).unwrap();
            let save = out.len();
            if self.expr(r, depth + 1, rng, out) {
                return true;
            }
            out.truncate(save);
        }
        false
    }

    fn expr(&self, e: &Expr, depth: usize, rng: &mut SmallRng, out: &mut Vec<u8>) -> bool {
        let reps = |rng: &mut SmallRng, lo: u32, hi: u32| rng.gen_range(lo..=hi.max(lo));
        match e {
            Expr::Lit(b) => {
                out.extend_from_slice(b);
                true
            }
            Expr::Regex(rx) => {
                rx_sample(rx, rng, out);
                true
            }
            Expr::Except(arg, max) => {
                let forbid: Vec<Vec<u8>> = match arg {
                    ExceptArg::Lit(b) => vec![b.clone()],
                    ExceptArg::Ref(n) => nonterminal_literal_language(self.g, *n),
                    ExceptArg::Regex(_) => Vec::new(),
                };
                let nfa = match arg {
                    ExceptArg::Regex(rx) => Some(Nfa::new(rx)),
                    _ => None,
                };
                let max = max.map_or(8, |m| m as usize);
                let mut s: Vec<u8> = Vec::new();
                for _ in 0..rng.gen_range(0..5) {
                    let c = *POOL.choose(rng).unwrap();
                    let mut t = s.clone();
                    t.extend(c.to_string().bytes());
                    let bad = t.len() > max
                        || forbid
                            .iter()
                            .any(|f| t.windows(f.len()).any(|w| w == f.as_slice()))
                        || nfa.as_ref().is_some_and(|nfa| {
                            (0..t.len())
                                .any(|a| (a + 1..=t.len()).any(|b| nfa.full_match(&t[a..b])))
                        });
                    if !bad {
                        s = t;
                    }
                }
                out.extend_from_slice(&s);
                true
            }
            Expr::Ref(n) => self.nonterminal(*n, depth, rng, out),
            Expr::Seq(xs) => xs.iter().all(|x| self.expr(x, depth, rng, out)),
            Expr::Alt(xs) => {
                let save = out.len();
                for _ in 0..4 {
                    if self.expr(xs.choose(rng).unwrap(), depth, rng, out) {
                        return true;
                    }
                    out.truncate(save);
                }
                false
            }
            Expr::Group(x) => self.expr(x, depth, rng, out),
            Expr::Opt(x) | Expr::Bracket(x) => {
                let save = out.len();
                if rng.gen_bool(0.5) && self.expr(x, depth, rng, out) {
                    return true;
                }
                out.truncate(save);
                true
            }
            Expr::Star(x) | Expr::Brace(x) => {
                for _ in 0..reps(rng, 0, 3) {
                    let save = out.len();
                    if !self.expr(x, depth, rng, out) {
                        out.truncate(save);
                        break;
                    }
                }
                true
            }
            Expr::Plus(x) => (0..reps(rng, 1, 3)).all(|_| self.expr(x, depth, rng, out)),
            Expr::Rep(x, m, n) => {
                let k = reps(rng, *m, n.unwrap_or(m + 2));
                (0..k).all(|_| self.expr(x, depth, rng, out))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A tiny KBNF-subset parser for hand-written test grammars (literals with `\\ \' \" \n` escapes,
// names, `|`, juxtaposition, `( )`, `[ ]`, `{ }`, `? * +`, `{m}` `{m,}` `{m,n}`). The start symbol
// is `start`.
// ---------------------------------------------------------------------------------------------

pub fn parse_gram(text: &str) -> Gram {
    struct P<'a> {
        s: &'a [u8],
        i: usize,
        names: Vec<String>,
    }
    impl P<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }
        fn peek(&mut self) -> Option<u8> {
            self.ws();
            self.s.get(self.i).copied()
        }
        fn eat(&mut self, c: u8) -> bool {
            if self.peek() == Some(c) {
                self.i += 1;
                true
            } else {
                false
            }
        }
        fn name_id(&mut self, n: &str) -> usize {
            match self.names.iter().position(|x| x == n) {
                Some(k) => k,
                None => {
                    self.names.push(n.to_string());
                    self.names.len() - 1
                }
            }
        }
        fn ident(&mut self) -> String {
            self.ws();
            let st = self.i;
            while self.i < self.s.len()
                && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
            {
                self.i += 1;
            }
            assert!(self.i > st, "test grammar: name expected at {}", self.i);
            String::from_utf8(self.s[st..self.i].to_vec()).unwrap()
        }
        fn alt(&mut self) -> Expr {
            let mut xs = vec![self.seq()];
            while self.eat(b'|') {
                xs.push(self.seq());
            }
            if xs.len() == 1 {
                xs.pop().unwrap()
            } else {
                Expr::Alt(xs)
            }
        }
        fn seq(&mut self) -> Expr {
            let mut xs = Vec::new();
            loop {
                self.eat(b',');
                match self.peek() {
                    Some(b'\'' | b'"' | b'(' | b'[' | b'{') => xs.push(self.postfix()),
                    Some(c) if c.is_ascii_alphabetic() || c == b'_' => xs.push(self.postfix()),
                    _ => break,
                }
            }
            assert!(
                !xs.is_empty(),
                "test grammar: empty alternative at {}",
                self.i
            );
            if xs.len() == 1 {
                xs.pop().unwrap()
            } else {
                Expr::Seq(xs)
            }
        }
        fn counted(&mut self) -> Option<(u32, Option<u32>)> {
            let save = self.i;
            if !self.eat(b'{') {
                return None;
            }
            let num = |p: &mut Self| -> Option<u32> {
                p.ws();
                let st = p.i;
                while p.i < p.s.len() && p.s[p.i].is_ascii_digit() {
                    p.i += 1;
                }
                std::str::from_utf8(&p.s[st..p.i]).unwrap().parse().ok()
            };
            let Some(m) = num(self) else {
                self.i = save;
                return None;
            };
            if self.eat(b'}') {
                return Some((m, Some(m)));
            }
            assert!(self.eat(b','), "test grammar: bad counted repetition");
            if self.eat(b'}') {
                return Some((m, None));
            }
            let n = num(self).expect("test grammar: bad counted repetition");
            assert!(self.eat(b'}'), "test grammar: bad counted repetition");
            Some((m, Some(n)))
        }
        fn postfix(&mut self) -> Expr {
            let mut e = self.primary();
            loop {
                if self.eat(b'?') {
                    e = Expr::Opt(Box::new(e));
                } else if self.eat(b'*') {
                    e = Expr::Star(Box::new(e));
                } else if self.eat(b'+') {
                    e = Expr::Plus(Box::new(e));
                } else if let Some((m, n)) = self.counted() {
                    e = Expr::Rep(Box::new(e), m, n);
                } else {
                    return e;
                }
            }
        }
        fn primary(&mut self) -> Expr {
            match self.peek() {
                Some(q @ (b'\'' | b'"')) => {
                    self.i += 1;
                    let mut v = Vec::new();
                    loop {
                        let c = self.s[self.i];
                        self.i += 1;
                        if c == q {
                            break;
                        }
                        if c == b'\\' {
                            let e = self.s[self.i];
                            self.i += 1;
                            v.push(if e == b'n' { b'\n' } else { e });
                        } else {
                            v.push(c);
                        }
                    }
                    Expr::Lit(v)
                }
                Some(b'(') => {
                    self.i += 1;
                    let e = self.alt();
                    assert!(self.eat(b')'), "test grammar: `)` expected");
                    Expr::Group(Box::new(e))
                }
                Some(b'[') => {
                    self.i += 1;
                    let e = self.alt();
                    assert!(self.eat(b']'), "test grammar: `]` expected");
                    Expr::Bracket(Box::new(e))
                }
                Some(b'{') => {
                    self.i += 1;
                    let e = self.alt();
                    assert!(self.eat(b'}'), "test grammar: `}}` expected");
                    Expr::Brace(Box::new(e))
                }
                _ => {
                    let n = self.ident();
                    Expr::Ref(self.name_id(&n))
                }
            }
        }
    }
    let mut p = P {
        s: text.as_bytes(),
        i: 0,
        names: vec!["start".to_string()],
    };
    let mut rules = Vec::new();
    while p.peek().is_some() {
        let lhs = p.ident();
        let lhs = p.name_id(&lhs);
        p.ws();
        assert!(
            p.s[p.i..].starts_with(b"::="),
            "test grammar: `::=` expected at {}",
            p.i
        );
        p.i += 3;
        let rhs = p.alt();
        assert!(p.eat(b';'), "test grammar: `;` expected at {}", p.i);
        rules.push((lhs, rhs));
    }
    Gram {
        names: p.names,
        rules,
        start: 0,
        style: Style::default(),
    }
}

// ---------------------------------------------------------------------------------------------
// Exhaustive comparison of engine and reference over all short strings.
// ---------------------------------------------------------------------------------------------

/// Compares the engine with the reference on every string over `alphabet` of length at most
/// `depth` whose proper prefixes are viable: at each such prefix `is_complete()` and
/// `allowed_bytes()` must agree, and `feed_byte` must return the reference viability. Walks the
/// strings depth-first with `rollback_to`. Returns the number of prefixes compared.
pub fn exhaustive_compare(
    g: &Arc<Grammar>,
    gram: &Gram,
    alphabet: &[u8],
    depth: usize,
) -> Result<usize, String> {
    let mut reference = Reference::new(gram);
    let classes = reference.byte_classes();
    let mut r = Recognizer::new(g.clone());
    let mut prefix = Vec::new();
    let mut count = 0;
    walk(
        &mut r,
        &mut reference,
        &classes,
        alphabet,
        depth,
        &mut prefix,
        &mut count,
    )
    .map_err(|e| format!("grammar:\n{}{e}", gram.render()))?;
    Ok(count)
}

fn walk(
    r: &mut Recognizer,
    reference: &mut Reference,
    classes: &[u8; 256],
    alphabet: &[u8],
    depth: usize,
    prefix: &mut Vec<u8>,
    count: &mut usize,
) -> Result<(), String> {
    *count += 1;
    let exp_c = reference.complete(prefix);
    if exp_c != r.is_complete() {
        return Err(format!(
            "is_complete() after {}: expected {exp_c}, got {}",
            esc(prefix),
            r.is_complete()
        ));
    }
    let exp = reference.allowed(prefix, classes, false);
    let got = allowed(r);
    if exp != got {
        return Err(format!(
            "allowed_bytes() after {}: expected {}, got {}",
            esc(prefix),
            fmt_set(&exp),
            fmt_set(&got)
        ));
    }
    if prefix.len() == depth {
        return Ok(());
    }
    let len = r.len();
    for &b in alphabet {
        prefix.push(b);
        let exp = reference.viable(prefix);
        let got = r.feed_byte(b);
        if exp != got {
            return Err(format!(
                "feed_byte after {}: expected {exp}, got {got}",
                esc(prefix)
            ));
        }
        if got {
            walk(r, reference, classes, alphabet, depth, prefix, count)?;
            r.rollback_to(len);
        }
        prefix.pop();
    }
    Ok(())
}
