//! Byte-driven generators: small KBNF grammars (as an AST that renders to KBNF text and that the
//! reference recognizer understands), inputs, and vocabularies.
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

/// A small regex, rendered in Rust `regex` syntax.
#[derive(Clone, Debug)]
pub enum Re {
    Char(char),
    /// `[...]` or `[^...]` over ranges.
    Class(Vec<(char, char)>, bool),
    /// `.` (any code point but `\n`).
    Dot,
    /// `\d` (Unicode digits).
    Digit,
    /// `(?-u:\xHH)`: one raw byte, possibly not UTF-8.
    Byte(u8),
    Seq(Vec<Re>),
    Alt(Vec<Re>),
    Star(Box<Re>),
    Plus(Box<Re>),
    Opt(Box<Re>),
    Rep(Box<Re>, u32, u32),
}

impl Re {
    pub fn nullable(&self) -> bool {
        match self {
            Re::Char(_) | Re::Class(..) | Re::Dot | Re::Digit | Re::Byte(_) => false,
            Re::Seq(v) => v.iter().all(Re::nullable),
            Re::Alt(v) => v.iter().any(Re::nullable),
            Re::Star(_) | Re::Opt(_) => true,
            Re::Plus(r) => r.nullable(),
            Re::Rep(r, m, _) => *m == 0 || r.nullable(),
        }
    }

    /// Regex syntax; a `"` is written `\"` so the text can stand verbatim inside `#"..."`.
    pub fn render(&self, out: &mut String) {
        match self {
            Re::Char(c) => push_re_char(*c, out),
            Re::Class(ranges, neg) => {
                out.push('[');
                if *neg {
                    out.push('^');
                }
                for &(a, b) in ranges {
                    push_re_char(a, out);
                    if b != a {
                        out.push('-');
                        push_re_char(b, out);
                    }
                }
                out.push(']');
            }
            Re::Dot => out.push('.'),
            Re::Digit => out.push_str("\\d"),
            Re::Byte(b) => out.push_str(&format!("(?-u:\\x{b:02X})")),
            Re::Seq(v) => {
                out.push_str("(?:");
                for r in v {
                    r.render(out);
                }
                out.push(')');
            }
            Re::Alt(v) => {
                out.push_str("(?:");
                for (i, r) in v.iter().enumerate() {
                    if i > 0 {
                        out.push('|');
                    }
                    r.render(out);
                }
                out.push(')');
            }
            Re::Star(r) => {
                r.render_atom(out);
                out.push('*');
            }
            Re::Plus(r) => {
                r.render_atom(out);
                out.push('+');
            }
            Re::Opt(r) => {
                r.render_atom(out);
                out.push('?');
            }
            Re::Rep(r, m, n) => {
                r.render_atom(out);
                out.push_str(&format!("{{{m},{n}}}"));
            }
        }
    }

    fn render_atom(&self, out: &mut String) {
        match self {
            Re::Star(_) | Re::Plus(_) | Re::Opt(_) | Re::Rep(..) => {
                out.push_str("(?:");
                self.render(out);
                out.push(')');
            }
            _ => self.render(out),
        }
    }

    pub fn to_pattern(&self) -> String {
        let mut s = String::new();
        self.render(&mut s);
        s
    }
}

fn push_re_char(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '"' => out.push_str("\\\""),
        c if c.is_ascii_alphanumeric() || !c.is_ascii() => out.push(c),
        c => {
            // Every other ASCII character is escaped (always valid in the regex crate).
            out.push('\\');
            out.push(c);
        }
    }
}

