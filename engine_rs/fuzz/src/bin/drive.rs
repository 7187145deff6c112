//! A deterministic fuzz driver that runs on stable Rust (no libFuzzer, no coverage feedback).
//!
//! ```text
//! drive <target|all> <seconds> [--seed N] [--timeout S] [--max-len N]
//! drive <target> --replay FILE...      run inputs once (reproduce a finding)
//! drive <target> --minimize FILE       shrink a crashing input, print it
//! ```
//!
//! For each target it first runs every file of `corpus/<target>/`, then, until the time is up,
//! mutates pool entries (bit flips, byte edits, inserts, deletes, chunk copies, splices, KBNF
//! dictionary tokens) with a seeded generator and runs them. A panic is a finding: the input is
//! saved to `artifacts/<target>/crash-<hash>` (one per distinct panic location) and the exit status
//! is 1. An execution that runs longer than `--timeout` seconds (default 20) is saved as
//! `timeout-<hash>` and the driver exits with status 3.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use structout_fuzz::{Target, TARGETS};

/// Tokens of the KBNF language, inserted by the dictionary mutator.
const KBNF_DICT: &[&str] = &[
    "start",
    " ::= ",
    ";",
    "|",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "*",
    "+",
    "?",
    "{2,5}",
    "{3}",
    "{1,}",
    "{0,1000000}",
    "'a'",
    "\"b\"",
    "''",
    "#\"",
    "#\"[a-z]+\"",
    "#\"(a|b)*a(a|b){12}\"",
    "except!(",
    "except!('\\n\\n', 20)",
    ", 7)",
    "(* c *)",
    "\\x00",
    "\\xFF",
    "\\u{1F600}",
    "\\u{D800}",
    "\\u{110000}",
    "\\n",
    "\\\\",
    "\\'",
    "\\\"",
    "A",
    "B ::= ",
    "start ::= ",
    " A B",
    "(?-u:\\xFF)",
    "\\b",
    ".",
    "[^a]",
    "é",
    ",",
    "#\"\\\"\"",
    "'\\",
];

fn rng_next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn below(state: &mut u64, n: usize) -> usize {
    (rng_next(state) % n.max(1) as u64) as usize
}

fn fnv(data: &[u8]) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for &b in data {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01B3);
    }
    h
}

fn mutate(data: &mut Vec<u8>, pool: &[Vec<u8>], rng: &mut u64, dict: bool, max_len: usize) {
    let rounds = 1 + below(rng, 4);
    for _ in 0..rounds {
        let len = data.len();
        match below(rng, if dict { 11 } else { 9 }) {
            0 if len > 0 => {
                let i = below(rng, len);
                data[i] ^= 1 << below(rng, 8);
            }
            1 if len > 0 => {
                let i = below(rng, len);
                data[i] = match below(rng, 4) {
                    0 => 0,
                    1 => 0xFF,
                    2 => {
                        let special = b"'\"\\;|(){}[]*+?#!,:=\n ";
                        special[below(rng, special.len())]
                    }
                    _ => rng_next(rng) as u8,
                };
            }
            2 => {
                let i = below(rng, len + 1);
                let n = 1 + below(rng, 4);
                for _ in 0..n {
                    data.insert(i, rng_next(rng) as u8);
                }
            }
            3 if len > 0 => {
                let i = below(rng, len);
                let n = 1 + below(rng, (len - i).min(16));
                data.drain(i..i + n);
            }
            4 if len > 0 => {
                let i = below(rng, len);
                let n = 1 + below(rng, (len - i).min(32));
                let chunk = data[i..i + n].to_vec();
                let at = below(rng, len + 1);
                data.splice(at..at, chunk);
            }
            5 if !pool.is_empty() => {
                let other = &pool[below(rng, pool.len())];
                if !other.is_empty() {
                    let i = below(rng, other.len());
                    let n = 1 + below(rng, (other.len() - i).min(64));
                    let at = below(rng, len + 1);
                    let end = (at + n).min(len);
                    data.splice(at..end, other[i..i + n].iter().copied());
                }
            }
            6 if len > 0 => {
                let i = below(rng, len);
                data[i] = data[i].wrapping_add(if below(rng, 2) == 0 { 1 } else { 255 });
            }
            7 if len > 1 => {
                let n = below(rng, len);
                data.truncate(n.max(1));
            }
            8 => {
                let n = 1 + below(rng, 8);
                for _ in 0..n {
                    data.push(rng_next(rng) as u8);
                }
            }
            9 | 10 => {
                let tok = KBNF_DICT[below(rng, KBNF_DICT.len())].as_bytes();
                let at = below(rng, len + 1);
                if below(rng, 2) == 0 {
                    data.splice(at..at, tok.iter().copied());
                } else {
                    let end = (at + tok.len()).min(len);
                    data.splice(at..end, tok.iter().copied());
                }
            }
            _ => {}
        }
    }
    data.truncate(max_len);
}

