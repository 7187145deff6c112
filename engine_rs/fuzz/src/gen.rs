//! Byte-driven generators: small KBNF grammars in the reference recognizer's AST (shared with the
//! integration tests, see [`crate::reference`]), sentences sampled from them, and raw inputs.
//!
//! Every generator consumes bytes from a [`Src`]; an exhausted source yields zeros, and choice 0
//! is always the simplest option, so generation terminates on any input.

/// A cursor over fuzz input bytes. Reading past the end yields zeros.
pub struct Src<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Src<'a> {
    pub fn new(data: &'a [u8]) -> Src<'a> {
        Src { data, pos: 0 }
    }

    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// A number in `0..n` (`n >= 1`).
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n >= 1);
        if n <= 256 {
            self.byte() as usize % n
        } else {
            let v = (self.byte() as usize) << 8 | self.byte() as usize;
            v % n
        }
    }

    /// True with probability about `1/n`.
    pub fn one_in(&mut self, n: u8) -> bool {
        self.byte() % n == n - 1
    }

    pub fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.data[self.pos.min(self.data.len())..]
    }
}

/// Characters the generated regexes, literals and inputs are drawn from: ASCII letters, JSON
/// punctuation, a newline, a quote, a backslash, two-byte `é` and a four-byte emoji.
pub const CHARS: &[char] = &[
    'a',
    'b',
    'c',
    'd',
    '0',
    '1',
    ' ',
    '\n',
    '"',
    '\\',
    '{',
    '}',
    ',',
    'é',
    '\u{1F600}',
    'x',
];

/// Bytes for raw inputs: ASCII from [`CHARS`], the UTF-8 of `é` and the emoji, and invalid bytes.
pub const INPUT_BYTES: &[u8] = &[
    b'a', b'b', b'c', b'd', b'0', b'1', b' ', b'\n', b'"', b'\\', b'{', b'}', b',', 0xC3, 0xA9,
    0xF0, 0x9F, 0x98, 0x80, 0xFF, 0x00, b'x',
];

use crate::reference::{ExceptArg, Expr, Gram, Rx, Style};

/// A small regex over [`CHARS`]: characters, classes with ranges (possibly negated), `.`,
/// `(?-u:\d)`, raw bytes `(?-u:\xHH)` (possibly not UTF-8) and the regex operators.
pub fn gen_rx(src: &mut Src, depth: u32) -> Rx {
    let leaf = depth == 0 || src.exhausted();
    match if leaf { src.below(5) } else { src.below(12) } {
        0 | 1 => Rx::Char(CHARS[src.below(CHARS.len())]),
        2 => {
            let n = 1 + src.below(3);
            let mut ranges = Vec::new();
            for _ in 0..n {
                let a = CHARS[src.below(CHARS.len())];
                // Ranges only between letters so they stay well-formed.
                if a.is_ascii_lowercase() && src.one_in(2) {
                    let b = (a as u8 + src.below(3) as u8).min(b'z') as char;
                    ranges.push((a, b));
                } else {
                    ranges.push((a, a));
                }
            }
            Rx::Class(ranges, src.one_in(3))
        }
        3 => match src.below(3) {
            0 => Rx::Dot,
            1 => Rx::AsciiDigit,
            _ => Rx::Byte(INPUT_BYTES[src.below(INPUT_BYTES.len())]),
        },
        4 => Rx::Char('a'),
        5 | 6 => {
            let n = 2 + src.below(3);
            Rx::Seq((0..n).map(|_| gen_rx(src, depth - 1)).collect())
        }
        7 | 8 => {
            let n = 2 + src.below(2);
            Rx::Alt((0..n).map(|_| gen_rx(src, depth - 1)).collect())
        }
        9 => Rx::Star(Box::new(gen_rx(src, depth - 1))),
        10 => match src.below(2) {
            0 => Rx::Plus(Box::new(gen_rx(src, depth - 1))),
            _ => Rx::Opt(Box::new(gen_rx(src, depth - 1))),
        },
        _ => {
            let m = src.below(3) as u32;
            let n = m + src.below(3) as u32;
            Rx::Rep(Box::new(gen_rx(src, depth - 1)), m, Some(n))
        }
    }
}

