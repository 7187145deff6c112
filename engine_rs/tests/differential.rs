//! Differential tests: thousands of random small grammars (rendered to KBNF) and random strings, the
//! engine's recognizer against the reference recognizer in `common/mod.rs`.
//!
//! For each (grammar, string) pair this checks, at every prefix reached:
//! * `is_complete()` equals reference membership;
//! * `allowed_bytes()` equals `{ b | prefix + b is a viable prefix }` (viable = some extension is in
//!   the language), one representative per byte class (or all 256 bytes with `DIFF_EXHAUSTIVE=1`);
//! * `feed_byte(b)` returns exactly the reference viability of `prefix + b`, and leaves the state
//!   unchanged when it returns false;
//! * `feed(whole string)` is atomic and agrees with the reference;
//! * `rollback_to(k)` restores the state at length `k`, and re-feeding gives the same answers;
//! * `reset()` restores the initial state.
//!
//! Grammars whose language is empty, and grammars referring to undefined nonterminals, must be
//! rejected by `Grammar::compile`.
//!
//! Environment: `DIFF_ITERS` (grammars, default 700), `DIFF_SEED` (default 0x5eed), `DIFF_ONLY`
//! (run one iteration index), `DIFF_MAX_LEN` (longest strings, default 20, at most 62),
//! `DIFF_EXHAUSTIVE=1` (check all 256 bytes), `DIFF_VERBOSE=1` (print each
//! grammar). On a mismatch the grammar and string are shrunk and printed with both answers.

mod common;

use std::sync::Arc;

use common::*;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use structout_engine::{EngineError, Grammar, Recognizer};

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => {
            let v = v.trim();
            if let Some(hex) = v.strip_prefix("0x") {
                u64::from_str_radix(hex, 16).expect("bad hex number in env")
            } else {
                v.parse().expect("bad number in env")
            }
        }
        Err(_) => default,
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v == "true")
}

// ---------------------------------------------------------------------------------------------
// Random grammar generation.
// ---------------------------------------------------------------------------------------------

const SPECIAL_LITERALS: &[&[u8]] = &[
    "é".as_bytes(),
    "€".as_bytes(),
    b"\n",
    b"'",
    b"\"",
    b"\\",
    b"\xff",
    b"a\xc3",
    "b😀".as_bytes(),
    b"\t",
];

struct Gen<'r> {
    rng: &'r mut SmallRng,
    n_nts: usize,
    /// Index of the literal-only nonterminal used as an `except!` argument, if any.
    stop: Option<usize>,
    /// "Wide" grammars: long concatenations (many nullable items), big alternations of terminals
    /// (merged into one DFA by the engine) and counts above the engine's linear-expansion limit.
    wide: bool,
}

