//! Fuzz targets for `structout-engine`, as plain functions so that both libFuzzer
//! (`fuzz_targets/*.rs`, nightly) and the stable driver (`src/bin/drive.rs`) run the same logic.
//!
//! Each target panics (a finding) only when the engine breaks a property:
//!
//! * [`kbnf_compile`]: arbitrary bytes → `Grammar::compile` never panics; errors render; a
//!   compiled grammar's recognizer keeps its invariants (allowed bytes exact, no dead incomplete
//!   state) on a walk.
//! * [`recognize`]: a generated grammar and inputs → the recognizer agrees with the slow
//!   reference in [`reference`] on every input, allowed bytes are exact, `feed` is atomic,
//!   rollback restores earlier states, and every completion it offers is a real sentence.
//! * [`matcher_ops`]: random sequences of accept/rollback/fill/fork/reset/forced-bytes on token
//!   matchers → every state equals replaying its accepted tokens from scratch, and fast masks equal
//!   brute force (trying each token).

pub mod gen;
/// The reference recognizer of the integration tests (one reference for tests and fuzzing).
#[path = "../../tests/common/reference.rs"]
pub mod reference;

use std::sync::Arc;

use structout_engine::vocab::Vocabulary;
use structout_engine::{
    ByteSet, CompileOptions, CompiledGrammar, ErrorKind, Grammar, Matcher, Recognizer,
};

use gen::{gen_grammar, gen_input, Src};
use reference::{Reference, MAX_REF_LEN};

/// Longest input checked against the reference.
const MAX_INPUT: usize = MAX_REF_LEN;

/// A fuzz target: runs one input, panics on a finding.
pub type Target = fn(&[u8]);

/// The targets by name, for the driver.
pub const TARGETS: &[(&str, Target)] = &[
    ("kbnf_compile", kbnf_compile),
    ("recognize", recognize),
    ("matcher_ops", matcher_ops),
];

/// Options for fuzzing: the defaults with smaller automata and repetition bounds, so that one
/// execution stays in the millisecond range.
fn fuzz_options() -> CompileOptions {
    CompileOptions {
        dfa_size_limit: 1 << 22,
        max_repetition: 1 << 16,
        max_grammar_symbols: 1 << 18,
        ..CompileOptions::default()
    }
}

/// A tiny deterministic generator (splitmix64) seeded from the input.
struct Mix(u64);