/// The last panic's location and message, recorded by the hook.
fn last_panic() -> &'static Mutex<String> {
    static LAST: OnceLock<Mutex<String>> = OnceLock::new();
    LAST.get_or_init(|| Mutex::new(String::new()))
}

thread_local! {
    /// Whether this thread is running a target (panics there are findings, recorded quietly).
    static IN_TARGET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn install_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !IN_TARGET.with(|c| c.get()) {
            return default(info);
        }
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        let loc = info
            .location()
            .map_or("?".to_owned(), |l| format!("{}:{}", l.file(), l.line()));
        *last_panic().lock().unwrap_or_else(|p| p.into_inner()) = format!("{loc}: {msg}");
    }));
}

/// Runs one input; `Some(panic text)` if it panicked.
fn run_one(f: Target, data: &[u8]) -> Option<String> {
    IN_TARGET.with(|c| c.set(true));
    let result = std::panic::catch_unwind(|| f(data));
    IN_TARGET.with(|c| c.set(false));
    match result {
        Ok(()) => None,
        Err(_) => Some(
            last_panic()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        ),
    }
}

fn location(panic: &str) -> &str {
    // "file:line: message" → "file:line"
    let mut parts = panic.splitn(3, ':');
    let file = parts.next().unwrap_or("");
    let line = parts.next().unwrap_or("");
    &panic[..(file.len() + 1 + line.len()).min(panic.len())]
}

/// Shrinks `data` while it still panics at the same location.
fn minimize(f: Target, data: &[u8]) -> Vec<u8> {
    let Some(first) = run_one(f, data) else {
        return data.to_vec();
    };
    let loc = location(&first).to_owned();
    let mut cur = data.to_vec();
    let mut chunk = cur.len().div_ceil(2).max(1);
    let mut tries = 0;
    while chunk >= 1 && tries < 5000 {
        let mut i = 0;
        let mut progress = false;
        while i < cur.len() && tries < 5000 {
            let mut cand = cur.clone();
            cand.drain(i..(i + chunk).min(cur.len()));
            tries += 1;
            if run_one(f, &cand).is_some_and(|p| location(&p) == loc) {
                cur = cand;
                progress = true;
            } else {
                i += chunk;
            }
        }
        if !progress {
            if chunk == 1 {
                break;
            }
            chunk /= 2;
        }
    }
    cur
}

struct Watchdog {
    /// Milliseconds since `epoch` when the current execution started; 0 when idle.
    started: Arc<AtomicU64>,
    current: Arc<Mutex<(String, Vec<u8>)>>,
    epoch: Instant,
}

impl Watchdog {
    fn start(timeout: Duration, artifacts: PathBuf) -> Watchdog {
        let started = Arc::new(AtomicU64::new(0));
        let current = Arc::new(Mutex::new((String::new(), Vec::new())));
        let epoch = Instant::now();
        let (s, c) = (started.clone(), current.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            let t = s.load(Ordering::SeqCst);
            if t == 0 {
                continue;
            }
            let now = epoch.elapsed().as_millis() as u64;
            if now.saturating_sub(t) > timeout.as_millis() as u64 {
                let (target, data) = c.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let dir = artifacts.join(&target);
                let _ = std::fs::create_dir_all(&dir);
                let path = dir.join(format!("timeout-{:016x}", fnv(&data)));
                let _ = std::fs::write(&path, &data);
                eprintln!(
                    "TIMEOUT: {target}: one execution ran over {} s; input saved to {}",
                    timeout.as_secs(),
                    path.display()
                );
                std::process::exit(3);
            }
        });
        Watchdog {
            started,
            current,
            epoch,
        }
    }

    fn enter(&self, target: &str, data: &[u8]) {
        {
            let mut c = self.current.lock().unwrap_or_else(|p| p.into_inner());
            c.0.clear();
            c.0.push_str(target);
            c.1.clear();
            c.1.extend_from_slice(data);
        }
        let now = self.epoch.elapsed().as_millis() as u64;
        self.started.store(now.max(1), Ordering::SeqCst);
    }

    fn leave(&self) {
        self.started.store(0, Ordering::SeqCst);
    }
}

