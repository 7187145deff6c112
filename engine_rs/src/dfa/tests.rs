use super::*;

const LIMIT: usize = 10 << 20;

#[test]
fn full_match_semantics() {
    let d = Dfa::from_regex("a|ab", LIMIT).unwrap();
    assert!(d.matches(b"a") && d.matches(b"ab") && !d.matches(b"abb") && !d.matches(b""));
    let d = Dfa::from_regex("[0-9]+(\\.[0-9]+)?", LIMIT).unwrap();
    assert!(d.matches(b"12.5") && !d.matches(b"12.") && !d.matches(b"x"));
    let d = Dfa::from_regex("^ab$", LIMIT).unwrap();
    assert!(d.matches(b"ab"));
}

#[test]
fn pruned_states_are_dead() {
    // `a` followed by something impossible: only dead states after `a`.
    let d = Dfa::from_regex("a(?-u:[^\\x00-\\xff])|b", LIMIT).unwrap();
    assert_eq!(d.next(d.start(), b'a'), DEAD);
    assert!(d.matches(b"b"));
    assert!(
        Dfa::from_regex("[^\\x00-\\x{10FFFF}]", LIMIT)
            .unwrap()
            .start()
            == DEAD
    );
}

#[test]
fn unicode_classes_are_utf8() {
    let d = Dfa::from_regex("[^a]", LIMIT).unwrap();
    assert!(d.matches("é".as_bytes()));
    assert!(!d.matches(b"\xff"));
    let s1 = d.next(d.start(), 0xC3);
    assert_ne!(s1, DEAD);
    assert!(!d.is_accept(s1));
    assert_eq!(d.min_to_accept(s1), 1);
}

#[test]
fn except_excludes_substring() {
    let d = Dfa::except(&escape_bytes(b"\n\n"), LIMIT).unwrap();
    assert!(d.matches(b"ab\ncd") && d.matches(b"") && d.matches(b"x\n"));
    assert!(!d.matches(b"a\n\nb") && !d.matches(b"\n\n"));
    assert!(!d.matches(b"\xff"));
    assert!(d.matches("día".as_bytes()));
    assert!(Dfa::except("a*", LIMIT).unwrap().start() == DEAD);
}

#[test]
fn errors_are_reported() {
    assert!(matches!(
        Dfa::from_regex("(", LIMIT),
        Err(DfaError::Syntax(_))
    ));
    assert!(matches!(
        Dfa::from_regex("(a|b)*a(a|b){20}", 1 << 16),
        Err(DfaError::TooBig { .. })
    ));
}

#[test]
fn escape_round_trips() {
    for lit in [&b"a.b*"[..], b"\xff\x00x", "é(".as_bytes()] {
        let d = Dfa::from_regex(&escape_bytes(lit), LIMIT).unwrap();
        assert!(d.matches(lit));
    }
}

// --- Simplification and combination: differential checks against regex text -------------

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Strings over `alphabet` of length at most `max_len`.
pub(super) fn strings(alphabet: &[u8], max_len: usize) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut layer = vec![Vec::new()];
    for _ in 0..max_len {
        let mut next = Vec::new();
        for s in &layer {
            for &b in alphabet {
                let mut t: Vec<u8> = s.clone();
                t.push(b);
                next.push(t);
            }
        }
        out.extend(next.iter().cloned());
        layer = next;
    }
    out
}

/// `a` and `b` agree on every string over `alphabet` up to `max_len`: same matches and the
/// same viable prefixes (both tables map non-viable prefixes to `DEAD`).
fn assert_same(a: &Dfa, b: &Dfa, alphabet: &[u8], max_len: usize, what: &str) {
    for s in strings(alphabet, max_len) {
        let (mut x, mut y) = (a.start(), b.start());
        for (k, &byte) in s.iter().enumerate() {
            assert_eq!(x == DEAD, y == DEAD, "{what}: viability of {:?}", &s[..k]);
            if x == DEAD {
                break;
            }
            x = a.next(x, byte);
            y = b.next(y, byte);
        }
        assert_eq!(a.matches(&s), b.matches(&s), "{what}: {s:?}");
    }
}

