//! `schemas/json.kbnf` against real documents: every `"valid": true` document of
//! `<repo>/tests/data/maskbench/*.jsonl.gz`, serialized the way Python's `json.dumps` does
//! (compact, default separators, `indent=2`, `indent="\t"`, with `ensure_ascii` on and off), must be
//! accepted with every prefix viable; corrupted variants (truncations, bad escapes, trailing
//! commas, unquoted keys, leading zeros, raw control characters, invalid UTF-8) must be rejected at
//! exactly the first offending byte.
//!
//! The expected answers come from an independent oracle, [`JsonPda`]: a byte-level pushdown
//! automaton for RFC 8259 JSON over UTF-8 that knows after every byte whether the input is a complete
//! document and which bytes may come next. The engine must agree on `is_complete()` after every
//! byte, and on `allowed_bytes()` at sampled prefixes (all prefixes of small documents).
//!
//! Documents are parsed with a small parser that keeps object key order and the raw text of numbers
//! (serde_json, without its `preserve_order`/`arbitrary_precision` features, would sort keys and
//! round numbers), so the serializations are byte-identical to Python's; serde_json is used only to
//! cross-check the parser and serializer. Documents whose strings contain unpaired surrogate escapes
//! cannot be held in a Rust `String` and are skipped (none in the current data).
//!
//! Environment: `MASKBENCH_ALL=1` checks every document (default: every 4th document, plus every
//! document with non-ASCII text), `MASKBENCH_LIMIT=n` caps the number of documents.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use structout_engine::{Grammar, Recognizer};

// ---------------------------------------------------------------------------------------------
// JSON values with key order and raw numbers; Python-compatible serialization.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum J {
    Null,
    Bool(bool),
    /// The number exactly as written.
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }
    fn value(&mut self) -> Result<J, String> {
        self.ws();
        match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(J::Obj(members));
                }
                loop {
                    self.ws();
                    let J::Str(k) = self.value()? else {
                        return self.err("key expected");
                    };
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        return self.err("':' expected");
                    }
                    self.i += 1;
                    let v = self.value()?;
                    members.push((k, v));
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(J::Obj(members));
                        }
                        _ => return self.err("',' or '}' expected"),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(J::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(J::Arr(items));
                        }
                        _ => return self.err("',' or ']' expected"),
                    }
                }
            }
            Some(b'"') => {
                self.i += 1;
                let mut out: Vec<u8> = Vec::new();
                loop {
                    let Some(&c) = self.s.get(self.i) else {
                        return self.err("unterminated string");
                    };
                    self.i += 1;
                    match c {
                        b'"' => break,
                        b'\\' => {
                            let e = self.s.get(self.i).copied();
                            self.i += 1;
                            let ch = match e {
                                Some(b'"') => '"',
                                Some(b'\\') => '\\',
                                Some(b'/') => '/',
                                Some(b'b') => '\u{8}',
                                Some(b'f') => '\u{c}',
                                Some(b'n') => '\n',
                                Some(b'r') => '\r',
                                Some(b't') => '\t',
                                Some(b'u') => {
                                    let hi = self.hex4()?;
                                    let cp = if (0xd800..0xdc00).contains(&hi) {
                                        if !self.s[self.i..].starts_with(b"\\u") {
                                            return self.err("unpaired surrogate");
                                        }
                                        self.i += 2;
                                        let lo = self.hex4()?;
                                        if !(0xdc00..0xe000).contains(&lo) {
                                            return self.err("unpaired surrogate");
                                        }
                                        0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                                    } else {
                                        hi
                                    };
                                    match char::from_u32(cp) {
                                        Some(c) => c,
                                        None => return self.err("unpaired surrogate"),
                                    }
                                }
                                _ => return self.err("bad escape"),
                            };
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => out.push(c),
                    }
                }
                String::from_utf8(out)
                    .map(J::Str)
                    .or_else(|_| self.err("invalid UTF-8"))
            }
            Some(b't') if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(J::Bool(true))
            }
            Some(b'f') if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(J::Bool(false))
            }
            Some(b'n') if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(J::Null)
            }
            Some(b'-' | b'0'..=b'9') => {
                let st = self.i;
                self.i += 1;
                while self.i < self.s.len()
                    && matches!(
                        self.s[self.i],
                        b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'
                    )
                {
                    self.i += 1;
                }
                Ok(J::Num(
                    String::from_utf8(self.s[st..self.i].to_vec()).unwrap(),
                ))
            }
            _ => self.err("value expected"),
        }
    }
    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.s.get(self.i..self.i + 4).ok_or("short \\u escape")?;
        let h = std::str::from_utf8(h).map_err(|_| "bad \\u escape")?;
        let v = u32::from_str_radix(h, 16).map_err(|_| "bad \\u escape")?;
        self.i += 4;
        Ok(v)
    }
}

