//! Shared helpers for the integration tests: the reference recognizer and its grammar AST
//! ([`reference`], shared with the fuzz targets), samplers, a parser for hand-written grammars,
//! and thin adapters over the engine API.

#![allow(dead_code)]

mod reference;
pub use reference::*;

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
        Rx::Class(rs, false) => {
            let &(a, b) = rs.choose(rng).unwrap();
            push(
                char::from_u32(rng.gen_range(a as u32..=b as u32)).unwrap_or(a),
                out,
            )
        }
        Rx::Class(rs, true) => {
            let outside = |c: &char| !rs.iter().any(|&(a, b)| a <= *c && *c <= b);
            let ok: Vec<char> = POOL.iter().copied().filter(outside).collect();
            push(*ok.choose(rng).unwrap(), out)
        }
        Rx::AsciiDigit => push(char::from(b'0' + rng.gen_range(0..10u8)), out),
        Rx::Byte(b) => out.push(*b),
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
            Rx::Class(rs, false) => out.extend(rs[0].0.to_string().bytes()),
            Rx::Class(rs, true) => {
                let outside = |c: &&char| !rs.iter().any(|&(a, b)| a <= **c && **c <= b);
                out.extend(POOL.iter().find(outside).unwrap().to_string().bytes())
            }
            Rx::AsciiDigit => out.push(b'0'),
            Rx::Byte(b) => out.push(*b),
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