/// A random small pattern over `a`, `b`, `é` with many adjacent repeated items.
fn random_pattern(rng: &mut SmallRng, depth: u32) -> String {
    if depth == 0 || rng.gen_bool(0.3) {
        return ["a", "b", "[ab]", "(a)", "é", "(?:a|bb)", "[^a]"][rng.gen_range(0..7)].into();
    }
    let sub = random_pattern(rng, depth - 1);
    match rng.gen_range(0..6) {
        0 => format!("(?:{sub})*"),
        1 => format!("(?:{sub})+"),
        2 => format!("(?:{sub})?"),
        3 => {
            let m = rng.gen_range(0..3);
            match rng.gen_range(0..2) {
                0 => format!("(?:{sub}){{{m},}}"),
                _ => format!("(?:{sub}){{{m},{}}}", m + rng.gen_range(0..3)),
            }
        }
        4 => {
            // Adjacent copies of one item, in different spellings, bounded or not.
            let other = random_pattern(rng, depth - 1);
            match rng.gen_range(0..3) {
                0 => format!("{sub}(?:{sub})+{sub}?(?:{other})|{other}{other}*"),
                1 => format!("(?:{sub})?{sub}(?:{sub}){{0,2}}(?:{other}){{1,2}}{other}?"),
                _ => format!("(?:{sub}){{2}}(?:{sub}){{1,3}}|(?:{other})?(?:{other})?"),
            }
        }
        _ => {
            let other = random_pattern(rng, depth - 1);
            format!("(?:{sub})(?:{other})")
        }
    }
}

#[test]
fn simplified_patterns_keep_their_language() {
    let alphabet = [b'a', b'b', b'c', 0xC3, 0xA9];
    let mut rng = SmallRng::seed_from_u64(7);
    let mut patterns: Vec<String> = vec![
        r"\w+\w+\w+".into(),
        "a+a+a*a?a{2}a{1,3}".into(),
        "(a)(a)+(?:a){2,}b".into(),
        "a*a*".into(),
        "a?a?a?".into(),
        // Look-around keeps the pattern in one piece (segments would lose the context).
        r"a*(?-u:\b)b*".into(),
        r"(?-u:\B)a+(?-u:\b)b*c".into(),
        "^a*b+$".into(),
        "a{1,2}a{0,3}b?b{2}".into(),
        "(?:ab)+(?:ab)+".into(),
    ];
    patterns.extend((0..300).map(|_| random_pattern(&mut rng, 3)));
    let mut too_big = 0;
    for p in &patterns {
        let ours = match Dfa::from_regex(p, LIMIT) {
            Ok(d) => d,
            Err(DfaError::TooBig { .. }) => {
                too_big += 1;
                continue;
            }
            Err(e) => panic!("{p}: {e}"),
        };
        let reference = regex_automata::meta::Regex::new(&format!("^(?:{p})$")).unwrap();
        for s in strings(&alphabet, 6) {
            assert_eq!(ours.matches(&s), reference.is_match(&s), "{p} on {s:?}");
        }
    }
    assert!(too_big < 10, "{too_big} patterns over the limit");
    // `\w+` repeated is linear after merging: 2,000 copies build in a few thousand states.
    let d = Dfa::from_regex(&"[a-z]+".repeat(2000), LIMIT).unwrap();
    assert!(d.state_count() < 2100, "{}", d.state_count());
    assert!(d.matches("x".repeat(2000).as_bytes()) && !d.matches("x".repeat(1999).as_bytes()));
}

/// Whether two automata accept the same language, walking pairs of states over every byte: both
/// dead or both alive, with the same acceptance, live bytes and distance to acceptance.
pub(super) fn same_language(a: &Dfa, b: &Dfa) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![(a.start(), b.start())];
    while let Some((x, y)) = stack.pop() {
        if !seen.insert((x, y)) {
            continue;
        }
        if (x == DEAD) != (y == DEAD) {
            return Err(format!("states {x} / {y}: one is dead"));
        }
        if x == DEAD {
            continue;
        }
        if a.is_accept(x) != b.is_accept(y)
            || a.live_bytes(x) != b.live_bytes(y)
            || a.min_to_accept(x) != b.min_to_accept(y)
        {
            return Err(format!("states {x} / {y} differ"));
        }
        stack.extend((0..=255u8).map(|c| (a.next(x, c), b.next(y, c))));
    }
    Ok(())
}