fn parse_json(text: &[u8]) -> Result<J, String> {
    let mut p = Parser { s: text, i: 0 };
    let v = p.value()?;
    p.ws();
    if p.i != text.len() {
        return p.err("trailing data");
    }
    Ok(v)
}

/// Options of Python's `json.dumps` that change the output bytes.
#[derive(Clone, Copy, Debug)]
struct Dumps {
    item_sep: &'static str,
    key_sep: &'static str,
    indent: Option<&'static str>,
    ensure_ascii: bool,
    name: &'static str,
}

const FORMATS: &[Dumps] = &[
    Dumps {
        item_sep: ",",
        key_sep: ":",
        indent: None,
        ensure_ascii: true,
        name: "compact",
    },
    Dumps {
        item_sep: ",",
        key_sep: ":",
        indent: None,
        ensure_ascii: false,
        name: "compact, ensure_ascii=False",
    },
    Dumps {
        item_sep: ", ",
        key_sep: ": ",
        indent: None,
        ensure_ascii: true,
        name: "default",
    },
    Dumps {
        item_sep: ", ",
        key_sep: ": ",
        indent: None,
        ensure_ascii: false,
        name: "default, ensure_ascii=False",
    },
    Dumps {
        item_sep: ",",
        key_sep: ": ",
        indent: Some("  "),
        ensure_ascii: true,
        name: "indent=2",
    },
    Dumps {
        item_sep: ",",
        key_sep: ": ",
        indent: Some("  "),
        ensure_ascii: false,
        name: "indent=2, ensure_ascii=False",
    },
    Dumps {
        item_sep: ", ",
        key_sep: ": ",
        indent: Some("  "),
        ensure_ascii: true,
        name: "indent=2, separators=(', ', ': ')",
    },
    Dumps {
        item_sep: ",",
        key_sep: ": ",
        indent: Some("\t"),
        ensure_ascii: false,
        name: "indent='\\t', ensure_ascii=False",
    },
];

