//! Thread safety: one compiled grammar shared by 8 threads, each with its own matchers, must produce
//! exactly the masks of a single-threaded run; the compile cache and shared grammars behave the
//! same under concurrency.
//!
//! The shared objects (`Grammar`, `CompiledGrammar`, `Vocabulary`, the token index) are immutable
//! after construction; per-sequence state lives in `Matcher`/`Recognizer`, which are `Send` and
//! owned by one thread. These tests check the observable consequence (identical results under
//! contention, many times over) and the `Send`/`Sync` bounds at compile time.

use std::sync::{Arc, Barrier};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use structout_engine::grammar_cache;
use structout_engine::vocab::Vocabulary;
use structout_engine::{ByteSet, CompileOptions, CompiledGrammar, Grammar, Matcher, Recognizer};

const THREADS: usize = 8;

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn shared_types_are_send_and_sync() {
    assert_send_sync::<Grammar>();
    assert_send_sync::<CompiledGrammar>();
    assert_send_sync::<Vocabulary>();
    assert_send::<Matcher>();
    assert_send::<Recognizer>();
}

/// A deterministic vocabulary of a few thousand tokens: every printable ASCII byte, every pair over
/// a JSON alphabet, words and JSON fragments, multi-byte and partial UTF-8; id 0 is EOS.
fn vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Option<Vec<u8>>> = vec![None];
    for b in 0x20u8..0x7F {
        toks.push(Some(vec![b]));
    }
    toks.push(Some(b"\n".to_vec()));
    let alphabet: &[u8] = b"{}[]\":, \nabeflnrstu0123456789.-E\\";
    for &a in alphabet {
        for &b in alphabet {
            toks.push(Some(vec![a, b]));
        }
    }
    for w in [
        "true",
        "false",
        "null",
        "\"name\"",
        "\": ",
        "\", \"",
        "\": {\"",
        "\"}",
        "}}",
        "]}",
        "12345",
        "-0.5e10",
        "hello world",
        "abcdefghijklmnopqrstuvwxyz",
        "é",
        "\u{1F600}",
    ] {
        toks.push(Some(w.as_bytes().to_vec()));
    }
    toks.push(Some(vec![0xC3]));
    toks.push(Some(vec![0xA9]));
    Arc::new(Vocabulary::from_byte_tokens(&toks, &[0], Some(toks.len() + 7)).unwrap())
}

const SCHEMA_LIKE: &str = r#"start ::= "{\"name\": " str ", \"tags\": [" (str (", " str){0,3})? "], \"n\": " num "}";
str ::= "\"" #"[a-z é]{0,10}" "\"";
num ::= #"-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,3})?";"#;

/// One scripted run: tokens picked from the masks with a seeded generator, with occasional
/// rollbacks and forks; returns every mask computed, in order.
fn scripted_run(cg: &Arc<CompiledGrammar>, seed: u64, steps: usize) -> Vec<Vec<u32>> {
    let words = cg.mask_words();
    let size = cg.vocab().size() as u32;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut m = cg.matcher();
    let mut masks = Vec::new();
    let mut fork: Option<Matcher> = None;
    for step in 0..steps {
        let mut mask = vec![0u32; words];
        m.fill_next_token_bitmask(&mut mask).unwrap();
        let allowed: Vec<u32> = (0..size)
            .filter(|&i| mask[i as usize / 32] >> (i % 32) & 1 == 1)
            .collect();
        masks.push(mask);
        if allowed.is_empty() || m.is_finished() {
            break;
        }
        // Avoid EOS most of the time so that runs are long.
        let non_eos: Vec<u32> = allowed.iter().copied().filter(|&t| t != 0).collect();
        let pick = if non_eos.is_empty() || rng.gen_ratio(1, 20) {
            allowed[rng.gen_range(0..allowed.len())]
        } else {
            non_eos[rng.gen_range(0..non_eos.len())]
        };
        assert!(m.accept_token(pick).unwrap());
        if step % 7 == 3 {
            fork = Some(m.clone());
        }
        if step % 11 == 5 && m.num_tokens() > 2 {
            m.rollback(2).unwrap();
        }
        if step % 13 == 12 {
            if let Some(f) = fork.take() {
                m = f;
            }
        }
    }
    masks
}

fn compiled(text: &str) -> Arc<CompiledGrammar> {
    let g = Arc::new(Grammar::compile(text, &CompileOptions::default()).unwrap());
    Arc::new(CompiledGrammar::new(g, vocab()))
}

