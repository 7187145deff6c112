//! Lowering the KBNF AST to plain BNF: anonymous groups, options, repetitions and `except!` become
//! named nonterminals, terminals are interned, regexes are compiled to DFAs.

use rustc_hash::FxHashMap;

use super::bnf::{AnyOrderSpec, Bnf, ExceptTerm, RegexTerm, Sym, UniqueCounts};
use crate::dfa::{escape_bytes, CharCount, Dfa, DfaError, PATTERN_BYTES_PER_LIMIT};
use crate::error::{Diagnostic, ErrorKind, Span};
use crate::kbnf::ast::{Expr, ExprKind, GrammarAst, MemberKind};
use crate::options::CompileOptions;

/// Repetition counts up to this are expanded as plain alternatives; larger ones use the
/// logarithmic-size construction of [`Lowerer::upto`].
const LINEAR_REPEAT: u32 = 4;

pub fn lower(ast: &GrammarAst, opts: &CompileOptions) -> Result<Bnf, Vec<Diagnostic>> {
    let mut user_exprs: FxHashMap<String, Vec<&Expr>> = FxHashMap::default();
    for rule in &ast.rules {
        user_exprs
            .entry(rule.name.clone())
            .or_default()
            .push(&rule.expr);
    }
    let mut lw = Lowerer {
        bnf: Bnf::default(),
        user_exprs,
        user: FxHashMap::default(),
        opts,
        diags: Vec::new(),
        exact_memo: FxHashMap::default(),
        upto_memo: FxHashMap::default(),
        word_sets: FxHashMap::default(),
        excepts: FxHashMap::default(),
    };
    // Declare user nonterminals in order of first definition; `start` (configured) must exist.
    for rule in &ast.rules {
        if !lw.user.contains_key(&rule.name) {
            let id = lw.bnf.add_nt(rule.name.clone());
            lw.user.insert(rule.name.clone(), id);
        }
    }
    let start = match lw.user.get(&opts.start) {
        Some(&id) => id,
        None => {
            let known: Vec<&str> = ast.rules.iter().map(|r| r.name.as_str()).take(5).collect();
            let span = ast.rules.first().map_or(Span::default(), |r| r.name_span);
            let hint = if known.is_empty() {
                format!("write a rule `{} ::= ...;`", opts.start)
            } else {
                format!(
                    "define `{} ::= ...;` or choose another start symbol (rules here: {})",
                    opts.start,
                    known.join(", ")
                )
            };
            return Err(vec![Diagnostic::new(
                ErrorKind::Semantic,
                span,
                format!("the start symbol `{}` is not defined", opts.start),
            )
            .hint(hint)]);
        }
    };
    lw.bnf.start = start;
    for rule in &ast.rules {
        let id = lw.user[&rule.name];
        let alts = lw.alternatives(&rule.expr);
        lw.bnf.rules[id as usize].extend(alts);
    }
    if lw.diags.is_empty() {
        Ok(lw.bnf)
    } else {
        Err(lw.diags)
    }
}

struct Lowerer<'a> {
    bnf: Bnf,
    user_exprs: FxHashMap<String, Vec<&'a Expr>>,
    user: FxHashMap<String, u32>,
    opts: &'a CompileOptions,
    diags: Vec<Diagnostic>,
    exact_memo: FxHashMap<(Sym, u32), u32>,
    upto_memo: FxHashMap<(Sym, u32), u32>,
    /// `json_string_except!` terminals by their sorted, distinct words.
    word_sets: FxHashMap<Vec<String>, u32>,
    /// Unbounded `except!` terminals by their argument's regex (a structural tag's free text
    /// uses one twice: after the last island and before each).
    excepts: FxHashMap<String, u32>,
}

impl<'a> Lowerer<'a> {
    /// The alternatives an expression stands for, each a symbol sequence.
    fn alternatives(&mut self, e: &Expr) -> Vec<Vec<Sym>> {
        match &e.kind {
            ExprKind::Alt(items) => items.iter().flat_map(|i| self.alternatives(i)).collect(),
            _ => vec![self.sequence(e)],
        }
    }

