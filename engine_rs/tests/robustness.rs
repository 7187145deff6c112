//! Robustness: adversarial grammars and inputs, documented limits, and regression tests for
//! problems found by fuzzing (`engine_rs/fuzz`).
//!
//! Every adversarial case must either compile and run within the documented bounds or fail with
//! the documented error (`docs/limits.md`), in bounded time (asserted, generously: CI machines are
//! slow and shared) and bounded memory (asserted through `memory_usage()` of the grammar and the
//! recognizer, and the process's peak RSS where it is meaningful).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use structout_engine::vocab::Vocabulary;
use structout_engine::{
    CompileError, CompileOptions, CompiledGrammar, EngineError, ErrorKind, Grammar, Recognizer,
};

/// Generous wall-clock bound for one adversarial case.
const BOUND: Duration = Duration::from_secs(20);
const MIB: usize = 1 << 20;

fn compile(text: &str) -> Result<Arc<Grammar>, CompileError> {
    compile_with(text, &CompileOptions::default())
}

fn compile_with(text: &str, opts: &CompileOptions) -> Result<Arc<Grammar>, CompileError> {
    Grammar::compile(text, opts).map(Arc::new)
}

/// Runs `f`, asserting it finishes within [`BOUND`]; returns its result and the elapsed time.
fn timed<T>(what: &str, f: impl FnOnce() -> T) -> (T, Duration) {
    let t0 = Instant::now();
    let out = f();
    let dt = t0.elapsed();
    eprintln!("{what}: {dt:.2?}");
    assert!(dt < BOUND, "{what} took {dt:?} (bound {BOUND:?})");
    (out, dt)
}

fn expect_limit(e: &CompileError, limit: &str) {
    let text = e.to_string();
    assert_eq!(
        e.kind(),
        ErrorKind::Limit,
        "expected a limit error, got: {text}"
    );
    assert!(
        text.contains(limit),
        "the error should name `{limit}`: {text}"
    );
    assert!(
        text.starts_with("error at "),
        "the error should give line:col: {text}"
    );
}

fn accepts(g: &Arc<Grammar>, input: &[u8]) -> bool {
    let mut r = Recognizer::new(g.clone());
    r.feed(input) && r.is_complete()
}

/// Peak resident set size of this process in bytes (Linux), if known.
fn peak_rss() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

// ------------------------------------------------------------------------------------------------
// Exponential regexes: the DFA limit
// ------------------------------------------------------------------------------------------------

