use super::*;
use crate::options::CompileOptions;

fn rec(text: &str) -> Recognizer {
    let g = Grammar::compile(text, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    Recognizer::new(Arc::new(g))
}

fn accepts(text: &str, input: &[u8]) -> bool {
    let mut r = rec(text);
    r.feed(input) && r.is_complete()
}

#[test]
fn basics() {
    let g = "start ::= 'a' start 'b' | 'ab';";
    assert!(accepts(g, b"ab") && accepts(g, b"aaabbb"));
    assert!(!accepts(g, b"aab") && !accepts(g, b"") && !accepts(g, b"abb"));
    let g = "start ::= #\"[0-9]+\" ('.' #\"[0-9]+\")?;";
    assert!(accepts(g, b"12") && accepts(g, b"1.5") && !accepts(g, b"1."));
}

#[test]
fn feed_is_atomic_and_rollback_works() {
    let mut r = rec("start ::= 'abc' | 'abd';");
    assert!(!r.feed(b"abx"));
    assert_eq!(r.len(), 0);
    assert!(r.feed(b"ab"));
    assert_eq!(r.allowed_bytes().iter().collect::<Vec<_>>(), b"cd".to_vec());
    assert!(r.feed(b"c") && r.is_complete());
    r.rollback_to(1);
    assert!(!r.is_complete());
    assert!(r.feed(b"bd") && r.is_complete());
}

#[test]
fn leo_counterexample_shape() {
    let g = "start ::= 'x' A | 'x' A 'b'; A ::= 'a' A | 'a';";
    assert!(accepts(g, b"xaaa") && accepts(g, b"xaaab") && !accepts(g, b"xb"));
}

#[test]
fn long_right_recursion() {
    let mut r = rec("start ::= 'a' start | 'a';");
    let input = vec![b'a'; 50_000];
    assert!(r.feed(&input) && r.is_complete());
    // Leo keeps sets small.
    assert!(r.current_set_size() < 8);
}

#[test]
fn except_with_bound() {
    let g = "start ::= except!('\\n\\n', 5) '\\n\\n';";
    assert!(accepts(g, b"abc\n\n"));
    assert!(accepts(g, b"abcd\n\n\n"));
    assert!(!accepts(g, b"abcdef\n\n"));
    let mut r = rec(g);
    assert!(r.feed(b"abcd"));
    // 5th byte may be anything but a second newline-free continuation beyond 5 is refused.
    assert!(r.feed(b"e"));
    assert_eq!(r.allowed_bytes().iter().collect::<Vec<_>>(), vec![b'\n']);
}

#[test]
fn nullable_start_and_empty() {
    let g = "start ::= 'a'*;";
    assert!(accepts(g, b"") && accepts(g, b"aaa"));
    let g = "start ::= '';";
    assert!(accepts(g, b"") && !accepts(g, b"a"));
}

#[test]
fn unique_items_hit_a_limit_not_a_panic() {
    // Item values count against `max_total_items`; history released by `forget_before` keeps
    // the Earley items few, so the values reach the limit: an error, the state unchanged.
    let text = r#"start ::= '[' unique!(',', s) ']'; s ::= '"' #"[a-z]*" '"';"#;
    let opts = CompileOptions {
        max_total_items: 2000,
        ..CompileOptions::default()
    };
    let mut r = Recognizer::new(Arc::new(Grammar::compile(text, &opts).unwrap()));
    assert!(r.feed(b"["));
    let mut hit = None;
    for k in 0..200 {
        let item = format!("{}\"{}\"", if k > 0 { "," } else { "" }, "x".repeat(k + 1));
        let len = r.len();
        match r.try_feed(item.as_bytes()) {
            Ok(true) => r.compact_before(r.len()),
            Ok(false) => panic!("item {k} refused"),
            Err(e) => {
                assert_eq!(r.len(), len);
                hit = Some(e);
                break;
            }
        }
    }
    match hit {
        Some(EngineError::Limit { limit, .. }) => {
            assert_eq!(limit, "max_total_items (unique! values)")
        }
        other => panic!("{other:?}"),
    }
    // Equal items are still refused below the limit.
    let mut r = Recognizer::new(Arc::new(Grammar::compile(text, &opts).unwrap()));
    assert!(r.feed(br#"["ab","b""#) && !r.feed(br#","ab""#) && r.feed(b"]"));
}