    /// A single symbol sequence for an expression (alternations inside become nonterminals).
    fn sequence(&mut self, e: &Expr) -> Vec<Sym> {
        let mut out = Vec::new();
        self.sequence_into(e, &mut out);
        out
    }

    /// [`Lowerer::sequence`], appended to `out` (one vector for a whole concatenation).
    fn sequence_into(&mut self, e: &Expr, out: &mut Vec<Sym>) {
        match &e.kind {
            ExprKind::Concat(items) => items.iter().for_each(|i| self.sequence_into(i, out)),
            ExprKind::Literal(b) if b.is_empty() => {}
            _ => out.push(self.symbol(e)),
        }
    }

    /// Exactly one symbol for an expression.
    fn symbol(&mut self, e: &Expr) -> Sym {
        match &e.kind {
            ExprKind::Literal(b) => {
                if b.is_empty() {
                    let nt = self.bnf.add_nt("''".into());
                    self.bnf.rules[nt as usize].push(Vec::new());
                    Sym::Nt(nt)
                } else {
                    Sym::Lit(self.bnf.intern_literal(b))
                }
            }
            ExprKind::Regex(p) => self.regex(p, e.span),
            ExprKind::Nonterminal(name) => match self.user.get(name) {
                Some(&id) => Sym::Nt(id),
                None => {
                    let hint = match self.closest_name(name) {
                        Some(c) => {
                            format!("did you mean `{c}`? Otherwise define `{name} ::= ...;`")
                        }
                        None => format!("define it with `{name} ::= ...;`"),
                    };
                    self.diags.push(
                        Diagnostic::new(
                            ErrorKind::Semantic,
                            e.span,
                            format!("undefined nonterminal `{name}`"),
                        )
                        .hint(hint),
                    );
                    Sym::Nt(self.bnf.start)
                }
            },
            ExprKind::Except { arg, max } => self.except(arg, *max, e.span),
            ExprKind::Len {
                arg,
                min,
                max,
                json,
            } => self.len(arg, *min, *max, *json, e.span),
            ExprKind::JsonStringExcept(words) => self.json_string_except(words, e.span),
            ExprKind::AnyOrder {
                sep,
                members,
                counts,
            } => self.any_order(sep.as_deref(), members, *counts, e.span),
            ExprKind::Unique {
                sep,
                members,
                min,
                max,
            } => self.unique(sep.as_deref(), members, (*min, *max), e.span),
            ExprKind::Concat(_) | ExprKind::Alt(_) => {
                let alts = self.alternatives(e);
                let nt = self.bnf.add_nt(format!("group@{}", e.span.start));
                self.bnf.rules[nt as usize] = alts;
                Sym::Nt(nt)
            }
            ExprKind::Repeat { expr, min, max } => {
                let x = self.symbol(expr);
                self.repeat(x, *min, *max, e.span)
            }
        }
    }

    fn closest_name(&self, name: &str) -> Option<String> {
        let lower = name.to_ascii_lowercase();
        self.user
            .keys()
            .filter(|k| {
                let kl = k.to_ascii_lowercase();
                kl == lower || kl.contains(&lower) || lower.contains(&kl)
            })
            .min_by_key(|k| k.len())
            .cloned()
    }

    fn regex(&mut self, pattern: &str, span: Span) -> Sym {
        if let Some(&id) = self.bnf.regex_ids.get(pattern) {
            return Sym::Regex(id);
        }
        match Dfa::from_regex(pattern, self.opts.dfa_size_limit) {
            Ok(dfa) => {
                let id = self.bnf.regexes.len() as u32;
                self.bnf.regexes.push(RegexTerm {
                    pattern: pattern.to_owned(),
                    dfa,
                });
                self.bnf.regex_ids.insert(pattern.to_owned(), id);
                Sym::Regex(id)
            }
            Err(err) => {
                self.diags.push(dfa_diag(err, span, "regex terminal"));
                Sym::Nt(self.bnf.start)
            }
        }
    }