#[test]
fn exponential_regex_hits_the_dfa_limit() {
    // The DFA of (a|b)*a(a|b){25} needs 2^26 states: far beyond the default 32 MiB.
    let text = r#"start ::= #"(a|b)*a(a|b){25}";"#;
    let (r, _) = timed("(a|b)*a(a|b){25} with defaults", || compile(text));
    let e = r.expect_err("a 2^26-state DFA must not compile under the default limit");
    expect_limit(&e, "dfa_size_limit");
    assert!(e.to_string().contains("error at 1:11"), "{e}");
    // A small limit fails fast.
    let small = CompileOptions {
        dfa_size_limit: 1 << 16,
        ..CompileOptions::default()
    };
    let (r, dt) = timed("(a|b)*a(a|b){25} with a 64 KiB limit", || {
        compile_with(text, &small)
    });
    expect_limit(&r.unwrap_err(), "dfa_size_limit");
    assert!(dt < Duration::from_secs(5), "{dt:?}");
    // Raising nothing, a smaller instance compiles within the limit and runs in linear time.
    let (g, _) = timed("(a|b)*a(a|b){12}", || {
        compile(r#"start ::= #"(a|b)*a(a|b){12}";"#).unwrap()
    });
    assert!(g.memory_usage() <= CompileOptions::default().dfa_size_limit);
    let mut input = vec![b'b'; 20_000];
    input[20_000 - 13] = b'a';
    let (ok, _) = timed("20 kB through the 8k-state DFA", || accepts(&g, &input));
    assert!(ok);
}

#[test]
fn exponential_regexes_in_every_position_hit_the_limit() {
    // The same blow-up inside except!, and a counted repetition inside a regex.
    for text in [
        r#"start ::= except!(#"(a|b)*a(a|b){25}");"#,
        r#"start ::= #"a{1000000}";"#,
    ] {
        let (r, _) = timed(text, || compile(text));
        expect_limit(&r.expect_err(text), "dfa_size_limit");
    }
}

// ------------------------------------------------------------------------------------------------
// Ambiguity: the Earley item limits
// ------------------------------------------------------------------------------------------------

const AMBIGUOUS: &str = "start ::= S; S ::= S S | 'a';";

#[test]
fn ambiguous_grammar_hits_max_items_per_set_with_state_unchanged() {
    // Catalan-many parses: the set at position k holds about k items, so a limit of 300 is hit
    // after about 300 bytes.
    let opts = CompileOptions {
        max_items_per_set: 300,
        ..CompileOptions::default()
    };
    let g = compile_with(AMBIGUOUS, &opts).unwrap();
    let (outcome, _) = timed("S ::= S S | 'a' until max_items_per_set", || {
        let mut r = Recognizer::new(g.clone());
        for k in 0..10_000 {
            match r.try_feed_byte(b'a') {
                Ok(true) => {}
                Ok(false) => panic!("'a' refused at {k}"),
                Err(e) => return (k, e, r),
            }
        }
        panic!("no limit error after 10000 bytes");
    });
    let (k, err, mut r) = outcome;
    assert!((250..=310).contains(&k), "limit hit at {k}");
    assert_eq!(
        err,
        EngineError::Limit {
            limit: "max_items_per_set",
            value: 300
        }
    );
    assert!(err.to_string().contains("max_items_per_set"), "{err}");
    // The failed byte left the state as it was: same length, still complete, rollback works.
    assert_eq!(r.len(), k);
    assert!(r.is_complete());
    r.rollback_to(10);
    assert!(r.feed(b"aa") && r.is_complete() && r.len() == 12);
    // `feed` is atomic on a limit error too.
    let mut r = Recognizer::new(g);
    assert!(r.feed(&[b'a'; 100]));
    assert!(r.try_feed(&[b'a'; 1000]).is_err());
    assert_eq!(r.len(), 100);
}

#[test]
fn matcher_reports_item_limits_as_errors_not_panics() {
    let opts = CompileOptions {
        max_items_per_set: 200,
        ..CompileOptions::default()
    };
    let g = compile_with(AMBIGUOUS, &opts).unwrap();
    let toks: Vec<Option<Vec<u8>>> = vec![None, Some(b"a".to_vec()), Some(b"aaaa".to_vec())];
    let vocab = Arc::new(Vocabulary::from_byte_tokens(&toks, &[0], None).unwrap());
    let cg = Arc::new(CompiledGrammar::new(g, vocab));
    let mut m = cg.matcher();
    let mut mask = vec![0u32; cg.mask_words()];
    let mut hit = false;
    for _ in 0..1000 {
        match m.accept_token(2) {
            Ok(true) => {}
            Ok(false) => panic!("token refused"),
            Err(e) => {
                assert!(e.to_string().contains("max_items_per_set"), "{e}");
                hit = true;
                break;
            }
        }
        if m.fill_next_token_bitmask(&mut mask).is_err() {
            hit = true;
            break;
        }
    }
    assert!(hit, "the limit was never hit");
    // After the error the matcher still works: roll back and continue.
    let n = m.num_tokens();
    m.rollback(n.min(10)).unwrap();
    assert!(m.fill_next_token_bitmask(&mut mask).is_ok());
    assert!(mask[0] & 0b110 != 0, "tokens allowed again after rollback");
}

#[test]
fn ambiguous_grammar_with_default_limits_is_bounded_in_time() {
    let g = compile(AMBIGUOUS).unwrap();
    let mut r = Recognizer::new(g);
    let t0 = Instant::now();
    for k in 0..3000 {
        assert!(
            t0.elapsed() < BOUND,
            "neither finished nor hit a limit: {k} bytes in {BOUND:?}"
        );
        match r.try_feed_byte(b'a') {
            Ok(true) => {}
            Ok(false) => panic!("'a' refused"),
            Err(_) => return,
        }
    }
}

#[test]
fn max_total_items_bounds_memory_per_sequence() {
    let opts = CompileOptions {
        max_total_items: 100_000,
        ..CompileOptions::default()
    };
    let g = compile_with("start ::= '[' start ']' | 'a';", &opts).unwrap();
    let mut r = Recognizer::new(g.clone());
    let (res, _) = timed("deep nesting into max_total_items", || {
        r.try_feed(&vec![b'['; 1_000_000])
    });
    let err = res.expect_err("1M bytes exceed 100k items");
    assert!(err.to_string().contains("max_total_items"), "{err}");
    assert_eq!(r.len(), 0, "feed is atomic");
    // Byte by byte: the limit stops growth; memory stays proportional to the limit.
    let mut r = Recognizer::new(g);
    let mut fed = 0;
    while let Ok(true) = r.try_feed_byte(b'[') {
        fed += 1;
    }
    assert!(fed > 10_000 && fed < 100_000, "{fed}");
    assert!(
        r.memory_usage() < 100_000 * 64,
        "recognizer holds {} bytes for a 100k-item limit",
        r.memory_usage()
    );
}

#[test]
fn a_failed_feed_does_not_keep_memory_for_its_whole_input() {
    let g = compile("start ::= 'a'+;").unwrap();
    let mut r = Recognizer::new(g);
    let before = r.memory_usage();
    let mut input = vec![b'a'; 1_000_000];
    input[0] = b'b';
    assert!(!r.feed(&input));
    assert!(
        r.memory_usage() < before + MIB,
        "a feed refused at its first byte left {} bytes allocated",
        r.memory_usage()
    );
}

#[test]
fn deep_recursion_at_run_time_is_linear() {
    let g = compile("start ::= '[' start ']' | 'a';").unwrap();
    let n = 200_000;
    let input = [vec![b'['; n], vec![b'a'], vec![b']'; n]].concat();
    let mut r = Recognizer::new(g);
    let (ok, _) = timed("400 kB of nesting", || r.feed(&input));
    assert!(ok && r.is_complete());
    // One Earley set per byte: memory is linear in the input (a few dozen bytes per byte).
    let per_byte = r.memory_usage() / input.len();
    eprintln!(
        "recognizer memory: {} B ({per_byte} B/byte)",
        r.memory_usage()
    );
    assert!(per_byte < 256, "{per_byte} bytes per input byte");
}

// ------------------------------------------------------------------------------------------------
// Size: many alternatives, many rules, deep nesting, long patterns
// ------------------------------------------------------------------------------------------------

#[test]
fn ten_thousand_enum_values() {
    let values: Vec<String> = (0..10_000).map(|i| format!("'\"value_{i}\"'")).collect();
    let text = format!("start ::= {};", values.join(" | "));
    let (g, _) = timed("10k alternatives", || compile(&text).unwrap());
    assert!(g.memory_usage() < 64 * MIB, "{}", g.memory_usage());
    assert!(accepts(&g, b"\"value_9999\"") && accepts(&g, b"\"value_0\""));
    assert!(!accepts(&g, b"\"value_10000\"") && !accepts(&g, b"\"value_\""));
}

#[test]
fn five_thousand_properties() {
    let names: Vec<String> = (0..5_000).map(|i| format!("p{i}")).collect();
    let rules: Vec<String> = (0..5_000)
        .map(|i| format!("p{i} ::= '\"prop_{i}\": ' v;"))
        .collect();
    let text = format!(
        "start ::= '{{' ({0}) (', ' ({0}))* '}}';\nv ::= #\"[0-9]+\";\n{1}",
        names.join(" | "),
        rules.join("\n")
    );
    let (g, _) = timed("5k property rules", || compile(&text).unwrap());
    assert!(g.memory_usage() < 64 * MIB, "{}", g.memory_usage());
    assert!(accepts(&g, b"{\"prop_4999\": 12, \"prop_0\": 3}"));
    assert!(!accepts(&g, b"{\"prop_5000\": 1}"));
}

#[test]
fn nesting_depth_1000() {
    // Parenthesized nesting beyond the parser's MAX_NESTING (100) is a limit error, fast.
    let text = format!("start ::= {}'a'{};", "(".repeat(1000), ")".repeat(1000));
    let (r, dt) = timed("1000 nested parentheses", || compile(&text));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
    assert!(e.to_string().contains("nested deeper than 100"), "{e}");
    assert!(dt < Duration::from_secs(1));
    // 99 levels compile.
    let text = format!("start ::= {}'a'{};", "(".repeat(99), ")".repeat(99));
    assert!(accepts(&compile(&text).unwrap(), b"a"));
    // Nesting through 1000 rules has no depth limit: it compiles and recognizes.
    let chain: Vec<String> = (0..1000)
        .map(|i| format!("r{i} ::= '[' r{} ']' | 'x';", i + 1))
        .collect();
    let text = format!("start ::= r0;\n{}\nr1000 ::= 'y';", chain.join("\n"));
    let (g, _) = timed("1000-rule chain", || compile(&text).unwrap());
    let deep = [vec![b'['; 1000], b"y".to_vec(), vec![b']'; 1000]].concat();
    assert!(accepts(&g, &deep) && accepts(&g, b"[[x]]"));
    assert!(!accepts(&g, &deep[1..]));
}

#[test]
fn one_megabyte_literal_and_regexes() {
    let mb = "a".repeat(MIB);
    let (g, _) = timed("1 MiB literal", || {
        compile(&format!("start ::= '{mb}';")).unwrap()
    });
    assert!(g.memory_usage() < 4 * MIB);
    let (ok, _) = timed("1 MiB input", || accepts(&g, mb.as_bytes()));
    assert!(ok);
    // A 1 MiB alternation of words and a 1 MiB character class compile within the DFA limit.
    let words: Vec<String> = (0..150_000).map(|i| format!("w{i}")).collect();
    let text = format!("start ::= #\"({})\";", words.join("|"));
    assert!(text.len() > 900_000, "{}", text.len());
    let (g, _) = timed("1 MiB regex alternation", || compile(&text).unwrap());
    assert!(accepts(&g, b"w149999") && !accepts(&g, b"w150000"));
    let text = format!("start ::= #\"[{}]+\";", "a-z".repeat(350_000));
    let (g, _) = timed("1 MiB character class", || compile(&text).unwrap());
    assert!(accepts(&g, b"abc") && !accepts(&g, b"ABC"));
}

#[test]
fn regexes_over_the_nfa_budget_fail_with_a_limit_error() {
    // The Thompson NFA of a 1 MiB literal regex, or of (\w{1000}){1000}, exceeds the 32 MiB
    // budget: the error must be fast and be a limit error naming the option to raise.
    let big = format!("start ::= #\"{}\";", "a".repeat(MIB));
    for text in [big.as_str(), r#"start ::= #"(\w{1000}){1000}";"#] {
        let (r, _) = timed(&text[..text.len().min(40)], || compile(text));
        match r {
            Ok(g) => assert!(accepts(&g, "a".repeat(MIB).as_bytes())),
            Err(e) => expect_limit(&e, "dfa_size_limit"),
        }
    }
}

#[test]
fn huge_repetition_counts() {
    // Beyond max_repetition: a limit error naming it.
    let (r, _) = timed("X{4294967295}", || compile("start ::= 'a'{4294967295};"));
    expect_limit(&r.unwrap_err(), "max_repetition");
    let (r, _) = timed("X{99999999999999999999}", || {
        compile("start ::= 'a'{99999999999999999999};")
    });
    assert!(r.is_err());
    let (r, _) = timed("except! bound 2^32-1", || {
        compile("start ::= except!('x', 4294967295);")
    });
    expect_limit(&r.unwrap_err(), "max_repetition");
    // Within the limit, counted repetition is logarithmic in size and linear to run.
    let (g, _) = timed("'a'{1000000}", || {
        compile("start ::= 'a'{1000000};").unwrap()
    });
    assert!(g.lnf().syms.len() < 10_000, "{}", g.lnf().syms.len());
    let input = vec![b'a'; 1_000_000];
    let mut r = Recognizer::new(g);
    let (ok, _) = timed("1M bytes of 'a'{1000000}", || r.feed(&input));
    assert!(ok && r.is_complete());
    assert!(!r.feed(b"a"));
    // Nested products far beyond u32 (10^18 repetitions) must neither overflow nor blow up.
    let (g, _) = timed("nested 10^18 repetition", || {
        compile("start ::= (('a'{1000000}){1000000}){1000000};").unwrap()
    });
    assert!(g.memory_usage() < 16 * MIB);
    let mut r = Recognizer::new(g);
    assert!(r.feed(&[b'a'; 10_000]) && !r.is_complete() && !r.is_dead());
    let (g, _) = timed("nested optional repetition", || {
        compile("start ::= (('a'{0,1000000}){0,1000000}){0,1000000} 'b';").unwrap()
    });
    // Massively ambiguous: either accepted, or refused by the work bound with a Limit error.
    for input in [&b"aaaab"[..], b"b"] {
        let mut r = Recognizer::new(g.clone());
        match r.try_feed(input) {
            Ok(ok) => assert!(ok && r.is_complete(), "{input:?}"),
            Err(e) => assert!(e.to_string().contains("max_work_per_byte"), "{e}"),
        }
    }
}

#[test]
fn max_grammar_symbols_is_enforced() {
    let opts = CompileOptions {
        max_grammar_symbols: 1_000,
        ..CompileOptions::default()
    };
    let rules: Vec<String> = (0..2_000)
        .map(|i| format!("r{i} ::= 'x' r{} 'y' | 'z{i}';", i + 1))
        .collect();
    let text = format!("start ::= r0;\n{}\nr2000 ::= 'end';", rules.join("\n"));
    let (r, _) = timed("2000 rules under max_grammar_symbols = 1000", || {
        compile_with(&text, &opts)
    });
    expect_limit(&r.unwrap_err(), "max_grammar_symbols");
    assert!(compile(&text).is_ok());
}

// ------------------------------------------------------------------------------------------------
// Odd bytes in grammar text
// ------------------------------------------------------------------------------------------------

#[test]
fn nul_bytes_in_grammar_text() {
    // Inside a literal or regex a raw NUL is an ordinary byte; `\x00` is the same byte.
    for text in [
        "start ::= 'a\0b';",
        "start ::= 'a\\x00b';",
        "start ::= #\"a\0b\";",
    ] {
        let g = compile(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(accepts(&g, b"a\0b") && !accepts(&g, b"ab"), "{text:?}");
    }
    // Outside literals it is a syntax error with a position, not a crash.
    let e = compile("start ::= 'a' \0 'b';").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert!(e.to_string().starts_with("error at 1:15"), "{e}");
    let e = compile("\0").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Syntax, "{e}");
}

// ------------------------------------------------------------------------------------------------
// Regressions found by fuzzing (engine_rs/fuzz)
// ------------------------------------------------------------------------------------------------

/// Compiling must return (Ok or Err) without panicking, and errors must render.
fn compiles_without_panic(text: &str) -> Result<Arc<Grammar>, CompileError> {
    let r = catch_unwind(AssertUnwindSafe(|| compile(text)))
        .unwrap_or_else(|_| panic!("Grammar::compile panicked on {text:?}"));
    if let Err(e) = &r {
        let rendered = e.to_string();
        assert!(rendered.starts_with("error at "), "{rendered}");
        for d in &e.diagnostics {
            assert!(
                d.span.start <= d.span.end && d.span.end as usize <= text.len(),
                "span {:?} outside the {}-byte text {text:?}",
                d.span,
                text.len()
            );
        }
    }
    r
}

#[test]
fn fuzz_parser_escape_at_end_of_input() {
    // kbnf_compile crash-09116c32 / crash-590e2547: a backslash as the last byte of an
    // unterminated literal or regex made error recovery index past the end of the text.
    for text in [
        "'''\\",
        "r::=#\"\\",
        "start ::= 'a' | '\\",
        "start ::= #\"ab\\",
    ] {
        assert!(compiles_without_panic(text).is_err(), "{text:?}");
    }
}

#[test]
fn fuzz_parser_x_escape_span_inside_text() {
    // kbnf_compile crash-0bd97b1f: `\x` at the end of the text gave a span past its end.
    for text in ["t::='''\\x", "start ::= '\\x", "start ::= '\\x4"] {
        assert!(compiles_without_panic(text).is_err(), "{text:?}");
    }
}

#[test]
fn fuzz_recognizer_with_limits_below_the_initial_set() {
    // Recognizer::new used to `expect` that the initial Earley set fits the item limits; with a
    // small max_items_per_set it panicked. Either compile rejects the options or the recognizer
    // works; neither may panic.
    let text = "start ::= A | B 'x'; A ::= 'a' | C; C ::= 'c' 'd'; B ::= 'b' | 'bb' start;";
    for (items, total) in [(1, usize::MAX), (usize::MAX, 1), (2, 3)] {
        let opts = CompileOptions {
            max_items_per_set: items,
            max_total_items: total,
            ..CompileOptions::default()
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| match compile_with(text, &opts) {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Limit, "{e}"),
            Ok(g) => {
                let mut r = Recognizer::new(g);
                let _ = r.try_feed(b"cd");
            }
        }));
        assert!(
            outcome.is_ok(),
            "panicked with max_items_per_set = {items}, max_total_items = {total}"
        );
    }
}