#[test]
fn eight_threads_share_one_compiled_grammar() {
    for text in [
        structout_engine::builtin_grammar("json").unwrap(),
        SCHEMA_LIKE,
    ] {
        let cg = compiled(text);
        let seeds: Vec<u64> = (0..THREADS as u64).collect();
        // Single-threaded reference.
        let expected: Vec<Vec<Vec<u32>>> =
            seeds.iter().map(|&s| scripted_run(&cg, s, 300)).collect();
        assert!(expected.iter().map(Vec::len).sum::<usize>() > 100);
        let expected = Arc::new(expected);
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (cg, expected, barrier) = (cg.clone(), expected.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    // Every thread runs every script, starting at a different one, so the same
                    // scripts run concurrently in different threads.
                    for k in 0..THREADS {
                        let s = (t + k) % THREADS;
                        let got = scripted_run(&cg, s as u64, 300);
                        assert_eq!(got, expected[s], "thread {t}, script {s}");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("a worker thread panicked");
        }
    }
}

/// Batch steps: `rows` matchers (a different seed each) advance in lockstep; each step fills all
/// rows in one `fill_next_token_bitmasks` call with `threads` threads and checks every row against
/// the mask of a clone filled alone; returns the number of rows filled.
fn batch_walk(cg: &Arc<CompiledGrammar>, rows: usize, threads: usize, steps: usize) -> usize {
    let words = cg.mask_words();
    let size = cg.vocab().size() as u32;
    let mut rngs: Vec<SmallRng> = (0..rows as u64).map(SmallRng::seed_from_u64).collect();
    let mut live: Vec<Matcher> = (0..rows).map(|_| cg.matcher()).collect();
    let mut filled = 0;
    for _ in 0..steps {
        if live.is_empty() {
            break;
        }
        let mut masks = vec![vec![0u32; words]; live.len()];
        let mut jobs: Vec<(&mut Matcher, &mut [u32])> = live
            .iter_mut()
            .zip(masks.iter_mut())
            .map(|(m, out)| (m, out.as_mut_slice()))
            .collect();
        structout_engine::fill_next_token_bitmasks(&mut jobs, threads).unwrap();
        filled += masks.len();
        let mut next = Vec::new();
        for ((mut m, mask), rng) in live.into_iter().zip(masks).zip(rngs.iter_mut()) {
            let mut alone = vec![0u32; words];
            m.clone().fill_next_token_bitmask(&mut alone).unwrap();
            assert_eq!(mask, alone);
            let allowed: Vec<u32> = (1..size)
                .filter(|&i| mask[i as usize / 32] >> (i % 32) & 1 == 1)
                .collect();
            if allowed.is_empty() || m.is_finished() {
                continue;
            }
            assert!(m
                .accept_token(allowed[rng.gen_range(0..allowed.len())])
                .unwrap());
            next.push(m);
        }
        live = next;
    }
    filled
}

#[test]
fn batch_fills_match_single_fills_also_when_batches_overlap() {
    for text in [
        structout_engine::builtin_grammar("json").unwrap(),
        SCHEMA_LIKE,
    ] {
        let cg = compiled(text);
        assert!(batch_walk(&cg, 24, 4, 40) > 100);
        // Batches from several threads at once: one gets the pool, the others run on their own.
        let handles: Vec<_> = (0..3)
            .map(|t| {
                let cg = cg.clone();
                std::thread::spawn(move || batch_walk(&cg, 8 + t, 3, 30))
            })
            .collect();
        for h in handles {
            assert!(h.join().expect("a batch thread panicked") > 0);
        }
    }
}

#[test]
fn concurrent_cache_compiles_return_one_grammar() {
    let v = vocab();
    let opts = CompileOptions::default();
    // A text no other test uses, so the cache entry is fresh.
    let text = format!("{SCHEMA_LIKE}\n(* threads test {} *)", std::process::id());
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (v, opts, text, barrier) = (v.clone(), opts.clone(), text.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let cg = grammar_cache::compile(&text, &opts, &v).unwrap();
                let masks = scripted_run(&cg, 42, 40);
                (cg, masks)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let first = &results[0];
    for (cg, masks) in &results[1..] {
        assert_eq!(masks, &first.1, "masks differ between threads");
        // Threads that found the entry, or lost the race to insert it, get the same object.
        let again = grammar_cache::compile(&text, &opts, &v).unwrap();
        assert!(Arc::ptr_eq(&again, &first.0) || Arc::ptr_eq(&again, cg));
    }
}

#[test]
fn recognizers_on_one_grammar_in_parallel() {
    let g = Arc::new(
        Grammar::compile(
            structout_engine::builtin_grammar("json").unwrap(),
            &CompileOptions::default(),
        )
        .unwrap(),
    );
    let doc: Vec<u8> = {
        let mut s = String::from("[");
        for i in 0..300 {
            s.push_str(&format!(
                "{{\"id\": {i}, \"name\": \"item é {i}\", \"tags\": [true, null, -1.5e3]}}, "
            ));
        }
        s.push_str("{}]");
        s.into_bytes()
    };
    let doc = Arc::new(doc);
    let expected = Arc::new(trace(&g, &doc));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (g, doc, expected) = (g.clone(), doc.clone(), expected.clone());
            std::thread::spawn(move || {
                for _ in 0..3 {
                    assert!(
                        trace(&g, &doc) == *expected,
                        "allowed bytes differ under concurrency"
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a worker thread panicked");
    }
}

/// The allowed-byte sets along `doc`, which must be a sentence.
fn trace(g: &Arc<Grammar>, doc: &[u8]) -> Vec<ByteSet> {
    let mut r = Recognizer::new(g.clone());
    let mut out = Vec::with_capacity(doc.len());
    for &b in doc {
        out.push(r.allowed_bytes());
        assert!(r.feed_byte(b));
    }
    assert!(r.is_complete());
    out
}
