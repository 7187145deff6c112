//! Leo's optimization: correctness on the shapes where a wrong "deterministic reduction" test goes
//! astray, and linear behaviour on long right-recursive inputs (plus left recursion, ambiguity and
//! deep nesting for contrast).
//!
//! Correctness checks compare the engine with the reference recognizer of `common/mod.rs` on every
//! viable string over the grammar's alphabet up to a length (depth-first with rollback). Long-input
//! checks use inputs far beyond what a quadratic recognizer could handle within the time bounds
//! (e.g. 10^6 bytes of a right-recursive list would need ~5·10^11 completion steps without Leo).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use structout_engine::{Grammar, Recognizer};

/// Right-linear rules stay rules here: these tests are about Leo's optimization on them.
fn grammar(text: &str) -> Arc<Grammar> {
    compile_as_rules(text).unwrap_or_else(|e| panic!("grammar should compile:\n{text}\n{e}"))
}

/// Compiles a hand-written grammar (through the test AST, so the reference sees the same grammar)
/// and compares engine and reference exhaustively.
fn compare(text: &str, alphabet: &[u8], depth: usize) -> usize {
    let gram = parse_gram(text);
    let g = grammar(&gram.render());
    exhaustive_compare(&g, &gram, alphabet, depth).unwrap_or_else(|e| panic!("{e}"))
}

/// Generous wall-clock bound: linear runs take milliseconds; quadratic ones take minutes.
const BOUND: Duration = Duration::from_secs(30);

/// Feeds `input` in chunks, failing as soon as the time bound is exceeded (so a quadratic
/// recognizer fails in `BOUND`, not in hours).
fn feed_all(g: &Arc<Grammar>, input: &[u8]) -> (Recognizer, Duration) {
    let mut r = Recognizer::new(g.clone());
    let t = Instant::now();
    for (k, chunk) in input.chunks(10_000).enumerate() {
        assert!(
            r.feed(chunk),
            "input rejected in the chunk at byte {} of {}",
            k * 10_000,
            input.len()
        );
        let took = t.elapsed();
        assert!(
            took < BOUND,
            "only {} of {} bytes fed after {took:?}: not linear",
            k * 10_000 + chunk.len(),
            input.len()
        );
    }
    (r, t.elapsed())
}

fn set(bytes: &[u8]) -> [bool; 256] {
    let mut s = [false; 256];
    for &b in bytes {
        s[b as usize] = true;
    }
    s
}

// ---------------------------------------------------------------------------------------------
// The counterexample shapes.
// ---------------------------------------------------------------------------------------------

/// cs.stackexchange.com/questions/101770: `A ::= A 'a' | ''` under `start ::= A`. In set 0 the item
/// `start -> . A` is the only one one step from completion, but `A -> . A 'a'` has the same postdot
/// symbol; a Leo test that looks for "the unique item one step from completion" then skips
/// `A -> A . 'a'` and rejects "aa".
#[test]
fn stackexchange_counterexample() {
    let text = "start ::= A; A ::= A 'a' | '';";
    let g = grammar(text);
    for n in 0..200 {
        let mut r = Recognizer::new(g.clone());
        assert!(r.feed(&vec![b'a'; n]), "a^{n} rejected");
        assert!(r.is_complete(), "a^{n} not complete");
        assert_eq!(allowed(&r), set(b"a"), "allowed bytes after a^{n}");
    }
    assert!(!Recognizer::new(g.clone()).feed(b"ab"));
    compare(text, b"ab", 10);
}

/// The same shape with a terminal prefix: after 'x', the items `S -> 'x' . A` (one step from
/// completion) and `S -> 'x' . A 'b'` share the postdot symbol `A`, so `A` has no Leo item in that
/// set, while the right recursion inside `A` does.
#[test]
fn unique_one_step_item_is_not_enough() {
    let text = "start ::= 'x' A | 'x' A 'b'; A ::= 'a' A | 'a';";
    let g = grammar(text);
    for n in 1..300usize {
        let mut input = b"x".to_vec();
        input.extend(std::iter::repeat_n(b'a', n));
        let mut r = Recognizer::new(g.clone());
        assert!(r.feed(&input), "x a^{n} rejected");
        assert!(r.is_complete(), "x a^{n} not complete");
        assert_eq!(allowed(&r), set(b"ab"), "allowed after x a^{n}");
        assert!(r.feed(b"b"), "x a^{n} b rejected");
        assert!(r.is_complete(), "x a^{n} b not complete");
        assert_eq!(allowed(&r), set(b""), "nothing may follow x a^{n} b");
        assert!(!r.feed(b"b"));
        assert!(!r.feed(b"a"));
    }
    let mut r = Recognizer::new(g.clone());
    assert!(!r.feed(b"xb"));
    assert!(r.feed(b"x") && !r.is_complete());
    compare(text, b"abx", 9);
}