fn gen_lit(src: &mut Src, allow_empty: bool) -> Vec<u8> {
    let len = if allow_empty {
        src.below(4)
    } else {
        1 + src.below(3)
    };
    let mut out = Vec::new();
    for _ in 0..len {
        if src.one_in(8) {
            out.push(INPUT_BYTES[src.below(INPUT_BYTES.len())]);
        } else {
            let c = CHARS[src.below(CHARS.len())];
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    out
}

/// Sequences and alternatives sometimes in explicit parentheses.
fn maybe_group(src: &mut Src, e: Expr) -> Expr {
    if src.one_in(4) {
        Expr::Group(Box::new(e))
    } else {
        e
    }
}

fn gen_expr(src: &mut Src, depth: u32, n_nts: usize) -> Expr {
    let leaf = depth == 0 || src.exhausted();
    match if leaf { src.below(4) } else { src.below(15) } {
        0 | 1 => Expr::Lit(gen_lit(src, true)),
        2 => Expr::Regex(gen_rx(src, 2)),
        3 => Expr::Ref(src.below(n_nts)),
        4..=6 => {
            let n = 2 + src.below(3);
            let e = Expr::Seq((0..n).map(|_| gen_expr(src, depth - 1, n_nts)).collect());
            maybe_group(src, e)
        }
        7 | 8 => {
            let n = 2 + src.below(2);
            let e = Expr::Alt((0..n).map(|_| gen_expr(src, depth - 1, n_nts)).collect());
            maybe_group(src, e)
        }
        9 => {
            let x = Box::new(gen_expr(src, depth - 1, n_nts));
            if src.one_in(2) {
                Expr::Bracket(x)
            } else {
                Expr::Opt(x)
            }
        }
        10 => {
            let x = Box::new(gen_expr(src, depth - 1, n_nts));
            if src.one_in(2) {
                Expr::Brace(x)
            } else {
                Expr::Star(x)
            }
        }
        11 => Expr::Plus(Box::new(gen_expr(src, depth - 1, n_nts))),
        12 => {
            let m = src.below(3) as u32;
            let max = match src.below(4) {
                0 => None,
                1 => Some(m),
                2 => Some(m + src.below(3) as u32),
                // Large bounds exercise the logarithmic expansion of counted repetition.
                _ => Some(m + 100 + src.below(2000) as u32),
            };
            Expr::Rep(Box::new(gen_expr(src, depth - 1, n_nts)), m, max)
        }
        13 => {
            let arg = if src.one_in(3) {
                let mut rx = gen_rx(src, 2);
                if rx.nullable() {
                    rx = Rx::Seq(vec![Rx::Char(CHARS[src.below(CHARS.len())]), rx]);
                }
                ExceptArg::Regex(rx)
            } else {
                ExceptArg::Lit(gen_lit(src, false))
            };
            let max = if src.one_in(2) {
                // The bound must be at least 1 (0 is a documented compile error).
                Some(1 + src.below(12) as u32)
            } else {
                None
            };
            Expr::Except(arg, max)
        }
        _ => Expr::Ref(src.below(n_nts)),
    }
}

/// A grammar of 1–5 nonterminals (0 is `start`) with 1–3 alternatives each, written as one rule
/// per alternative or one rule with `|`, in a generated style.
pub fn gen_grammar(src: &mut Src) -> Gram {
    let bits = src.byte();
    let style = Style {
        commas: bits & 2 != 0,
        comments: bits & 4 != 0,
        double_quotes: bits & 8 != 0,
        unicode_escapes: bits & 16 != 0,
    };
    let n_nts = 1 + src.below(5);
    let depth = 1 + src.below(3) as u32;
    let mut rules = Vec::new();
    for lhs in 0..n_nts {
        let n_alts = 1 + src.below(3);
        let mut alts: Vec<Expr> = (0..n_alts).map(|_| gen_expr(src, depth, n_nts)).collect();
        if bits & 1 != 0 || alts.len() == 1 {
            rules.extend(alts.into_iter().map(|e| (lhs, e)));
        } else {
            rules.push((lhs, Expr::Alt(std::mem::take(&mut alts))));
        }
    }
    let names = (0..n_nts)
        .map(|i| {
            if i == 0 {
                "start".to_owned()
            } else {
                format!("n{i}")
            }
        })
        .collect();
    Gram {
        names,
        rules,
        start: 0,
        style,
    }
}

/// Bytes that occur in the grammar's literals and regexes, and those of [`CHARS`] (for
/// vocabularies).
pub fn alphabet(g: &Gram) -> Vec<u8> {
    fn walk(e: &Expr, seen: &mut [bool; 256]) {
        let mark_rx = |rx: &Rx, seen: &mut [bool; 256]| {
            let mut bytes = Vec::new();
            rx.raw_bytes(&mut bytes);
            bytes.iter().for_each(|&x| seen[x as usize] = true);
        };
        match e {
            Expr::Lit(b) | Expr::Except(ExceptArg::Lit(b), _) => {
                b.iter().for_each(|&x| seen[x as usize] = true)
            }
            Expr::Regex(rx) | Expr::Except(ExceptArg::Regex(rx), _) => mark_rx(rx, seen),
            Expr::Ref(_) | Expr::Except(ExceptArg::Ref(_), _) => {}
            Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|x| walk(x, seen)),
            Expr::Group(x)
            | Expr::Opt(x)
            | Expr::Bracket(x)
            | Expr::Star(x)
            | Expr::Brace(x)
            | Expr::Plus(x)
            | Expr::Rep(x, ..) => walk(x, seen),
        }
    }
    let mut seen = [false; 256];
    for (_, e) in &g.rules {
        walk(e, &mut seen);
    }
    for c in CHARS {
        let mut buf = [0u8; 4];
        c.encode_utf8(&mut buf)
            .bytes()
            .for_each(|x| seen[x as usize] = true);
    }
    (0..=255u8).filter(|&b| seen[b as usize]).collect()
}

/// A sentence derived from the grammar by choices read from `src`, or `None` when the
/// derivation grows beyond `budget` expansion steps or `max_len` bytes.
pub fn sample(g: &Gram, src: &mut Src, budget: &mut u32, max_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    sample_nt(g, g.start, src, budget, max_len, &mut out)?;
    Some(out)
}

fn sample_nt(
    g: &Gram,
    nt: usize,
    src: &mut Src,
    budget: &mut u32,
    max_len: usize,
    out: &mut Vec<u8>,
) -> Option<()> {
    let rules: Vec<&Expr> = g
        .rules
        .iter()
        .filter(|(lhs, _)| *lhs == nt)
        .map(|(_, e)| e)
        .collect();
    if rules.is_empty() {
        return None;
    }
    let e = rules[src.below(rules.len())];
    sample_expr(g, e, src, budget, max_len, out)
}

fn sample_expr(
    g: &Gram,
    e: &Expr,
    src: &mut Src,
    budget: &mut u32,
    max_len: usize,
    out: &mut Vec<u8>,
) -> Option<()> {
    if *budget == 0 || out.len() > max_len {
        return None;
    }
    *budget -= 1;
    match e {
        Expr::Lit(b) => out.extend_from_slice(b),
        Expr::Regex(rx) => sample_rx(rx, src, out),
        Expr::Ref(i) => sample_nt(g, *i, src, budget, max_len, out)?,
        Expr::Seq(v) => {
            for x in v {
                sample_expr(g, x, src, budget, max_len, out)?;
            }
        }
        Expr::Alt(v) => {
            let x = &v[src.below(v.len())];
            sample_expr(g, x, src, budget, max_len, out)?;
        }
        Expr::Group(x) => sample_expr(g, x, src, budget, max_len, out)?,
        Expr::Opt(x) | Expr::Bracket(x) => {
            if src.one_in(2) {
                sample_expr(g, x, src, budget, max_len, out)?;
            }
        }
        Expr::Star(x) | Expr::Brace(x) => {
            for _ in 0..src.below(3) {
                sample_expr(g, x, src, budget, max_len, out)?;
            }
        }
        Expr::Plus(x) => {
            for _ in 0..1 + src.below(2) {
                sample_expr(g, x, src, budget, max_len, out)?;
            }
        }
        Expr::Rep(x, m, max) => {
            let extra = match max {
                Some(n) => src.below((n - m).min(3) as usize + 1) as u32,
                None => src.below(3) as u32,
            };
            for _ in 0..m + extra {
                sample_expr(g, x, src, budget, max_len, out)?;
            }
        }
        Expr::Except(arg, max) => {
            // A few characters avoiding the excluded text (checked by the reference).
            let limit = max.unwrap_or(6).min(6) as usize;
            let start = out.len();
            for _ in 0..src.below(limit + 1) {
                let c = CHARS[src.below(CHARS.len())];
                let mut buf = [0u8; 4];
                let enc = c.encode_utf8(&mut buf).as_bytes();
                if out.len() - start + enc.len() > limit {
                    break;
                }
                out.extend_from_slice(enc);
                let forbidden = match arg {
                    ExceptArg::Lit(b) => contains(&out[start..], b),
                    ExceptArg::Regex(_) | ExceptArg::Ref(_) => false,
                };
                if forbidden {
                    out.truncate(out.len() - enc.len());
                    break;
                }
            }
        }
    }
    Some(())
}

fn sample_rx(rx: &Rx, src: &mut Src, out: &mut Vec<u8>) {
    let push = |c: char, out: &mut Vec<u8>| {
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    };
    match rx {
        Rx::Char(c) => push(*c, out),
        Rx::Set(cs) => push(cs[src.below(cs.len())], out),
        Rx::NotSet(cs) => {
            let cands: Vec<char> = CHARS.iter().copied().filter(|c| !cs.contains(c)).collect();
            push(
                cands
                    .get(src.below(cands.len().max(1)))
                    .copied()
                    .unwrap_or('\u{263A}'),
                out,
            );
        }
        Rx::Class(ranges, negated) => {
            if *negated {
                // Pick a character outside the class, if one of ours is.
                let mut cands: Vec<char> = CHARS
                    .iter()
                    .copied()
                    .filter(|&c| c != '\n' && !ranges.iter().any(|&(a, b)| a <= c && c <= b))
                    .collect();
                if cands.is_empty() {
                    cands.push('\u{263A}');
                }
                push(cands[src.below(cands.len())], out);
            } else {
                let (a, b) = ranges[src.below(ranges.len())];
                let span = b as u32 - a as u32;
                let c = char::from_u32(a as u32 + src.below(span as usize + 1) as u32).unwrap_or(a);
                push(c, out);
            }
        }
        Rx::Dot => {
            let c = CHARS[src.below(CHARS.len())];
            push(if c == '\n' { 'y' } else { c }, out);
        }
        Rx::AsciiDigit => push((b'0' + src.below(10) as u8) as char, out),
        Rx::Byte(b) => out.push(*b),
        Rx::Seq(v) => v.iter().for_each(|x| sample_rx(x, src, out)),
        Rx::Alt(v) => sample_rx(&v[src.below(v.len())], src, out),
        Rx::Star(x) => (0..src.below(3)).for_each(|_| sample_rx(x, src, out)),
        Rx::Plus(x) => (0..1 + src.below(2)).for_each(|_| sample_rx(x, src, out)),
        Rx::Opt(x) => {
            if src.one_in(2) {
                sample_rx(x, src, out)
            }
        }
        Rx::Rep(x, m, n) => {
            let hi = n.unwrap_or(m + 2);
            let k = m + src.below((hi - m) as usize + 1) as u32;
            (0..k).for_each(|_| sample_rx(x, src, out));
        }
    }
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Raw input bytes, mostly from [`INPUT_BYTES`].
pub fn gen_input(src: &mut Src, max_len: usize) -> Vec<u8> {
    let len = src.below(max_len + 1);
    (0..len)
        .map(|_| {
            if src.one_in(16) {
                src.byte()
            } else {
                INPUT_BYTES[src.below(INPUT_BYTES.len())]
            }
        })
        .collect()
}