impl Gen<'_> {
    fn abc(&mut self, min: usize, max: usize) -> Vec<u8> {
        let len = self.rng.gen_range(min..=max);
        (0..len)
            .map(|_| *b"abc".choose(self.rng).unwrap())
            .collect()
    }

    fn literal(&mut self) -> Vec<u8> {
        if self.rng.gen_bool(0.06) {
            let mut v = SPECIAL_LITERALS.choose(self.rng).unwrap().to_vec();
            if self.rng.gen_bool(0.3) {
                v.extend(self.abc(1, 1));
            }
            v
        } else if self.rng.gen_bool(0.1) {
            Vec::new()
        } else {
            self.abc(1, 3)
        }
    }

    fn rx_atom(&mut self, abc_only: bool) -> Rx {
        let k = self.rng.gen_range(0..if abc_only { 3 } else { 9 });
        match k {
            0 => Rx::Char(*['a', 'b', 'c'].choose(self.rng).unwrap()),
            1 => Rx::Set(vec!['a', 'b']),
            2 => {
                let sets: &[&[char]] = &[&['a', 'c'], &['a', 'b', 'c'], &['b']];
                Rx::Set(sets.choose(self.rng).unwrap().to_vec())
            }
            3 => Rx::NotSet(vec!['a']),
            4 => Rx::Dot,
            5 => {
                let sets: &[&[char]] = &[&['a', 'é'], &['b', '€', '😀'], &['a', 'b'], &['\n']];
                Rx::Set(sets.choose(self.rng).unwrap().to_vec())
            }
            6 => {
                let ranges: &[&[(char, char)]] = &[
                    &[('a', 'c')],
                    &[('b', 'z'), ('é', '€')],
                    &[('\u{80}', '\u{10FFFF}')],
                ];
                Rx::Class(
                    ranges.choose(self.rng).unwrap().to_vec(),
                    self.rng.gen_bool(0.4),
                )
            }
            7 => Rx::AsciiDigit,
            _ => Rx::Byte(*[0xff, 0xc3, 0xa9, b'a'].choose(self.rng).unwrap()),
        }
    }

    fn regex(&mut self, depth: u32, abc_only: bool) -> Rx {
        if depth == 0 || self.rng.gen_bool(0.3) {
            return self.rx_atom(abc_only);
        }
        match self.rng.gen_range(0..7) {
            0 | 1 => Rx::Seq(
                (0..self.rng.gen_range(2..=3))
                    .map(|_| self.regex(depth - 1, abc_only))
                    .collect(),
            ),
            2 => Rx::Alt(
                (0..self.rng.gen_range(2..=3))
                    .map(|_| self.regex(depth - 1, abc_only))
                    .collect(),
            ),
            3 => Rx::Star(Box::new(self.regex(depth - 1, abc_only))),
            4 => Rx::Plus(Box::new(self.regex(depth - 1, abc_only))),
            5 => Rx::Opt(Box::new(self.regex(depth - 1, abc_only))),
            _ => {
                let m = self.rng.gen_range(0..=2);
                let max = match self.rng.gen_range(0..3) {
                    0 => Some(m),
                    1 => None,
                    _ => Some(m + self.rng.gen_range(1..=2)),
                };
                Rx::Rep(Box::new(self.regex(depth - 1, abc_only)), m, max)
            }
        }
    }

    fn fixed_regex(&mut self) -> Rx {
        let a = || Box::new(Rx::Char('a'));
        let ab = || Rx::Set(vec!['a', 'b']);
        match self.rng.gen_range(0..4) {
            // [ab]+
            0 => Rx::Plus(Box::new(ab())),
            // a*b?
            1 => Rx::Seq(vec![Rx::Star(a()), Rx::Opt(Box::new(Rx::Char('b')))]),
            // (ab|c){1,3}
            2 => Rx::Rep(
                Box::new(Rx::Alt(vec![
                    Rx::Seq(vec![Rx::Char('a'), Rx::Char('b')]),
                    Rx::Char('c'),
                ])),
                1,
                Some(3),
            ),
            // [^a]b*
            _ => Rx::Seq(vec![
                Rx::NotSet(vec!['a']),
                Rx::Star(Box::new(Rx::Char('b'))),
            ]),
        }
    }

    fn except(&mut self) -> Expr {
        let arg = match self.rng.gen_range(0..4) {
            0 | 1 => ExceptArg::Lit(self.abc(1, 2)),
            2 => loop {
                let rx = self.regex(2, true);
                if !rx.nullable() {
                    break ExceptArg::Regex(rx);
                }
            },
            _ => match self.stop {
                Some(s) => ExceptArg::Ref(s),
                None => ExceptArg::Lit(self.abc(1, 2)),
            },
        };
        let max = if self.rng.gen_bool(0.5) {
            Some(self.rng.gen_range(1..=4))
        } else {
            None
        };
        Expr::Except(arg, max)
    }

    fn atom(&mut self) -> Expr {
        match self.rng.gen_range(0..100) {
            0..=49 => Expr::Lit(self.literal()),
            50..=74 => Expr::Ref(self.rng.gen_range(0..self.n_nts)),
            75..=81 => Expr::Regex(self.fixed_regex()),
            82..=89 => Expr::Regex(self.regex(2, false)),
            _ => self.except(),
        }
    }

    fn expr(&mut self, depth: u32) -> Expr {
        if depth == 0 || self.rng.gen_bool(0.25) {
            return self.atom();
        }
        let sub = |g: &mut Self| Box::new(g.expr(depth - 1));
        let (seq_max, alt_max) = if self.wide { (6, 8) } else { (3, 3) };
        match self.rng.gen_range(0..100) {
            0..=29 => Expr::Seq(
                (0..self.rng.gen_range(2..=seq_max))
                    .map(|_| self.expr(depth - 1))
                    .collect(),
            ),
            30..=39 if self.wide => Expr::Alt(
                (0..self.rng.gen_range(2..=alt_max))
                    .map(|_| self.atom())
                    .collect(),
            ),
            30..=49 => Expr::Alt(
                (0..self.rng.gen_range(2..=alt_max))
                    .map(|_| self.expr(depth - 1))
                    .collect(),
            ),
            50..=54 => Expr::Group(sub(self)),
            55..=60 => Expr::Opt(sub(self)),
            61..=64 => Expr::Bracket(sub(self)),
            65..=70 => Expr::Star(sub(self)),
            71..=73 => Expr::Brace(sub(self)),
            74..=80 => Expr::Plus(sub(self)),
            _ => {
                let (m_max, extra) = if self.wide { (7, 7) } else { (3, 2) };
                let m = self.rng.gen_range(0..=m_max);
                let max = match self.rng.gen_range(0..3) {
                    0 => Some(m),
                    1 => None,
                    _ => Some(m + self.rng.gen_range(1..=extra)),
                };
                Expr::Rep(sub(self), m, max)
            }
        }
    }

    /// Rules for nonterminal `n`, sometimes shaped as left/right/nested recursion.
    fn rules_for(&mut self, n: usize) -> Vec<Expr> {
        let other = self.rng.gen_range(0..self.n_nts);
        match self.rng.gen_range(0..100) {
            // left recursion: N ::= N x | y
            0..=14 => vec![Expr::Seq(vec![Expr::Ref(n), self.expr(1)]), self.expr(1)],
            // right recursion: N ::= x N | y
            15..=29 => vec![Expr::Seq(vec![self.expr(1), Expr::Ref(n)]), self.expr(1)],
            // nested: N ::= x N y | z
            30..=37 => vec![
                Expr::Seq(vec![Expr::Lit(self.abc(1, 1)), Expr::Ref(n), self.expr(1)]),
                self.expr(1),
            ],
            // mutual recursion through another nonterminal
            38..=45 => vec![
                Expr::Seq(vec![self.expr(1), Expr::Ref(other)]),
                Expr::Seq(vec![Expr::Ref(other), self.expr(1)]),
                self.expr(1),
            ],
            _ => (0..self.rng.gen_range(1..=3))
                .map(|_| self.expr(2))
                .collect(),
        }
    }
}