/// Variants where a deterministic chain meets an item with the same postdot symbol at different
/// depths, through several nonterminals, or with nullable parts removed by normalization.
#[test]
fn leo_shapes_against_reference() {
    let cases: &[(&str, &[u8], usize)] = &[
        ("start ::= A | A 'c'; A ::= 'a' A | 'a';", b"abc", 9),
        ("start ::= 'a' start | 'a' start 'b' | 'c';", b"abc", 9),
        (
            "start ::= A; A ::= 'a' B | 'a'; B ::= 'b' A | 'b' A 'c' | 'b';",
            b"abc",
            9,
        ),
        (
            "start ::= A; A ::= 'a' B; B ::= 'b' C | 'b'; C ::= 'c' A | 'c';",
            b"abc",
            10,
        ),
        ("start ::= 'a' start? ;", b"ab", 10),
        ("start ::= 'a' [B] start | 'a'; B ::= 'b'?;", b"ab", 9),
        ("start ::= I (',' start)?; I ::= 'x'+;", b"x,", 10),
        ("start ::= 'a' start | T; T ::= start 'x' | 'y';", b"axy", 8),
        ("start ::= A A; A ::= 'a' A | 'a';", b"ab", 10),
        ("start ::= A 'b' A; A ::= 'a' A | '';", b"ab", 10),
        (
            "start ::= L; L ::= 'x' | 'x' ',' L | 'x' ';' M; M ::= 'y' M | 'y' | L;",
            b"xy,;",
            8,
        ),
        ("start ::= S; S ::= 'a' S 'b' | 'a' S | '';", b"ab", 10),
        ("start ::= ('a' | 'a' 'b')* 'c';", b"abc", 9),
        (
            "start ::= X 'x' | Y 'y'; X ::= 'a' X | 'a'; Y ::= 'a' Y | 'a';",
            b"axy",
            9,
        ),
        ("start ::= 'a' start 'a' | 'a' start | 'b';", b"ab", 10),
        ("start ::= A{2,3}; A ::= 'a' A | 'b';", b"ab", 10),
    ];
    let mut total = 0;
    for (text, alphabet, depth) in cases {
        total += compare(text, alphabet, *depth);
    }
    assert!(total > 1000, "too few prefixes compared: {total}");
}

/// The seed's own example, `A ::= 'a' A | 'a'` on "aaaaa", prefix by prefix.
#[test]
fn seed_example() {
    let g = grammar("start ::= 'a' start | 'a';");
    let mut r = Recognizer::new(g);
    assert!(!r.is_complete());
    for k in 1..=5 {
        assert!(r.feed_byte(b'a'));
        assert!(r.is_complete(), "a^{k}");
        assert_eq!(allowed(&r), set(b"a"));
    }
    assert!(!r.feed_byte(b'b'));
    assert_eq!(r.len(), 5);
}

// ---------------------------------------------------------------------------------------------
// Long inputs.
// ---------------------------------------------------------------------------------------------

const LONG: usize = 1_000_000;

#[test]
fn long_right_recursive_list() {
    let g = grammar("start ::= A; A ::= 'a' A | 'a';");
    let input = vec![b'a'; LONG];
    let (mut r, took) = feed_all(&g, &input);
    assert!(r.is_complete());
    assert!(
        took < BOUND,
        "right recursion over {LONG} bytes took {took:?}"
    );
    assert!(
        r.current_set_size() <= 8,
        "set size {} grows with the input",
        r.current_set_size()
    );
    // Byte by byte, every prefix is complete.
    r.reset();
    let t = Instant::now();
    for k in 0..100_000 {
        assert!(r.feed_byte(b'a'));
        assert!(r.is_complete(), "a^{} not complete", k + 1);
    }
    assert!(t.elapsed() < BOUND);
    // Rollback into the middle of a long Leo chain, then continue.
    r.rollback_to(50_000);
    assert!(r.is_complete());
    assert_eq!(allowed(&r), set(b"a"));
    assert!(!r.feed(b"ab"));
    assert!(r.feed(&vec![b'a'; 60_000]));
    assert_eq!(r.len(), 110_000);
    assert!(r.is_complete());
}

#[test]
fn long_counterexample_shape() {
    let g = grammar("start ::= 'x' A | 'x' A 'b'; A ::= 'a' A | 'a';");
    let mut input = b"x".to_vec();
    input.extend(vec![b'a'; LONG]);
    let (mut r, took) = feed_all(&g, &input);
    assert!(took < BOUND, "took {took:?}");
    assert!(r.is_complete());
    assert_eq!(allowed(&r), set(b"ab"));
    assert!(r.feed(b"b"));
    assert!(r.is_complete());
    assert!(!r.feed(b"b"));
}