fn dump_str(s: &str, ensure_ascii: bool, out: &mut String) {
    use std::fmt::Write as _;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `json.dumps(value, separators=..., indent=..., ensure_ascii=...)`.
fn dumps(v: &J, f: &Dumps) -> String {
    let mut out = String::new();
    dump_into(v, f, 0, &mut out);
    out
}

fn dump_into(v: &J, f: &Dumps, level: usize, out: &mut String) {
    let newline = |out: &mut String, level: usize| {
        if let Some(ind) = f.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(ind);
            }
        }
    };
    match v {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(s) => dump_str(s, f.ensure_ascii, out),
        J::Arr(items) if items.is_empty() => out.push_str("[]"),
        J::Obj(members) if members.is_empty() => out.push_str("{}"),
        J::Arr(items) => {
            out.push('[');
            for (k, it) in items.iter().enumerate() {
                if k > 0 {
                    out.push_str(f.item_sep);
                }
                newline(out, level + 1);
                dump_into(it, f, level + 1, out);
            }
            newline(out, level);
            out.push(']');
        }
        J::Obj(members) => {
            out.push('{');
            for (k, (key, val)) in members.iter().enumerate() {
                if k > 0 {
                    out.push_str(f.item_sep);
                }
                newline(out, level + 1);
                dump_str(key, f.ensure_ascii, out);
                out.push_str(f.key_sep);
                dump_into(val, f, level + 1, out);
            }
            newline(out, level);
            out.push('}');
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The oracle: a byte-level pushdown automaton for RFC 8259 JSON over UTF-8.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Expecting a value (whitespace allowed).
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value: `,` or the closing bracket (or the end at top level).
    After,
    /// Inside a string; `key` says whether a `:` follows it.
    Str { key: bool },
    /// After a backslash.
    Escape { key: bool },
    /// Inside `\uXXXX`, `n` hex digits read.
    Unicode { key: bool, n: u8 },
    /// Inside a multi-byte UTF-8 scalar: `need` more continuation bytes, the next in `lo..=hi`.
    Utf8 { key: bool, need: u8, lo: u8, hi: u8 },
    /// Inside a number.
    Num(NumState),
    /// Inside `true`/`false`/`null`: the word and the bytes matched so far.
    Word { word: &'static [u8], n: u8 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NumState {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

#[derive(Clone, Debug)]
struct JsonPda {
    mode: Mode,
    /// Open containers, `b'['` or `b'{'`.
    stack: Vec<u8>,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl JsonPda {
    fn new() -> JsonPda {
        JsonPda {
            mode: Mode::Value,
            stack: Vec::new(),
        }
    }

    /// The input so far is a complete JSON text.
    fn is_complete(&self) -> bool {
        self.stack.is_empty()
            && match self.mode {
                Mode::After => true,
                Mode::Num(s) => matches!(
                    s,
                    NumState::Zero | NumState::Int | NumState::Frac | NumState::Exp
                ),
                _ => false,
            }
    }

    fn close(&mut self, b: u8) -> bool {
        let want = if b == b']' { b'[' } else { b'{' };
        if self.stack.last() == Some(&want) {
            self.stack.pop();
            self.mode = Mode::After;
            true
        } else {
            false
        }
    }

    fn start_value(&mut self, b: u8) -> bool {
        self.mode = match b {
            b'{' => {
                self.stack.push(b'{');
                Mode::ObjectFirst
            }
            b'[' => {
                self.stack.push(b'[');
                Mode::ArrayFirst
            }
            b'"' => Mode::Str { key: false },
            b'-' => Mode::Num(NumState::Minus),
            b'0' => Mode::Num(NumState::Zero),
            b'1'..=b'9' => Mode::Num(NumState::Int),
            b't' => Mode::Word {
                word: b"true",
                n: 1,
            },
            b'f' => Mode::Word {
                word: b"false",
                n: 1,
            },
            b'n' => Mode::Word {
                word: b"null",
                n: 1,
            },
            _ => return false,
        };
        true
    }

    fn end_string(&mut self, key: bool) {
        self.mode = if key { Mode::Colon } else { Mode::After };
    }

    /// Consumes one byte; `false` (state unspecified) when no JSON text starts with the input.
    fn step(&mut self, b: u8) -> bool {
        match self.mode {
            Mode::Value => is_ws(b) || self.start_value(b),
            Mode::ArrayFirst => is_ws(b) || (b == b']' && self.close(b)) || self.start_value(b),
            Mode::ObjectFirst | Mode::Key => {
                if is_ws(b) {
                    true
                } else if b == b'"' {
                    self.mode = Mode::Str { key: true };
                    true
                } else {
                    self.mode == Mode::ObjectFirst && b == b'}' && self.close(b)
                }
            }
            Mode::Colon => {
                if b == b':' {
                    self.mode = Mode::Value;
                }
                is_ws(b) || b == b':'
            }
            Mode::After => match b {
                _ if is_ws(b) => true,
                b',' => match self.stack.last() {
                    Some(b'[') => {
                        self.mode = Mode::Value;
                        true
                    }
                    Some(b'{') => {
                        self.mode = Mode::Key;
                        true
                    }
                    _ => false,
                },
                b']' | b'}' => self.close(b),
                _ => false,
            },
            Mode::Str { key } => {
                match b {
                    b'"' => self.end_string(key),
                    b'\\' => self.mode = Mode::Escape { key },
                    0x00..=0x1f => return false,
                    0x20..=0x7f => {}
                    0xc2..=0xdf => {
                        self.mode = Mode::Utf8 {
                            key,
                            need: 1,
                            lo: 0x80,
                            hi: 0xbf,
                        }
                    }
                    0xe0 => {
                        self.mode = Mode::Utf8 {
                            key,
                            need: 2,
                            lo: 0xa0,
                            hi: 0xbf,
                        }
                    }
                    0xe1..=0xec | 0xee..=0xef => {
                        self.mode = Mode::Utf8 {
                            key,
                            need: 2,
                            lo: 0x80,
                            hi: 0xbf,
                        }
                    }
                    0xed => {
                        self.mode = Mode::Utf8 {
                            key,
                            need: 2,
                            lo: 0x80,
                            hi: 0x9f,
                        }
                    }
                    0xf0 => {
                        self.mode = Mode::Utf8 {
                            key,
                            need: 3,
                            lo: 0x90,
                            hi: 0xbf,
                        }
                    }
                    0xf1..=0xf3 => {
                        self.mode = Mode::Utf8 {
                            key,
                            need: 3,
                            lo: 0x80,
                            hi: 0xbf,
                        }
                    }
                    0xf4 => {
                        self.mode = Mode::Utf8 {
                            key,
                            need: 3,
                            lo: 0x80,
                            hi: 0x8f,
                        }
                    }
                    _ => return false,
                }
                true
            }
            Mode::Utf8 { key, need, lo, hi } => {
                if !(lo..=hi).contains(&b) {
                    return false;
                }
                self.mode = if need == 1 {
                    Mode::Str { key }
                } else {
                    Mode::Utf8 {
                        key,
                        need: need - 1,
                        lo: 0x80,
                        hi: 0xbf,
                    }
                };
                true
            }
            Mode::Escape { key } => {
                self.mode = match b {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Mode::Str { key },
                    b'u' => Mode::Unicode { key, n: 0 },
                    _ => return false,
                };
                true
            }
            Mode::Unicode { key, n } => {
                if !b.is_ascii_hexdigit() {
                    return false;
                }
                self.mode = if n == 3 {
                    Mode::Str { key }
                } else {
                    Mode::Unicode { key, n: n + 1 }
                };
                true
            }
            Mode::Word { word, n } => {
                if word[n as usize] != b {
                    return false;
                }
                self.mode = if n as usize + 1 == word.len() {
                    Mode::After
                } else {
                    Mode::Word { word, n: n + 1 }
                };
                true
            }
            Mode::Num(s) => {
                use NumState::*;
                let digit = b.is_ascii_digit();
                let next = match (s, b) {
                    (Minus, b'0') => Some(Zero),
                    (Minus, b'1'..=b'9') => Some(Int),
                    (Int, _) if digit => Some(Int),
                    (Zero | Int, b'.') => Some(Dot),
                    (Dot | Frac, _) if digit => Some(Frac),
                    (Zero | Int | Frac, b'e' | b'E') => Some(E),
                    (E, b'+' | b'-') => Some(ESign),
                    (E | ESign | Exp, _) if digit => Some(Exp),
                    _ => None,
                };
                match next {
                    Some(n) => {
                        self.mode = Mode::Num(n);
                        true
                    }
                    None if matches!(s, Zero | Int | Frac | Exp) => {
                        // The number ends here; the byte belongs to what follows.
                        self.mode = Mode::After;
                        self.step(b)
                    }
                    None => false,
                }
            }
        }
    }

    fn allowed(&self) -> [bool; 256] {
        let mut out = [false; 256];
        for b in 0..=255u8 {
            out[b as usize] = self.clone().step(b);
        }
        out
    }
}

/// Offset of the first byte of `text` after which no JSON text can follow (None: viable).
fn first_error(text: &[u8]) -> Option<usize> {
    let mut p = JsonPda::new();
    text.iter().position(|&b| !p.step(b))
}

fn is_valid_json(text: &[u8]) -> bool {
    let mut p = JsonPda::new();
    text.iter().all(|&b| p.step(b)) && p.is_complete()
}

// ---------------------------------------------------------------------------------------------
// Data.
// ---------------------------------------------------------------------------------------------

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/maskbench")
}

fn json_grammar() -> Arc<Grammar> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas/json.kbnf");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    compile(&text).unwrap_or_else(|e| panic!("schemas/json.kbnf does not compile:\n{e}"))
}

struct Doc {
    origin: String,
    value: J,
    /// serde_json's reading of the same document, for cross-checks.
    serde: serde_json::Value,
}

fn load_docs() -> (Vec<Doc>, usize) {
    let dir = data_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "MaskBench data not found at {} ({e}); the repository carries it under tests/data/maskbench",
                dir.display()
            )
        })
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".jsonl.gz"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.jsonl.gz in {}", dir.display());
    let mut docs = Vec::new();
    let mut skipped = 0;
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let reader = BufReader::new(flate2::read::GzDecoder::new(
            std::fs::File::open(&f).unwrap(),
        ));
        for (lineno, line) in reader.lines().enumerate() {
            let line = line.unwrap();
            let row = match parse_json(line.as_bytes()) {
                Ok(r) => r,
                Err(e) => {
                    skipped += 1;
                    eprintln!("skipping {name}:{}: {e}", lineno + 1);
                    continue;
                }
            };
            let serde_row: serde_json::Value = serde_json::from_str(&line).unwrap();
            let J::Obj(fields) = row else {
                panic!("{name}: row is not an object")
            };
            let Some((_, J::Arr(tests))) = fields.iter().find(|(k, _)| k == "tests") else {
                continue;
            };
            for (k, t) in tests.iter().enumerate() {
                let J::Obj(tf) = t else { continue };
                let valid = tf.iter().any(|(k, v)| k == "valid" && *v == J::Bool(true));
                let Some((_, data)) = tf.iter().find(|(k, _)| k == "data") else {
                    continue;
                };
                if valid {
                    docs.push(Doc {
                        origin: format!("{name}:{} test {k}", lineno + 1),
                        value: data.clone(),
                        serde: serde_row["tests"][k]["data"].clone(),
                    });
                }
            }
        }
    }
    (docs, skipped)
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v == "true")
}

