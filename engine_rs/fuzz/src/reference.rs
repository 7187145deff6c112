//! A slow, obviously-correct recognizer for generated grammars, used as the oracle.
//!
//! For an input `w` of at most [`MAX_INPUT`] bytes it computes, for every expression, the set of
//! spans `(i, j)` such that `w[i..j]` derives from the expression, as one `u64` bitset of end
//! positions per start position. Nonterminals are the least fixpoint of their rules, so left
//! recursion, nullable rules and ambiguity need no special care. Regex terminals are matched with
//! the `regex` crate (anchored at both ends); `except!` checks UTF-8 validity, the length bound and
//! the absence of the excluded text directly.

use regex::bytes::Regex;

use crate::gen::{contains, ExceptArg, Expr, Gram, Re};

/// Longest input the reference handles (end positions must fit a `u64`).
pub const MAX_INPUT: usize = 63;

type Spans = Vec<u64>;

pub struct Reference<'g> {
    gram: &'g Gram,
    /// Compiled regexes in the order [`Expr::Regex`] / [`ExceptArg::Re`] occur in a pre-order walk.
    regexes: Vec<Regex>,
}

impl<'g> Reference<'g> {
    /// `None` if a generated regex does not compile with the `regex` crate (then the generator,
    /// not the engine, is at fault and the case is skipped).
    pub fn new(gram: &'g Gram) -> Option<Reference<'g>> {
        let mut pats = Vec::new();
        for alts in &gram.rules {
            for e in alts {
                collect_regexes(e, &mut pats);
            }
        }
        let regexes = pats
            .iter()
            .map(|p| Regex::new(&format!(r"\A(?:{p})\z")).ok())
            .collect::<Option<Vec<_>>>()?;
        Some(Reference { gram, regexes })
    }

    /// Whether the start symbol derives any string at all.
    pub fn start_productive(&self) -> bool {
        let n = self.gram.rules.len();
        let mut prod = vec![false; n];
        loop {
            let mut changed = false;
            for i in 0..n {
                if !prod[i] && self.gram.rules[i].iter().any(|e| productive(e, &prod)) {
                    prod[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return prod[0];
            }
        }
    }

    /// Whether `w` is a sentence of the grammar.
    pub fn accepts(&self, w: &[u8]) -> bool {
        assert!(w.len() <= MAX_INPUT);
        let nts = self.fixpoint(w);
        nts[0][0] >> w.len() & 1 == 1
    }

    fn fixpoint(&self, w: &[u8]) -> Vec<Spans> {
        let n = self.gram.rules.len();
        let l = w.len();
        // Every regex's matches, computed once per input.
        let res: Vec<Spans> = self
            .regexes
            .iter()
            .map(|re| all_spans(l, |i, j| re.is_match(&w[i..j])))
            .collect();
        let mut nts: Vec<Spans> = vec![vec![0; l + 1]; n];
        loop {
            let mut changed = false;
            for i in 0..n {
                let mut acc = vec![0u64; w.len() + 1];
                let mut re_idx = 0;
                for (k, alts) in self.gram.rules.iter().enumerate() {
                    for e in alts {
                        if k == i {
                            let s = self.eval(e, w, &nts, &res, &mut re_idx);
                            or_into(&mut acc, &s);
                        } else {
                            skip_regexes(e, &mut re_idx);
                        }
                    }
                }
                let merged: Spans = acc.iter().zip(&nts[i]).map(|(a, b)| a | b).collect();
                if merged != nts[i] {
                    nts[i] = merged;
                    changed = true;
                }
            }
            if !changed {
                return nts;
            }
        }
    }

    fn eval(&self, e: &Expr, w: &[u8], nts: &[Spans], res: &[Spans], re_idx: &mut usize) -> Spans {
        let l = w.len();
        match e {
            Expr::Lit(b) => {
                let mut s = vec![0u64; l + 1];
                for (i, row) in s.iter_mut().enumerate() {
                    if w[i..].starts_with(b) {
                        *row |= 1 << (i + b.len());
                    }
                }
                s
            }
            Expr::Regex(_) => {
                *re_idx += 1;
                res[*re_idx - 1].clone()
            }
            Expr::Nt(k) => nts[*k].clone(),
            Expr::Seq(v) => {
                let mut acc = identity(l);
                for x in v {
                    let s = self.eval(x, w, nts, res, re_idx);
                    acc = compose(&acc, &s);
                }
                acc
            }
            Expr::Alt(v) => {
                let mut acc = vec![0u64; l + 1];
                for x in v {
                    or_into(&mut acc, &self.eval(x, w, nts, res, re_idx));
                }
                acc
            }
            Expr::Opt(x, _) => {
                let mut s = self.eval(x, w, nts, res, re_idx);
                or_into(&mut s, &identity(l));
                s
            }
            Expr::Star(x, _) => star(&self.eval(x, w, nts, res, re_idx)),
            Expr::Plus(x) => {
                let s = self.eval(x, w, nts, res, re_idx);
                compose(&s, &star(&s))
            }
            Expr::Rep(x, m, max) => {
                let s = self.eval(x, w, nts, res, re_idx);
                repeat(&s, *m, *max, l)
            }
            Expr::Except(arg, max) => {
                // forbidden(i, j): the excluded text occurs inside w[i..j].
                let forbidden = |i: usize, j: usize| match arg {
                    ExceptArg::Lit(b) => contains(&w[i..j], b),
                    ExceptArg::Re(_) => {
                        let m = &res[*re_idx];
                        let within = if j == 63 {
                            u64::MAX
                        } else {
                            (1u64 << (j + 1)) - 1
                        };
                        (i..=j).any(|a| m[a] & within != 0)
                    }
                };
                let s = all_spans(l, |i, j| {
                    max.is_none_or(|n| (j - i) as u32 <= n)
                        && std::str::from_utf8(&w[i..j]).is_ok()
                        && !forbidden(i, j)
                });
                if matches!(arg, ExceptArg::Re(_)) {
                    *re_idx += 1;
                }
                s
            }
        }
    }
}

fn productive(e: &Expr, prod: &[bool]) -> bool {
    match e {
        Expr::Lit(_) | Expr::Regex(_) | Expr::Except(..) => true,
        Expr::Nt(k) => prod[*k],
        Expr::Seq(v) => v.iter().all(|x| productive(x, prod)),
        Expr::Alt(v) => v.iter().any(|x| productive(x, prod)),
        Expr::Opt(..) | Expr::Star(..) => true,
        Expr::Plus(x) => productive(x, prod),
        Expr::Rep(x, m, _) => *m == 0 || productive(x, prod),
    }
}

fn collect_regexes(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Regex(r) | Expr::Except(ExceptArg::Re(r), _) => out.push(re_pattern(r)),
        Expr::Lit(_) | Expr::Nt(_) | Expr::Except(ExceptArg::Lit(_), _) => {}
        Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|x| collect_regexes(x, out)),
        Expr::Opt(x, _) | Expr::Star(x, _) | Expr::Plus(x) | Expr::Rep(x, ..) => {
            collect_regexes(x, out)
        }
    }
}

fn skip_regexes(e: &Expr, re_idx: &mut usize) {
    let mut v = Vec::new();
    collect_regexes(e, &mut v);
    *re_idx += v.len();
}

/// The regex as the engine sees it: the text between `#"` and `"`, where `\"` means `"`.
fn re_pattern(r: &Re) -> String {
    r.to_pattern()
}

fn all_spans(l: usize, f: impl Fn(usize, usize) -> bool) -> Spans {
    let mut s = vec![0u64; l + 1];
    for (i, row) in s.iter_mut().enumerate() {
        for j in i..=l {
            if f(i, j) {
                *row |= 1 << j;
            }
        }
    }
    s
}

fn identity(l: usize) -> Spans {
    (0..=l).map(|i| 1u64 << i).collect()
}

fn or_into(a: &mut Spans, b: &Spans) {
    a.iter_mut().zip(b).for_each(|(x, y)| *x |= y);
}

/// `{(i, k) | (i, j) in a, (j, k) in b}`.
fn compose(a: &Spans, b: &Spans) -> Spans {
    let mut out = vec![0u64; a.len()];
    for (i, &row) in a.iter().enumerate() {
        let mut r = row;
        while r != 0 {
            let j = r.trailing_zeros() as usize;
            r &= r - 1;
            out[i] |= b[j];
        }
    }
    out
}

fn star(s: &Spans) -> Spans {
    let mut acc = identity(s.len() - 1);
    loop {
        let mut next = compose(&acc, s);
        or_into(&mut next, &acc);
        if next == acc {
            return acc;
        }
        acc = next;
    }
}

/// `X{m,max}` (`max == None`: unbounded).
fn repeat(s: &Spans, m: u32, max: Option<u32>, l: usize) -> Spans {
    let mut exact = identity(l); // spans of exactly k repetitions
    let mut acc = vec![0u64; l + 1];
    let mut k = 0u32;
    loop {
        if k >= m {
            or_into(&mut acc, &exact);
        }
        if max.is_some_and(|n| k >= n) {
            return acc;
        }
        let next = compose(&exact, s);
        k += 1;
        // Beyond l + 1 repetitions `exact` is empty (non-nullable X) or has stopped growing
        // (nullable X: exact spans only grow), so later k add nothing new once k >= m.
        if k > m && (k as usize) > l + 1 && (next == exact || next.iter().all(|&x| x == 0)) {
            if next.iter().any(|&x| x != 0) {
                or_into(&mut acc, &next);
            }
            return acc;
        }
        exact = next;
    }
}