    fn except(&mut self, arg: &Expr, max: Option<u32>, span: Span) -> Sym {
        let regex = match self.arg_regex(arg, 0, "except!") {
            Ok(r) => r,
            Err(d) => {
                self.diags.push(d);
                return Sym::Nt(self.bnf.start);
            }
        };
        if max.is_none() {
            if let Some(&id) = self.excepts.get(&regex) {
                return Sym::Regex(id);
            }
        }
        match Dfa::except(&regex, self.opts.dfa_size_limit) {
            Ok(dfa) if max.is_none() => {
                // Unbounded: an ordinary regex terminal (no byte count to keep), so it merges
                // with its neighbours, its masks take the free-text shortcuts and its states
                // key the mask cache without a position.
                let id = self.bnf.add_regex(format!("except!({regex})"), dfa);
                self.excepts.insert(regex, id);
                Sym::Regex(id)
            }
            Ok(dfa) => {
                let id = self.bnf.excepts.len() as u32;
                self.bnf.excepts.push(ExceptTerm { dfa, max });
                // `except!` always sits alone in its own production so that an item's start
                // position is where the excepted text began (the recognizer derives the byte count
                // for the length bound from it).
                let nt = self.bnf.add_nt(format!("except@{}", span.start));
                self.bnf.rules[nt as usize].push(vec![Sym::Except(id)]);
                Sym::Nt(nt)
            }
            Err(err) => {
                self.diags.push(dfa_diag(err, arg.span, "except! argument"));
                Sym::Nt(self.bnf.start)
            }
        }
    }

    /// `len!(arg, min, max)` / `json_len!(arg, min, max)`: an ordinary regex terminal whose DFA is
    /// the product of `arg`'s DFA and a character counter.
    fn len(&mut self, arg: &Expr, min: u32, max: u32, json: bool, span: Span) -> Sym {
        let (construct, count) = if json {
            ("json_len!", CharCount::JsonBody)
        } else {
            ("len!", CharCount::Utf8)
        };
        let regex = match self.arg_regex(arg, 0, construct) {
            Ok(r) => r,
            Err(d) => {
                self.diags.push(d);
                return Sym::Nt(self.bnf.start);
            }
        };
        let limit = self.opts.dfa_size_limit;
        let built = match Dfa::prebuilt_counted(&regex, count, min, max, limit) {
            Some(dfa) => Ok(dfa),
            None => Dfa::from_regex(&regex, limit)
                .map_err(|err| dfa_diag(err, arg.span, &format!("{construct} argument")))
                .and_then(|e| {
                    Dfa::count_chars(&e, count, min, max, limit)
                        .map_err(|err| dfa_diag(err, span, construct))
                }),
        };
        match built {
            Ok(dfa) => {
                let id = self
                    .bnf
                    .add_regex(format!("{construct}@{}({min}, {max})", span.start), dfa);
                Sym::Regex(id)
            }
            Err(d) => {
                self.diags.push(d);
                Sym::Nt(self.bnf.start)
            }
        }
    }

    /// `json_string_except!(words)`: a regex terminal built from the words' trie (one per
    /// distinct word set).
    fn json_string_except(&mut self, words: &[String], span: Span) -> Sym {
        let mut sorted = words.to_vec();
        sorted.sort();
        sorted.dedup();
        if let Some(&id) = self.word_sets.get(&sorted) {
            return Sym::Regex(id);
        }
        match Dfa::json_string_except(&sorted, self.opts.dfa_size_limit) {
            Ok(dfa) => {
                let description = format!("json_string_except!@{}", span.start);
                let id = self.bnf.add_regex(description, dfa);
                self.word_sets.insert(sorted, id);
                Sym::Regex(id)
            }
            Err(err) => {
                self.diags.push(dfa_diag(err, span, "json_string_except!"));
                Sym::Nt(self.bnf.start)
            }
        }
    }