fn random_grammar(rng: &mut SmallRng) -> Gram {
    let n_nts = rng.gen_range(1..=4);
    let with_stop = rng.gen_bool(0.15);
    let mut names: Vec<String> = (0..n_nts)
        .map(|k| {
            if k == 0 {
                "start".to_string()
            } else {
                format!("n{k}")
            }
        })
        .collect();
    let stop = with_stop.then(|| {
        names.push("stop".to_string());
        names.len() - 1
    });
    let style = Style {
        commas: rng.gen_bool(0.2),
        unicode_escapes: rng.gen_bool(0.3),
        comments: rng.gen_bool(0.15),
        double_quotes: rng.gen_bool(0.3),
    };
    let wide = rng.gen_bool(0.25);
    let mut gen = Gen {
        rng,
        n_nts,
        stop,
        wide,
    };
    let mut rules = Vec::new();
    for n in 0..n_nts {
        let rs = gen.rules_for(n);
        // Several rules for one name, or one rule with `|`.
        if rs.len() > 1 && gen.rng.gen_bool(0.5) {
            rules.push((n, Expr::Alt(rs)));
        } else {
            rules.extend(rs.into_iter().map(|r| (n, r)));
        }
    }
    if let Some(s) = stop {
        // Literal-only rules: alternation of concatenations of non-empty {a,b,c} literals.
        let alts: Vec<Expr> = (0..gen.rng.gen_range(1..=2))
            .map(|_| {
                if gen.rng.gen_bool(0.5) {
                    Expr::Seq(vec![Expr::Lit(gen.abc(1, 1)), Expr::Lit(gen.abc(1, 1))])
                } else {
                    Expr::Lit(gen.abc(1, 2))
                }
            })
            .collect();
        rules.push((
            s,
            if alts.len() == 1 {
                alts[0].clone()
            } else {
                Expr::Alt(alts)
            },
        ));
    }
    rules.shuffle(rng);
    // Now and then another nonterminal is the configured start symbol.
    let start = if rng.gen_bool(0.1) {
        rng.gen_range(0..n_nts)
    } else {
        0
    };
    Gram {
        names,
        rules,
        start,
        style,
    }
}

fn random_strings(
    g: &Gram,
    reference: &Reference,
    rng: &mut SmallRng,
    count: usize,
) -> Vec<Vec<u8>> {
    let sampler = Sampler::new(g);
    let mut alphabet: Vec<u8> = b"abcz".to_vec();
    let classes = reference.byte_classes();
    for b in 0..=255u8 {
        if classes[b as usize] == b && !alphabet.contains(&b) {
            alphabet.push(b);
        }
    }
    // Longer strings now and then (counted repetitions above 4 need them).
    let long = env_u64("DIFF_MAX_LEN", 20).min(MAX_REF_LEN as u64) as usize;
    let cap = if rng.gen_bool(0.2) {
        long
    } else {
        12.min(long)
    };
    let mut out = Vec::new();
    for k in 0..count {
        let mut s = match k % 4 {
            0 | 1 => sampler.sentence(rng).unwrap_or_default(),
            2 => {
                // Several sentences back to back (long inputs for recursive grammars).
                let mut s = sampler.sentence(rng).unwrap_or_default();
                while s.len() < cap && rng.gen_bool(0.7) {
                    s.extend(sampler.sentence(rng).unwrap_or_default());
                }
                s
            }
            _ => (0..rng.gen_range(0..6))
                .map(|_| {
                    if rng.gen_bool(0.7) {
                        *b"abc".choose(rng).unwrap()
                    } else {
                        *alphabet.choose(rng).unwrap()
                    }
                })
                .collect(),
        };
        // Mutate some sentences.
        if k % 4 == 1 && !s.is_empty() {
            let at = rng.gen_range(0..s.len());
            match rng.gen_range(0..3) {
                0 => {
                    s.remove(at);
                }
                1 => s.insert(at, *alphabet.choose(rng).unwrap()),
                _ => s[at] = *alphabet.choose(rng).unwrap(),
            }
        }
        s.truncate(cap);
        out.push(s);
    }
    out.sort();
    out.dedup();
    out
}

// ---------------------------------------------------------------------------------------------
// Checking one (grammar, string) pair.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Failure {
    kind: &'static str,
    detail: String,
}

fn fail(kind: &'static str, detail: String) -> Result<(), Failure> {
    Err(Failure { kind, detail })
}

/// A resource-limit error (`max_work_per_byte` etc. on very ambiguous grammars) ends the check of
/// the current string without counting as a mismatch; the run reports how often it happened.
fn limited(r: Result<bool, EngineError>) -> Result<bool, Failure> {
    r.map_err(|e| Failure {
        kind: "limit",
        detail: e.to_string(),
    })
}

struct Checker<'a> {
    reference: &'a mut Reference,
    classes: [u8; 256],
    exhaustive: bool,
}