fn selected_docs() -> Vec<Doc> {
    let (docs, skipped) = load_docs();
    assert!(
        docs.len() > 1000,
        "too few documents loaded: {}",
        docs.len()
    );
    assert_eq!(skipped, 0, "rows that could not be parsed");
    let all = env_flag("MASKBENCH_ALL");
    let limit = std::env::var("MASKBENCH_LIMIT")
        .ok()
        .map(|v| v.parse::<usize>().expect("MASKBENCH_LIMIT"));
    let mut out: Vec<Doc> = docs
        .into_iter()
        .enumerate()
        .filter(|(k, d)| all || k % 4 == 0 || has_non_ascii(&d.value))
        .map(|(_, d)| d)
        .collect();
    if let Some(l) = limit {
        out.truncate(l);
    }
    out
}

/// Whether `ensure_ascii=False` changes the text: some scalar above `~` (DEL or non-ASCII).
fn has_non_ascii(v: &J) -> bool {
    let raw = |s: &str| s.chars().any(|c| c > '~');
    match v {
        J::Str(s) => raw(s),
        J::Arr(xs) => xs.iter().any(has_non_ascii),
        J::Obj(ms) => ms.iter().any(|(k, v)| raw(k) || has_non_ascii(v)),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Checks.
// ---------------------------------------------------------------------------------------------

/// Feeds `text` byte by byte, comparing `is_complete()` after every byte with the oracle and
/// `allowed_bytes()` where `check_allowed(offset)` says so. Leaves `r` holding all of `text`.
fn feed_checked(
    r: &mut Recognizer,
    text: &[u8],
    check_allowed: impl Fn(usize) -> bool,
    what: &str,
) -> Result<(), String> {
    let mut pda = JsonPda::new();
    for (k, &b) in text.iter().enumerate() {
        if check_allowed(k) {
            let exp = pda.allowed();
            let got = allowed(r);
            if exp != got {
                return Err(format!(
                    "{what}: allowed_bytes() after {} bytes (…{}): expected {}, got {}",
                    k,
                    esc(&text[k.saturating_sub(40)..k]),
                    fmt_set(&exp),
                    fmt_set(&got)
                ));
            }
        }
        assert!(
            pda.step(b),
            "{what}: the oracle rejects a serialized document at byte {k}"
        );
        if !r.feed_byte(b) {
            return Err(format!(
                "{what}: byte {k} ({}) rejected after …{}",
                esc(&[b]),
                esc(&text[k.saturating_sub(60)..k])
            ));
        }
        if r.is_complete() != pda.is_complete() {
            return Err(format!(
                "{what}: is_complete() after {} bytes (…{}): expected {}, got {}",
                k + 1,
                esc(&text[k.saturating_sub(40)..=k]),
                pda.is_complete(),
                r.is_complete()
            ));
        }
    }
    if !r.is_complete() {
        return Err(format!("{what}: the whole document is not complete"));
    }
    if allowed(r) != pda.allowed() {
        return Err(format!(
            "{what}: allowed_bytes() at the end: expected {}, got {}",
            fmt_set(&pda.allowed()),
            fmt_set(&allowed(r))
        ));
    }
    Ok(())
}

/// `r` holds all of `orig`. Checks the corrupted `text` (equal to `orig` before `at`): the engine
/// must accept exactly the bytes before the oracle's first error, and agree on completeness; then
/// restores `r` to all of `orig`.
fn check_variant(
    r: &mut Recognizer,
    orig: &[u8],
    text: &[u8],
    at: usize,
    what: &str,
) -> Result<(), String> {
    debug_assert_eq!(orig[..at], text[..at]);
    let err = first_error(text);
    r.rollback_to(at);
    let mut result = Ok(());
    for (k, &b) in text.iter().enumerate().skip(at) {
        let exp = err.is_none_or(|e| k < e);
        let got = r.feed_byte(b);
        if exp != got {
            result = Err(format!(
                "{what}: byte {k} ({}) after …{}: expected {}, got {}",
                esc(&[b]),
                esc(&text[k.saturating_sub(50)..k]),
                if exp { "accepted" } else { "rejected" },
                if got { "accepted" } else { "rejected" }
            ));
            break;
        }
        if !got {
            break;
        }
    }
    if result.is_ok() && err.is_none() && r.is_complete() != is_valid_json(text) {
        result = Err(format!(
            "{what}: is_complete() on {}: expected {}, got {}",
            esc(&text[text.len().saturating_sub(60)..]),
            is_valid_json(text),
            r.is_complete()
        ));
    }
    r.rollback_to(at);
    assert!(
        r.feed(&orig[at..]),
        "{what}: re-feeding the original failed"
    );
    result
}

/// Token positions in a serialized document.
#[derive(Default)]
struct Tokens {
    /// `(open quote, close quote, is_key)`.
    strings: Vec<(usize, usize, bool)>,
    /// Offsets inside strings where a new character could be inserted (not inside an escape or
    /// a UTF-8 sequence), including just before each closing quote.
    string_points: Vec<usize>,
    /// Start offsets of numbers.
    numbers: Vec<usize>,
    /// Offsets of `]`/`}` closing a non-empty container.
    closers: Vec<usize>,
}

fn tokens(text: &[u8]) -> Tokens {
    let mut t = Tokens::default();
    let mut i = 0;
    let mut last_sig = 0u8;
    while i < text.len() {
        let b = text[i];
        match b {
            b'"' => {
                let st = i;
                i += 1;
                loop {
                    t.string_points.push(i);
                    match text[i] {
                        b'"' => break,
                        b'\\' if text[i + 1] == b'u' => i += 6,
                        b'\\' => i += 2,
                        c => i += utf8_width(c).max(1),
                    }
                }
                let mut j = i + 1;
                while j < text.len() && is_ws(text[j]) {
                    j += 1;
                }
                t.strings.push((st, i, text.get(j) == Some(&b':')));
                last_sig = b'"';
            }
            b'-' | b'0'..=b'9' => {
                t.numbers.push(i);
                while i + 1 < text.len()
                    && matches!(text[i + 1], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                last_sig = b'0';
            }
            b']' | b'}' => {
                if last_sig != b'[' && last_sig != b'{' {
                    t.closers.push(i);
                }
                last_sig = b;
            }
            _ if is_ws(b) => {}
            _ => last_sig = b,
        }
        i += 1;
    }
    t
}

fn splice(text: &[u8], at: usize, remove: usize, insert: &[u8]) -> Vec<u8> {
    let mut v = text[..at].to_vec();
    v.extend_from_slice(insert);
    v.extend_from_slice(&text[at + remove..]);
    v
}

/// Corrupted variants of `text`: `(description, text, first offset that differs)`.
fn corruptions(text: &[u8], rng: &mut SmallRng) -> Vec<(String, Vec<u8>, usize)> {
    let t = tokens(text);
    let mut out = Vec::new();
    // Truncations at random points (valid JSON when the document is a bare number prefix).
    for _ in 0..4 {
        let k = rng.gen_range(0..text.len());
        out.push((format!("truncated at {k}"), text[..k].to_vec(), k));
    }
    let pick =
        |rng: &mut SmallRng, v: &[usize]| (!v.is_empty()).then(|| v[rng.gen_range(0..v.len())]);
    let inside = &t.string_points;
    for (desc, ins) in [
        ("bad escape \\x", &b"\\x"[..]),
        ("bad escape \\u12G4", b"\\u12G4"),
        ("bad escape \\U", b"\\U0041"),
        ("raw newline in a string", b"\n"),
        ("raw tab in a string", b"\t"),
        ("raw NUL in a string", b"\x00"),
        ("raw 0x1f in a string", b"\x1f"),
        ("invalid UTF-8 0xff in a string", b"\xff"),
        ("truncated UTF-8 sequence in a string", b"\xc3("),
        ("UTF-8 surrogate in a string", b"\xed\xa0\x80"),
        ("overlong UTF-8 in a string", b"\xc0\xaf"),
    ] {
        if let Some(k) = pick(rng, inside) {
            out.push((format!("{desc} at {k}"), splice(text, k, 0, ins), k));
        }
    }
    if let Some(k) = pick(rng, &t.closers) {
        out.push((
            format!("trailing comma at {k}"),
            splice(text, k, 0, b","),
            k,
        ));
    }
    let keys: Vec<(usize, usize)> = t
        .strings
        .iter()
        .filter(|s| s.2)
        .map(|s| (s.0, s.1))
        .collect();
    if !keys.is_empty() {
        let (o, c) = keys[rng.gen_range(0..keys.len())];
        let mut v = text[..o].to_vec();
        v.extend_from_slice(&text[o + 1..c]);
        v.extend_from_slice(&text[c + 1..]);
        out.push((format!("unquoted key at {o}"), v, o));
        out.push((
            format!("single-quoted key at {o}"),
            splice(text, o, 1, b"'"),
            o,
        ));
    }
    if let Some(k) = pick(rng, &t.numbers) {
        let at = if text[k] == b'-' { k + 1 } else { k };
        out.push((
            format!("leading zero at {at}"),
            splice(text, at, 0, b"0"),
            at,
        ));
        out.push((format!("leading plus at {k}"), splice(text, k, 0, b"+"), k));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn maskbench_documents_accepted_and_corruptions_rejected() {
    let started = std::time::Instant::now();
    let g = json_grammar();
    let docs = selected_docs();
    let mut rng = SmallRng::seed_from_u64(8259);
    let mut failures: Vec<String> = Vec::new();
    let (mut texts, mut bytes, mut variants, mut allowed_checks) = (0usize, 0usize, 0usize, 0usize);
    let mut r = Recognizer::new(g.clone());
    for doc in &docs {
        for (fi, f) in FORMATS.iter().enumerate() {
            let text = dumps(&doc.value, f);
            if !f.ensure_ascii && !has_non_ascii(&doc.value) && fi != 7 {
                // Identical to the ensure_ascii=True text.
                continue;
            }
            let text = text.as_bytes();
            texts += 1;
            bytes += text.len();
            let what = format!("{} [{}]", doc.origin, f.name);
            r.reset();
            // All prefixes' allowed sets for small texts, a few sampled offsets otherwise.
            let sample: Vec<usize> = (0..3).map(|_| rng.gen_range(0..text.len())).collect();
            let small = text.len() <= 400;
            allowed_checks += if small { text.len() + 1 } else { 4 };
            if let Err(e) = feed_checked(&mut r, text, |k| small || sample.contains(&k), &what) {
                failures.push(e);
                continue;
            }
            // Corruptions on the compact and indented ASCII texts and on raw UTF-8 texts.
            if matches!(fi, 0 | 4) || (!f.ensure_ascii && has_non_ascii(&doc.value)) {
                for (desc, bad, at) in corruptions(text, &mut rng) {
                    variants += 1;
                    if let Err(e) = check_variant(&mut r, text, &bad, at, &format!("{what} {desc}"))
                    {
                        failures.push(e);
                    }
                }
            }
        }
        if failures.len() > 50 {
            break;
        }
    }
    eprintln!(
        "json maskbench: {} documents, {texts} texts ({:.1} MB), {variants} corrupted variants, {allowed_checks} allowed-set checks, {} failures, {:.1}s",
        docs.len(),
        bytes as f64 / 1e6,
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} failures; first ones:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The Python-compatible serializer is right: its output parses back (by serde_json) to the same
/// value serde_json reads from the data file, for every format.
#[test]
fn serializer_round_trips_through_serde_json() {
    let docs = selected_docs();
    for doc in docs.iter().take(3000) {
        for f in FORMATS {
            let text = dumps(&doc.value, f);
            let back: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} [{}]: {e}\n{text}", doc.origin, f.name));
            assert_eq!(back, doc.serde, "{} [{}]", doc.origin, f.name);
            if f.ensure_ascii {
                assert!(text.is_ascii());
            }
        }
    }
    // Python's exact output for a few values (from CPython 3.11's json.dumps).
    let v = parse_json(br#"{"a": [1, 2.5e-07, {}], "b": "\u00e9\ud83d\ude00\u007f\n\"", "c": []}"#)
        .unwrap();
    assert_eq!(
        dumps(&v, &FORMATS[0]),
        r#"{"a":[1,2.5e-07,{}],"b":"\u00e9\ud83d\ude00\u007f\n\"","c":[]}"#
    );
    assert_eq!(
        dumps(&v, &FORMATS[3]),
        "{\"a\": [1, 2.5e-07, {}], \"b\": \"é😀\u{7f}\\n\\\"\", \"c\": []}"
    );
    assert_eq!(
        dumps(&v, &FORMATS[4]),
        "{\n  \"a\": [\n    1,\n    2.5e-07,\n    {}\n  ],\n  \"b\": \"\\u00e9\\ud83d\\ude00\\u007f\\n\\\"\",\n  \"c\": []\n}"
    );
    assert_eq!(
        dumps(&v, &FORMATS[6]),
        "{\n  \"a\": [\n    1, \n    2.5e-07, \n    {}\n  ], \n  \"b\": \"\\u00e9\\ud83d\\ude00\\u007f\\n\\\"\", \n  \"c\": []\n}"
    );
}

/// The oracle agrees with serde_json on validity, and with hand-checked answers.
#[test]
fn oracle_self_check() {
    let valid: &[&[u8]] = &[
        b"0",
        b"-0",
        b"1.5e+10",
        b"-12.0E-3",
        b" [ ] ",
        b"{}",
        b"\"\"",
        b"\"\\u00e9\\/\"",
        b"true",
        b"[null,false,true,{\"a\":{\"b\":[]}}]",
        "\"é😀\u{7f}\"".as_bytes(),
        b"\t\n\r 1 \n",
        b"\"\\ud800\"",
    ];
    let invalid: &[&[u8]] = &[
        b"",
        b"01",
        b"-",
        b"1.",
        b".5",
        b"+1",
        b"1e",
        b"1e+",
        b"[1,]",
        b"{\"a\":1,}",
        b"{a:1}",
        b"\"\\x\"",
        b"\"\\u12G4\"",
        b"\"\x01\"",
        b"\"\n\"",
        b"[1 2]",
        b"{\"a\" 1}",
        b"tru",
        b"nulll",
        b"NaN",
        b"'a'",
        b"\"\xff\"",
        b"\"\xc0\xaf\"",
        b"\"\xed\xa0\x80\"",
        b"\"\xc3\"",
        b"[",
        b"]",
        b"{\"a\"}",
        b"1 2",
        b"[1,,2]",
        b"\"abc",
    ];
    for v in valid {
        assert!(is_valid_json(v), "oracle rejects valid {}", esc(v));
    }
    for v in invalid {
        assert!(!is_valid_json(v), "oracle accepts invalid {}", esc(v));
    }
    for v in valid.iter().chain(invalid) {
        // serde_json also rejects lone surrogate escapes, which RFC 8259's grammar allows.
        if v.windows(6).any(|w| w == b"\\ud800") {
            continue;
        }
        assert_eq!(
            is_valid_json(v),
            serde_json::from_slice::<serde_json::Value>(v).is_ok(),
            "oracle and serde_json disagree on {}",
            esc(v)
        );
    }
    assert_eq!(first_error(b"[1,]"), Some(3));
    assert_eq!(first_error(b"{\"a\":01}"), Some(6));
    assert_eq!(first_error(b"\"\\u12G4\""), Some(5));
    assert_eq!(first_error(b"\"\xe0\x80\""), Some(2));
    assert_eq!(first_error(b"[1.5e+3"), None);
    let mut p = JsonPda::new();
    for &b in b"{\"k\"" {
        assert!(p.step(b));
    }
    let mut exp = [false; 256];
    for b in [b' ', b'\t', b'\n', b'\r', b':'] {
        exp[b as usize] = true;
    }
    assert_eq!(p.allowed(), exp);
}

/// The engine and the oracle agree on hand-picked valid and invalid texts, byte by byte, including
/// the allowed sets at every prefix.
#[test]
fn json_grammar_edge_cases() {
    let g = json_grammar();
    let texts: Vec<Vec<u8>> = [
        &b"0"[..],
        b"-0",
        b"1.5e+10",
        b"-12.0E-3",
        b" [ ] ",
        b"{}",
        b"\"\"",
        b"\"\\u00e9\\/\\b\\f\"",
        b"true",
        b"[null,false,true,{\"a\":{\"b\":[]}}]",
        "\"é😀\u{7f}\"".as_bytes(),
        b"\t\n\r 1 \n",
        b"\"\\ud800\"",
        b"01",
        b"-",
        b"1.",
        b".5",
        b"+1",
        b"1e",
        b"1e+",
        b"[1,]",
        b"{\"a\":1,}",
        b"{a:1}",
        b"\"\\x\"",
        b"\"\\u12G4\"",
        b"\"\x01\"",
        b"\"\n\"",
        b"[1 2]",
        b"{\"a\" 1}",
        b"tru",
        b"nulll",
        b"NaN",
        b"'a'",
        b"\"\xff\"",
        b"\"\xc0\xaf\"",
        b"\"\xed\xa0\x80\"",
        b"\"\xc3\"",
        b"\"\xf4\x90\x80\x80\"",
        b"\"\xf0\x9f\x98\x80\"",
        b"[",
        b"]",
        b"{\"a\"}",
        b"1 2",
        b"[1,,2]",
        b"\"abc",
        b"[[[[[[[[[[1]]]]]]]]]]",
        b"{\"\":{\"\":{\"\":\"\"}}}",
        b"-0.0e-0",
        b"1E400",
        b"123456789012345678901234567890",
    ]
    .iter()
    .map(|t| t.to_vec())
    .collect();
    let mut failures = Vec::new();
    for t in &texts {
        let mut r = Recognizer::new(g.clone());
        let mut pda = JsonPda::new();
        for (k, &b) in t.iter().enumerate() {
            if allowed(&r) != pda.allowed() {
                failures.push(format!(
                    "{}: allowed after {k} bytes: expected {}, got {}",
                    esc(t),
                    fmt_set(&pda.allowed()),
                    fmt_set(&allowed(&r))
                ));
                break;
            }
            let exp = pda.step(b);
            let got = r.feed_byte(b);
            if exp != got {
                failures.push(format!("{}: byte {k}: expected {exp}, got {got}", esc(t)));
                break;
            }
            if !exp {
                break;
            }
            if r.is_complete() != pda.is_complete() {
                failures.push(format!(
                    "{}: is_complete after {} bytes: expected {}, got {}",
                    esc(t),
                    k + 1,
                    pda.is_complete(),
                    r.is_complete()
                ));
                break;
            }
        }
        let mut r = Recognizer::new(g.clone());
        let whole = r.feed(t) && r.is_complete();
        if whole != is_valid_json(t) {
            failures.push(format!(
                "{}: whole text: expected valid={}, got {whole}",
                esc(t),
                is_valid_json(t)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
