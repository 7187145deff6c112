//! `any_order!`: the recognizer against a brute-force reference. Members are finite sets of byte
//! strings; the reference enumerates every sentence up to a length (member sequences joined by
//! the separator, each member's count respected) and so knows the viable prefixes. Every string
//! over the alphabet up to a depth is walked depth first with rollback, comparing acceptance,
//! completeness and the allowed next bytes.

mod common;

use std::collections::BTreeSet;

use common::*;
use structout_engine::{CompileOptions, Grammar, Recognizer};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Once,
    Optional,
    Many,
    Some,
}

struct Case {
    /// KBNF text: `start ::= <open> any_order!(...) <close>;`.
    text: String,
    open: &'static [u8],
    close: &'static [u8],
    sep: &'static [u8],
    members: Vec<(Vec<&'static [u8]>, Kind)>,
}

/// Every sentence of at most `max_len` bytes.
fn sentences(c: &Case, max_len: usize) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    // Depth-first over member sequences: (text so far, count per member).
    fn go(
        c: &Case,
        max_len: usize,
        text: &mut Vec<u8>,
        counts: &mut Vec<usize>,
        out: &mut BTreeSet<Vec<u8>>,
    ) {
        let done = counts.iter().any(|&n| n > 0)
            && c.members
                .iter()
                .zip(counts.iter())
                .all(|((_, k), &n)| !matches!(k, Kind::Once | Kind::Some) || n >= 1);
        if done && text.len() + c.close.len() <= max_len {
            let mut s = text.clone();
            s.extend_from_slice(c.close);
            out.insert(s);
        }
        for (i, (alts, kind)) in c.members.iter().enumerate() {
            if matches!(kind, Kind::Once | Kind::Optional) && counts[i] > 0 {
                continue;
            }
            for alt in alts {
                let before = text.len();
                if counts.iter().any(|&n| n > 0) {
                    text.extend_from_slice(c.sep);
                }
                text.extend_from_slice(alt);
                if text.len() < max_len {
                    counts[i] += 1;
                    go(c, max_len, text, counts, out);
                    counts[i] -= 1;
                }
                text.truncate(before);
            }
        }
    }
    let mut text = c.open.to_vec();
    let mut counts = vec![0; c.members.len()];
    go(c, max_len, &mut text, &mut counts, &mut out);
    out
}