impl Checker<'_> {
    fn state(&mut self, r: &Recognizer, p: &[u8], when: &str) -> Result<(), Failure> {
        if r.len() != p.len() {
            return fail(
                "len",
                format!(
                    "{when}: after {} len() = {}, expected {}",
                    esc(p),
                    r.len(),
                    p.len()
                ),
            );
        }
        let exp_c = self.reference.complete(p);
        let got_c = r.is_complete();
        if exp_c != got_c {
            return fail(
                "complete",
                format!(
                    "{when}: is_complete() after {}: expected {exp_c}, got {got_c}",
                    esc(p)
                ),
            );
        }
        let exp = self.reference.allowed(p, &self.classes, self.exhaustive);
        let got = allowed(r);
        if exp != got {
            let mut only_exp = [false; 256];
            let mut only_got = [false; 256];
            for b in 0..256 {
                only_exp[b] = exp[b] && !got[b];
                only_got[b] = got[b] && !exp[b];
            }
            return fail(
                "allowed",
                format!(
                    "{when}: allowed_bytes() after {}:\n  expected {}\n  got      {}\n  missing  {}\n  extra    {}",
                    esc(p),
                    fmt_set(&exp),
                    fmt_set(&got),
                    fmt_set(&only_exp),
                    fmt_set(&only_got)
                ),
            );
        }
        let exp_dead = !exp.iter().any(|b| *b);
        if r.is_dead() != exp_dead {
            return fail(
                "dead",
                format!(
                    "{when}: is_dead() after {}: expected {exp_dead}, got {}",
                    esc(p),
                    r.is_dead()
                ),
            );
        }
        Ok(())
    }

    fn check(&mut self, g: &Arc<Grammar>, s: &[u8], rng: &mut SmallRng) -> Result<(), Failure> {
        // 1. Byte by byte; rejected bytes are skipped (the state must be unchanged).
        let mut r = Recognizer::new(g.clone());
        let mut p: Vec<u8> = Vec::new();
        for &b in s {
            self.state(&r, &p, "byte-by-byte")?;
            let mut q = p.clone();
            q.push(b);
            let exp = self.reference.viable(&q);
            let got = limited(r.try_feed_byte(b))?;
            if exp != got {
                return fail(
                    "feed_byte",
                    format!(
                        "feed_byte(0x{b:02x}) after {}: expected {exp}, got {got}",
                        esc(&p)
                    ),
                );
            }
            if got {
                p = q;
            }
        }
        self.state(&r, &p, "byte-by-byte (end)")?;

        // 2. The whole string at once.
        let mut r2 = Recognizer::new(g.clone());
        let exp = self.reference.viable(s);
        let got = limited(r2.try_feed(s))?;
        if exp != got {
            return fail(
                "feed",
                format!(
                    "feed({}) on a fresh recognizer: expected {exp}, got {got}",
                    esc(s)
                ),
            );
        }
        let at: &[u8] = if got { s } else { &[] };
        self.state(&r2, at, "after feed(whole string)")?;

        // 3. Rollback past the end is a no-op; rollback and re-feed.
        r.rollback_to(p.len() + 3);
        self.state(&r, &p, "after rollback_to(len + 3)")?;
        for _ in 0..2 {
            let k = rng.gen_range(0..=p.len());
            r.rollback_to(k);
            self.state(&r, &p[..k], &format!("after rollback_to({k})"))?;
            if !limited(r.try_feed(&p[k..]))? {
                return fail(
                    "rollback",
                    format!(
                        "after rollback_to({k}), feed({}) returned false; the full {} was accepted before",
                        esc(&p[k..]),
                        esc(&p)
                    ),
                );
            }
            self.state(&r, &p, &format!("after rollback_to({k}) and re-feed"))?;
        }

        // 4. History released by compaction changes nothing ahead: a twin compacted after every
        //    byte (keeping a window of 0-2 bytes) agrees with the reference and has the same
        //    canonical state key as the uncompacted recognizer; rollback works inside the window.
        let window = rng.gen_range(0..3usize);
        let mut c = Recognizer::new(g.clone());
        let mut full = Recognizer::new(g.clone());
        let (mut kc, mut kf) = (Vec::new(), Vec::new());
        for (i, &b) in p.iter().enumerate() {
            if !limited(c.try_feed_byte(b))? || !limited(full.try_feed_byte(b))? {
                return fail(
                    "compact",
                    format!("compacted twin refused byte {i} of {}", esc(&p)),
                );
            }
            c.compact_before(c.len().saturating_sub(window));
            self.state(&c, &p[..=i], "compacted twin")?;
            let (a, b2) = (
                c.state_key(&mut kc, 1 << 20),
                full.state_key(&mut kf, 1 << 20),
            );
            if a != b2 || kc != kf {
                return fail(
                    "compact-key",
                    format!("state_key after {} differs once compacted", esc(&p[..=i])),
                );
            }
        }
        if !p.is_empty() && window > 0 {
            let k = p.len() - rng.gen_range(1..=window.min(p.len()));
            if k >= c.horizon() {
                if !c.rollback_to(k) {
                    return fail("compact", format!("rollback_to({k}) refused in the window"));
                }
                self.state(&c, &p[..k], "compacted twin after rollback")?;
            }
        }
        if c.horizon() > 0 && c.rollback_to(0) {
            return fail("compact", "rollback below the horizon succeeded".into());
        }

        // 5. Reset.
        r.reset();
        self.state(&r, &[], "after reset()")?;
        Ok(())
    }
}

/// Compiles the grammar, checks the compile outcome against the reference, and checks each string.
/// Returns the number of strings checked.
fn run_case(
    gram: &Gram,
    strings: &[Vec<u8>],
    exhaustive: bool,
    rng: &mut SmallRng,
    stats: &mut Stats,
) -> Result<usize, (Failure, Vec<u8>)> {
    let text = gram.render();
    let mut reference = Reference::new(gram);
    // Right-linear parts collapsed into terminals, or kept as rules: both against the reference.
    let compiled = compile_with(&text, &gram.names[gram.start], rng.gen_bool(0.5));
    if !reference.productive() {
        return match compiled {
            Ok(_) => Err((
                Failure {
                    kind: "accepted-empty-language",
                    detail: "Grammar::compile accepted a grammar whose language is empty".into(),
                },
                Vec::new(),
            )),
            Err(_) => {
                stats.empty_rejected += 1;
                Ok(0)
            }
        };
    }
    let g = match compiled {
        Ok(g) => g,
        Err(e) => {
            if !reference.has_nonempty() {
                // Language {""}: rejecting it is acceptable (nothing can be generated).
                stats.epsilon_only_rejected += 1;
                return Ok(0);
            }
            return Err((
                Failure {
                    kind: "rejected-valid",
                    detail: format!("Grammar::compile rejected a valid grammar:\n{e}"),
                },
                Vec::new(),
            ));
        }
    };
    let classes = reference.byte_classes();
    let mut checker = Checker {
        reference: &mut reference,
        classes,
        exhaustive,
    };
    for s in strings {
        match checker.check(&g, s, rng) {
            Err(f) if f.kind == "limit" => stats.limit_hits += 1,
            other => other.map_err(|f| (f, s.clone()))?,
        }
    }
    Ok(strings.len())
}

