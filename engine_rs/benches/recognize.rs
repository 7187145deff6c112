//! Recognition throughput: JSON documents of growing size with `schemas/json.kbnf`, and long left-
//! and right-recursive lists. Cost must grow linearly with input length.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use structout_engine::{builtin_grammar, CompileOptions, Grammar, Recognizer};

/// A deterministic JSON document of about `target` bytes mixing objects, arrays, strings with
/// escapes, integers, floats with exponents, booleans and null.
fn json_document(target: usize) -> Vec<u8> {
    let mut out = String::from("[");
    let mut i = 0u64;
    while out.len() < target {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&format!(
            "{{\"id\": {i}, \"name\": \"item \\\"{i}\\\" caf\\u00e9\", \"price\": {}.{}e-{}, \
             \"tags\": [\"a\", \"bc\", \"def\"], \"active\": {}, \"parent\": null, \
             \"dims\": {{\"w\": {}, \"h\": -{}.5}}}}",
            i * 7 % 1000,
            i % 97,
            i % 5,
            i.is_multiple_of(2),
            i % 13,
            i % 17
        ));
        i += 1;
    }
    out.push(']');
    out.into_bytes()
}

fn recognize(g: &Arc<Grammar>, input: &[u8]) -> bool {
    let mut r = Recognizer::new(g.clone());
    r.feed(input) && r.is_complete()
}

fn bench_json(c: &mut Criterion) {
    let g = Arc::new(
        Grammar::compile(builtin_grammar("json").unwrap(), &CompileOptions::default()).unwrap(),
    );
    let mut group = c.benchmark_group("json");
    group.sample_size(10);
    for size in [10_000usize, 100_000, 1_000_000] {
        let doc = json_document(size);
        assert!(recognize(&g, &doc));
        group.throughput(Throughput::Bytes(doc.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &doc, |b, doc| {
            b.iter(|| recognize(&g, doc))
        });
    }
    group.finish();
}

fn bench_lists(c: &mut Criterion) {
    // Rules, not one DFA terminal: these measure the Earley machinery (Leo on the right).
    let opts = CompileOptions {
        regular_terminals: false,
        ..CompileOptions::default()
    };
    let right = Arc::new(Grammar::compile("start ::= 'a' start | 'a';", &opts).unwrap());
    let left = Arc::new(Grammar::compile("start ::= start ',' 'a' | 'a';", &opts).unwrap());
    let mut group = c.benchmark_group("lists");
    group.sample_size(10);
    for n in [10_000usize, 100_000] {
        let r_in = vec![b'a'; n];
        let l_in: Vec<u8> = std::iter::once(b'a')
            .chain((1..n / 2).flat_map(|_| [b',', b'a']))
            .collect();
        group.throughput(Throughput::Bytes(n as u64));
        group.bench_with_input(BenchmarkId::new("right", n), &r_in, |b, i| {
            b.iter(|| assert!(recognize(&right, i)))
        });
        group.bench_with_input(BenchmarkId::new("left", n), &l_in, |b, i| {
            b.iter(|| assert!(recognize(&left, i)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_json, bench_lists);
criterion_main!(benches);