    /// `any_order!`: a nonterminal of its own whose one production lists the separator (if any)
    /// and the members, a placeholder that normalization leaves in place (only renaming the
    /// symbols) and [`super::Lnf::from_bnf`] replaces by the parametric productions.
    fn any_order(
        &mut self,
        sep: Option<&Expr>,
        members: &[(Expr, MemberKind)],
        counts: Option<(u32, u32)>,
        span: Span,
    ) -> Sym {
        let mut placeholder: Vec<Sym> = sep.map(|e| self.symbol(e)).into_iter().collect();
        placeholder.extend(members.iter().map(|(e, _)| self.symbol(e)));
        let nt = self.new_nt(format!("any_order@{}", span.start), vec![placeholder]);
        self.bnf.any_orders.push(AnyOrderSpec {
            nt,
            sep: sep.is_some(),
            kinds: members.iter().map(|(_, k)| *k).collect(),
            unique: None,
            counts: counts.map(|(min, max)| UniqueCounts { min, max }),
            span,
        });
        Sym::Nt(nt)
    }

    /// `unique!`: a placeholder nonterminal like [`Lowerer::any_order`]'s (separator, then the
    /// members in order, all kept as written), which [`super::Lnf::from_bnf`] replaces by the
    /// parametric productions that compare the items.
    fn unique(
        &mut self,
        sep: Option<&Expr>,
        members: &[Expr],
        (min, max): (u32, Option<u32>),
        span: Span,
    ) -> Sym {
        let mut placeholder: Vec<Sym> = sep.map(|e| self.symbol(e)).into_iter().collect();
        placeholder.extend(members.iter().map(|e| self.symbol(e)));
        let nt = self.new_nt(format!("unique@{}", span.start), vec![placeholder]);
        self.bnf.any_orders.push(AnyOrderSpec {
            nt,
            sep: sep.is_some(),
            kinds: vec![MemberKind::Once; members.len()],
            unique: Some(UniqueCounts {
                min,
                max: max.unwrap_or(u32::MAX),
            }),
            counts: None,
            span,
        });
        Sym::Nt(nt)
    }

    /// The regex for the argument of `except!` / `len!` / `json_len!` (`construct`): a literal, a
    /// regex terminal, or a nonterminal whose rules are only literals combined by concatenation
    /// and alternation.
    fn arg_regex(&self, arg: &Expr, depth: usize, construct: &str) -> Result<String, Diagnostic> {
        let bad = |span: Span, what: &str| {
            let usage = if construct == "except!" {
                "except!(X)".to_owned()
            } else {
                format!("{construct}(X, min, max)")
            };
            Diagnostic::new(
                ErrorKind::Semantic,
                span,
                format!("invalid {construct} argument: {what}"),
            )
            .hint(format!(
                "{usage} takes a literal, a regex terminal, or a nonterminal whose rules contain \
                 only literals combined by concatenation and alternation"
            ))
        };
        match &arg.kind {
            ExprKind::Literal(b) if b.is_empty() && construct == "except!" => {
                Err(bad(arg.span, "the empty string"))
            }
            ExprKind::Literal(b) => Ok(escape_bytes(b)),
            ExprKind::Regex(p) if depth == 0 => Ok(p.clone()),
            ExprKind::Regex(_) => Err(bad(arg.span, "a regex inside a nonterminal")),
            ExprKind::Concat(items) => {
                let parts: Result<Vec<_>, _> = items
                    .iter()
                    .map(|i| {
                        self.arg_regex(i, depth + 1, construct)
                            .map(|r| format!("(?:{r})"))
                    })
                    .collect();
                Ok(parts?.concat())
            }
            ExprKind::Alt(items) => {
                let parts: Result<Vec<_>, _> = items
                    .iter()
                    .map(|i| self.arg_regex(i, depth + 1, construct))
                    .collect();
                Ok(format!("(?:{})", parts?.join("|")))
            }
            ExprKind::Nonterminal(name) if depth == 0 => {
                let Some(exprs) = self.user_exprs.get(name) else {
                    return Err(Diagnostic::new(
                        ErrorKind::Semantic,
                        arg.span,
                        format!("undefined nonterminal `{name}`"),
                    ));
                };
                let parts: Result<Vec<_>, _> = exprs
                    .iter()
                    .map(|e| self.arg_regex(e, depth + 1, construct))
                    .collect();
                let parts = parts.map_err(|d| {
                    bad(
                        arg.span,
                        &format!("`{name}` contains something else: {}", d.message),
                    )
                })?;
                Ok(format!("(?:{})", parts.join("|")))
            }
            ExprKind::Nonterminal(_) => Err(bad(arg.span, "a nonterminal inside a nonterminal")),
            ExprKind::Except { .. } => Err(bad(arg.span, "a nested except!")),
            ExprKind::Len { json: false, .. } => Err(bad(arg.span, "a nested len!")),
            ExprKind::Len { json: true, .. } => Err(bad(arg.span, "a nested json_len!")),
            ExprKind::Repeat { .. } => Err(bad(arg.span, "a repetition (use a regex terminal)")),
            ExprKind::JsonStringExcept(_) => Err(bad(arg.span, "a json_string_except!")),
            ExprKind::AnyOrder { .. } => Err(bad(arg.span, "an any_order!")),
            ExprKind::Unique { .. } => Err(bad(arg.span, "a unique!")),
        }
    }