#[derive(Default)]
struct Stats {
    grammars: usize,
    strings: usize,
    empty_rejected: usize,
    epsilon_only_rejected: usize,
    /// Strings whose check stopped at an engine resource limit.
    limit_hits: usize,
}

// ---------------------------------------------------------------------------------------------
// Shrinking.
// ---------------------------------------------------------------------------------------------

fn expr_shrinks(e: &Expr) -> Vec<Expr> {
    let mut out = Vec::new();
    match e {
        Expr::Lit(b) if !b.is_empty() => {
            out.push(Expr::Lit(b[..b.len() - 1].to_vec()));
            out.push(Expr::Lit(b[1..].to_vec()));
        }
        Expr::Lit(_) | Expr::Ref(_) => {}
        Expr::Regex(_) | Expr::Except(..) => out.push(Expr::Lit(b"a".to_vec())),
        Expr::Seq(xs) | Expr::Alt(xs) => {
            out.extend(xs.iter().cloned());
            if xs.len() > 2 {
                for k in 0..xs.len() {
                    let mut ys = xs.clone();
                    ys.remove(k);
                    out.push(if matches!(e, Expr::Seq(_)) {
                        Expr::Seq(ys)
                    } else {
                        Expr::Alt(ys)
                    });
                }
            }
            for k in 0..xs.len() {
                for y in expr_shrinks(&xs[k]) {
                    let mut ys = xs.clone();
                    ys[k] = y;
                    out.push(if matches!(e, Expr::Seq(_)) {
                        Expr::Seq(ys)
                    } else {
                        Expr::Alt(ys)
                    });
                }
            }
        }
        Expr::Group(x)
        | Expr::Opt(x)
        | Expr::Bracket(x)
        | Expr::Star(x)
        | Expr::Brace(x)
        | Expr::Plus(x)
        | Expr::Rep(x, _, _) => {
            out.push((**x).clone());
            let rebuild = |y: Expr| -> Expr {
                let b = Box::new(y);
                match e {
                    Expr::Group(_) => Expr::Group(b),
                    Expr::Opt(_) => Expr::Opt(b),
                    Expr::Bracket(_) => Expr::Bracket(b),
                    Expr::Star(_) => Expr::Star(b),
                    Expr::Brace(_) => Expr::Brace(b),
                    Expr::Plus(_) => Expr::Plus(b),
                    Expr::Rep(_, m, n) => Expr::Rep(b, *m, *n),
                    _ => unreachable!(),
                }
            };
            if let Expr::Rep(_, m, n) = e {
                if *m > 0 {
                    out.push(Expr::Rep(x.clone(), m - 1, n.map(|n| n - 1)));
                }
                if let Some(n) = n {
                    if n > m {
                        out.push(Expr::Rep(x.clone(), *m, Some(n - 1)));
                    }
                }
            }
            for y in expr_shrinks(x) {
                out.push(rebuild(y));
            }
        }
    }
    out
}

fn grammar_shrinks(g: &Gram) -> Vec<Gram> {
    let mut out = Vec::new();
    let protected = |lhs: usize| g.names[lhs] == "stop";
    for k in 0..g.rules.len() {
        let lhs = g.rules[k].0;
        if g.rules.iter().filter(|(l, _)| *l == lhs).count() > 1 {
            let mut h = g.clone();
            h.rules.remove(k);
            out.push(h);
        }
    }
    for k in 0..g.rules.len() {
        if protected(g.rules[k].0) {
            continue;
        }
        for e in expr_shrinks(&g.rules[k].1) {
            let mut h = g.clone();
            h.rules[k].1 = e;
            out.push(h);
        }
    }
    let mut plain = g.clone();
    plain.style = Style::default();
    if plain.render() != g.render() {
        out.insert(0, plain);
    }
    out
}