fn check(c: &Case, alphabet: &[u8], depth: usize) -> usize {
    let g = Grammar::compile(&c.text, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", c.text));
    // Long enough that every viable prefix up to `depth` has a completion in the set.
    let longest = c
        .members
        .iter()
        .flat_map(|(a, _)| a.iter().map(|m| m.len()))
        .max()
        .unwrap();
    let slack = c.close.len() + (c.members.len() + 1) * (c.sep.len() + longest);
    let all = sentences(c, depth + slack);
    let viable: BTreeSet<Vec<u8>> = all
        .iter()
        .flat_map(|s| (0..=s.len()).map(move |k| s[..k].to_vec()))
        .collect();
    let mut r = Recognizer::new(std::sync::Arc::new(g));
    let mut path = Vec::new();
    let mut visited = 0;
    walk(
        &mut r,
        &mut path,
        c,
        &all,
        &viable,
        alphabet,
        depth,
        &mut visited,
    );
    visited
}

#[allow(clippy::too_many_arguments)]
fn walk(
    r: &mut Recognizer,
    path: &mut Vec<u8>,
    c: &Case,
    all: &BTreeSet<Vec<u8>>,
    viable: &BTreeSet<Vec<u8>>,
    alphabet: &[u8],
    depth: usize,
    visited: &mut usize,
) {
    *visited += 1;
    let at = esc(path);
    assert_eq!(
        r.is_complete(),
        all.contains(path),
        "{}: complete at {at}",
        c.text
    );
    let allowed = allowed(r);
    for &b in alphabet {
        path.push(b);
        let expect = viable.contains(path);
        path.pop();
        assert_eq!(
            allowed[b as usize], expect,
            "{}: byte {:?} after {at}",
            c.text, b as char
        );
    }
    if path.len() == depth {
        return;
    }
    for &b in alphabet {
        let len = r.len();
        path.push(b);
        let fed = r.feed_byte(b);
        assert_eq!(
            fed,
            viable.contains(path),
            "{}: feeding {}",
            c.text,
            esc(path)
        );
        if fed {
            walk(r, path, c, all, viable, alphabet, depth, visited);
            assert!(r.rollback_to(len));
        }
        path.pop();
    }
}

fn case(
    rules: &str,
    open: &'static [u8],
    close: &'static [u8],
    sep: &'static [u8],
    members: Vec<(Vec<&'static [u8]>, Kind)>,
    member_text: &[&str],
) -> Case {
    let sep_text = if sep.is_empty() {
        "''".to_owned()
    } else {
        format!("'{}'", String::from_utf8_lossy(sep))
    };
    let text = format!(
        "{rules} start ::= '{}' any_order!({sep_text}, {}) '{}';",
        String::from_utf8_lossy(open),
        member_text.join(", "),
        String::from_utf8_lossy(close)
    );
    Case {
        text,
        open,
        close,
        sep,
        members,
    }
}

#[test]
fn every_kind_of_member_with_a_separator() {
    let c = case(
        "",
        b"{",
        b"}",
        b",",
        vec![
            (vec![b"a"], Kind::Once),
            (vec![b"b"], Kind::Optional),
            (vec![b"c"], Kind::Many),
            (vec![b"d"], Kind::Some),
        ],
        &["'a'", "'b'?", "'c'*", "'d'+"],
    );
    let n = check(&c, b"{}abcd,x", 12);
    assert!(n > 2000, "{n}");
}

#[test]
fn ambiguous_members_without_separator() {
    // `ab` reads as one member or as `a` then `b`: both parses must be kept apart.
    let c = case(
        "m ::= 'ab' | 'b';",
        b"[",
        b"]",
        b"",
        vec![
            (vec![b"ab", b"b"], Kind::Once),
            (vec![b"a"], Kind::Optional),
            (vec![b"ba"], Kind::Many),
        ],
        &["m", "'a'?", "'ba'*"],
    );
    assert!(check(&c, b"[]ab", 10) > 100);
}

#[test]
fn multi_byte_members_and_separator() {
    let c = case(
        "k ::= '\"x\":' v; v ::= '1' | '12';",
        b"{",
        b"}",
        b", ",
        vec![
            (vec![b"\"x\":1", b"\"x\":12"], Kind::Once),
            (vec![b"\"y\":2"], Kind::Optional),
            (vec![b"\"z\"", b"\"zz\""], Kind::Once),
        ],
        &["k", "'\"y\":2'?", "#\"\\\"zz?\\\"\""],
    );
    let n = check(&c, b"{}\"xyz:12, ", 20);
    assert!(n > 200, "{n}");
}

#[test]
fn lone_members() {
    for (kind, suffix, depth) in [
        (Kind::Once, "", 6),
        (Kind::Optional, "?", 6),
        (Kind::Some, "+", 7),
    ] {
        let member = format!("'a'{suffix}");
        let c = case("", b"<", b">", b",", vec![(vec![b"a"], kind)], &[&member]);
        check(&c, b"<>a,", depth);
    }
}

#[test]
fn nested_any_orders_keep_their_own_members() {
    // An object whose members' values are objects of the same shape: each level has its set.
    let text = "start ::= o; o ::= '{' any_order!(',', 'a' v, ('b' v)?) '}'; v ::= '0' | o;";
    let g = std::sync::Arc::new(Grammar::compile(text, &CompileOptions::default()).unwrap());
    let accepts = |s: &[u8]| {
        let mut r = Recognizer::new(g.clone());
        r.feed(s) && r.is_complete()
    };
    for ok in ["{a0}", "{b0,a0}", "{a{b0,a0},b{a0}}", "{b{a{a0}},a0}"] {
        assert!(accepts(ok.as_bytes()), "{ok}");
    }
    for bad in [
        "{b0}",
        "{a0,a0}",
        "{a{b0},b0}",
        "{a{a0,a0}}",
        "{b0,a{a0},b0}",
        "{}",
    ] {
        assert!(!accepts(bad.as_bytes()), "{bad}");
    }
}

#[test]
fn state_keys_tell_member_sets_apart() {
    let text = "start ::= '{' any_order!(',', 'a', 'b'?, 'c'?) '}';";
    let g = std::sync::Arc::new(Grammar::compile(text, &CompileOptions::default()).unwrap());
    let key = |s: &[u8]| {
        let mut r = Recognizer::new(g.clone());
        assert!(r.feed(s));
        let mut k = Vec::new();
        assert!(r.state_key(&mut k, 1 << 16));
        (k, allowed(&r))
    };
    let (ka, aa) = key(b"{a,");
    let (kb, ab) = key(b"{b,");
    assert_ne!(ka, kb);
    assert_ne!(
        aa, ab,
        "after `a` it cannot come again; after `b`, `a` must"
    );
    assert_eq!(
        key(b"{a,b,").0,
        key(b"{b,a,").0,
        "equal sets, equal futures"
    );
}

#[test]
fn refused_shapes() {
    let counted: Vec<String> = (0..33).map(|i| format!("'k{i}'")).collect();
    let text = format!("start ::= any_order!(',', {});", counted.join(", "));
    let err = Grammar::compile(&text, &CompileOptions::default()).unwrap_err();
    assert!(err.to_string().contains("over the limit of 32"), "{err}");
    // Any number of `*` members is fine.
    let many: Vec<String> = (0..40).map(|i| format!("'k{i}'*")).collect();
    let text = format!("start ::= any_order!(',', 'a', {});", many.join(", "));
    Grammar::compile(&text, &CompileOptions::default()).unwrap();
    for (text, needle) in [
        (
            "start ::= any_order!(',', 'a', 'b'{2});",
            "may end in `?`, `*` or `+` only",
        ),
        ("start ::= any_order!(',');", "at least one member"),
        (
            "start ::= any_order!(',', 'a', x); x ::= 'b'?;",
            "matches the empty string",
        ),
        (
            "start ::= any_order!(','?, 'a', 'b');",
            "matches the empty string",
        ),
    ] {
        let err = Grammar::compile(text, &CompileOptions::default()).unwrap_err();
        assert!(err.to_string().contains(needle), "{text}: {err}");
    }
}

/// All strings over `alphabet` up to `depth` that `g` can continue, with `g`'s recognizer.
fn walk_union(parts: &[Recognizer], union: &mut Recognizer, alphabet: &[u8], depth: usize) {
    let mut parts = parts.to_vec();
    let mut path = Vec::new();
    fn go(
        parts: &mut [Recognizer],
        union: &mut Recognizer,
        path: &mut Vec<u8>,
        alphabet: &[u8],
        depth: usize,
    ) {
        let alive: Vec<bool> = parts.iter().map(|p| p.len() == path.len()).collect();
        let complete = parts.iter().zip(&alive).any(|(p, &a)| a && p.is_complete());
        assert_eq!(union.is_complete(), complete, "complete at {}", esc(path));
        let mut want = [false; 256];
        for (p, &a) in parts.iter().zip(&alive) {
            if a {
                for (w, x) in want.iter_mut().zip(allowed(p)) {
                    *w |= x;
                }
            }
        }
        assert_eq!(allowed(union), want, "allowed bytes at {}", esc(path));
        if path.len() == depth {
            return;
        }
        for &b in alphabet {
            if !want[b as usize] {
                continue;
            }
            let len = path.len();
            path.push(b);
            for (p, &a) in parts.iter_mut().zip(&alive) {
                if a {
                    p.feed_byte(b);
                }
            }
            assert!(union.feed_byte(b));
            go(parts, union, path, alphabet, depth);
            for p in parts.iter_mut() {
                p.rollback_to(len);
            }
            assert!(union.rollback_to(len));
            path.pop();
        }
    }
    go(&mut parts, union, &mut path, alphabet, depth);
}

#[test]
fn unions_of_any_orders_complete_together() {
    // Objects that start at the same byte and share members: their completions from one origin
    // are handled in one pass; each keeps its own members and requirements.
    let bodies = [
        "'{' any_order!(',', 'a', 'b'?, 'c'*) '}'",
        "'{' any_order!(',', 'a'?, 'b') '}'",
        "'{' any_order!(',', 'a', 'c'+) '}' 'x'?",
        "'{' any_order!('', 'a', 'b', 'ab'?) '}'",
    ];
    let rec = |body: &str| {
        let g = Grammar::compile(&format!("start ::= {body};"), &CompileOptions::default());
        Recognizer::new(std::sync::Arc::new(g.unwrap()))
    };
    let parts: Vec<Recognizer> = bodies.iter().map(|b| rec(b)).collect();
    let mut union = rec(&bodies.join(" | "));
    walk_union(&parts, &mut union, b"{}abc,x", 9);
}

#[test]
fn many_objects_that_start_together_stay_within_the_work_limit() {
    // 64 object shapes of 12 keys each, all alive for the whole document: one pass over the
    // object's first set per member end, not one per object (which needed ~64 times the work).
    let keys: Vec<String> = (0..12).map(|k| format!("'k{k}:' v")).collect();
    let objects: Vec<String> = (0..64)
        .map(|i| format!("'{{' any_order!(',', {}, 'z{i}:' v?) '}}'", keys.join(", ")))
        .collect();
    let text = format!("start ::= {}; v ::= #\"[0-9]+\";", objects.join(" | "));
    let opts = CompileOptions {
        max_work_per_byte: 20_000,
        ..CompileOptions::default()
    };
    let g = std::sync::Arc::new(Grammar::compile(&text, &opts).unwrap());
    let mut r = Recognizer::new(g);
    let doc: Vec<String> = (0..12).rev().map(|k| format!("k{k}:{k}")).collect();
    let doc = format!("{{{},z7:1}}", doc.join(","));
    assert!(r.try_feed(doc.as_bytes()).unwrap(), "{doc}");
    assert!(r.is_complete());
}

#[test]
fn members_that_may_be_left_out_need_not_be_productive() {
    // A tree whose children are optional members: the object is productive without them. A
    // member with no finite text at all is dropped, not the whole object.
    let text =
        "start ::= node; node ::= '{' any_order!(',', 'v', ('n:' node)?, ('d:' dead)*) '}'; \
                dead ::= 'x' dead;";
    let g = std::sync::Arc::new(Grammar::compile(text, &CompileOptions::default()).unwrap());
    let accepts = |s: &str| {
        let mut r = Recognizer::new(g.clone());
        r.feed(s.as_bytes()) && r.is_complete()
    };
    for ok in ["{v}", "{n:{v},v}", "{v,n:{n:{v},v}}"] {
        assert!(accepts(ok), "{ok}");
    }
    for bad in ["{n:{v}}", "{v,v}", "{v,d:x}", "{v,n:{v},n:{v}}"] {
        assert!(!accepts(bad), "{bad}");
    }
    let mut r = Recognizer::new(g.clone());
    assert!(r.feed(b"{v,"));
    assert!(
        !allowed(&r)[b'd' as usize],
        "a dropped member is never offered"
    );
    let err = Grammar::compile(
        "start ::= '{' any_order!(',', 'v', dead) '}'; dead ::= 'x' dead;",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
}