#[test]
fn fuzz_matcher_rollback_zero_after_eos() {
    // matcher_ops crash-83f35129: rollback(0) after EOS un-finished the matcher.
    let g = compile("start ::= 'a' | '';").unwrap();
    let toks: Vec<Option<Vec<u8>>> = vec![None, Some(b"a".to_vec())];
    let vocab = Arc::new(Vocabulary::from_byte_tokens(&toks, &[0], None).unwrap());
    let cg = Arc::new(CompiledGrammar::new(g, vocab));
    let mut m = cg.matcher();
    assert!(m.accept_token(0).unwrap() && m.is_finished());
    m.rollback(0).unwrap();
    assert!(m.is_finished() && !m.can_finish() && m.num_tokens() == 1);
    assert!(!m.accept_token(0).unwrap(), "a second EOS");
    m.rollback(1).unwrap();
    assert!(!m.is_finished() && m.can_finish() && m.num_tokens() == 0);
}

type MaskCase = (
    &'static str,
    &'static [&'static [u8]],
    &'static [&'static [u8]],
);

/// The mask by trying every token (slow reference).
fn brute_mask(m: &mut structout_engine::Matcher, size: usize, words: usize) -> Vec<u32> {
    let mut out = vec![0u32; words];
    for id in 0..size as u32 {
        if m.is_token_allowed(id).unwrap() {
            out[id as usize / 32] |= 1 << (id % 32);
        }
    }
    out
}

