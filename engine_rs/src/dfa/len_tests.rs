//! Brute-force checks of `len!` / `json_len!` (through the whole grammar pipeline) against
//! independently written character counts.

use std::sync::Arc;

use super::{test_form, CountForm};
use crate::earley::Recognizer;
use crate::grammar::{CompileOptions, Grammar};

/// Code points of the JSON string `"body"` as Python's `json.loads` decodes it (surrogate
/// escape pairs combined), or `None` when the body is not valid JSON string content.
fn json_decoded_len(body: &[u8]) -> Option<usize> {
    let s = std::str::from_utf8(body).ok()?;
    // (code unit or scalar, came from a `\u` escape)
    let mut units: Vec<(u32, bool)> = Vec::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        match c {
            '"' | '\u{0}'..='\u{1f}' => return None,
            '\\' => match it.next()? {
                '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => units.push((0, false)),
                'u' => {
                    let hex: String = (0..4).map(|_| it.next()).collect::<Option<_>>()?;
                    if !hex.chars().all(|h| h.is_ascii_hexdigit()) {
                        return None;
                    }
                    units.push((u32::from_str_radix(&hex, 16).ok()?, true));
                }
                _ => return None,
            },
            c => units.push((c as u32, false)),
        }
    }
    let mut n = 0;
    let mut i = 0;
    while i < units.len() {
        let (u, esc) = units[i];
        let pair = esc
            && (0xD800..0xDC00).contains(&u)
            && units
                .get(i + 1)
                .is_some_and(|&(v, e)| e && (0xDC00..0xE000).contains(&v));
        i += if pair { 2 } else { 1 };
        n += 1;
    }
    Some(n)
}

/// Characters for `len!`: code points of valid UTF-8, else bytes that are not continuations.
fn utf8_len(s: &[u8]) -> usize {
    match std::str::from_utf8(s) {
        Ok(s) => s.chars().count(),
        Err(_) => s.iter().filter(|&&b| !(0x80..=0xBF).contains(&b)).count(),
    }
}

/// Every concatenation of up to `depth` chunks: the grammar's verdict (through the
/// recognizer) must equal `want` where that says `Some`. Returns how many were accepted.
fn brute(
    grammar: &str,
    chunks: &[&[u8]],
    depth: usize,
    want: &mut dyn FnMut(&[u8]) -> Option<bool>,
) -> usize {
    // An empty language is a compile error; then nothing may be wanted.
    let (mut r, alive) = match Grammar::compile(grammar, &CompileOptions::default()) {
        Ok(g) => (Recognizer::new(Arc::new(g)), true),
        Err(e) if e.to_string().contains("is empty") => (recognizer("start ::= 'x';"), false),
        Err(e) => panic!("{grammar}: {e}"),
    };
    let mut buf = Vec::new();
    let mut accepted = 0;
    walk(
        &mut r,
        alive,
        &mut buf,
        chunks,
        depth,
        want,
        grammar,
        &mut accepted,
    );
    accepted
}

#[allow(clippy::too_many_arguments)]
fn walk(
    r: &mut Recognizer,
    alive: bool,
    buf: &mut Vec<u8>,
    chunks: &[&[u8]],
    depth: usize,
    want: &mut dyn FnMut(&[u8]) -> Option<bool>,
    grammar: &str,
    accepted: &mut usize,
) {
    let got = alive && r.is_complete();
    if let Some(w) = want(buf) {
        assert_eq!(got, w, "{grammar} on {:?}", String::from_utf8_lossy(buf));
    }
    *accepted += usize::from(got);
    if depth == 0 {
        return;
    }
    let len = r.len();
    for c in chunks {
        let fed = alive && r.feed(c);
        buf.extend_from_slice(c);
        walk(r, fed, buf, chunks, depth - 1, want, grammar, accepted);
        buf.truncate(buf.len() - c.len());
        if fed {
            assert!(r.rollback_to(len));
        }
    }
}