pub fn gen_re(src: &mut Src, depth: u32) -> Re {
    let leaf = depth == 0 || src.exhausted();
    match if leaf { src.below(5) } else { src.below(12) } {
        0 | 1 => Re::Char(CHARS[src.below(CHARS.len())]),
        2 => {
            let n = 1 + src.below(3);
            let mut ranges = Vec::new();
            for _ in 0..n {
                let a = CHARS[src.below(CHARS.len())];
                // Ranges only between letters/digits so they stay well-formed.
                if a.is_ascii_lowercase() && src.one_in(2) {
                    let b = (a as u8 + src.below(3) as u8).min(b'z') as char;
                    ranges.push((a, b));
                } else {
                    ranges.push((a, a));
                }
            }
            Re::Class(ranges, src.one_in(3))
        }
        3 => match src.below(3) {
            0 => Re::Dot,
            1 => Re::Digit,
            _ => Re::Byte(INPUT_BYTES[src.below(INPUT_BYTES.len())]),
        },
        4 => Re::Char('a'),
        5 | 6 => {
            let n = 2 + src.below(3);
            Re::Seq((0..n).map(|_| gen_re(src, depth - 1)).collect())
        }
        7 | 8 => {
            let n = 2 + src.below(2);
            Re::Alt((0..n).map(|_| gen_re(src, depth - 1)).collect())
        }
        9 => Re::Star(Box::new(gen_re(src, depth - 1))),
        10 => match src.below(2) {
            0 => Re::Plus(Box::new(gen_re(src, depth - 1))),
            _ => Re::Opt(Box::new(gen_re(src, depth - 1))),
        },
        _ => {
            let m = src.below(3) as u32;
            let n = m + src.below(3) as u32;
            Re::Rep(Box::new(gen_re(src, depth - 1)), m, n)
        }
    }
}

/// The argument of a generated `except!`: a non-empty literal or a regex that does not match the
/// empty string.
#[derive(Clone, Debug)]
pub enum ExceptArg {
    Lit(Vec<u8>),
    Re(Re),
}

/// A generated KBNF expression.
#[derive(Clone, Debug)]
pub enum Expr {
    Lit(Vec<u8>),
    Regex(Re),
    /// Index of a nonterminal (0 is `start`).
    Nt(usize),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    /// `X?` or `[X]` (the flag picks the spelling).
    Opt(Box<Expr>, bool),
    /// `X*` or `{X}`.
    Star(Box<Expr>, bool),
    Plus(Box<Expr>),
    /// `X{m}` (max == Some(m)), `X{m,}` (None) or `X{m,n}`.
    Rep(Box<Expr>, u32, Option<u32>),
    Except(ExceptArg, Option<u32>),
}

