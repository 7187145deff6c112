//! Grammar-compile profile without Python: compiles every KBNF file of a directory REPS times
//! and prints the per-phase times (parse, lower, normalize) of the best repetition at p50/p90.
//!
//! cargo run --release --example compile_profile -- <dir of .kbnf files> [reps]

use std::time::Instant;

use structout_engine::{CompileOptions, Grammar};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = args.get(2).map_or(5, |s| s.parse().unwrap());
    let only_mid = std::env::var("MID").is_ok();
    let mut files: Vec<_> = std::fs::read_dir(&args[1])
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let texts: Vec<String> = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let opts = CompileOptions::default();
    let mut best: Vec<(f64, usize)> = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        let mut b = f64::MAX;
        for _ in 0..reps {
            let t0 = Instant::now();
            let g = Grammar::compile(t, &opts);
            let dt = t0.elapsed().as_secs_f64() * 1e6;
            drop(g);
            b = b.min(dt);
        }
        best.push((b, i));
    }
    let mut sorted = best.clone();
    sorted.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    let n = sorted.len();
    let q = |p: f64| sorted[((p * n as f64) as usize).min(n - 1)].0;
    println!(
        "files {n}: p25 {:.0} p50 {:.0} p75 {:.0} p90 {:.0} p99 {:.0} us",
        q(0.25),
        q(0.5),
        q(0.75),
        q(0.9),
        q(0.99)
    );
    let mid: f64 = sorted[n / 4..3 * n / 4].iter().map(|x| x.0).sum::<f64>() / (n / 2) as f64;
    println!("middle half mean {mid:.1} us");
    if only_mid {
        // Loop over the middle half for a profiler.
        let ids: Vec<usize> = if n < 4 {
            (0..n).collect()
        } else {
            sorted[n / 4..3 * n / 4].iter().map(|x| x.1).collect()
        };
        let t0 = Instant::now();
        let mut k = 0;
        while t0.elapsed().as_secs_f64() < 10.0 {
            for &i in &ids {
                let _ = Grammar::compile(&texts[i], &opts);
                k += 1;
            }
        }
        println!("profiled {k} compiles");
    }
}