    fn new_nt(&mut self, name: String, alts: Vec<Vec<Sym>>) -> u32 {
        let nt = self.bnf.add_nt(name);
        self.bnf.rules[nt as usize] = alts;
        nt
    }

    /// `x{min,max}` with a grammar of size O(log max).
    fn repeat(&mut self, x: Sym, min: u32, max: Option<u32>, span: Span) -> Sym {
        let at = span.start;
        match (min, max) {
            (0, Some(1)) => Sym::Nt(self.new_nt(format!("opt@{at}"), vec![vec![], vec![x]])),
            (0, None) => {
                let nt = self.bnf.add_nt(format!("star@{at}"));
                self.bnf.rules[nt as usize] = vec![vec![], vec![Sym::Nt(nt), x]];
                Sym::Nt(nt)
            }
            (1, None) => {
                let nt = self.bnf.add_nt(format!("plus@{at}"));
                self.bnf.rules[nt as usize] = vec![vec![x], vec![Sym::Nt(nt), x]];
                Sym::Nt(nt)
            }
            (m, None) => {
                let exact = self.exact(x, m);
                let star = self.repeat(x, 0, None, span);
                Sym::Nt(self.new_nt(format!("rep@{at}"), vec![vec![Sym::Nt(exact), star]]))
            }
            (m, Some(n)) => {
                let mut seq = Vec::new();
                if m > 0 {
                    seq.push(Sym::Nt(self.exact(x, m)));
                }
                if n > m {
                    seq.push(Sym::Nt(self.upto(x, n - m)));
                }
                Sym::Nt(self.new_nt(format!("rep@{at}"), vec![seq]))
            }
        }
    }

    /// A nonterminal for exactly `k >= 1` copies of `x`, built by doubling.
    fn exact(&mut self, x: Sym, k: u32) -> u32 {
        if let Some(&nt) = self.exact_memo.get(&(x, k)) {
            return nt;
        }
        let body = if k <= LINEAR_REPEAT {
            vec![vec![x; k as usize]]
        } else {
            let half = Sym::Nt(self.exact(x, k / 2));
            let mut seq = vec![half, half];
            if k % 2 == 1 {
                seq.push(x);
            }
            vec![seq]
        };
        let nt = self.new_nt(format!("exact{k}"), body);
        self.exact_memo.insert((x, k), nt);
        nt
    }