/// A generated grammar: `rules[i]` are the alternatives of nonterminal `i`; 0 is `start`.
#[derive(Clone, Debug)]
pub struct Gram {
    pub rules: Vec<Vec<Expr>>,
    /// Rendering choices (bits): 1 = one rule per alternative, 2 = commas in sequences,
    /// 4 = comments, 8 = double-quoted literals.
    pub style: u8,
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

fn gen_expr(src: &mut Src, depth: u32, n_nts: usize) -> Expr {
    let leaf = depth == 0 || src.exhausted();
    match if leaf { src.below(4) } else { src.below(15) } {
        0 | 1 => Expr::Lit(gen_lit(src, true)),
        2 => Expr::Regex(gen_re(src, 2)),
        3 => Expr::Nt(src.below(n_nts)),
        4..=6 => {
            let n = 2 + src.below(3);
            Expr::Seq((0..n).map(|_| gen_expr(src, depth - 1, n_nts)).collect())
        }
        7 | 8 => {
            let n = 2 + src.below(2);
            Expr::Alt((0..n).map(|_| gen_expr(src, depth - 1, n_nts)).collect())
        }
        9 => Expr::Opt(Box::new(gen_expr(src, depth - 1, n_nts)), src.one_in(2)),
        10 => Expr::Star(Box::new(gen_expr(src, depth - 1, n_nts)), src.one_in(2)),
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
                let mut re = gen_re(src, 2);
                if re.nullable() {
                    re = Re::Seq(vec![Re::Char(CHARS[src.below(CHARS.len())]), re]);
                }
                ExceptArg::Re(re)
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
        _ => Expr::Nt(src.below(n_nts)),
    }
}

/// A grammar of 1–5 nonterminals with 1–3 alternatives each.
pub fn gen_grammar(src: &mut Src) -> Gram {
    let style = src.byte();
    let n_nts = 1 + src.below(5);
    let depth = 1 + src.below(3) as u32;
    let rules = (0..n_nts)
        .map(|_| {
            let n_alts = 1 + src.below(3);
            (0..n_alts).map(|_| gen_expr(src, depth, n_nts)).collect()
        })
        .collect();
    Gram { rules, style }
}

pub fn nt_name(i: usize) -> String {
    if i == 0 {
        "start".to_owned()
    } else {
        format!("n{i}")
    }
}

impl Gram {
    /// KBNF text for the grammar.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.style & 4 != 0 {
            out.push_str("(* generated grammar *)\n");
        }
        for (i, alts) in self.rules.iter().enumerate() {
            if self.style & 1 != 0 {
                for a in alts {
                    out.push_str(&nt_name(i));
                    out.push_str(" ::= ");
                    self.render_expr(a, &mut out);
                    out.push_str(";\n");
                }
            } else {
                out.push_str(&nt_name(i));
                out.push_str(" ::= ");
                for (k, a) in alts.iter().enumerate() {
                    if k > 0 {
                        out.push_str(if self.style & 4 != 0 {
                            " (* or *) | "
                        } else {
                            " | "
                        });
                    }
                    self.render_expr(a, &mut out);
                }
                out.push_str(";\n");
            }
        }
        out
    }

    fn render_lit(&self, bytes: &[u8], out: &mut String) {
        let q = if self.style & 8 != 0 { '"' } else { '\'' };
        out.push(q);
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            // Multi-byte UTF-8 characters: raw, or as \u{...} depending on style.
            if b >= 0x80 {
                let end = (i + 4).min(bytes.len());
                if let Some(c) = (i + 2..=end)
                    .filter_map(|j| std::str::from_utf8(&bytes[i..j]).ok())
                    .find_map(|s| s.chars().next().filter(|c| c.len_utf8() == s.len()))
                {
                    if self.style & 16 != 0 {
                        out.push_str(&format!("\\u{{{:X}}}", c as u32));
                    } else {
                        out.push(c);
                    }
                    i += c.len_utf8();
                    continue;
                }
                out.push_str(&format!("\\x{b:02X}"));
            } else if b == b'\n' {
                out.push_str("\\n");
            } else if b == b'\\' {
                out.push_str("\\\\");
            } else if b == q as u8 {
                out.push('\\');
                out.push(q);
            } else if b.is_ascii_graphic() || b == b' ' {
                out.push(b as char);
            } else {
                out.push_str(&format!("\\x{b:02X}"));
            }
            i += 1;
        }
        out.push(q);
    }

    fn render_expr(&self, e: &Expr, out: &mut String) {
        match e {
            Expr::Lit(b) => self.render_lit(b, out),
            Expr::Regex(r) => {
                out.push_str("#\"");
                r.render(out);
                out.push('"');
            }
            Expr::Nt(i) => out.push_str(&nt_name(*i)),
            Expr::Seq(v) => {
                out.push('(');
                for (k, x) in v.iter().enumerate() {
                    if k > 0 {
                        out.push_str(if self.style & 2 != 0 { ", " } else { " " });
                    }
                    self.render_expr(x, out);
                }
                out.push(')');
            }
            Expr::Alt(v) => {
                out.push('(');
                for (k, x) in v.iter().enumerate() {
                    if k > 0 {
                        out.push_str(" | ");
                    }
                    self.render_expr(x, out);
                }
                out.push(')');
            }
            Expr::Opt(x, brackets) => {
                if *brackets {
                    out.push('[');
                    self.render_expr(x, out);
                    out.push(']');
                } else {
                    self.render_atom(x, out);
                    out.push('?');
                }
            }
            Expr::Star(x, braces) => {
                if *braces {
                    out.push('{');
                    self.render_expr(x, out);
                    out.push('}');
                } else {
                    self.render_atom(x, out);
                    out.push('*');
                }
            }
            Expr::Plus(x) => {
                self.render_atom(x, out);
                out.push('+');
            }
            Expr::Rep(x, m, max) => {
                self.render_atom(x, out);
                match max {
                    Some(n) if n == m => out.push_str(&format!("{{{m}}}")),
                    Some(n) => out.push_str(&format!("{{{m},{n}}}")),
                    None => out.push_str(&format!("{{{m},}}")),
                }
            }
            Expr::Except(arg, max) => {
                out.push_str("except!(");
                match arg {
                    ExceptArg::Lit(b) => self.render_lit(b, out),
                    ExceptArg::Re(r) => {
                        out.push_str("#\"");
                        r.render(out);
                        out.push('"');
                    }
                }
                if let Some(n) = max {
                    out.push_str(&format!(", {n}"));
                }
                out.push(')');
            }
        }
    }

    fn render_atom(&self, e: &Expr, out: &mut String) {
        match e {
            Expr::Opt(..) | Expr::Star(..) | Expr::Plus(_) | Expr::Rep(..) => {
                out.push('(');
                self.render_expr(e, out);
                out.push(')');
            }
            _ => self.render_expr(e, out),
        }
    }

    /// Bytes that occur in the grammar's literals and regexes' characters (for vocabularies).
    pub fn alphabet(&self) -> Vec<u8> {
        let mut seen = [false; 256];
        fn walk(e: &Expr, seen: &mut [bool; 256]) {
            match e {
                Expr::Lit(b) | Expr::Except(ExceptArg::Lit(b), _) => {
                    b.iter().for_each(|&x| seen[x as usize] = true)
                }
                Expr::Regex(_) | Expr::Except(ExceptArg::Re(_), _) | Expr::Nt(_) => {}
                Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|x| walk(x, seen)),
                Expr::Opt(x, _) | Expr::Star(x, _) | Expr::Plus(x) | Expr::Rep(x, ..) => {
                    walk(x, seen)
                }
            }
        }
        for alts in &self.rules {
            alts.iter().for_each(|e| walk(e, &mut seen));
        }
        for c in CHARS {
            let mut buf = [0u8; 4];
            c.encode_utf8(&mut buf)
                .bytes()
                .for_each(|x| seen[x as usize] = true);
        }
        (0..=255u8).filter(|&b| seen[b as usize]).collect()
    }

    /// A random sentence derived from the grammar, or `None` when the derivation grows beyond
    /// `budget` expansion steps or `max_len` bytes.
    pub fn sample(&self, src: &mut Src, budget: &mut u32, max_len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let alts = &self.rules[0];
        let e = &alts[src.below(alts.len())];
        self.sample_expr(e, src, budget, max_len, &mut out)?;
        Some(out)
    }

    fn sample_expr(
        &self,
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
            Expr::Regex(r) => sample_re(r, src, out),
            Expr::Nt(i) => {
                let alts = &self.rules[*i];
                let a = &alts[src.below(alts.len())];
                self.sample_expr(a, src, budget, max_len, out)?;
            }
            Expr::Seq(v) => {
                for x in v {
                    self.sample_expr(x, src, budget, max_len, out)?;
                }
            }
            Expr::Alt(v) => {
                let x = &v[src.below(v.len())];
                self.sample_expr(x, src, budget, max_len, out)?;
            }
            Expr::Opt(x, _) => {
                if src.one_in(2) {
                    self.sample_expr(x, src, budget, max_len, out)?;
                }
            }
            Expr::Star(x, _) => {
                for _ in 0..src.below(3) {
                    self.sample_expr(x, src, budget, max_len, out)?;
                }
            }
            Expr::Plus(x) => {
                for _ in 0..1 + src.below(2) {
                    self.sample_expr(x, src, budget, max_len, out)?;
                }
            }
            Expr::Rep(x, m, max) => {
                let extra = match max {
                    Some(n) => src.below((n - m).min(3) as usize + 1) as u32,
                    None => src.below(3) as u32,
                };
                for _ in 0..m + extra {
                    self.sample_expr(x, src, budget, max_len, out)?;
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
                        ExceptArg::Re(_) => false,
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
}

fn sample_re(r: &Re, src: &mut Src, out: &mut Vec<u8>) {
    let push = |c: char, out: &mut Vec<u8>| {
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    };
    match r {
        Re::Char(c) => push(*c, out),
        Re::Class(ranges, neg) => {
            if *neg {
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
        Re::Dot => {
            let c = CHARS[src.below(CHARS.len())];
            push(if c == '\n' { 'y' } else { c }, out);
        }
        Re::Digit => push((b'0' + src.below(10) as u8) as char, out),
        Re::Byte(b) => out.push(*b),
        Re::Seq(v) => v.iter().for_each(|x| sample_re(x, src, out)),
        Re::Alt(v) => sample_re(&v[src.below(v.len())], src, out),
        Re::Star(x) => (0..src.below(3)).for_each(|_| sample_re(x, src, out)),
        Re::Plus(x) => (0..1 + src.below(2)).for_each(|_| sample_re(x, src, out)),
        Re::Opt(x) => {
            if src.one_in(2) {
                sample_re(x, src, out)
            }
        }
        Re::Rep(x, m, n) => {
            let k = m + src.below((n - m) as usize + 1) as u32;
            (0..k).for_each(|_| sample_re(x, src, out));
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
