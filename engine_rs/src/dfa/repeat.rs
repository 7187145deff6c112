//! Bounded repetition `X{min,max}` of a prefix-free automaton, built by unrolling.
//!
//! Why: determinizing `X{m,n}` from an NFA keeps up to `n` copies of `X`'s NFA per subset and
//! hashes every subset; for the string terminals of typical schemas (`"(?:char){1,64}"`) that is
//! most of the time a grammar takes to compile. When `X` is *prefix-free* — no accepting state of
//! its automaton can continue, and the empty string does not match — a copy of `X` ends exactly
//! where `X`'s automaton accepts, so the repetition is deterministic as it stands: a state is
//! (copies completed `k`, state `s` inside the current copy), and the byte that completes a copy
//! moves to the boundary state `(k + 1, ·)`. That is at most `max × |X|` states, built in one pass
//! over `X`'s table without subsets.
//!
//! Invariant: the result has exactly the language of `X{min,max}`; when `X` is not prefix-free the
//! construction declines (`None`) and the caller determinizes as before.

use super::{Dfa, DfaError, DEAD};

/// `s` of the boundary state: between copies, the next copy (if any) starts at `X`'s start.
const BOUNDARY: u32 = u32::MAX;

/// Whether `body` is a plain table whose matches are non-empty and never a proper prefix of
/// another match.
fn prefix_free(body: &Dfa) -> bool {
    body.counter.is_none()
        && body.start != DEAD
        && !body.accept[body.start as usize]
        && body
            .accept
            .iter()
            .zip(&body.live_bytes)
            .all(|(&acc, live)| !acc || live.is_empty())
}

/// The automaton of `body{min,max}`, or `None` when `body` is not prefix-free (or `min > max`).
pub(super) fn bounded(
    body: &Dfa,
    min: u32,
    max: u32,
    size_limit: usize,
) -> Result<Option<Dfa>, DfaError> {
    if min > max || !prefix_free(body) {
        return Ok(None);
    }
    let reps = body.class_reps();
    let explored = super::explore(
        (0u32, BOUNDARY),
        &reps,
        |&(k, s), b| {
            let s = if s == BOUNDARY {
                if k == max {
                    return Ok(None);
                }
                body.start
            } else {
                s
            };
            let t = body.next(s, b);
            Ok(if t == DEAD {
                None
            } else if body.accept[t as usize] {
                Some((k + 1, BOUNDARY))
            } else {
                Some((k, t))
            })
        },
        |&(k, s)| s == BOUNDARY && k >= min,
        size_limit,
    )?;
    Ok(Some(explored.finish(body.classes)))
}

#[cfg(test)]
mod tests {
    use super::super::tests::strings;
    use super::*;

    const LIMIT: usize = 32 << 20;

    /// The unrolled automaton and regex-automata's agree on every short string.
    #[test]
    fn agrees_with_determinization() {
        let cases = [
            ("(?:a|bc){0,3}", &b"abcx"[..]),
            ("(?:a|bc){2,4}", b"abc"),
            ("(?:[a-c]|\\\\[nt]){1,5}", b"ab\\nt"),
            ("(?:ab){3}", b"abx"),
            ("(?:a[bc]d|e){1,2}", b"abcde"),
        ];
        for (pattern, alphabet) in cases {
            let hir = super::super::build::parse(pattern, LIMIT).unwrap();
            let regex_syntax::hir::HirKind::Repetition(r) = hir.kind() else {
                panic!("{pattern} is not a repetition")
            };
            let body = Dfa::from_hir(&r.sub, LIMIT).unwrap();
            let fast = bounded(&body, r.min, r.max.unwrap(), LIMIT)
                .unwrap()
                .unwrap_or_else(|| panic!("{pattern}: body not prefix-free"));
            let slow = Dfa::from_hir(&hir, LIMIT).unwrap();
            for s in strings(alphabet, 7) {
                assert_eq!(fast.matches(&s), slow.matches(&s), "{pattern} on {s:?}");
            }
        }
    }

    #[test]
    fn bodies_that_are_not_prefix_free_decline() {
        for body in ["a|ab", "a*", "(?:ab)+", "a?"] {
            let d = Dfa::from_regex(body, LIMIT).unwrap();
            assert!(bounded(&d, 1, 3, LIMIT).unwrap().is_none(), "{body}");
        }
    }

    #[test]
    fn the_size_limit_holds() {
        let d = Dfa::from_regex("[a-z]{1,40}\\.", LIMIT).unwrap();
        assert!(matches!(
            bounded(&d, 0, 100_000, 1 << 16),
            Err(DfaError::TooBig { .. })
        ));
    }
}