fn shrink(gram: &Gram, s: &[u8], kind: &str, exhaustive: bool) -> (Gram, Vec<u8>, Failure) {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut stats = Stats::default();
    let mut still_fails = |g: &Gram, s: &[u8]| -> Option<Failure> {
        match run_case(g, &[s.to_vec()], exhaustive, &mut rng, &mut stats) {
            Err((f, _)) if f.kind == kind => Some(f),
            _ => None,
        }
    };
    let mut g = gram.clone();
    let mut s = s.to_vec();
    let mut last = still_fails(&g, &s).unwrap_or(Failure {
        kind: "flaky",
        detail: "the failure did not reproduce with the same string in isolation".into(),
    });
    if last.kind == "flaky" {
        return (g, s, last);
    }
    let mut budget = 3000;
    loop {
        let mut progressed = false;
        // Shorter strings first.
        for k in 0..s.len() {
            let mut t = s.clone();
            t.remove(k);
            if let Some(f) = still_fails(&g, &t) {
                s = t;
                last = f;
                progressed = true;
                break;
            }
        }
        if !progressed {
            for h in grammar_shrinks(&g) {
                budget -= 1;
                if budget == 0 {
                    return (g, s, last);
                }
                if let Some(f) = still_fails(&h, &s) {
                    g = h;
                    last = f;
                    progressed = true;
                    break;
                }
            }
        }
        if !progressed {
            return (g, s, last);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn random_grammars_match_reference() {
    let iters = env_u64("DIFF_ITERS", 700);
    let seed = env_u64("DIFF_SEED", 0x5eed);
    let only = std::env::var("DIFF_ONLY")
        .ok()
        .map(|v| v.parse::<u64>().unwrap());
    let exhaustive = env_flag("DIFF_EXHAUSTIVE");
    let verbose = env_flag("DIFF_VERBOSE");
    let started = std::time::Instant::now();
    let mut stats = Stats::default();
    let mut failures: Vec<String> = Vec::new();
    let mut kinds_seen: Vec<&'static str> = Vec::new();
    for it in 0..iters {
        if only.is_some_and(|o| o != it) {
            continue;
        }
        let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ it);
        let gram = random_grammar(&mut rng);
        if verbose {
            eprintln!("--- iteration {it}\n{}", gram.render());
        }
        let reference = Reference::new(&gram);
        let strings = random_strings(&gram, &reference, &mut rng, 10);
        drop(reference);
        stats.grammars += 1;
        match run_case(&gram, &strings, exhaustive, &mut rng, &mut stats) {
            Ok(n) => stats.strings += n,
            Err((f, s)) => {
                // Report each kind of failure once (shrunk), count the rest.
                let first_of_kind = !kinds_seen.contains(&f.kind);
                if first_of_kind && kinds_seen.len() < 6 {
                    kinds_seen.push(f.kind);
                    let (g2, s2, f2) = shrink(&gram, &s, f.kind, exhaustive);
                    failures.push(format!(
                        "MISMATCH [{}] (iteration {it}, seed {seed:#x})\n--- original grammar:\n{}--- original input: {}\n{}\n--- shrunk grammar:\n{}--- shrunk input: {}\n{}\n",
                        f.kind,
                        gram.render(),
                        esc(&s),
                        f.detail,
                        g2.render(),
                        esc(&s2),
                        f2.detail
                    ));
                    eprintln!("{}", failures.last().unwrap());
                } else {
                    failures.push(format!("MISMATCH [{}] (iteration {it})", f.kind));
                }
            }
        }
    }
    eprintln!(
        "differential: {} grammars, {} strings, {} empty-language grammars rejected, {} {{\"\"}}-only grammars rejected, {} strings stopped by engine limits, {} mismatching grammars, {:.1}s",
        stats.grammars,
        stats.strings,
        stats.empty_rejected,
        stats.epsilon_only_rejected,
        stats.limit_hits,
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} grammars mismatch; first reports:\n{}",
        failures.len(),
        stats.grammars,
        failures
            .iter()
            .filter(|f| f.contains("shrunk"))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn undefined_nonterminals_are_rejected() {
    let mut rng = SmallRng::seed_from_u64(77);
    for _ in 0..200 {
        let mut gram = random_grammar(&mut rng);
        let k = rng.gen_range(0..gram.rules.len());
        if gram.names[gram.rules[k].0] == "stop" {
            continue;
        }
        gram.names.push("undefined_name".into());
        let u = gram.names.len() - 1;
        let rhs = gram.rules[k].1.clone();
        gram.rules[k].1 = if rng.gen_bool(0.5) {
            Expr::Alt(vec![rhs, Expr::Ref(u)])
        } else {
            Expr::Seq(vec![rhs, Expr::Ref(u)])
        };
        let text = gram.render();
        match compile(&text) {
            Ok(_) => panic!("undefined nonterminal accepted:\n{text}"),
            Err(e) => assert!(
                e.contains("undefined_name"),
                "error does not name the undefined nonterminal:\n{text}\n{e}"
            ),
        }
    }
}

#[test]
fn empty_languages_are_rejected() {
    let fixed = [
        "start ::= start 'a';",
        "start ::= 'a' x; x ::= 'b' x;",
        "start ::= x | y; x ::= y 'a'; y ::= x 'b';",
        "start ::= 'a'{2} x; x ::= x;",
        "start ::= (start | 'a' start) 'b'*;",
        "start ::= x+; x ::= 'a' x;",
    ];
    for text in fixed {
        assert!(compile(text).is_err(), "empty language accepted:\n{text}");
    }
    // Random grammars whose start symbol is unproductive.
    let mut rng = SmallRng::seed_from_u64(99);
    let mut found = 0;
    for _ in 0..20_000 {
        let gram = random_grammar(&mut rng);
        let reference = Reference::new(&gram);
        if reference.productive() {
            continue;
        }
        found += 1;
        let text = gram.render();
        assert!(
            compile_with_start(&text, &gram.names[gram.start]).is_err(),
            "empty language accepted (start `{}`):\n{text}",
            gram.names[gram.start]
        );
        if found == 100 {
            break;
        }
    }
    assert!(
        found >= 20,
        "generator produced too few unproductive grammars ({found})"
    );
}

/// The reference's regex matcher agrees with `regex_automata::meta::Regex` on full matches.
#[test]
fn reference_regex_agrees_with_regex_automata() {
    let mut rng = SmallRng::seed_from_u64(5);
    let inputs: Vec<Vec<u8>> = {
        let pieces: Vec<Vec<u8>> = ["a", "b", "c", "z", "\n", "é", "€", "😀", "1"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .chain([vec![0xff], vec![0xc3]])
            .collect();
        (0..300)
            .map(|_| {
                (0..rng.gen_range(0..6))
                    .flat_map(|_| pieces.choose(&mut rng).unwrap().clone())
                    .collect()
            })
            .collect()
    };
    for _ in 0..300 {
        let rx = {
            let mut gen = Gen {
                rng: &mut rng,
                n_nts: 1,
                stop: None,
                wide: false,
            };
            gen.regex(3, false)
        };
        let pattern = format!("^(?:{})$", rx.render());
        // Raw-byte atoms may match invalid UTF-8, as they do in the engine.
        let meta = regex_automata::meta::Builder::new()
            .syntax(regex_automata::util::syntax::Config::new().utf8(false))
            .configure(regex_automata::meta::Config::new().utf8_empty(false))
            .build(&pattern)
            .unwrap_or_else(|e| panic!("bad rendered regex {pattern}: {e}"));
        let nfa = Nfa::new(&rx);
        for w in &inputs {
            assert_eq!(
                nfa.full_match(w),
                meta.is_match(w.as_slice()),
                "reference regex disagrees with regex_automata on {pattern} / {}",
                esc(w)
            );
        }
        // Prefix viability (INF) agrees with brute force over one- and two-scalar extensions.
        for w in inputs.iter().take(60) {
            let viable = nfa.ends(w, 0) & (INF | (1 << w.len())) != 0;
            let mut brute = meta.is_match(w.as_slice());
            'outer: for a in POOL {
                for b in POOL.iter().map(Some).chain([None]) {
                    let mut x = w.clone();
                    x.extend(a.to_string().bytes());
                    if let Some(b) = b {
                        x.extend(b.to_string().bytes());
                    }
                    for c in POOL.iter().map(Some).chain([None]) {
                        let mut y = x.clone();
                        if let Some(c) = c {
                            y.extend(c.to_string().bytes());
                        }
                        if meta.is_match(y.as_slice()) {
                            brute = true;
                            break 'outer;
                        }
                    }
                }
            }
            // Brute force only explores up to three more scalars: it may miss long completions.
            if brute {
                assert!(
                    viable,
                    "reference says dead, brute force found a completion: {pattern} / {}",
                    esc(w)
                );
            }
        }
    }
}

/// Hand-checked answers of the reference itself.
#[test]
fn reference_sanity() {
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // start ::= start 'a' | 'b';   (left recursion)
    let g = Gram {
        names: names(&["start"]),
        rules: vec![(0, seq(vec![nt(0), lit("a")])), (0, lit("b"))],
        start: 0,
        style: Style::default(),
    };
    let mut r = Reference::new(&g);
    assert!(r.complete(b"baaa"));
    assert!(r.viable(b""));
    assert!(!r.complete(b""));
    assert!(!r.viable(b"ab"));
    assert!(!r.viable(b"bb"));
    // start ::= except!('ab', 3) 'b';
    let g = Gram {
        names: names(&["start"]),
        rules: vec![(
            0,
            seq(vec![
                Expr::Except(ExceptArg::Lit(b"ab".to_vec()), Some(3)),
                lit("b"),
            ]),
        )],
        start: 0,
        style: Style::default(),
    };
    let mut r = Reference::new(&g);
    assert!(r.complete(b"b"));
    assert!(r.complete(b"ab")); // except = "a"
    assert!(r.complete(b"ccab"));
    assert!(r.complete(b"cccb"));
    assert!(!r.viable(b"ccccb"));
    assert!(r.viable("é".as_bytes()));
    assert!(r.viable(&"é".as_bytes()[..1]));
    assert!(!r.viable(b"\xff"));
    assert!(r.complete("éab".as_bytes()));
    assert!(!r.viable("éa€".as_bytes())); // 6 bytes before the final 'b'
    assert!(r.complete(b"acb"));
    assert!(!r.viable(b"abb"));
    // start ::= #"[ab]+" 'c' | 'a'{2,3};
    let g = Gram {
        names: names(&["start"]),
        rules: vec![(
            0,
            alt(vec![
                seq(vec![
                    Expr::Regex(Rx::Plus(Box::new(Rx::Set(vec!['a', 'b'])))),
                    lit("c"),
                ]),
                Expr::Rep(Box::new(lit("a")), 2, Some(3)),
            ]),
        )],
        start: 0,
        style: Style::default(),
    };
    let mut r = Reference::new(&g);
    assert!(r.complete(b"abc"));
    assert!(r.complete(b"aa"));
    assert!(r.complete(b"aaa"));
    assert!(r.viable(b"aaaa") && !r.complete(b"aaaa"));
    assert!(!r.viable(b"c"));
    assert_eq!(g.render(), "start ::= #\"[ab]+\" 'c' | 'a'{2,3};\n");
}

/// One compiled grammar serves recognizers on several threads at once.
#[test]
fn grammar_shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Grammar>();
    send::<Recognizer>();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut cases = Vec::new();
    while cases.len() < 30 {
        let gram = random_grammar(&mut rng);
        let mut reference = Reference::new(&gram);
        if !reference.has_nonempty() {
            continue;
        }
        let strings = random_strings(&gram, &reference, &mut rng, 12);
        let expected: Vec<(bool, bool)> = strings.iter().map(|s| reference.status(s)).collect();
        let g = compile_with_start(&gram.render(), &gram.names[gram.start])
            .unwrap_or_else(|e| panic!("{}\n{e}", gram.render()));
        cases.push((g, strings, expected));
    }
    std::thread::scope(|scope| {
        for t in 0..4 {
            let cases = &cases;
            scope.spawn(move || {
                for _ in 0..20 {
                    for (g, strings, expected) in cases {
                        for (k, s) in strings.iter().enumerate().skip(t % 2) {
                            let mut r = Recognizer::new(g.clone());
                            let got = (r.feed(s), r.is_complete());
                            let (viable, complete) = expected[k];
                            assert_eq!(got.0, viable, "thread {t}: feed({})", esc(s));
                            if viable {
                                assert_eq!(got.1, complete, "thread {t}: complete({})", esc(s));
                            }
                        }
                    }
                }
            });
        }
    });
}

/// Counted repetitions far above the engine's linear-expansion limit, against a closed-form
/// recognizer: `(t1 | t2 | ...){m,n}` over a finite token set.
#[test]
fn large_counted_repetitions() {
    /// `(viable, complete)` of every prefix `w[..l]` (index `l`) for "a concatenation of k
    /// tokens, m <= k <= n".
    fn token_reps(tokens: &[&[u8]], m: usize, n: Option<usize>, w: &[u8]) -> Vec<(bool, bool)> {
        let cap = n.unwrap_or(w.len() + m + 1);
        let longest = tokens.iter().map(|t| t.len()).max().unwrap();
        // counts[i][c]: c tokens can end exactly at byte i (c <= cap).
        let mut counts: Vec<Vec<bool>> = vec![vec![false; cap + 1]; w.len() + 1];
        counts[0][0] = true;
        for i in 0..w.len() {
            for c in 0..cap {
                if counts[i][c] {
                    for t in tokens {
                        if w[i..].starts_with(t) {
                            counts[i + t.len()][c + 1] = true;
                        }
                    }
                }
            }
        }
        (0..=w.len())
            .map(|l| {
                let complete = (m..=cap).any(|c| counts[l][c]);
                // Or some count c < cap ends at i and w[i..l] is a proper prefix of a token.
                let inside = (l.saturating_sub(longest)..=l).any(|i| {
                    (0..cap).any(|c| {
                        counts[i][c]
                            && tokens
                                .iter()
                                .any(|t| t.len() > l - i && t.starts_with(&w[i..l]))
                    })
                });
                (complete || inside, complete)
            })
            .collect()
    }
    /// `(grammar, tokens, m, n)`.
    type Case = (&'static str, &'static [&'static [u8]], usize, Option<usize>);
    let cases: &[Case] = &[
        ("start ::= 'a'{100};", &[b"a"], 100, Some(100)),
        ("start ::= 'a'{100,200};", &[b"a"], 100, Some(200)),
        ("start ::= 'a'{37,};", &[b"a"], 37, None),
        ("start ::= 'a'{0,129};", &[b"a"], 0, Some(129)),
        ("start ::= ('a' | 'bc'){5,40};", &[b"a", b"bc"], 5, Some(40)),
        (
            "start ::= ('ab' | 'a' | 'ba'){17,33};",
            &[b"ab", b"a", b"ba"],
            17,
            Some(33),
        ),
        ("start ::= ('x' | 'xx'){9};", &[b"x", b"xx"], 9, Some(9)),
        ("start ::= #\"[ab]\"{64,65};", &[b"a", b"b"], 64, Some(65)),
        (
            "start ::= ('a' 'b'?){6,1000};",
            &[b"a", b"ab"],
            6,
            Some(1000),
        ),
    ];
    let mut rng = SmallRng::seed_from_u64(12);
    for (text, tokens, m, n) in cases {
        let g = compile(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let hi = n.unwrap_or(*m) + 10;
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for k in [
            0,
            1,
            m.saturating_sub(1),
            *m,
            m + 1,
            hi - 11,
            hi - 10,
            hi - 9,
            hi,
        ] {
            // k random tokens, plus a copy with one byte changed.
            let w: Vec<u8> = (0..k)
                .flat_map(|_| tokens[rng.gen_range(0..tokens.len())].to_vec())
                .collect();
            let mut bad = w.clone();
            if !bad.is_empty() {
                let at = rng.gen_range(0..bad.len());
                bad[at] = *b"abcx".choose(&mut rng).unwrap();
            }
            inputs.push(w);
            inputs.push(bad);
        }
        for w in &inputs {
            let expected = token_reps(tokens, *m, *n, w);
            let mut r = Recognizer::new(g.clone());
            assert_eq!(r.is_complete(), expected[0].1, "{text}: empty input");
            for (i, &b) in w.iter().enumerate() {
                let (viable, complete) = expected[i + 1];
                let got = r.feed_byte(b);
                assert_eq!(got, viable, "{text}: feed_byte at {i} of {}", esc(w));
                if !viable {
                    break;
                }
                let c = r.is_complete();
                assert_eq!(c, complete, "{text}: complete after {}", esc(&w[..=i]));
            }
        }
    }
}

/// Regex terminals beyond the generator's alphabet (Unicode classes, flags, escapes) accept
/// exactly what `regex_automata::meta::Regex` matches in full.
#[test]
fn regex_terminals_agree_with_regex_crate() {
    let patterns = [
        r"\d+",
        r"\w+@\w+\.com",
        r"\p{Greek}+",
        r"[^\x00-\x7F]+",
        r"(?i)abc|xyz",
        r"[a-c&&b-d]+",
        r"a{2,5}?",
        r"(?s).{0,3}",
        r".{2}",
        r"[\u{e9}-\u{20ac}]*z",
        r"\s*[\[\]]\s*",
        r"(?:\\.|[^\\\x22])*",
        r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
        r"\x41\u{3b1}\t",
        r"(?-u:\xff)[\x80-\xbf]?",
    ];
    let pieces: Vec<Vec<u8>> = [
        "a", "b", "c", "x", "y", "z", "A", "B", "Z", "0", "7", "٣", "α", "Ω", "é", "€", "😀", "@",
        ".com", " ", "\t", "\n", "[", "]", "\\", "\"", "-", "+", "e", "E", ".",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .chain([vec![0xff], vec![0x80], vec![0xc3]])
    .collect();
    let mut rng = SmallRng::seed_from_u64(21);
    let mut matched = 0;
    for p in patterns {
        let g = compile(&format!("start ::= #\"{}\";", p.replace('"', "\\\"")))
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        let meta = regex_automata::meta::Regex::builder()
            .syntax(regex_automata::util::syntax::Config::new().utf8(false))
            .build(&format!("^(?:{p})$"))
            .unwrap();
        for _ in 0..3000 {
            let w: Vec<u8> = (0..rng.gen_range(0..6))
                .flat_map(|_| pieces.choose(&mut rng).unwrap().clone())
                .collect();
            let exp = meta.is_match(w.as_slice());
            let mut r = Recognizer::new(g.clone());
            let got = r.feed(&w) && r.is_complete();
            assert_eq!(got, exp, "pattern {p} on {}", esc(&w));
            matched += exp as usize;
        }
    }
    assert!(matched > 2000, "too few matching samples: {matched}");
}
