//! The automata of the JSON lexemes the schema translator writes into nearly every grammar —
//! numbers, integers, string bodies — built once per process instead of once per grammar.
//!
//! A pattern is recognized by its exact text ([`PREBUILT_PATTERNS`]): any other spelling of the
//! same language is simply built as usual, so this table decides speed, never meaning. Each
//! constant is built by [`Dfa::from_regex`]'s own path under [`BUILT_WITHIN`] bytes and handed out
//! only to callers whose limit is at least that: building is deterministic and a construction that
//! succeeds under a limit succeeds alike under any larger one, so the copy is the table the caller
//! would have built (tested), and a smaller limit still gets its own build (and its own error).

use std::sync::{Mutex, OnceLock};

use super::{CharCount, Dfa, DfaError};

/// The size limit the constants are built within (bytes); callers with a smaller limit build
/// their own automaton.
pub(super) const BUILT_WITHIN: usize = 1 << 20;

/// The characters of a JSON string in every spelling JSON allows (raw, short escapes, `\uXXXX`
/// in either case, surrogate pairs; lone surrogates refused), in the translator's spelling.
macro_rules! json_char {
    () => {
        r"(?:[ !\#-\[\]-\uD7FF\uE000-\U0010FFFF]|\x5C[\x22/\x5Cbfnrt]|\x5Cu(?:[0-9A-Ca-c][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2}|[EFef][0-9A-Fa-f]{3})|\x5Cu[Dd][89ABab][0-9A-Fa-f]{2}\x5Cu[Dd][C-Fc-f][0-9A-Fa-f]{2})"
    };
}

/// One character of a JSON string ([`json_char`]), as the translator writes it.
pub const JSON_CHAR: &str = json_char!();

/// Any JSON number, as the translator writes it.
pub const JSON_NUMBER: &str = r"\-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[Ee][\+\-]?[0-9]+)?";

/// Any JSON integer, as the translator writes it.
pub const JSON_INTEGER: &str = r"\-?(?:0|[1-9][0-9]*)";

/// The patterns, as the translator writes them: a JSON number; a JSON integer; the body of a JSON
/// string (the argument of `json_len!` for a string with only a length bound); a non-empty JSON
/// string, quotes included (`minLength: 1`).
pub const PREBUILT_PATTERNS: [&str; 4] = [
    JSON_NUMBER,
    JSON_INTEGER,
    concat!(json_char!(), "*"),
    concat!(r"\x22", json_char!(), r"+\x22"),
];

/// The automaton of a [`PREBUILT_PATTERNS`] pattern for a caller whose size limit is
/// `size_limit`; `None` for any other pattern or a smaller limit (the caller then builds its own).
pub(super) fn known(pattern: &str, size_limit: usize) -> Option<Dfa> {
    static BUILT: [OnceLock<Result<Dfa, DfaError>>; PREBUILT_PATTERNS.len()] =
        [const { OnceLock::new() }; PREBUILT_PATTERNS.len()];
    if size_limit < BUILT_WITHIN {
        return None;
    }
    let i = PREBUILT_PATTERNS.iter().position(|&k| k == pattern)?;
    BUILT[i]
        .get_or_init(|| Dfa::build_regex(PREBUILT_PATTERNS[i], BUILT_WITHIN))
        .as_ref()
        .ok()
        .cloned()
}

/// Most `len!` automata of constants kept ([`Dfa::prebuilt_counted`]): one per count, bounds and
/// size limit a process uses (the translator's `max_number_length`), so a few.
const MAX_COUNTED: usize = 16;