#[test]
fn fuzz_masks_after_star_of_literals_and_regex() {
    // matcher_ops crash-2e56e313 / crash-8a73412b (working tree before 6b53ccf): after "x" the
    // token "z" (allowed by the trailing 'z'?) was missing from the fast mask; and with
    // `start ::= '' | 'é{0' start` the first byte of `é` was missing.
    // (grammar, vocabulary tokens besides EOS, prefixes to check the mask after)
    let cases: &[MaskCase] = &[
        (
            r#"start ::= ('x' | 'xy' | #"[a-c]+")* 'z'?;"#,
            &[b"x", b"z", b"y", b"a", b"xz", b"az", b"abcdefghz"],
            &[b"", b"x", b"a", b"xy", b"xa", b"ax"],
        ),
        (
            "start ::= start; start ::= ''; start ::= ('\\u{E9}{0' start '');",
            &[
                b"\xC3",
                b"\xA9",
                b"{",
                b"0",
                b"\xC3\xA9",
                b"\xC3\xA9{0",
                b"x",
            ],
            &[
                b"",
                b"\xC3",
                b"\xC3\xA9",
                b"\xC3\xA9{0",
                b"\xC3\xA9{0\xC3\xA9",
            ],
        ),
    ];
    for (text, tokens, prefixes) in cases {
        let g = compile(text).unwrap();
        let mut toks: Vec<Option<Vec<u8>>> = vec![None];
        toks.extend(tokens.iter().map(|t| Some(t.to_vec())));
        let vocab = Arc::new(Vocabulary::from_byte_tokens(&toks, &[0], None).unwrap());
        let size = vocab.size();
        let cg = Arc::new(CompiledGrammar::new(g, vocab));
        let words = cg.mask_words();
        for prefix in *prefixes {
            let mut m = cg.matcher();
            assert!(m.accept_bytes(prefix).unwrap(), "{text} {prefix:?}");
            let mut fast = vec![0u32; words];
            m.fill_next_token_bitmask(&mut fast).unwrap();
            let slow = brute_mask(&mut m, size, words);
            assert_eq!(fast, slow, "{text} after {prefix:?}");
        }
    }
}

