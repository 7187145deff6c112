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
    /// Least and most members read in all (`any_order!`'s counts).
    counts: (usize, usize),
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
        let total: usize = counts.iter().sum();
        let done = total > 0
            && total >= c.counts.0
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
            if total >= c.counts.1 {
                break;
            }
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
        counts: (0, usize::MAX),
    }
}

/// [`case`] with the counts `min, max` written after the members.
fn counted_case(
    sep: &'static [u8],
    members: Vec<(Vec<&'static [u8]>, Kind)>,
    member_text: &[&str],
    (min, max): (usize, usize),
) -> Case {
    let counts = match max {
        usize::MAX => format!("{min}"),
        _ => format!("{min}, {max}"),
    };
    let mut text: Vec<&str> = member_text.to_vec();
    text.push(&counts);
    Case {
        counts: (min, max),
        ..case("", b"{", b"}", sep, members, &text)
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

/// Members without a separator where `ab` is one member or two (`counts`: written after them).
fn ambiguous_case(counts: &str) -> Case {
    let last = format!("'ba'*{counts}");
    case(
        "m ::= 'ab' | 'b';",
        b"[",
        b"]",
        b"",
        vec![
            (vec![b"ab", b"b"], Kind::Once),
            (vec![b"a"], Kind::Optional),
            (vec![b"ba"], Kind::Many),
        ],
        &["m", "'a'?", &last],
    )
}

#[test]
fn ambiguous_members_without_separator() {
    // `ab` reads as one member or as `a` then `b`: both parses must be kept apart.
    assert!(check(&ambiguous_case(""), b"[]ab", 10) > 100);
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
    // Any number of members is fine (more than 32 counted ones: interned member sets).
    let counted: Vec<String> = (0..33).map(|i| format!("'k{i}'")).collect();
    let text = format!("start ::= any_order!(',', {});", counted.join(", "));
    Grammar::compile(&text, &CompileOptions::default()).unwrap();
    let many: Vec<String> = (0..40).map(|i| format!("'k{i}'*")).collect();
    let text = format!("start ::= any_order!(',', 'a', {});", many.join(", "));
    Grammar::compile(&text, &CompileOptions::default()).unwrap();
    for (text, needle) in [
        (
            "start ::= any_order!(',', 'a', 'b'{2});",
            "may end in `?`, `*` or `+` only",
        ),
        ("start ::= any_order!(',');", "at least one member"),
        ("start ::= any_order!(',', 'a', 3, 2);", "0 <= min <= max"),
        ("start ::= any_order!(',', 'a', 0, 0);", "max >= 1"),
        (
            "start ::= any_order!(',', 'a', 1, 2, 3);",
            "at most two counts",
        ),
        (
            "start ::= any_order!(',', 'a', 1, 'b');",
            "counts come after the members",
        ),
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

#[test]
fn counts_of_members_read() {
    let members = || {
        vec![
            (vec![&b"a"[..]], Kind::Once),
            (vec![&b"b"[..]], Kind::Optional),
            (vec![&b"c"[..]], Kind::Many),
            (vec![&b"d"[..]], Kind::Some),
        ]
    };
    let text = ["'a'", "'b'?", "'c'*", "'d'+"];
    for counts in [(0, 2), (2, 2), (3, 4), (4, usize::MAX), (5, 5), (1, 3)] {
        let c = counted_case(b",", members(), &text, counts);
        let n = check(&c, b"{}abcd,", 12);
        assert!(n > 5, "{counts:?}: {n}");
    }
    // Only optional members: at least two of three, or at most one.
    let opt = || {
        vec![
            (vec![&b"a"[..]], Kind::Optional),
            (vec![&b"b"[..]], Kind::Optional),
            (vec![&b"c"[..]], Kind::Optional),
        ]
    };
    for counts in [(2, usize::MAX), (0, 1), (3, 3)] {
        let c = counted_case(b",", opt(), &["'a'?", "'b'?", "'c'?"], counts);
        check(&c, b"{}abc,", 9);
    }
    // Ambiguous members without a separator: each parse counts its own members.
    let c = Case {
        counts: (2, 3),
        ..ambiguous_case(", 2, 3")
    };
    check(&c, b"[]ab", 10);
}

#[test]
fn counts_no_member_set_can_meet_leave_nothing() {
    for text in [
        // (two required members, at most one in all)
        "start ::= 'x' | '{' any_order!(',', 'a', 'b', 0, 1) '}';",
        // (two members at most, at least three in all)
        "start ::= 'x' | '{' any_order!(',', 'a'?, 'b'?, 3) '}';",
    ] {
        let g = Grammar::compile(text, &CompileOptions::default()).unwrap();
        let mut r = Recognizer::new(std::sync::Arc::new(g));
        assert!(!r.feed(b"{"), "{text}");
        assert!(r.feed(b"x") && r.is_complete(), "{text}");
    }
}

/// Members `A`, `B`, ... (single bytes) of the given kinds, joined by `,` in `{...}`: the
/// reference for any number of members, from the members read so far.
struct Letters {
    kinds: Vec<Kind>,
    min: usize,
    max: usize,
}

const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

impl Letters {
    fn grammar(&self) -> String {
        let members: Vec<String> = self
            .kinds
            .iter()
            .zip(LETTERS)
            .map(|(k, &b)| {
                let suffix = match k {
                    Kind::Once => "",
                    Kind::Optional => "?",
                    Kind::Many => "*",
                    Kind::Some => "+",
                };
                format!("'{}'{suffix}", b as char)
            })
            .collect();
        let counts = match (self.min, self.max) {
            (0, usize::MAX) => String::new(),
            (min, usize::MAX) => format!(", {min}"),
            (min, max) => format!(", {min}, {max}"),
        };
        format!(
            "start ::= '{{' any_order!(',', {}{counts}) '}}';",
            members.join(", ")
        )
    }

    fn readable(&self, counts: &[usize], j: usize) -> bool {
        matches!(self.kinds[j], Kind::Many | Kind::Some) || counts[j] == 0
    }

    /// Whether members read `counts` can still end the object.
    fn completable(&self, counts: &[usize]) -> bool {
        let total: usize = counts.iter().sum();
        let need = (0..counts.len())
            .filter(|&j| matches!(self.kinds[j], Kind::Once | Kind::Some) && counts[j] == 0)
            .count();
        let most = if self
            .kinds
            .iter()
            .any(|k| matches!(k, Kind::Many | Kind::Some))
        {
            usize::MAX
        } else {
            total + counts.iter().filter(|&&n| n == 0).count()
        };
        total + need <= self.max && self.min <= most.min(self.max) && total.max(1) <= self.max
    }

    fn can_close(&self, counts: &[usize]) -> bool {
        let total: usize = counts.iter().sum();
        total >= self.min.max(1)
            && (0..counts.len())
                .all(|j| !matches!(self.kinds[j], Kind::Once | Kind::Some) || counts[j] > 0)
    }

    /// The next bytes after `text` (a viable prefix), and whether it is complete.
    fn next(&self, text: &[u8]) -> ([bool; 256], bool) {
        let mut out = [false; 256];
        if text.is_empty() {
            out[b'{' as usize] = true;
            return (out, false);
        }
        if text.last() == Some(&b'}') {
            return (out, true);
        }
        let mut counts = vec![0; self.kinds.len()];
        for &b in &text[1..] {
            if let Some(j) = LETTERS.iter().position(|&l| l == b) {
                counts[j] += 1;
            }
        }
        let total: usize = counts.iter().sum();
        let can_read = |counts: &mut Vec<usize>, j: usize| {
            if !self.readable(counts, j) || total >= self.max {
                return false;
            }
            counts[j] += 1;
            let ok = self.completable(counts);
            counts[j] -= 1;
            ok
        };
        let at_member = matches!(text.last(), Some(b'{' | b','));
        if at_member {
            for j in 0..self.kinds.len() {
                if can_read(&mut counts, j) {
                    out[LETTERS[j] as usize] = true;
                }
            }
        } else {
            out[b'}' as usize] = self.can_close(&counts);
            out[b',' as usize] = (0..self.kinds.len()).any(|j| can_read(&mut counts, j));
        }
        (out, false)
    }
}

/// Random walks over `l`'s grammar with rollback and forks, each step checked against the
/// reference: the allowed bytes and completeness.
fn random_walks(l: &Letters, walks: usize, seed: u64) {
    use rand::{Rng, SeedableRng};
    let text = l.grammar();
    let g = std::sync::Arc::new(
        Grammar::compile(&text, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}")),
    );
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut r = Recognizer::new(g);
    let mut path: Vec<u8> = Vec::new();
    for _ in 0..walks {
        r.reset();
        path.clear();
        loop {
            let (want, complete) = l.next(&path);
            assert_eq!(
                r.is_complete(),
                complete,
                "{text}: complete at {}",
                esc(&path)
            );
            assert_eq!(
                fmt_set(&allowed(&r)),
                fmt_set(&want),
                "{text}: after {}",
                esc(&path)
            );
            // (a byte the reference refuses is refused, state unchanged)
            let bad = rng.gen_range(0..=255u8);
            if !want[bad as usize] {
                assert!(!r.feed_byte(bad), "{text}: {} then {bad}", esc(&path));
            }
            let options: Vec<u8> = (0..=255u8).filter(|&b| want[b as usize]).collect();
            if options.is_empty() {
                break;
            }
            match rng.gen_range(0..20) {
                0 if path.len() > 2 => {
                    // rollback, then the walk goes on from there
                    let to = rng.gen_range(1..path.len());
                    assert!(r.rollback_to(to));
                    path.truncate(to);
                    continue;
                }
                1 => {
                    // a fork reads a few bytes on its own; the original is unchanged
                    let mut f = r.clone();
                    let mut fp = path.clone();
                    for _ in 0..4 {
                        let (w, _) = l.next(&fp);
                        let opts: Vec<u8> = (0..=255u8).filter(|&b| w[b as usize]).collect();
                        let Some(&b) = opts.get(rng.gen_range(0..opts.len().max(1))) else {
                            break;
                        };
                        assert!(f.feed_byte(b));
                        fp.push(b);
                        assert_eq!(fmt_set(&allowed(&f)), fmt_set(&l.next(&fp).0));
                    }
                }
                _ => {}
            }
            // (members rather than the closing brace most of the time: long objects)
            let b = match options.iter().find(|&&b| b != b'}') {
                Some(_) if rng.gen_range(0..8) > 0 => {
                    let rest: Vec<u8> = options.iter().copied().filter(|&b| b != b'}').collect();
                    rest[rng.gen_range(0..rest.len())]
                }
                _ => options[rng.gen_range(0..options.len())],
            };
            assert!(r.feed_byte(b), "{text}: {} then {}", esc(&path), b as char);
            path.push(b);
        }
    }
}

#[test]
fn more_than_32_counted_members() {
    use Kind::*;
    let kinds: Vec<Kind> = (0..40)
        .map(|i| [Once, Optional, Optional, Many, Some][i % 5])
        .collect();
    random_walks(
        &Letters {
            kinds: kinds.clone(),
            min: 0,
            max: usize::MAX,
        },
        60,
        1,
    );
    random_walks(
        &Letters {
            kinds: kinds.clone(),
            min: 20,
            max: 30,
        },
        60,
        2,
    );
    let optional = vec![Optional; 50];
    random_walks(
        &Letters {
            kinds: optional.clone(),
            min: 0,
            max: usize::MAX,
        },
        40,
        3,
    );
    random_walks(
        &Letters {
            kinds: optional,
            min: 45,
            max: 47,
        },
        40,
        4,
    );
    random_walks(
        &Letters {
            kinds: vec![Once; 52],
            min: 0,
            max: usize::MAX,
        },
        20,
        5,
    );
    // Small sets with counts take the same path.
    random_walks(
        &Letters {
            kinds: vec![Once, Optional, Many],
            min: 3,
            max: 5,
        },
        200,
        6,
    );
    random_walks(
        &Letters {
            kinds: vec![Optional, Optional, Some],
            min: 0,
            max: 2,
        },
        200,
        7,
    );
}

#[test]
fn every_order_of_many_members_is_accepted() {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let l = Letters {
        kinds: vec![Kind::Once; 45],
        min: 0,
        max: usize::MAX,
    };
    let g =
        std::sync::Arc::new(Grammar::compile(&l.grammar(), &CompileOptions::default()).unwrap());
    let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
    let mut order: Vec<u8> = LETTERS[..45].to_vec();
    for _ in 0..50 {
        order.shuffle(&mut rng);
        let body: Vec<String> = order.iter().map(|&b| (b as char).to_string()).collect();
        let doc = format!("{{{}}}", body.join(","));
        let mut r = Recognizer::new(g.clone());
        assert!(r.feed(doc.as_bytes()) && r.is_complete(), "{doc}");
        // (one member left out, or one twice: refused)
        let short = format!("{{{}}}", body[1..].join(","));
        assert!(
            !Recognizer::new(g.clone()).feed(short.as_bytes())
                || !{
                    let mut r = Recognizer::new(g.clone());
                    r.feed(short.as_bytes());
                    r.is_complete()
                }
        );
        let twice = format!("{{{},{}}}", body.join(","), body[3]);
        assert!(
            !Recognizer::new(g.clone()).feed(twice.as_bytes()),
            "{twice}"
        );
    }
}

#[test]
fn state_keys_of_member_sets_ignore_the_order_read() {
    let l = Letters {
        kinds: vec![Kind::Optional; 40],
        min: 0,
        max: 30,
    };
    let g =
        std::sync::Arc::new(Grammar::compile(&l.grammar(), &CompileOptions::default()).unwrap());
    let key = |s: &[u8]| {
        let mut r = Recognizer::new(g.clone());
        assert!(r.feed(s));
        let mut k = Vec::new();
        assert!(r.state_key(&mut k, 1 << 16));
        k
    };
    assert_eq!(key(b"{A,B,C,"), key(b"{C,A,B,"));
    assert_ne!(key(b"{A,B,C,"), key(b"{A,B,D,"));
    assert_ne!(key(b"{A,B,"), key(b"{A,B,C,"));
}

#[test]
fn member_sets_over_the_item_limit_are_an_error() {
    let l = Letters {
        kinds: vec![Kind::Optional; 50],
        min: 0,
        max: usize::MAX,
    };
    let options = CompileOptions {
        max_total_items: 2_000,
        ..CompileOptions::default()
    };
    let g = std::sync::Arc::new(Grammar::compile(&l.grammar(), &options).unwrap());
    let mut r = Recognizer::new(g);
    let body: Vec<String> = LETTERS[..50]
        .iter()
        .map(|&b| (b as char).to_string())
        .collect();
    let doc = format!("{{{}}}", body.join(","));
    let mut failed = false;
    for &b in doc.as_bytes() {
        match r.try_feed_byte(b) {
            Ok(true) => {}
            Ok(false) => panic!("refused {}", b as char),
            Err(e) => {
                assert!(e.to_string().contains("max_total_items"), "{e}");
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the limit is reached");
}