/// Our subset construction and `regex-automata`'s dense determinizer give automata of the same
/// language (ours has no more states: its sets hold only the NFA states that read or match) for
/// patterns without look-around, from the same NFA.
#[test]
fn subset_construction_equals_regex_automata() {
    let mut rng = SmallRng::seed_from_u64(11);
    let mut patterns: Vec<String> = [
        r"\-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[Ee][\+\-]?[0-9]+)?",
        r#"\x22(?:[ !\#-\[\]-\uD7FF\uE000-\U0010FFFF]|\x5C[\x22/\x5Cbfnrt]|\x5Cu[0-9A-Fa-f]{4})+\x22"#,
        r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})",
        r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#]+(?:/[^\s?#]*)?",
        r"\p{L}+(?:\s\p{L}+)*",
        r"(?s:.){2,5}",
        r"[^\x22\x5C]*",
        r"\w+@\w+\.(?:com|org)",
        r"(?-u:[\x00-\xff])+",
        "(?:a|ab)(?:c|bcd)(?:d*)",
        "",
        "[^\\x00-\\x{10FFFF}]",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    patterns.extend((0..300).map(|_| random_pattern(&mut rng, 3)));
    for p in &patterns {
        let hir = build::parse(p, LIMIT).unwrap();
        let nfa = build::build_nfa(&hir, LIMIT).unwrap();
        let ours = determinize::determinize(&nfa, LIMIT)
            .expect("no look-around")
            .unwrap();
        let theirs = Dfa::from_dense(&build::build_dense(&nfa, LIMIT).unwrap(), LIMIT).unwrap();
        assert_eq!(ours.classes, theirs.classes, "{p}: classes");
        assert!(
            ours.state_count() <= theirs.state_count(),
            "{p}: more states"
        );
        if let Err(e) = same_language(&ours, &theirs) {
            panic!("{p}: {e}");
        }
    }
    // Look-around is left to `regex-automata`.
    let nfa = build::build_nfa(&build::parse(r"a(?-u:\b)", LIMIT).unwrap(), LIMIT).unwrap();
    assert!(determinize::determinize(&nfa, LIMIT).is_none());
}

#[test]
fn concat_and_union_agree_with_regex_text() {
    let alphabet = [b'a', b'b', 0xC3, 0xA9];
    let mut rng = SmallRng::seed_from_u64(11);
    let lits: [&[u8]; 3] = [b"a", b"ab", "é".as_bytes()];
    for round in 0..200 {
        let n = rng.gen_range(1..=4);
        let mut dfas = Vec::new();
        let mut texts = Vec::new();
        let mut is_lit = Vec::new();
        for _ in 0..n {
            if rng.gen_bool(0.3) {
                let l = lits[rng.gen_range(0..lits.len())];
                texts.push(escape_bytes(l));
                is_lit.push(Some(l));
                dfas.push(Dfa::empty());
            } else {
                let p = random_pattern(&mut rng, 2);
                dfas.push(Dfa::from_regex(&p, LIMIT).unwrap());
                texts.push(p);
                is_lit.push(None);
            }
        }
        let parts: Vec<Part<'_>> = (0..n)
            .map(|i| match is_lit[i] {
                Some(l) => Part::Lit(l),
                None => Part::Dfa(&dfas[i]),
            })
            .collect();
        let mut budget = CombineBudget {
            size_limit: LIMIT,
            steps: 1 << 24,
        };
        let cat = Dfa::concat(&parts, &mut budget).unwrap();
        let cat_text: String = texts.iter().map(|t| format!("(?:{t})")).collect();
        let expect = Dfa::from_regex(&cat_text, LIMIT).unwrap();
        assert_same(&cat, &expect, &alphabet, 6, &format!("#{round} {cat_text}"));
        // `from_regex` may itself combine segments: check against an independent matcher.
        let reference = regex_automata::meta::Regex::new(&format!("^(?:{cat_text})$")).unwrap();
        for s in strings(&alphabet, 6) {
            assert_eq!(
                cat.matches(&s),
                reference.is_match(&s),
                "{cat_text} on {s:?}"
            );
        }
        let uni = Dfa::union(&parts, &mut budget).unwrap();
        let uni_text = texts.iter().map(|t| format!("(?:{t})")).collect::<Vec<_>>();
        let expect = Dfa::from_regex(&uni_text.join("|"), LIMIT).unwrap();
        assert_same(
            &uni,
            &expect,
            &alphabet,
            6,
            &format!("#{round} {uni_text:?}"),
        );
    }
    // Equal languages collapse: a union of two literals needs three states like the regex.
    let mut budget = CombineBudget {
        size_limit: LIMIT,
        steps: 1 << 20,
    };
    let u = Dfa::union(&[Part::Lit(b"a"), Part::Lit(b"b")], &mut budget).unwrap();
    assert_eq!(u.state_count(), 3);
}