fn recognizer(grammar: &str) -> Recognizer {
    let g = Grammar::compile(grammar, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{grammar}: {e}"));
    Recognizer::new(Arc::new(g))
}

fn member(r: &mut Recognizer, s: &[u8]) -> bool {
    r.reset();
    r.feed(s) && r.is_complete()
}

const FINE: &[&[u8]] = &[
    b"\\",
    b"u",
    b"D",
    b"8",
    b"C",
    b"0",
    b"a",
    b"\"",
    "\u{e9}".as_bytes(),
];
const COARSE: &[&[u8]] = &[
    b"\\uD83D",
    b"\\uDE00",
    b"\\ud800",
    b"\\udbff",
    b"\\uDC00",
    b"\\udfff",
    b"\\u0041",
    b"\\n",
    b"\\",
    b"u",
    b"a",
    "\u{e9}".as_bytes(),
];
const RULES: &str =
    r"body ::= 'a\\uD83D\\uDE00' | '\\ud800\\udc00\\udc00' | '\u{e9}\\u0041' | '\\n' | '';";

/// Runs `f` with `len!` / `json_len!` tabulated, then length-counted.
fn each_form(f: impl Fn(CountForm)) {
    for form in [CountForm::Table, CountForm::Counted] {
        test_form::with(form, || f(form));
    }
}

#[test]
fn json_len_equals_python_decoded_length() {
    each_form(|_| json_len_equals_python_decoded_length_in_form());
}

fn json_len_equals_python_decoded_length_in_form() {
    let bodies = [
        // The JSON string body.
        r#"#"(?:[^\"\\\x00-\x1F]|\\[\"\\/bfnrt]|\\u[0-9A-Fa-f]{4})*""#,
        // Surrogate escapes only, plus plain characters.
        r#"#"(?:[a\u00e98]|\\u[dD][0-9a-fA-F]{3}|\\n)*""#,
        // Anything: bodies that are not valid JSON are not compared.
        r#"#"(?s:.)*""#,
        // A nonterminal of literals.
        "body",
    ];
    for e in bodies {
        let mut in_e = recognizer(&format!("start ::= {e}; {RULES}"));
        for (lo, hi) in [(0, 0), (0, 2), (1, 3), (2, 2), (3, 6)] {
            let grammar = format!("start ::= json_len!({e}, {lo}, {hi}); {RULES}");
            let mut want = |s: &[u8]| {
                if !member(&mut in_e, s) {
                    return Some(false);
                }
                json_decoded_len(s).map(|n| (lo..=hi).contains(&n))
            };
            let n = brute(&grammar, FINE, 5, &mut want) + brute(&grammar, COARSE, 4, &mut want);
            assert!(n > 0 || e == "body", "{grammar}: nothing accepted");
        }
    }
}

#[test]
fn len_counts_code_points() {
    each_form(|_| len_counts_code_points_in_form());
}

fn len_counts_code_points_in_form() {
    let bytes: &[&[u8]] = &[
        b"a",
        b"\\",
        "\u{e9}".as_bytes(),
        "\u{1f600}".as_bytes(),
        b"\xC3",
        b"\xA9",
    ];
    let bodies = [
        r#"#"(?s-u:.)*""#,
        r#"#"[a\u00e9]*\\?""#,
        r#"#"(?:\\u[0-9]{4}|\u00e9)+""#,
        "body",
    ];
    for e in bodies {
        let mut in_e = recognizer(&format!("start ::= {e}; {RULES}"));
        for (lo, hi) in [(0, 0), (0, 2), (1, 3), (2, 2), (3, 6)] {
            let grammar = format!("start ::= len!({e}, {lo}, {hi}); {RULES}");
            let mut want =
                |s: &[u8]| Some(member(&mut in_e, s) && (lo..=hi).contains(&utf8_len(s)));
            brute(&grammar, bytes, 6, &mut want);
            brute(&grammar, FINE, 4, &mut want);
            brute(&grammar, COARSE, 3, &mut want);
        }
    }
}

#[test]
fn surrogate_pairs_and_merging() {
    each_form(surrogate_pairs_and_merging_in_form);
}

fn surrogate_pairs_and_merging_in_form(form: CountForm) {
    let mut r =
        recognizer(r#"start ::= '"' json_len!(#"(?:[a-z]|\\u[0-9a-fA-F]{4})*", 1, 2) '"';"#);
    for (s, ok) in [
        (&br#""\uD83D\uDE00""#[..], true),
        (br#""\uD83D\uDE00a""#, true),
        (br#""\uD83D\uDE00ab""#, false),
        (br#""\ud800\ud800\udc00""#, true),
        (br#""\udc00\ud800""#, true),
        (br#""\udc00\udc00a""#, false),
        (br#""""#, false),
    ] {
        assert_eq!(member(&mut r, s), ok, "{}", String::from_utf8_lossy(s));
    }
    // A tabulated body merges with the quotes into one terminal, like regex terminals; a
    // length-counted one stays a terminal of its own between the quote literals.
    let g = Grammar::compile(
        r#"start ::= '"' json_len!(#"[a-z]+", 1, 3) '"';"#,
        &CompileOptions::default(),
    )
    .unwrap();
    let lnf = g.lnf_debug();
    assert_eq!(lnf.matches("#regex").count(), 1, "{lnf}");
    if form == CountForm::Table {
        assert!(!lnf.contains("\\\""), "{lnf}");
    } else {
        assert!(lnf.contains("\\\""), "{lnf}");
    }
}

/// The automatic form tabulates only small products: a bound that would make a large table is
/// counted, so a grammar with many bounded strings stays the size of its parts whatever the bound
/// (before `MAX_TABLE_BYTES`, 30 members with `maxLength: 200` took ~100 MB, merged into keys).
#[test]
fn auto_form_keeps_tables_small() {
    let body = r#"#"(?:[^\"\\\x00-\x1F]|\\[\"\\/bfnrt]|\\u[0-9A-Fa-f]{4})*""#;
    let forms = |hi: u32| {
        let g = Grammar::compile(
            &format!("start ::= json_len!({body}, 0, {hi});"),
            &CompileOptions::default(),
        )
        .unwrap();
        let counted: Vec<bool> = g.lnf().dfas.iter().map(|d| d.is_counted()).collect();
        counted
    };
    assert_eq!(forms(2), [false], "a small product stays a table");
    assert_eq!(forms(200), [true], "a large product is counted");

    let members = |hi: u32| {
        let alts: Vec<String> = (0..30)
            .map(|i| format!(r#"'"k{i}": ' ('null' | '"' json_len!({body}, 0, {hi}) '"')"#))
            .collect();
        let text = format!(
            "start ::= '{{' member (', ' member)* '}}'; member ::= {};",
            alts.join(" | ")
        );
        Grammar::compile(&text, &CompileOptions::default())
            .unwrap()
            .memory_usage()
    };
    let (small, large) = (members(20), members(5000));
    assert!(large < 1 << 20, "30 bounded members take {large} bytes");
    assert!(
        large <= small * 2,
        "size grows with the bound: {small} -> {large} bytes"
    );
}