#[test]
fn long_mutual_right_recursion() {
    let g = grammar("start ::= A; A ::= 'a' B | 'a'; B ::= 'b' A | 'b';");
    let input: Vec<u8> = (0..LONG)
        .map(|k| if k % 2 == 0 { b'a' } else { b'b' })
        .collect();
    let (r, took) = feed_all(&g, &input);
    assert!(took < BOUND, "took {took:?}");
    assert!(r.is_complete());
    assert_eq!(allowed(&r), set(b"a"));
    let mut r = Recognizer::new(g.clone());
    assert!(r.feed(&input[..1001]));
    assert!(!r.feed(b"a"));
    assert!(r.feed(b"b") && r.is_complete());
}

#[test]
fn long_right_recursive_separated_list_with_regex_items() {
    let g = grammar("start ::= L; L ::= #\"[a-z]+\" ',' L | #\"[a-z]+\";");
    let input: Vec<u8> = "abc,".repeat(LONG / 4).into_bytes();
    let (mut r, took) = feed_all(&g, &input);
    assert!(took < BOUND, "took {took:?}");
    assert!(!r.is_complete());
    assert!(r.feed(b"zz"));
    assert!(r.is_complete());
    assert!(!r.feed(b",,"));
}

#[test]
fn long_right_recursion_through_optional_group() {
    let g = grammar("start ::= 'x' (',' start)?;");
    let input: Vec<u8> = "x,".repeat(LONG / 2).into_bytes();
    let (mut r, took) = feed_all(&g, &input[..input.len() - 1]);
    assert!(took < BOUND, "took {took:?}");
    assert!(r.is_complete());
    assert!(r.feed(b",") && !r.is_complete());
}

#[test]
fn long_left_recursive_lists() {
    for text in [
        "start ::= start 'a' | 'a';",
        "start ::= start ',' 'x' | 'x';",
        "start ::= 'x'+;",
        "start ::= L; L ::= L ',' I | I; I ::= #\"[0-9]+\";",
    ] {
        let g = grammar(text);
        let input: Vec<u8> = match text {
            t if t.contains("'a'") => vec![b'a'; LONG],
            t if t.contains("[0-9]") => "12,".repeat(LONG / 3).into_bytes(),
            t if t.contains(',') => "x,".repeat(LONG / 2).into_bytes(),
            _ => vec![b'x'; LONG],
        };
        let input = input.strip_suffix(b",").unwrap_or(&input).to_vec();
        let (r, took) = feed_all(&g, &input);
        assert!(took < BOUND, "{text}: took {took:?}");
        assert!(r.is_complete(), "{text}");
    }
}

#[test]
fn deep_nesting() {
    let depth = 100_000;
    for text in [
        "start ::= '[' start ']' | 'x';",
        "start ::= V; V ::= '[' (V (',' V)*)? ']';",
        "start ::= S; S ::= 'a' S 'b' | '';",
    ] {
        let g = grammar(text);
        let (open, close, mid): (u8, u8, &[u8]) = if text.contains('[') {
            (b'[', b']', if text.contains('x') { b"x" } else { b"" })
        } else {
            (b'a', b'b', b"")
        };
        let mut input = vec![open; depth];
        input.extend_from_slice(mid);
        let t = Instant::now();
        let mut r = Recognizer::new(g.clone());
        assert!(r.feed(&input), "{text}: opening rejected");
        assert!(!r.is_complete() || depth == 0);
        // One closing bracket short: not complete; then complete.
        assert!(r.feed(&vec![close; depth - 1]), "{text}: closing rejected");
        assert!(!r.is_complete(), "{text}: complete one bracket early");
        assert!(r.feed(&[close]));
        assert!(r.is_complete(), "{text}: not complete");
        assert!(!r.feed(&[close]), "{text}: extra closing bracket accepted");
        assert!(t.elapsed() < BOUND, "{text}: took {:?}", t.elapsed());
    }
    // A wide flat list inside a nested one.
    let g = grammar("start ::= V; V ::= '[' (V (',' V)*)? ']' | 'x';");
    let mut input = b"[[".to_vec();
    input.extend("x,".repeat(200_000).as_bytes());
    input.extend(b"x]]");
    let (r, took) = feed_all(&g, &input);
    assert!(took < BOUND, "took {took:?}");
    assert!(r.is_complete());
}

/// Highly ambiguous grammars (cubic for Earley) on moderate inputs.
#[test]
fn ambiguous_grammars() {
    let g = grammar("start ::= start start | 'a';");
    let mut r = Recognizer::new(g.clone());
    let t = Instant::now();
    for k in 1..=150 {
        assert!(r.feed_byte(b'a'));
        assert!(r.is_complete(), "a^{k}");
        assert_eq!(allowed(&r), set(b"a"));
    }
    assert!(!r.feed_byte(b'b'));
    assert!(t.elapsed() < BOUND, "took {:?}", t.elapsed());
    compare("start ::= start start | 'a';", b"ab", 10);
    compare(
        "start ::= start start start | start start | 'a' | 'b';",
        b"abc",
        7,
    );
    compare("start ::= start 'p' start | 'n';", b"np", 11);
    compare("start ::= (start | 'a')+ 'b'?;", b"ab", 8);
}