fn load_corpus(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter(|p| p.is_file())
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

struct Config {
    seconds: f64,
    seed: u64,
    timeout: Duration,
    max_len: usize,
    root: PathBuf,
}

/// Fuzzes one target; returns the number of distinct crashes.
fn fuzz_target(name: &str, f: Target, cfg: &Config, dog: &Watchdog) -> usize {
    let corpus_dir = cfg.root.join("corpus").join(name);
    let artifacts = cfg.root.join("artifacts").join(name);
    let mut pool = load_corpus(&corpus_dir);
    let seeds = pool.len();
    if pool.is_empty() {
        pool.push(Vec::new());
    }
    let dict = name == "kbnf_compile";
    let mut rng = cfg.seed ^ fnv(name.as_bytes());
    let mut crashes: HashMap<String, PathBuf> = HashMap::new();
    let mut execs: u64 = 0;
    let mut slowest = Duration::ZERO;
    let t0 = Instant::now();
    let budget = Duration::from_secs_f64(cfg.seconds);
    let record = |data: &[u8], panic: String, crashes: &mut HashMap<String, PathBuf>| {
        let loc = location(&panic).to_owned();
        if crashes.contains_key(&loc) {
            return;
        }
        let _ = std::fs::create_dir_all(&artifacts);
        let path = artifacts.join(format!("crash-{:016x}", fnv(data)));
        let _ = std::fs::write(&path, data);
        eprintln!(
            "CRASH in {name}: {panic}\n  input saved to {}",
            path.display()
        );
        crashes.insert(loc, path);
    };
    let mut i = 0;
    loop {
        let data = if i < seeds {
            pool[i].clone()
        } else {
            if t0.elapsed() >= budget {
                break;
            }
            let mut d = pool[below(&mut rng, pool.len())].clone();
            mutate(&mut d, &pool, &mut rng, dict, cfg.max_len);
            d
        };
        i += 1;
        dog.enter(name, &data);
        let t = Instant::now();
        let result = run_one(f, &data);
        let dt = t.elapsed();
        dog.leave();
        slowest = slowest.max(dt);
        execs += 1;
        if let Some(p) = result {
            record(&data, p, &mut crashes);
        } else if i > seeds && below(&mut rng, 8) == 0 {
            // Without coverage feedback, keep a random share of passing mutants so that mutations
            // accumulate; the pool is bounded.
            if pool.len() < 4096 {
                pool.push(data);
            } else {
                let k = seeds + below(&mut rng, pool.len() - seeds);
                pool[k] = data;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{name}: {execs} execs in {secs:.1} s ({:.0}/s), {seeds} seeds, slowest {:.1} ms, \
         crashes {}",
        execs as f64 / secs.max(1e-9),
        slowest.as_secs_f64() * 1e3,
        crashes.len()
    );
    crashes.len()
}

fn usage() -> ! {
    eprintln!(
        "usage: drive <target|all> <seconds> [--seed N] [--timeout S] [--max-len N]\n       \
         drive <target> --replay FILE...\n       drive <target> --minimize FILE\n\
         targets: {}",
        TARGETS.iter().map(|t| t.0).collect::<Vec<_>>().join(", ")
    );
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        usage();
    }
    install_hook();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let find = |n: &str| TARGETS.iter().find(|t| t.0 == n).map(|t| t.1);
    if args[1] == "--replay" || args[1] == "--minimize" {
        let f = find(&args[0]).unwrap_or_else(|| usage());
        let mut failed = false;
        for file in &args[2..] {
            let data = std::fs::read(file).unwrap_or_else(|e| {
                eprintln!("cannot read {file}: {e}");
                std::process::exit(2)
            });
            if args[1] == "--minimize" {
                let small = minimize(f, &data);
                println!(
                    "{} -> {} bytes: {:?}",
                    data.len(),
                    small.len(),
                    String::from_utf8_lossy(&small)
                );
                let out = format!("{file}.min");
                let _ = std::fs::write(&out, &small);
                println!("written to {out}; panic: {:?}", run_one(f, &small));
                continue;
            }
            match run_one(f, &data) {
                None => println!("{file}: ok"),
                Some(p) => {
                    println!("{file}: PANIC {p}");
                    failed = true;
                }
            }
        }
        std::process::exit(i32::from(failed));
    }
    let seconds: f64 = args[1].parse().unwrap_or_else(|_| usage());
    let mut cfg = Config {
        seconds,
        seed: 0x5EED,
        timeout: Duration::from_secs(20),
        max_len: 4096,
        root,
    };
    let mut k = 2;
    while k < args.len() {
        let val = args.get(k + 1).and_then(|v| v.parse::<u64>().ok());
        match (args[k].as_str(), val) {
            ("--seed", Some(v)) => cfg.seed = v,
            ("--timeout", Some(v)) => cfg.timeout = Duration::from_secs(v),
            ("--max-len", Some(v)) => cfg.max_len = v as usize,
            _ => usage(),
        }
        k += 2;
    }
    let targets: Vec<(&str, Target)> = if args[0] == "all" {
        TARGETS.to_vec()
    } else {
        vec![(args[0].as_str(), find(&args[0]).unwrap_or_else(|| usage()))]
    };
    let dog = Watchdog::start(cfg.timeout, cfg.root.join("artifacts"));
    let mut crashes = 0;
    for (name, f) in targets {
        crashes += fuzz_target(name, f, &cfg, &dog);
    }
    std::process::exit(i32::from(crashes > 0));
}