impl Mix {
    fn new(data: &[u8]) -> Mix {
        let mut h = 0x9E37_79B9_7F4A_7C15u64 ^ data.len() as u64;
        for &b in data.iter().take(64) {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01B3);
        }
        Mix(h)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Checks that `allowed` is exactly the set of bytes `r` accepts next (state unchanged after).
fn check_allowed_exact(r: &mut Recognizer, allowed: &ByteSet, context: &dyn Fn() -> String) {
    let len = r.len();
    for b in 0..=255u8 {
        // A limit error (Err) is a documented outcome, not a disagreement.
        if let Ok(ok) = r.try_feed_byte(b) {
            assert_eq!(
                ok,
                allowed.contains(b),
                "allowed_bytes disagrees with feed_byte({b:#04x}) at length {len}\n{}",
                context()
            );
            if ok {
                r.rollback_to(len);
            }
        }
        assert_eq!(r.len(), len, "state changed after probing byte {b:#04x}");
    }
}

/// Every state reached by accepted input can be completed: it is complete or some byte is allowed.
fn check_not_stuck(r: &Recognizer, allowed: &ByteSet, context: &dyn Fn() -> String) {
    assert!(
        r.is_complete() || !allowed.is_empty(),
        "recognizer reached an incomplete state with no allowed byte at length {}\n{}",
        r.len(),
        context()
    );
}

/// Target `kbnf_compile`: arbitrary bytes as grammar text.
pub fn kbnf_compile(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let g = match Grammar::compile(&text, &fuzz_options()) {
        Ok(g) => Arc::new(g),
        Err(e) => {
            assert!(
                !e.diagnostics.is_empty(),
                "a compile error without diagnostics"
            );
            for d in &e.diagnostics {
                assert!(
                    d.span.start <= d.span.end && d.span.end as usize <= text.len() + 1,
                    "diagnostic span {:?} outside the text of {} bytes",
                    d.span,
                    text.len()
                );
            }
            let rendered = e.to_string();
            assert!(rendered.starts_with("error at "), "{rendered}");
            return;
        }
    };
    let _ = g.lnf_debug();
    let _ = g.memory_usage();
    let ctx = || format!("grammar:\n{text}");
    let mut r = Recognizer::new(g);
    let mut mix = Mix::new(data);
    for step in 0..48 {
        let allowed = r.allowed_bytes();
        check_not_stuck(&r, &allowed, &ctx);
        if step < 4 {
            check_allowed_exact(&mut r, &allowed, &ctx);
        }
        if allowed.is_empty() || (r.is_complete() && mix.next().is_multiple_of(8)) {
            break;
        }
        let pick = (mix.next() % allowed.len() as u64) as usize;
        let b = allowed.iter().nth(pick).expect("pick < len");
        match r.try_feed_byte(b) {
            Ok(true) => {}
            Ok(false) => panic!(
                "allowed byte {b:#04x} refused at length {}\n{}",
                r.len(),
                ctx()
            ),
            Err(_) => break, // a documented limit
        }
    }
}

/// Target `recognize`: generated grammar + inputs, checked against the reference recognizer.
pub fn recognize(data: &[u8]) {
    let mut src = Src::new(data);
    let gram = gen_grammar(&mut src);
    let mut reference = Reference::new(&gram);
    let text = gram.render();
    let opts = CompileOptions {
        max_items_per_set: 1 << 14,
        max_total_items: 1 << 22,
        ..fuzz_options()
    };
    let g = match Grammar::compile(&text, &opts) {
        Ok(g) => {
            assert!(
                reference.productive(),
                "compiled a grammar whose start derives nothing:\n{text}"
            );
            Arc::new(g)
        }
        Err(e) => {
            if e.kind() == ErrorKind::Limit {
                return;
            }
            let msg = e.to_string();
            assert!(
                !reference.productive(),
                "rejected a valid grammar:\n{text}\n{msg}"
            );
            assert!(
                msg.contains("empty"),
                "unexpected error for a grammar whose start derives nothing:\n{text}\n{msg}"
            );
            return;
        }
    };
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for _ in 0..3 {
        let mut budget = 300;
        if let Some(s) = gen::sample(&gram, &mut src, &mut budget, MAX_INPUT) {
            if s.len() <= MAX_INPUT {
                inputs.push(s);
            }
        }
    }
    // Mutants of the samples (one byte changed, inserted or dropped) and raw inputs.
    let n = inputs.len();
    for k in 0..n {
        let mut m = inputs[k].clone();
        let at = src.below(m.len() + 1);
        match src.below(3) {
            0 if at < m.len() => m[at] = gen::INPUT_BYTES[src.below(gen::INPUT_BYTES.len())],
            1 if at < m.len() => {
                m.remove(at);
            }
            _ => m.insert(at, gen::INPUT_BYTES[src.below(gen::INPUT_BYTES.len())]),
        }
        m.truncate(MAX_INPUT);
        inputs.push(m);
    }
    inputs.push(gen_input(&mut src, 16));
    for (n, w) in inputs.iter().enumerate() {
        check_input(&g, &mut reference, &text, w, n == 0, &mut src);
    }
}

fn check_input(
    g: &Arc<Grammar>,
    reference: &mut Reference,
    text: &str,
    w: &[u8],
    exhaustive: bool,
    src: &mut Src,
) {
    let ctx = || format!("grammar:\n{text}input: {:?}", String::from_utf8_lossy(w));
    let mut r = Recognizer::new(g.clone());
    // A twin that releases all history after every byte must behave identically.
    let mut twin = Recognizer::new(g.clone());
    let (mut key_r, mut key_t) = (Vec::new(), Vec::new());
    let mut history = Vec::new();
    let mut fed = 0;
    for (k, &b) in w.iter().enumerate() {
        let allowed = r.allowed_bytes();
        check_not_stuck(&r, &allowed, &ctx);
        assert_eq!(twin.len(), r.len(), "compacted twin lost track\n{}", ctx());
        assert_eq!(
            (twin.allowed_bytes(), twin.is_complete()),
            (allowed, r.is_complete()),
            "compacted twin differs at {k}\n{}",
            ctx()
        );
        // Keys longer than the bound are unusable (the mask cache skips them): compare the rest.
        if twin.state_key(&mut key_t, 1 << 16) && r.state_key(&mut key_r, 1 << 16) {
            assert_eq!(
                key_t,
                key_r,
                "compacted twin's state key differs at {k}\n{}",
                ctx()
            );
        }
        history.push((allowed, r.is_complete()));
        if exhaustive || k < 2 {
            check_allowed_exact(&mut r, &allowed, &ctx);
        }
        match r.try_feed_byte(b) {
            Ok(ok) => {
                assert_eq!(
                    ok,
                    allowed.contains(b),
                    "feed_byte({b:#04x}) at {k}\n{}",
                    ctx()
                );
                if !ok {
                    break;
                }
                assert_eq!(twin.try_feed_byte(b), Ok(true), "twin refused\n{}", ctx());
                twin.compact_before(twin.len());
                fed += 1;
            }
            Err(_) => return, // a documented limit
        }
    }
    let engine = fed == w.len() && r.is_complete();
    let expected = reference.complete(w);
    assert_eq!(
        engine,
        expected,
        "recognizer says {engine}, reference says {expected} (fed {fed} of {} bytes)\n{}",
        w.len(),
        ctx()
    );
    // `feed` is atomic and agrees with byte-by-byte feeding.
    let mut whole = Recognizer::new(g.clone());
    match whole.try_feed(w) {
        Ok(ok) => {
            assert_eq!(ok, fed == w.len(), "feed(all) vs feed_byte\n{}", ctx());
            assert_eq!(whole.len(), if ok { w.len() } else { 0 }, "feed not atomic");
        }
        Err(_) => assert_eq!(whole.len(), 0, "feed not atomic on a limit error"),
    }
    // Rolling back restores the earlier state exactly.
    if fed > 0 {
        let k = src.below(fed);
        r.rollback_to(k);
        assert_eq!(r.len(), k);
        assert_eq!(
            (r.allowed_bytes(), r.is_complete()),
            history[k],
            "state after rollback_to({k}) differs\n{}",
            ctx()
        );
        assert!(
            r.feed(&w[k..fed]),
            "re-feeding after rollback failed\n{}",
            ctx()
        );
    }
    // Every completion the recognizer offers is a sentence.
    let mut cur = w[..fed].to_vec();
    r.rollback_to(fed);
    loop {
        let allowed = r.allowed_bytes();
        check_not_stuck(&r, &allowed, &ctx);
        if r.is_complete() && (allowed.is_empty() || src.one_in(3) || src.exhausted()) {
            assert!(
                reference.complete(&cur),
                "recognizer completes on {:?} but the reference rejects it\ngrammar:\n{text}",
                String::from_utf8_lossy(&cur)
            );
            break;
        }
        if cur.len() == MAX_INPUT || allowed.is_empty() {
            break;
        }
        let b = allowed
            .iter()
            .nth(src.below(allowed.len()))
            .expect("below len");
        match r.try_feed_byte(b) {
            Ok(true) => cur.push(b),
            Ok(false) => panic!("allowed byte {b:#04x} refused\n{}", ctx()),
            Err(_) => return,
        }
    }
}

/// Grammars for [`matcher_ops`] besides generated ones: JSON and constructs with slice buckets,
/// bounded `except!`, `len!` / `json_len!` (tabulated and length-counted), nullable starts and
/// ambiguity.
const MATCHER_GRAMMARS: &[&str] = &[
    r#"start ::= "{\"name\": \"" #"[a-z ]{0,12}" "\", \"n\": " #"-?[0-9]{1,4}" "}";"#,
    r#"start ::= "<" except!(">>", 10) ">>" start?;"#,
    r#"start ::= S; S ::= S S | 'a' | 'ab' | 'b';"#,
    r#"start ::= ('x' | 'xy' | #"[a-c]+")* 'z'?;"#,
    r#"start ::= #"(?s:.)*" ;"#,
    r#"start ::= except!('\n\n') '\n\n' | 'é'{2,3};"#,
    r#"start ::= '"' json_len!(#"(?:[a-zé]|\\u[0-9a-fA-F]{4}|\\[n\"])*", 1, 4) '"' | len!(#"[0-9é]+", 2, 3);"#,
    // Bounds too large to tabulate: length-counted terminals.
    r#"start ::= '"' json_len!(#"(?:[a-zé]+ |\\n)*[a-z]", 3, 1000000) '"' | len!(#"(?:ab|c)*", 5, 500000);"#,
];

#[derive(Clone, Debug)]
enum Step {
    Token(u32),
    Bytes(Vec<u8>),
}

fn gen_vocab(src: &mut Src, alphabet: &[u8]) -> Option<Arc<Vocabulary>> {
    let mut toks: Vec<Option<Vec<u8>>> = vec![None]; // id 0: EOS
    for &b in alphabet {
        toks.push(Some(vec![b]));
    }
    let extra = src.below(48);
    for _ in 0..extra {
        match src.below(10) {
            0 => toks.push(None), // special token
            1 => {
                // a long token (exercises slice buckets)
                let len = 8 + src.below(24);
                toks.push(Some(
                    (0..len)
                        .map(|_| alphabet[src.below(alphabet.len())])
                        .collect(),
                ));
            }
            _ => {
                let len = 1 + src.below(5);
                toks.push(Some(
                    (0..len)
                        .map(|_| alphabet[src.below(alphabet.len())])
                        .collect(),
                ));
            }
        }
    }
    let mut eos = vec![0u32];
    if src.one_in(4) {
        toks.push(None);
        eos.push(toks.len() as u32 - 1);
    }
    let size = toks.len() + src.below(40);
    Vocabulary::from_byte_tokens(&toks, &eos, Some(size))
        .ok()
        .map(Arc::new)
}

/// The mask by trying every token id (slow reference).
fn brute_mask(m: &mut Matcher) -> Vec<u32> {
    let words = m.compiled().mask_words();
    let size = m.compiled().vocab().size() as u32;
    let mut out = vec![0u32; words];
    for id in 0..size {
        if m.is_token_allowed(id).unwrap_or(false) {
            out[id as usize / 32] |= 1 << (id % 32);
        }
    }
    out
}

fn replay(cg: &Arc<CompiledGrammar>, steps: &[Step]) -> Matcher {
    let mut m = cg.matcher();
    for s in steps {
        let ok = match s {
            Step::Token(t) => m.accept_token(*t),
            Step::Bytes(b) => m.accept_bytes(b),
        };
        assert!(
            matches!(ok, Ok(true)),
            "replaying {s:?} failed: {ok:?} (steps {steps:?})"
        );
    }
    m
}

fn observe(m: &Matcher) -> (usize, usize, bool, bool) {
    (
        m.recognizer().len(),
        m.num_tokens(),
        m.can_finish(),
        m.is_finished(),
    )
}

/// Target `matcher_ops`: random matcher call sequences checked against replay and brute force.
pub fn matcher_ops(data: &[u8]) {
    let mut src = Src::new(data);
    let mode = src.byte();
    let generated;
    let (text, alphabet): (&str, Vec<u8>) = match mode % 4 {
        0 => (
            structout_engine::builtin_grammar("json").expect("bundled"),
            b"{}[]\":, \n\\aeflnrstu01-.E".to_vec(),
        ),
        1 => {
            let t = MATCHER_GRAMMARS[src.below(MATCHER_GRAMMARS.len())];
            (t, b"{}\"namez: ,-0123abxy<>\n\xC3\xA9".to_vec())
        }
        _ => {
            let gram = gen_grammar(&mut src);
            let alphabet = gen::alphabet(&gram);
            generated = gram.render();
            (generated.as_str(), alphabet)
        }
    };
    let opts = CompileOptions {
        // Small item limits in some runs exercise the error paths (state must stay unchanged).
        max_items_per_set: if mode & 0x10 != 0 { 256 } else { 1 << 14 },
        max_total_items: if mode & 0x20 != 0 { 4096 } else { 1 << 22 },
        ..fuzz_options()
    };
    let Ok(g) = Grammar::compile(text, &opts) else {
        return;
    };
    let Some(vocab) = gen_vocab(&mut src, &alphabet) else {
        return;
    };
    let cg = Arc::new(CompiledGrammar::new(Arc::new(g), vocab));
    let size = cg.vocab().size() as u32;
    let words = cg.mask_words();
    let mut first = cg.matcher();
    // Half the runs bound rollback, which lets the recognizer release history.
    if src.one_in(2) {
        first.set_max_rollback_tokens(Some(src.below(4)));
    }
    let mut ms: Vec<(Matcher, Vec<Step>)> = vec![(first, Vec::new())];
    let mut cur = 0;
    let vocab_listing = || {
        let v = cg.vocab();
        (0..v.size() as u32)
            .filter_map(|i| {
                v.token_bytes(i)
                    .map(|b| format!("{i}={:?}", String::from_utf8_lossy(b)))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let ctx = |steps: &[Step]| {
        format!(
            "grammar:\n{text}\nsteps: {steps:?}\neos: {:?}\nvocab: {}",
            cg.vocab().eos_token_ids(),
            vocab_listing()
        )
    };
    for _ in 0..64 {
        if src.exhausted() {
            break;
        }
        let op = src.below(11);
        let (m, steps) = &mut ms[cur];
        let before = observe(m);
        match op {
            // accept a token from the mask (progress), or any id
            0..=2 => {
                let mut mask = vec![0u32; words];
                if m.fill_next_token_bitmask(&mut mask).is_err() {
                    assert_eq!(observe(m), before, "state changed by a failed fill");
                    continue;
                }
                let allowed: Vec<u32> = (0..size)
                    .filter(|&i| mask[i as usize / 32] >> (i % 32) & 1 == 1)
                    .collect();
                let id = if op < 2 && !allowed.is_empty() {
                    allowed[src.below(allowed.len())]
                } else {
                    src.below(size as usize + 2) as u32
                };
                let in_mask = id < size && mask[id as usize / 32] >> (id % 32) & 1 == 1;
                match m.accept_token(id) {
                    Ok(ok) => {
                        assert_eq!(
                            ok,
                            in_mask,
                            "accept_token({id}) = {ok} but mask bit = {in_mask}\n{}",
                            ctx(steps)
                        );
                        if ok {
                            steps.push(Step::Token(id));
                        } else {
                            assert_eq!(observe(m), before, "refused token changed the state");
                        }
                    }
                    Err(_) => assert_eq!(observe(m), before, "state changed by a limit error"),
                }
            }
            3 => {
                let len = src.below(4);
                let bytes: Vec<u8> = (0..len)
                    .map(|_| alphabet[src.below(alphabet.len())])
                    .collect();
                let mut probe = m.recognizer().clone();
                let fits = probe.feed(&bytes);
                let stopped = matches!(steps.last(),
                    Some(Step::Token(t)) if cg.vocab().eos_token_ids().contains(t));
                match m.accept_bytes(&bytes) {
                    Ok(true) => {
                        assert!(!stopped, "bytes accepted after EOS\n{}", ctx(steps));
                        assert!(fits, "accept_bytes took bytes the recognizer refuses");
                        steps.push(Step::Bytes(bytes));
                    }
                    Ok(false) => {
                        assert!(
                            stopped || !fits,
                            "accept_bytes refused {bytes:?}\n{}",
                            ctx(steps)
                        );
                        assert_eq!(observe(m), before, "refused bytes changed the state");
                    }
                    Err(_) => assert_eq!(observe(m), before, "state changed by a limit error"),
                }
            }
            4 => {
                let n = src.below(4);
                let window = m.rollback_window();
                match m.rollback(n) {
                    Ok(()) => {
                        assert!(
                            m.max_rollback_tokens().is_none() || n <= window,
                            "rollback({n}) beyond the window {window} succeeded"
                        );
                        let keep = steps.len().saturating_sub(n);
                        steps.truncate(keep);
                    }
                    Err(_) => {
                        assert!(
                            n > window,
                            "rollback({n}) refused inside the window {window}"
                        );
                        assert_eq!(observe(m), before, "refused rollback changed the state");
                    }
                }
            }
            5 | 6 => {
                let mut fast = vec![u32::MAX; words];
                match m.fill_next_token_bitmask(&mut fast) {
                    Ok(()) => {
                        let slow = brute_mask(m);
                        assert_eq!(fast, slow, "fast mask != brute force\n{}", ctx(steps));
                    }
                    Err(_) => assert_eq!(observe(m), before, "state changed by a failed fill"),
                }
            }
            7 => {
                let fork = m.clone();
                let s = steps.clone();
                ms.push((fork, s));
                if src.one_in(2) {
                    cur = ms.len() - 1;
                }
            }
            8 => {
                m.reset();
                steps.clear();
            }
            9 => {
                let forced = m.forced_bytes();
                assert_eq!(observe(m), before, "forced_bytes changed the state");
                if !forced.is_empty() {
                    let mut probe = m.recognizer().clone();
                    for &b in &forced {
                        let allowed = probe.allowed_bytes();
                        assert_eq!(allowed.len(), 1, "forced byte {b:#04x} not the only one");
                        assert!(probe.feed_byte(b));
                    }
                }
            }
            _ => cur = src.below(ms.len()),
        }
        // The state equals replaying the accepted steps from scratch.
        let (m, steps) = &mut ms[cur];
        let mut fresh = replay(&cg, steps);
        assert_eq!(
            observe(m),
            observe(&fresh),
            "state differs from replay\n{}",
            ctx(steps)
        );
        if src.one_in(3) {
            let (mut a, mut b) = (vec![0u32; words], vec![0u32; words]);
            if let (Ok(()), Ok(())) = (
                m.fill_next_token_bitmask(&mut a),
                fresh.fill_next_token_bitmask(&mut b),
            ) {
                assert_eq!(a, b, "mask differs from replay\n{}", ctx(steps));
            }
            assert_eq!(
                m.forced_bytes(),
                fresh.forced_bytes(),
                "forced bytes differ"
            );
        }
    }
}