#[test]
fn unanchored_counters_are_linear() {
    // The shape of every unanchored schema pattern: `"X* P X*"` with P = `[a-z]+` × 3000.
    // Determinized at once, each state holds O(n) NFA states (seconds); by segments, ms.
    let x = r#"(?:[^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;
    let p = format!(r#""{x}*{}{x}*""#, "[a-z]+".repeat(3000));
    let t0 = std::time::Instant::now();
    let d = Dfa::from_regex(&p, LIMIT).unwrap();
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t0.elapsed()
    );
    let word = "q".repeat(3000);
    for (s, ok) in [
        (format!("\"{word}\""), true),
        (format!("\"a\\n-{word}\\u00e9 \""), true),
        (format!("\"{}\"", &word[1..]), false),
        (format!("\"{} {}\"", &word[..1500], &word[..1500]), false),
        (format!("\"\\x{word}\""), false),
    ] {
        assert_eq!(d.matches(s.as_bytes()), ok, "{}", &s[..20]);
    }
}

#[test]
fn counters_split_across_pieces_combine_in_linear_steps() {
    // `[a-z]{500,}` three times: without inclusion pruning every set would hold every count
    // of the later pieces reached so far (~n²/2 pairs).
    let piece = Dfa::from_regex("[a-z]{500,}", LIMIT).unwrap();
    let parts = [Part::Dfa(&piece), Part::Dfa(&piece), Part::Dfa(&piece)];
    let steps = 1u64 << 24;
    let mut budget = CombineBudget {
        size_limit: LIMIT,
        steps,
    };
    let d = Dfa::concat(&parts, &mut budget).unwrap();
    let used = steps - budget.steps;
    assert!(used < 200_000, "{used} steps");
    assert!(d.state_count() < 1600, "{}", d.state_count());
    assert!(d.matches("q".repeat(1500).as_bytes()) && d.matches("q".repeat(4000).as_bytes()));
    assert!(!d.matches("q".repeat(1499).as_bytes()));
}

