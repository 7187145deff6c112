//! `unique!`: the recognizer against brute force. Every prefix over a small alphabet that the
//! same grammar without uniqueness can continue is walked depth first (feed, recurse, rollback);
//! a complete document is accepted exactly when its items are pairwise distinct JSON values
//! (the reference parses them with `serde_json` and compares numbers as decimals of a few
//! digits, exactly representable), a prefix the recognizer refuses never leads to a valid
//! document, and forks taken along the way agree with the recognizer they came from.

use std::sync::Arc;

use serde_json::Value;
use structout_engine::{CompileOptions, Grammar, Recognizer};

fn grammar(text: &str) -> Arc<Grammar> {
    Arc::new(Grammar::compile(text, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}")))
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

fn distinct(doc: &[u8]) -> bool {
    let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(doc) else {
        panic!("not a JSON array: {}", String::from_utf8_lossy(doc));
    };
    (0..items.len()).all(|i| (i + 1..items.len()).all(|j| !equal(&items[i], &items[j])))
}

struct Walk {
    plain: Recognizer,
    unique: Recognizer,
    alphabet: &'static [u8],
    path: Vec<u8>,
    accepted: usize,
    refused: usize,
}

impl Walk {
    /// `alive`: the unique recognizer holds `path` (else it refused a prefix of it).
    fn go(&mut self, depth: usize, alive: bool) {
        if self.plain.is_complete() {
            let valid = distinct(&self.path);
            let got = alive && self.unique.is_complete();
            assert_eq!(got, valid, "{}", String::from_utf8_lossy(&self.path));
            if valid {
                self.accepted += 1;
            } else {
                self.refused += 1;
            }
        }
        if depth == 0 {
            return;
        }
        let allowed = self.plain.allowed_bytes();
        for &b in self.alphabet {
            if !allowed.contains(b) {
                continue;
            }
            assert!(self.plain.feed_byte(b));
            self.path.push(b);
            let len = self.unique.len();
            let fed = alive && self.unique.feed_byte(b);
            if fed && self.path.len().is_multiple_of(5) {
                // A fork goes on exactly like its origin.
                let mut fork = self.unique.clone();
                let tail = b"1]";
                let mut origin = self.unique.clone();
                assert_eq!(fork.feed(tail), origin.feed(tail));
                assert_eq!(fork.is_complete(), origin.is_complete());
            }
            self.go(depth - 1, fed);
            if fed {
                assert!(self.unique.rollback_to(len));
            }
            self.path.pop();
            assert!(self.plain.rollback_to(self.path.len()));
        }
    }
}

fn check(items: &str, alphabet: &'static [u8], depth: usize) -> (usize, usize) {
    let plain = grammar(&format!("start ::= '[' v (',' v)* ']' | '[]'; {items}"));
    let unique = grammar(&format!(
        "start ::= '[' unique!(',', v) ']' | '[]'; {items}"
    ));
    let mut w = Walk {
        plain: Recognizer::new(plain),
        unique: Recognizer::new(unique),
        alphabet,
        path: Vec::new(),
        accepted: 0,
        refused: 0,
    };
    w.go(depth, true);
    (w.accepted, w.refused)
}

#[test]
fn numbers_in_every_spelling() {
    let (accepted, refused) = check(
        r#"v ::= #"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9])?";"#,
        b"[],01.e-",
        11,
    );
    assert!(accepted > 10_000 && refused > 1000, "{accepted} {refused}");
}

#[test]
fn strings_with_escapes_and_nested_arrays() {
    let (accepted, refused) = check(
        r#"v ::= '"' #"([ab]|\\u006[12]|\\/)*" '"' | '[' (v (',' v)*)? ']';"#,
        b"[],\"ab\\u0612/",
        10,
    );
    assert!(accepted > 200 && refused > 5, "{accepted} {refused}");
}

#[test]
fn objects_in_any_key_order() {
    let (accepted, refused) = check(
        r#"v ::= '{' (m (',' m)*)? '}' | '0' | '1'; m ::= '"' #"[ab]" '":' v;"#,
        b"[],{}\"ab:01",
        13,
    );
    assert!(accepted > 50 && refused > 100, "{accepted} {refused}");
}
