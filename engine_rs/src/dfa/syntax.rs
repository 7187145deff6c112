//! A parser for plain regexes: ASCII literals and escapes, bracketed classes of ASCII ranges,
//! non-capturing groups, alternation and greedy repetition — nearly every pattern the schema
//! translator writes (numbers, enums, keys, lengths). It builds the HIR `regex-syntax` builds for
//! the same text (same smart constructors, in the same order), in a fraction of the time (its
//! parse was most of the cost of a small automaton); anything else — other escapes, negated or
//! nested classes, captures, flags, anchors, `.`, lazy repetition, non-ASCII text, errors — is
//! `None`, and the caller parses with `regex-syntax`.
//!
//! Invariant: `parse_plain(p) == Some(h)` implies `regex-syntax` (Unicode mode, `utf8(false)`)
//! parses `p` to exactly `h` (tested on generated patterns and the translator's common ones).

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, Repetition};

/// Nesting deeper than this is left to `regex-syntax` (which has its own limit and message).
const MAX_DEPTH: usize = 64;

/// The HIR of a plain pattern, or `None` when the pattern is not plain.
pub(super) fn parse_plain(pattern: &str) -> Option<Hir> {
    let mut p = Parser {
        s: pattern.as_bytes(),
        at: 0,
    };
    let hir = p.alternation(0)?;
    (p.at == p.s.len()).then_some(hir)
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let found = self.peek() == Some(b);
        self.at += usize::from(found);
        found
    }

    /// `concat ('|' concat)*`, up to a `)` or the end.
    fn alternation(&mut self, depth: usize) -> Option<Hir> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut branches = vec![self.concat(depth)?];
        while self.eat(b'|') {
            branches.push(self.concat(depth)?);
        }
        Some(if branches.len() == 1 {
            branches.pop().expect("one branch")
        } else {
            Hir::alternation(branches)
        })
    }

    /// Repeated atoms up to `|`, `)` or the end (empty pieces dropped, as `regex-syntax` does).
    /// Characters not repeated are gathered into one literal (what `Hir::concat` would merge
    /// them into), so a long literal is one allocation, not one per character.
    fn concat(&mut self, depth: usize) -> Option<Hir> {
        let mut items: Vec<Hir> = Vec::new();
        let mut text: Vec<u8> = Vec::new();
        while let Some(b) = self.peek() {
            if b == b'|' || b == b')' {
                break;
            }
            let atom = if b == b'(' || b == b'[' {
                self.atom(depth)?
            } else {
                let c = self.literal_char(false)?;
                if !matches!(self.peek(), Some(b'?' | b'*' | b'+' | b'{')) {
                    text.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    continue;
                }
                Hir::literal(c.encode_utf8(&mut [0; 4]).as_bytes())
            };
            let item = self.repetition(atom)?;
            if !matches!(item.kind(), regex_syntax::hir::HirKind::Empty) {
                if !text.is_empty() {
                    items.push(Hir::literal(std::mem::take(&mut text)));
                }
                items.push(item);
            }
        }
        if !text.is_empty() {
            items.push(Hir::literal(text));
        }
        Some(match items.len() {
            0 => Hir::empty(),
            1 => items.pop().expect("one item"),
            _ => Hir::concat(items),
        })
    }

    /// `atom`, `atom?`, `atom*`, `atom+`, `atom{m}`, `atom{m,}`, `atom{m,n}` (greedy only).
    fn repetition(&mut self, atom: Hir) -> Option<Hir> {
        let (min, max) = match self.peek() {
            Some(b'?') => (0, Some(1)),
            Some(b'*') => (0, None),
            Some(b'+') => (1, None),
            Some(b'{') => {
                self.at += 1;
                let min = self.number()?;
                let max = if self.eat(b',') {
                    if self.peek() == Some(b'}') {
                        None
                    } else {
                        Some(self.number()?)
                    }
                } else {
                    Some(min)
                };
                if self.peek() != Some(b'}') || max.is_some_and(|n| n < min) {
                    return None;
                }
                (min, max)
            }
            _ => return Some(atom),
        };
        self.at += 1;
        if matches!(self.peek(), Some(b'?' | b'*' | b'+' | b'{')) {
            return None; // lazy or stacked repetition: not plain
        }
        Some(Hir::repetition(Repetition {
            min,
            max,
            greedy: true,
            sub: Box::new(atom),
        }))
    }

    /// A decimal count (at most 9 digits: larger ones are `regex-syntax`'s to refuse).
    fn number(&mut self) -> Option<u32> {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        let digits = &self.s[start..self.at];
        if digits.is_empty() || digits.len() > 9 {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    }

    /// A group or a class (literal characters are read by `concat`).
    fn atom(&mut self, depth: usize) -> Option<Hir> {
        match self.peek()? {
            b'(' => {
                if !self.s[self.at..].starts_with(b"(?:") {
                    return None; // captures and flags are not plain
                }
                self.at += 3;
                let inner = self.alternation(depth + 1)?;
                self.eat(b')').then_some(inner)
            }
            b'[' => {
                self.at += 1;
                self.class()
            }
            _ => None, // literal characters are read by `concat`
        }
    }

    /// One literal character: a printable ASCII character that is not a meta character here,
    /// `\` and an escapable ASCII punctuation character, or `\xHH`.
    fn literal_char(&mut self, in_class: bool) -> Option<char> {
        let b = self.peek()?;
        self.at += 1;
        if b == b'\\' {
            let e = self.peek()?;
            self.at += 1;
            return match e {
                b'x' => {
                    let hex = self.s.get(self.at..self.at + 2)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    self.at += 2;
                    char::from_u32(u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?)
                }
                // `regex-syntax` lets every ASCII punctuation character but `<` and `>` be
                // escaped to itself.
                b'!'..=b'/' | b':'..=b'@' | b'['..=b'`' | b'{'..=b'~' if e != b'<' && e != b'>' => {
                    Some(e as char)
                }
                _ => None,
            };
        }
        // `#`, `&`, `-` and `~` are literals outside classes (no verbose mode); inside one, `-`
        // is read by `class`, and `&&` / `~~` are set operations.
        let meta: &[u8] = if in_class {
            b"[]\\^-"
        } else {
            b"()[]{}|?*+.^$\\"
        };
        if !(b' '..=b'~').contains(&b) || meta.contains(&b) {
            return None;
        }
        if in_class && (b == b'&' || b == b'~') && self.peek() == Some(b) {
            return None;
        }
        Some(b as char)
    }

    /// The rest of a bracketed class after `[`: items `c` and `c-d` up to `]`; no negation, no
    /// nested classes or set operations, not empty.
    fn class(&mut self) -> Option<Hir> {
        let mut cls = ClassUnicode::empty();
        let mut items = 0;
        loop {
            match self.peek()? {
                b']' if items > 0 => {
                    self.at += 1;
                    return Some(Hir::class(Class::Unicode(cls)));
                }
                b'-' if items == 0 || self.s.get(self.at + 1) == Some(&b']') => {
                    // A `-` first or last is the character itself.
                    if self.s.get(self.at + 1) == Some(&b'-') {
                        return None;
                    }
                    self.at += 1;
                    cls.push(ClassUnicodeRange::new('-', '-'));
                }
                _ => {
                    let lo = self.literal_char(true)?;
                    let hi = if self.peek() == Some(b'-') && self.s.get(self.at + 1) != Some(&b']')
                    {
                        self.at += 1;
                        let hi = self.literal_char(true)?;
                        if hi < lo {
                            return None;
                        }
                        hi
                    } else {
                        lo
                    };
                    cls.push(ClassUnicodeRange::new(lo, hi));
                }
            }
            items += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{rngs::SmallRng, Rng, SeedableRng};

    use super::*;

    fn reference(p: &str) -> Option<Hir> {
        regex_automata::util::syntax::parse_with(
            p,
            &regex_automata::util::syntax::Config::new().utf8(false),
        )
        .ok()
    }

    fn check(p: &str) -> bool {
        match parse_plain(p) {
            Some(h) => {
                assert_eq!(Some(h), reference(p), "pattern {p:?}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn the_translators_patterns_are_plain_and_equal() {
        let plain = [
            r"\-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[Ee][\+\-]?[0-9]+)?",
            r"\-?(?:0|[1-9][0-9]*)",
            r"\x22(?:square|rectangle|circle|triangle)\x22",
            r"[0-9A-Fa-f]{8}\-[0-9A-Fa-f]{4}\-[0-9A-Fa-f]{4}\-[0-9A-Fa-f]*",
            r"[\-0-9A-Z_a-z]*",
            r"[1-9]|\-?0|[1-9][0-9]{2}|1[0-9]{9}",
            r"\x22[01]\x22",
            r"(?:a|)b{0}c{1}d{2,}e{3,5}",
            r"[-a]|[a-]|[ -~]|[#&~]|a#b&c~d-e",
            r"",
            r"(?:)",
            r"a||b",
        ];
        for p in plain {
            assert!(check(p), "{p:?} should be plain");
        }
        // Not plain: left to regex-syntax (whose errors and features stay its own).
        for p in [
            r"a.b",
            r"^a",
            r"a$",
            r"(a)",
            r"(?i)a",
            r"[^a]",
            r"[a-z&&b]",
            r"[[a]]",
            r"[]a]",
            r"a*?",
            r"\d",
            r"\n",
            r"\u0041",
            r"é",
            r"a{2,1}",
            r"a{",
            r"(?:a",
            r"a)",
            r"\<",
            r"[a--b]",
            r"\x{41}",
            r"a**",
            r"[z-a]",
        ] {
            assert!(parse_plain(p).is_none(), "{p:?} should not be plain");
        }
    }

    #[test]
    fn generated_patterns_equal_regex_syntax() {
        const ATOMS: &[&str] = &[
            "a",
            "b",
            "-",
            "#",
            "&",
            "~",
            " ",
            "\\-",
            "\\.",
            "\\+",
            "\\x22",
            "\\x5C",
            "\\xe9",
            "\\/",
            "\\\"",
            "[0-9]",
            "[a-c0-2_]",
            "[\\-x]",
            "[-x]",
            "[x-]",
            "[ab]",
            "[a]",
            "[\\x22-\\x2f]",
            "[!-~]",
            "[&~#]",
        ];
        const REPS: &[&str] = &[
            "", "", "", "?", "*", "+", "{2}", "{0,3}", "{1,}", "{0}", "{1}",
        ];
        fn gen(rng: &mut SmallRng, depth: usize, out: &mut String) {
            let branches = rng.gen_range(1..=3);
            for k in 0..branches {
                if k > 0 {
                    out.push('|');
                }
                for _ in 0..rng.gen_range(0..4) {
                    if depth < 3 && rng.gen_bool(0.25) {
                        out.push_str("(?:");
                        gen(rng, depth + 1, out);
                        out.push(')');
                    } else {
                        out.push_str(ATOMS[rng.gen_range(0..ATOMS.len())]);
                    }
                    out.push_str(REPS[rng.gen_range(0..REPS.len())]);
                }
            }
        }
        let mut rng = SmallRng::seed_from_u64(11);
        let mut plain = 0;
        for _ in 0..5000 {
            let mut p = String::new();
            gen(&mut rng, 0, &mut p);
            plain += usize::from(check(&p));
        }
        assert!(plain > 4000, "{plain}");
    }
}