#[test]
fn combine_budgets_are_enforced() {
    // `[ab]*a` then 1,000 literal `a`s: each set holds every literal position reached.
    let any_a = Dfa::from_regex("[ab]*a", LIMIT).unwrap();
    let lit = vec![b'a'; 1000];
    let parts = [Part::Dfa(&any_a), Part::Lit(&lit)];
    let mut budget = CombineBudget {
        size_limit: LIMIT,
        steps: 100_000,
    };
    let t0 = std::time::Instant::now();
    let r = Dfa::concat(&parts, &mut budget);
    assert!(
        matches!(r, Err(DfaError::TooSlow { steps: 100_000 })),
        "{r:?}"
    );
    assert!(budget.steps < 1000);
    let mut budget = CombineBudget {
        size_limit: 1 << 16,
        steps: u64::MAX,
    };
    let r = Dfa::concat(&parts, &mut budget);
    assert!(matches!(r, Err(DfaError::TooBig { limit: 65536 })), "{r:?}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(2));
    // A generous budget builds it.
    let mut budget = CombineBudget {
        size_limit: LIMIT,
        steps: 1 << 30,
    };
    let d = Dfa::concat(&parts, &mut budget).unwrap();
    let mut ok = b"b".to_vec();
    ok.extend(std::iter::repeat_n(b'a', 1001));
    assert!(d.matches(&ok) && !d.matches(&ok[..1001]));
}

#[test]
fn pattern_length_is_bounded_by_the_limit() {
    let limit = 1 << 20;
    let max = limit / PATTERN_BYTES_PER_LIMIT;
    // A character class: long to write, tiny automaton.
    let class = |len: usize| format!("[{}]", "a".repeat(len - 2));
    assert!(Dfa::from_regex(&class(max), limit).is_ok());
    let r = Dfa::from_regex(&class(max + 1), limit);
    assert!(matches!(r, Err(DfaError::TooLong { .. })), "{r:?}");
    assert!(r.unwrap_err().to_string().contains("dfa_size_limit"));
}

/// Class refinement numbers the pairs (old class, key) by their first byte, like a map from
/// pairs to ids filled in byte order.
#[test]
fn refined_classes_match_a_pair_map() {
    let mut rng = SmallRng::seed_from_u64(5);
    for round in 0..200 {
        let old_count = rng.gen_range(1..=40u16);
        let key_count = rng.gen_range(1..=300u32);
        let mut cls = [0u16; 256];
        cls.iter_mut()
            .for_each(|c| *c = rng.gen_range(0..old_count));
        // `refine_classes` expects classes numbered by first byte.
        let (numbered, _) = classes_and_reps(&{
            let mut seen = std::collections::HashMap::new();
            let mut c = [0u16; 256];
            for b in 0..256 {
                let n = seen.len() as u16;
                c[b] = *seen.entry(cls[b]).or_insert(n);
            }
            c
        });
        let mut cls = numbered.map(u16::from);
        let keys: Vec<u32> = (0..256).map(|_| rng.gen_range(0..key_count)).collect();
        let mut expect = [0u16; 256];
        let mut map = std::collections::HashMap::new();
        for b in 0..256 {
            let n = map.len() as u16;
            expect[b] = *map.entry((cls[b], keys[b])).or_insert(n);
        }
        refine_classes(&mut cls, |b| keys[b as usize]);
        assert_eq!(cls, expect, "round {round}");
    }
}

#[test]
fn literal_sets_build_the_subset_constructions_table() {
    // Enums as the schema translator writes them, alternatives that regex-syntax turns into
    // classes or factors, and nested alternations: the trie construction must give the table
    // (classes, numbering, distances) that determinizing the pattern's NFA gives.
    let patterns = [
        r#"\x22(?:high|celsius|low)\x22"#,
        r#"\x22(?:a|b|low)\x22"#,
        r#"\x22(?:a|b|c|asc|desc)\x22"#,
        r#"a|ab|abc|b"#,
        r#"(?:x|y)(?:1|22|333)"#,
        r#"[a-c]z|q"#,
        r#"true|false|null"#,
        r#"\x22(?:caf\xc3\xa9|na\xc3\xafve)\x22"#,
        r#"(?:)|a"#,
        r#"[0-9]"#,
    ];
    for p in patterns {
        let hir = build::parse(p, LIMIT).unwrap();
        let fast = Dfa::from_literal_set(&hir, LIMIT)
            .unwrap_or_else(|| panic!("{p}: not a literal set"))
            .unwrap();
        let slow = Dfa::from_hir(&hir, LIMIT).unwrap();
        assert_same_table(&fast, &slow, p);
    }
    // Repetitions, non-ASCII classes and large sets take the ordinary construction.
    for p in [r"a+", r"[a-z]{2}", r"x*|y", "é|ü|e", r"[\x00-\x7f]"] {
        let hir = build::parse(p, LIMIT).unwrap();
        assert!(Dfa::from_literal_set(&hir, LIMIT).is_none(), "{p}");
    }
}

#[test]
fn except_of_a_literal_set_is_the_general_constructions_table() {
    // Triggers and stop strings: overlapping strings, a string inside another, repeated
    // prefixes (failure links), non-ASCII bytes, case-insensitive classes.
    let patterns = [
        "<tool_call>",
        "</tool_call>|<tool_call>",
        "aab|ab|b",
        "abab|babb",
        "ü|über",
        "(?i-u)stop",
        "\\n\\n|\\n```",
    ];
    for p in patterns {
        let fast = build::except_literal_set(p, LIMIT)
            .unwrap_or_else(|| panic!("{p}: not a literal set"))
            .unwrap();
        let general = Dfa::except_general(p, LIMIT).unwrap();
        assert_same_table(&fast, &general, p);
    }
    assert!(
        build::except_literal_set("a|", LIMIT)
            .unwrap()
            .unwrap()
            .start()
            == DEAD
    );
    assert!(build::except_literal_set("a+", LIMIT).is_none());
}

#[test]
fn split_out_is_the_product_with_singletons() {
    let mut rng = SmallRng::seed_from_u64(11);
    for round in 0..300 {
        let count = rng.gen_range(1..=60u8);
        let base: [u8; 256] = std::array::from_fn(|_| rng.gen_range(0..count));
        let mut singles = ByteSet::EMPTY;
        for _ in 0..rng.gen_range(0..=40) {
            singles.insert(rng.gen());
        }
        if round % 50 == 0 {
            (0..=255u8).for_each(|b| singles.insert(b));
        }
        let expect = product_classes(|b| {
            let mine = if singles.contains(b) {
                u32::from(b) + 1
            } else {
                0
            };
            (base[b as usize], mine)
        });
        assert_eq!(split_out(&base, &singles), expect, "round {round}");
    }
}
