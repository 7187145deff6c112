//! Mask-computation profile without Python: Llama 3 vocabulary (tokenizer.json path as argument),
//! MaskBench valid documents tokenized greedily by longest match, a mask before every token.
//!
//! cargo run --release --example mask_profile -- <tokenizer.json> <maskbench dir> [docs]

use std::io::Read;
use std::sync::Arc;
use std::time::Instant;

use structout_engine::vocab::{AddedToken, TokenEncoding, Vocabulary};
use structout_engine::{builtin_grammar, CompileOptions, CompiledGrammar, Grammar};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tok: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&args[1]).unwrap()).unwrap();
    let vocab_map = tok["model"]["vocab"].as_object().unwrap();
    let mut strings: Vec<Option<String>> = vec![None; 128_256];
    for (s, id) in vocab_map {
        strings[id.as_u64().unwrap() as usize] = Some(s.clone());
    }
    let added: Vec<AddedToken> = tok["added_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| AddedToken {
            id: t["id"].as_u64().unwrap() as u32,
            content: t["content"].as_str().unwrap().to_owned(),
            special: t["special"].as_bool().unwrap(),
        })
        .collect();
    let t0 = Instant::now();
    let vocab = Arc::new(
        Vocabulary::from_hf_tokens(&strings, TokenEncoding::ByteLevel, &added, &[128001], None)
            .unwrap(),
    );
    eprintln!("vocab {:?}", t0.elapsed());
    let g = Arc::new(
        Grammar::compile(builtin_grammar("json").unwrap(), &CompileOptions::default()).unwrap(),
    );
    let t0 = Instant::now();
    let cg = Arc::new(CompiledGrammar::new(g, vocab.clone()));
    eprintln!("compile+index {:?} {:?}", t0.elapsed(), cg.index_stats());
    let mut mask0 = vec![0u32; cg.mask_words()];
    for prefix in [
        "",
        "{",
        "{\"a\"",
        "{\"a\":",
        "{\"a\": ",
        "{\"a\": 1",
        "{\"a\": 12",
        "{\"a\": 1, ",
        "{\"a\": \"xy",
        "{\"a\": [",
        "{\"a\": [1, 2",
        "{\"a\": tr",
        "{\"a\": {\"b\": null",
    ] {
        let mut m = cg.matcher();
        assert!(m.accept_bytes(prefix.as_bytes()).unwrap());
        let t0 = Instant::now();
        for _ in 0..200 {
            m.fill_next_token_bitmask(&mut mask0).unwrap();
        }
        let pop: u32 = mask0.iter().map(|w| w.count_ones()).sum();
        eprintln!(
            "{:>8.1}us {pop:>6} allowed after {prefix:?}",
            t0.elapsed().as_nanos() as f64 / 200.0 / 1000.0
        );
    }
    if let Ok(p) = std::env::var("PREFIX") {
        let mut m = cg.matcher();
        assert!(m.accept_bytes(p.as_bytes()).unwrap());
        let cpu = || -> f64 {
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            let f: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap()
                .split_whitespace()
                .collect();
            (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
        };
        let (t0, c0) = (Instant::now(), cpu());
        for _ in 0..20_000 {
            m.fill_next_token_bitmask(&mut mask0).unwrap();
        }
        eprintln!(
            "{:.2}us wall {:.2}us cpu per mask after {p:?}",
            t0.elapsed().as_nanos() as f64 / 20_000.0 / 1000.0,
            (cpu() - c0) * 1e6 / 20_000.0
        );
        return;
    }
    let max_docs: usize = args.get(3).map_or(200, |s| s.parse().unwrap());
    let mut docs = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&args[2])
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let mut s = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&f).unwrap())
            .read_to_string(&mut s)
            .unwrap();
        for line in s.lines().step_by(7) {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(t) = row["tests"]
                .as_array()
                .and_then(|t| t.iter().find(|t| t["valid"] == true))
            {
                docs.push(serde_json::to_string(&t["data"]).unwrap());
            }
        }
    }
    docs.truncate(max_docs);
    let trie = vocab.trie();
    let mut times = Vec::new();
    let mut cat: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let mut slow: Vec<(u64, String)> = Vec::new();
    let mut mask = vec![0u32; cg.mask_words()];
    for d in &docs {
        let bytes = d.as_bytes();
        let mut m = cg.matcher();
        let mut i = 0;
        while i < bytes.len() {
            // Greedy longest-match tokenization.
            let mut node = 0usize;
            let mut best = None;
            let mut j = i;
            while j < bytes.len() {
                match trie.child(node, bytes[j]) {
                    Some(c) => {
                        node = c;
                        j += 1;
                        if let Some(t) = trie.node(c).token() {
                            best = Some((t, j));
                        }
                    }
                    None => break,
                }
            }
            let (t, end) = best.unwrap();
            let t0 = Instant::now();
            m.fill_next_token_bitmask(&mut mask).unwrap();
            let ns = t0.elapsed().as_nanos() as u64;
            let pop: u32 = mask.iter().map(|w| w.count_ones()).sum();
            cat[(pop > 100_000) as usize].push(ns);
            times.push(ns);
            slow.push((ns, format!("{:?}", &d[i.saturating_sub(40)..i])));
            assert!(
                mask[t as usize / 32] & (1 << (t % 32)) != 0,
                "token {t} disallowed in {d} at {i}"
            );
            assert!(m.accept_token(t).unwrap());
            i = end;
        }
    }
    slow.sort_by_key(|s| std::cmp::Reverse(s.0));
    for (ns, ctx) in slow.iter().take(8) {
        eprintln!("{:>8.1}us after ...{ctx}", *ns as f64 / 1000.0);
    }
    for (name, c) in ["small", "large"].iter().zip(cat.iter_mut()) {
        c.sort();
        if !c.is_empty() {
            eprintln!(
                "{name}: {} masks p50 {:.1}us mean {:.1}us",
                c.len(),
                c[c.len() / 2] as f64 / 1000.0,
                c.iter().sum::<u64>() as f64 / c.len() as f64 / 1000.0
            );
        }
    }
    times.sort();
    let n = times.len();
    let mean = times.iter().sum::<u64>() as f64 / n as f64 / 1000.0;
    eprintln!(
        "docs {} masks {n} mean {mean:.1}us p50 {:.1}us p99 {:.1}us max {:.1}us",
        docs.len(),
        times[n / 2] as f64 / 1000.0,
        times[n * 99 / 100] as f64 / 1000.0,
        times[n - 1] as f64 / 1000.0
    );
}