#[test]
fn process_memory_stays_bounded() {
    // Run last-ish in the binary: all cases above together stay far below a few GiB.
    if let Some(rss) = peak_rss() {
        eprintln!("peak RSS so far: {} MiB", rss / MIB);
        assert!(rss < 4096 * MIB, "peak RSS {} MiB", rss / MIB);
    }
}

// ------------------------------------------------------------------------------------------------
// `len!` / `json_len!`
// ------------------------------------------------------------------------------------------------

/// A grammar error (not a limit) located at `line:col`, mentioning `what`.
fn expect_grammar_error(text: &str, at: &str, what: &str) {
    let e = compile(text).expect_err(text);
    let msg = e.to_string();
    assert_ne!(e.kind(), ErrorKind::Limit, "{msg}");
    assert!(msg.starts_with(&format!("error at {at}:")), "{text}: {msg}");
    assert!(msg.contains(what), "{text}: should mention {what:?}: {msg}");
}

#[test]
fn len_errors_are_located() {
    expect_grammar_error(
        "start ::= len!(#\"[a-z]+\", 5, 2);",
        "1:27",
        "greater than its maximum",
    );
    expect_grammar_error(
        "start ::=\n  json_len!('a', 3);",
        "2:19",
        "expected `,` and the maximum length",
    );
    expect_grammar_error("start ::= len!('a');", "1:19", "expected `,`");
    expect_grammar_error("start ::= len!('a', 1, 2, 3);", "1:25", "expected `)`");
    expect_grammar_error(
        "start ::= json_len!(x, 0, 3);\nx ::= 'a' y;\ny ::= 'b';",
        "1:21",
        "invalid json_len! argument",
    );
    expect_grammar_error(
        "start ::= len!(#\"a\"*, 0, 3);",
        "1:16",
        "invalid len! argument: a repetition",
    );
    expect_grammar_error(
        "start ::= len!(len!('a', 0, 1), 0, 3);",
        "1:16",
        "a nested len!",
    );
    expect_grammar_error(
        "start ::= len!(#\"(\", 0, 3);",
        "1:16",
        "invalid len! argument",
    );
    expect_grammar_error(
        "start ::= lenx!('a', 0, 3);",
        "1:11",
        "unknown special nonterminal",
    );
    // Counts over max_repetition: the same limit error as counted repetition.
    let e = compile("start ::= len!('a', 0, 4294967295);").unwrap_err();
    expect_limit(&e, "max_repetition");
    let opts = CompileOptions {
        max_repetition: 100,
        ..CompileOptions::default()
    };
    let e = compile_with("start ::= json_len!(#\"[a-z]*\", 101, 200);", &opts).unwrap_err();
    expect_limit(&e, "max_repetition");
    // A table over dfa_size_limit / 8 is replaced by a counted automaton, whose size does not
    // grow with the bound ...
    let opts = CompileOptions {
        dfa_size_limit: 64 << 10,
        ..CompileOptions::default()
    };
    let g = compile_with("start ::= 'x' json_len!(#\"[a-z]*\", 0, 10000);", &opts).unwrap();
    assert!(accepts(&g, format!("x{}", "a".repeat(10000)).as_bytes()));
    assert!(!accepts(&g, format!("x{}", "a".repeat(10001)).as_bytes()));
    // ... and when that is over dfa_size_limit too: a limit error naming it, at the construct.
    let opts = CompileOptions {
        dfa_size_limit: 64 << 10,
        ..CompileOptions::default()
    };
    let e = compile_with(
        "start ::=\n  'x' json_len!(#\"[a-z]{0,400}\", 300, 10000);",
        &opts,
    )
    .unwrap_err();
    expect_limit(&e, "dfa_size_limit");
    assert!(e.to_string().starts_with("error at 2:7:"), "{e}");
}