    /// A nonterminal for 0..=k copies of `x` (k >= 1), unambiguous and of size O(log k):
    /// with `2^j <= k + 1 < 2^(j+1)`, counts below `2^j` are a binary choice per bit, the rest
    /// are `x^(2^j)` followed by `0..=k-2^j` copies.
    fn upto(&mut self, x: Sym, k: u32) -> u32 {
        if let Some(&nt) = self.upto_memo.get(&(x, k)) {
            return nt;
        }
        let alts = if k <= LINEAR_REPEAT {
            (0..=k).map(|i| vec![x; i as usize]).collect()
        } else {
            let j = 31 - (k + 1).leading_zeros(); // 2^j <= k+1
            let low = self.below_pow2(x, j);
            let mut alts = vec![vec![Sym::Nt(low)]];
            let p = 1u32 << j;
            if k >= p {
                let mut seq = vec![Sym::Nt(self.exact(x, p))];
                if k > p {
                    seq.push(Sym::Nt(self.upto(x, k - p)));
                }
                alts.push(seq);
            }
            alts
        };
        let nt = self.new_nt(format!("upto{k}"), alts);
        self.upto_memo.insert((x, k), nt);
        nt
    }

    /// 0..=2^j - 1 copies of `x`: `B(j) = x^(2^(j-1)) B(j-1) | B(j-1)`, `B(0) = ε`.
    fn below_pow2(&mut self, x: Sym, j: u32) -> u32 {
        let k = (1u32 << j) - 1;
        if let Some(&nt) = self.upto_memo.get(&(x, k)) {
            return nt;
        }
        let alts = if j == 0 {
            vec![vec![]]
        } else {
            let lower = Sym::Nt(self.below_pow2(x, j - 1));
            let high = Sym::Nt(self.exact(x, 1 << (j - 1)));
            vec![vec![high, lower], vec![lower]]
        };
        let nt = self.new_nt(format!("upto{k}"), alts);
        self.upto_memo.insert((x, k), nt);
        nt
    }
}

pub(crate) fn dfa_diag(err: DfaError, span: Span, what: &str) -> Diagnostic {
    match err {
        DfaError::Syntax(m) => {
            Diagnostic::new(ErrorKind::Regex, span, format!("invalid {what}: {m}")).hint(
                "regexes use Rust `regex` syntax; look-around and backreferences are not supported",
            )
        }
        DfaError::TooBig { limit } => Diagnostic::new(
            ErrorKind::Limit,
            span,
            format!("{what} needs a DFA larger than dfa_size_limit = {limit} bytes"),
        )
        .hint("simplify the regex (bounded repetitions multiply states) or raise `dfa_size_limit`"),
        DfaError::Unsupported(m) => {
            Diagnostic::new(ErrorKind::Regex, span, format!("unsupported {what}: {m}"))
        }
        DfaError::TooLong { len, max, limit } => Diagnostic::new(
            ErrorKind::Limit,
            span,
            format!(
                "{what} is {len} bytes long, over dfa_size_limit / {PATTERN_BYTES_PER_LIMIT} = \
                 {max} bytes (dfa_size_limit = {limit}; parsing needs up to ~350 bytes per \
                 pattern byte)"
            ),
        )
        .hint("split the regex into several terminals or rules, or raise `dfa_size_limit`"),
        DfaError::TooSlow { steps } => Diagnostic::new(
            ErrorKind::Limit,
            span,
            format!(
                "{what} needs more than {steps} construction steps (budget from dfa_size_limit)"
            ),
        )
        .hint("simplify the regex or raise `dfa_size_limit`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kbnf::parser;

    fn lowered(text: &str) -> Bnf {
        let opts = CompileOptions::default();
        lower(&parser::parse(text, opts.max_repetition).unwrap(), &opts).unwrap()
    }

    #[test]
    fn equal_unbounded_excepts_are_one_terminal() {
        // (a structural tag's free text: before each island and after the last one)
        let bnf = lowered("start ::= (r2* except!(r1)); r2 ::= except!(r1) 'T' 'x'; r1 ::= 'T';");
        let excepts: Vec<&RegexTerm> = bnf
            .regexes
            .iter()
            .filter(|r| r.pattern.starts_with("except!"))
            .collect();
        assert_eq!(excepts.len(), 1);
        // Bounded ones keep their own production (the byte count starts there).
        let bnf = lowered("start ::= except!('T', 3) | 'x' except!('T', 3);");
        assert_eq!(bnf.excepts.len(), 2);
    }
}