impl Dfa {
    /// `Dfa::count_chars(&Dfa::from_regex(pattern, size_limit)?, count, min, max, size_limit)`
    /// for a [`PREBUILT_PATTERNS`] pattern, built once per process for each `(pattern, count,
    /// min, max, size_limit)` (the translator writes `len!(number, 1, max_number_length)` into
    /// nearly every grammar): the automaton the caller would build, the construction being
    /// deterministic. `None` for other patterns or when the construction fails (the caller then
    /// builds its own, and reports its error).
    pub(crate) fn prebuilt_counted(
        pattern: &str,
        count: CharCount,
        min: u32,
        max: u32,
        size_limit: usize,
    ) -> Option<Dfa> {
        type Key = (usize, CharCount, u32, u32, usize);
        static COUNTED: Mutex<Vec<(Key, Dfa)>> = Mutex::new(Vec::new());
        #[cfg(test)]
        if super::test_form::get() != super::CountForm::Auto {
            return None; // (a test asking for one form builds it)
        }
        let key = (
            PREBUILT_PATTERNS.iter().position(|&k| k == pattern)?,
            count,
            min,
            max,
            size_limit,
        );
        let found = COUNTED
            .lock()
            .ok()?
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, d)| d.clone());
        if found.is_some() {
            return found;
        }
        let dfa = Dfa::from_regex(pattern, size_limit)
            .and_then(|e| Dfa::count_chars(&e, count, min, max, size_limit))
            .ok()?;
        let mut kept = COUNTED.lock().ok()?;
        if kept.len() < MAX_COUNTED && !kept.iter().any(|(k, _)| *k == key) {
            kept.push((key, dfa.clone()));
        }
        Some(dfa)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &Dfa, b: &Dfa) -> bool {
        a.classes == b.classes
            && a.stride == b.stride
            && a.trans == b.trans
            && a.accept == b.accept
            && a.live_bytes == b.live_bytes
            && a.min_to_accept == b.min_to_accept
            && a.start == b.start
            && a.counter.is_none()
            && b.counter.is_none()
    }

    #[test]
    fn a_constant_is_the_table_its_caller_would_build() {
        for pattern in PREBUILT_PATTERNS {
            for limit in [BUILT_WITHIN, 32 << 20, usize::MAX] {
                let shared = known(pattern, limit).expect("a known pattern");
                let own = Dfa::build_regex(pattern, limit).unwrap();
                assert!(same(&shared, &own), "{pattern} under {limit}");
            }
        }
    }

    #[test]
    fn a_counted_constant_is_the_automaton_its_caller_would_build() {
        let samples: Vec<&[u8]> = vec![b"1", b"-0.5", b"123", b"1e10", b"12345678", b"", b"0001"];
        for pattern in [JSON_NUMBER, JSON_INTEGER, PREBUILT_PATTERNS[2]] {
            for count in [CharCount::Utf8, CharCount::JsonBody] {
                for (min, max) in [(1, 24), (0, 3), (2, 5), (1, 100_000)] {
                    for limit in [BUILT_WITHIN, 32 << 20] {
                        let own = Dfa::from_regex(pattern, limit)
                            .and_then(|e| Dfa::count_chars(&e, count, min, max, limit))
                            .unwrap();
                        for _ in 0..2 {
                            // (built, then kept)
                            let shared = Dfa::prebuilt_counted(pattern, count, min, max, limit)
                                .expect("a known pattern");
                            assert_eq!(shared.is_counted(), own.is_counted());
                            if !own.is_counted() {
                                assert!(same(&shared, &own), "{pattern} {min} {max} {limit}");
                            }
                            for s in &samples {
                                assert_eq!(shared.matches(s), own.matches(s), "{pattern} {s:?}");
                            }
                        }
                    }
                }
            }
        }
        assert!(Dfa::prebuilt_counted("[0-9]+", CharCount::Utf8, 1, 3, BUILT_WITHIN).is_none());
    }

    #[test]
    fn smaller_limits_and_other_patterns_build_their_own() {
        assert!(known(PREBUILT_PATTERNS[0], BUILT_WITHIN - 1).is_none());
        // The same language spelled differently is not recognized (only speed depends on it).
        assert!(known(r"-?(?:0|[1-9][0-9]*)", 32 << 20).is_none());
        // Below the limit the caller's own build decides, errors included.
        assert!(matches!(
            Dfa::from_regex(PREBUILT_PATTERNS[2], 64),
            Err(DfaError::TooLong { .. })
        ));
    }

    #[test]
    fn the_constants_accept_their_lexemes() {
        let number = known(PREBUILT_PATTERNS[0], BUILT_WITHIN).unwrap();
        for (text, ok) in [
            ("-0.5e+3", true),
            ("01", false),
            ("1.", false),
            ("12", true),
        ] {
            assert_eq!(number.matches(text.as_bytes()), ok, "{text}");
        }
        let integer = known(PREBUILT_PATTERNS[1], BUILT_WITHIN).unwrap();
        assert!(integer.matches(b"-12") && !integer.matches(b"1.0"));
        let body = known(PREBUILT_PATTERNS[2], BUILT_WITHIN).unwrap();
        for (text, ok) in [
            (&b"a\\u00e9\\\"\xc3\xa9"[..], true),
            (b"\\ud800", false),
            (b"\"", false),
            (b"", true),
        ] {
            assert_eq!(
                body.matches(text),
                ok,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
        let nonempty = known(PREBUILT_PATTERNS[3], BUILT_WITHIN).unwrap();
        assert!(nonempty.matches(b"\"x\"") && !nonempty.matches(b"\"\""));
    }
}