#[test]
fn len_examples_from_the_docs() {
    let g = compile(
        r#"start ::= email | name; email ::= '"' json_len!(#"[a-z]+@[a-z]+\.[a-z]{2,}", 3, 64) '"';
           name ::= len!(#"\p{L}+", 1, 20);"#,
    )
    .unwrap();
    assert!(accepts(&g, b"\"a@b.cd\"") && !accepts(&g, b"\"@b.c\""));
    // 64 characters, and 65.
    let local = |n: usize| format!("\"{}@b.cd\"", "a".repeat(n));
    assert!(accepts(&g, local(59).as_bytes()) && !accepts(&g, local(60).as_bytes()));
    assert!(
        accepts(&g, "\u{e9}t\u{e9}".as_bytes()) && !accepts(&g, "\u{e9}".repeat(21).as_bytes())
    );
}

#[test]
fn json_len_of_email_and_hostname_patterns_is_fast_and_small() {
    let email = r#"#"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?""#;
    let host = r#"#"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*""#;
    for (what, e, max) in [("email", email, 255), ("hostname", host, 253)] {
        let text = format!("start ::= '\"' json_len!({e}, 1, {max}) '\"';");
        let (g, dt) = timed(what, || compile(&text).unwrap());
        let mem = g.memory_usage();
        let states: usize = g.lnf().dfas.iter().map(|d| d.state_count()).sum();
        eprintln!(
            "json_len! {what} max {max}: {dt:.2?}, {} KiB, {states} states",
            mem >> 10
        );
        assert!(dt < Duration::from_secs(3), "{what}: {dt:?}");
        assert!(mem < 16 * MIB, "{what}: {mem}");
        // Exactly `max` characters, and one more.
        let (long, too_long) = if what == "email" {
            let local = |n: usize| format!("\"{}@b.io\"", "a".repeat(n));
            (local(max - 5), local(max - 4))
        } else {
            let label = "a".repeat(63);
            let host = |n: usize| format!("\"{label}.{label}.{label}.{}\"", "a".repeat(n));
            (host(61), host(62))
        };
        assert!(accepts(&g, long.as_bytes()), "{what}: {long}");
        assert!(!accepts(&g, too_long.as_bytes()), "{what}: {too_long}");
        assert!(!accepts(&g, b"\"a@\"") && !accepts(&g, b"\"a..b\""));
        let mut r = Recognizer::new(g.clone());
        assert!(r.feed(b"\"a"));
    }
}
