//! Normalization of BNF into LNF: no nullable rules (except a flag for the empty sentence), no unit
//! rules, no useless rules, merged literal runs, deduplicated alternatives and nonterminals, and
//! alternations of terminals compiled into one DFA.

use rustc_hash::{FxHashMap, FxHashSet};

use super::bnf::{Bnf, Sym, UniqueCounts, UniqueProductions};
use crate::dfa::{CombineBudget, Dfa, Part, RightLinear};
use crate::error::{Diagnostic, ErrorKind, Span};
use crate::kbnf::ast::MemberKind;
use crate::options::CompileOptions;

/// Productions with more nullable symbols than this are split before nullable elimination, keeping
/// the expansion linear instead of exponential.
const MAX_NULLABLE_PER_PRODUCTION: usize = 3;

/// Normalizes in place; returns whether the start symbol derives the empty string.
pub fn normalize(bnf: &mut Bnf, opts: &CompileOptions) -> Result<bool, Diagnostic> {
    check_size(bnf, opts)?;
    // Lexical merging first: a run of adjacent terminals becomes one terminal, so the recognizer
    // does the work of a lexer inside one DFA instead of creating Earley items per piece.
    let mut merger = Merger::new(opts);
    inline_single_terminals(bnf);
    if opts.regular_terminals {
        collapse_right_linear(bnf, &mut merger);
    }
    merge_terminal_runs(bnf, &mut merger);
    check_any_order_members(bnf)?;
    let start_nullable = eliminate_nullable(bnf);
    check_size(bnf, opts)?;
    remove_useless(bnf);
    if bnf.rules[bnf.start as usize].is_empty() && !start_nullable {
        return Err(Diagnostic::new(
            ErrorKind::Semantic,
            Span::default(),
            format!(
                "the language of `{}` is empty: no finite string matches it",
                opts.start
            ),
        )
        .hint("every recursive rule needs a non-recursive alternative (a base case)"));
    }
    remove_unit_rules(bnf);
    check_size(bnf, opts)?;
    // Inlining creates new literal runs and terminal alternations, so run the trio twice.
    // (`remove_useless` only after a pass changed something: on a reduced grammar it is a no-op,
    // and each call walks every production.)
    for _ in 0..2 {
        let mut changed = merge_literal_runs(bnf);
        changed |= merge_terminal_alternations(bnf, &mut merger);
        changed |= inline_single_terminals(bnf);
        if changed {
            remove_useless(bnf);
        }
    }
    // (removes what its merges make useless itself)
    merge_equal_nonterminals(bnf);
    check_size(bnf, opts)?;
    Ok(start_nullable)
}

/// The separator and members of every `any_order!` must not match the empty string: the
/// parametric productions count each member by the input it reads.
fn check_any_order_members(bnf: &Bnf) -> Result<(), Diagnostic> {
    if bnf.any_orders.is_empty() {
        return Ok(());
    }
    let nullable = nullable_set(bnf);
    for a in &bnf.any_orders {
        let empty = bnf.rules[a.nt as usize][0].iter().any(|&s| match s {
            Sym::Nt(n) => nullable[n as usize],
            t => terminal_nullable(bnf, t),
        });
        if empty {
            let name = if a.unique.is_some() {
                "unique!"
            } else {
                "any_order!"
            };
            return Err(Diagnostic::new(
                ErrorKind::Semantic,
                a.span,
                format!("a member or the separator of `{name}` matches the empty string"),
            )
            .hint("make every member non-empty; write `''` as the separator for none"));
        }
    }
    Ok(())
}

fn check_size(bnf: &Bnf, opts: &CompileOptions) -> Result<(), Diagnostic> {
    let n = bnf.symbol_count();
    if n > opts.max_grammar_symbols {
        return Err(Diagnostic::new(
            ErrorKind::Limit,
            Span::default(),
            format!(
                "normalized grammar has {n} symbols, over max_grammar_symbols = {}",
                opts.max_grammar_symbols
            ),
        )
        .hint("simplify the grammar or raise `max_grammar_symbols`"));
    }
    Ok(())
}

fn terminal_nullable(bnf: &Bnf, s: Sym) -> bool {
    match s {
        Sym::Nt(_) | Sym::Lit(_) => false,
        Sym::Regex(r) => bnf.regexes[r as usize].dfa.matches_empty(),
        Sym::Except(e) => bnf.excepts[e as usize].dfa.matches_empty(),
    }
}

fn nullable_set(bnf: &Bnf) -> Vec<bool> {
    let mut nullable = vec![false; bnf.rules.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for (nt, alts) in bnf.rules.iter().enumerate() {
            if nullable[nt] {
                continue;
            }
            let is = alts.iter().any(|alt| {
                alt.iter().all(|&s| match s {
                    Sym::Nt(n) => nullable[n as usize],
                    t => terminal_nullable(bnf, t),
                })
            });
            if is {
                nullable[nt] = true;
                changed = true;
            }
        }
    }
    nullable
}

/// Rewrites every production into the variants with and without each nullable symbol and drops
/// empty productions; nullable terminals then stand for their non-empty matches only.
fn eliminate_nullable(bnf: &mut Bnf) -> bool {
    // Split long productions with many nullable symbols: A ::= s1 s2 ... sn  →  A ::= s1 R; R ::= s2..sn.
    let mut nullable = nullable_set(bnf);
    let is_nullable = |bnf: &Bnf, nullable: &[bool], s: Sym| -> bool {
        match s {
            Sym::Nt(n) => nullable[n as usize],
            t => terminal_nullable(bnf, t),
        }
    };
    let mut nt = 0;
    while nt < bnf.rules.len() {
        let mut i = 0;
        while i < bnf.rules[nt].len() {
            let alt = &bnf.rules[nt][i];
            let count = alt
                .iter()
                .filter(|&&s| is_nullable(bnf, &nullable, s))
                .count();
            if count > MAX_NULLABLE_PER_PRODUCTION && alt.len() > 2 {
                let alt = bnf.rules[nt][i].clone();
                let rest: Vec<Sym> = alt[1..].to_vec();
                let rest_nullable = rest.iter().all(|&s| is_nullable(bnf, &nullable, s));
                let r = bnf.add_nt(format!("{}+", bnf.names[nt]));
                bnf.rules[r as usize].push(rest);
                nullable.push(rest_nullable);
                bnf.rules[nt][i] = vec![alt[0], Sym::Nt(r)];
            }
            i += 1;
        }
        nt += 1;
    }
    let start_nullable = nullable[bnf.start as usize];
    for nt in 0..bnf.rules.len() {
        let alts = std::mem::take(&mut bnf.rules[nt]);
        let mut out = UniqueProductions::default();
        for alt in alts {
            if !alt.iter().any(|&s| is_nullable(bnf, &nullable, s)) {
                // (the one variant: the production itself, unless empty)
                if !alt.is_empty() {
                    out.push(alt);
                }
                continue;
            }
            let positions: Vec<usize> = (0..alt.len())
                .filter(|&k| is_nullable(bnf, &nullable, alt[k]))
                .collect();
            for mask in 0u32..(1u32 << positions.len()) {
                let variant: Vec<Sym> = alt
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| {
                        positions
                            .iter()
                            .position(|p| p == k)
                            .is_none_or(|bit| mask & (1 << bit) == 0)
                    })
                    .map(|(_, &s)| s)
                    .collect();
                if !variant.is_empty() {
                    out.push(variant);
                }
            }
        }
        bnf.rules[nt] = out.into_vec();
    }
    start_nullable
}

fn terminal_productive(bnf: &Bnf, s: Sym) -> bool {
    match s {
        Sym::Nt(_) => false,
        Sym::Lit(_) => true,
        Sym::Regex(r) => bnf.regexes[r as usize].dfa.matches_nonempty(),
        Sym::Except(e) => {
            let t = &bnf.excepts[e as usize];
            let d = &t.dfa;
            if !d.matches_nonempty() {
                return false;
            }
            // Shortest non-empty match must fit the length bound.
            let shortest = d
                .live_bytes(d.start())
                .iter()
                .map(|b| d.min_to_accept(d.next(d.start(), b)).saturating_add(1))
                .min()
                .unwrap_or(u32::MAX);
            t.max.is_none_or(|m| shortest <= m)
        }
    }
}

/// Removes productions using non-productive symbols, then nonterminals unreachable from start.
/// An `any_order!` is productive when its separator, its required members and some member are:
/// its other members may be left out, so a non-productive one (say an optional member that
/// only recurses) is dropped from it rather than emptying it.
fn remove_useless(bnf: &mut Bnf) {
    let n = bnf.rules.len();
    let opaque = bnf.opaque();
    let terminals = TerminalsProductive::of(bnf);
    let productive = productive_set(bnf, &opaque, &terminals);
    let sym_ok = |_: &Bnf, productive: &[bool], s: Sym| match s {
        Sym::Nt(m) => productive[m as usize],
        t => terminals.get(t),
    };
    for a in 0..bnf.any_orders.len() {
        let (nt, skip) = (
            bnf.any_orders[a].nt as usize,
            bnf.any_orders[a].sep as usize,
        );
        if !productive[nt] || bnf.rules[nt].is_empty() {
            continue;
        }
        if let Some(counts) = bnf.any_orders[a].unique {
            let limit = unique_limit(bnf, nt as u32, |s| sym_ok(bnf, &productive, s));
            if limit < counts.max {
                // (items from `limit` on derive nothing: at most `limit` items, `limit >= min`)
                let members = (limit as usize).min(bnf.rules[nt][0].len() - skip);
                bnf.rules[nt][0].truncate(skip + members);
                if limit == 1 && skip == 1 {
                    // (one item: no separator, which may derive nothing)
                    bnf.rules[nt][0].remove(0);
                    bnf.any_orders[a].sep = false;
                }
                bnf.any_orders[a].kinds.truncate(members);
                bnf.any_orders[a].unique = Some(UniqueCounts {
                    max: limit,
                    ..counts
                });
            }
            continue;
        }
        // (only members that may be left out are dropped: the required ones are productive)
        let alt = &bnf.rules[nt][0];
        let keep: Vec<bool> = alt[skip..]
            .iter()
            .map(|&s| sym_ok(bnf, &productive, s))
            .collect();
        if keep.iter().all(|&k| k) {
            continue;
        }
        let mut placeholder = alt[..skip].to_vec();
        let mut kinds = Vec::new();
        for ((&s, &kind), &k) in alt[skip..].iter().zip(&bnf.any_orders[a].kinds).zip(&keep) {
            if k {
                placeholder.push(s);
                kinds.push(kind);
            }
        }
        bnf.rules[nt] = vec![placeholder];
        bnf.any_orders[a].kinds = kinds;
    }
    for nt in 0..n {
        if opaque[nt] {
            if !productive[nt] {
                bnf.rules[nt].clear();
            }
            continue;
        }
        // (in place: most productions stay)
        let mut alts = std::mem::take(&mut bnf.rules[nt]);
        alts.retain(|alt| alt.iter().all(|&s| sym_ok(bnf, &productive, s)));
        bnf.rules[nt] = alts;
    }
    let reachable = reachable(bnf);
    for (rules, &keep) in bnf.rules.iter_mut().zip(&reachable) {
        if !keep {
            rules.clear();
        }
    }
}

/// Whether each terminal derives some text ([`terminal_productive`]), computed once per pass
/// for the regex and `except!` terminals (literals always do).
struct TerminalsProductive {
    regexes: Vec<bool>,
    excepts: Vec<bool>,
}

impl TerminalsProductive {
    fn of(bnf: &Bnf) -> TerminalsProductive {
        TerminalsProductive {
            regexes: (0..bnf.regexes.len() as u32)
                .map(|r| terminal_productive(bnf, Sym::Regex(r)))
                .collect(),
            excepts: (0..bnf.excepts.len() as u32)
                .map(|e| terminal_productive(bnf, Sym::Except(e)))
                .collect(),
        }
    }

    fn get(&self, s: Sym) -> bool {
        match s {
            Sym::Nt(_) => false,
            Sym::Lit(_) => true,
            Sym::Regex(r) => self.regexes[r as usize],
            Sym::Except(e) => self.excepts[e as usize],
        }
    }
}

/// The productive nonterminals (those deriving some text), by a work list: each production
/// counts its nonterminal occurrences not yet known productive, and a nonterminal found
/// productive decrements the counts of the productions it occurs in (an `any_order!`
/// nonterminal, productive by its own rule, is checked again when one of its symbols is found
/// productive). Linear in the grammar, where a fixpoint over all rules takes one pass per level
/// of nesting.
fn productive_set(bnf: &Bnf, opaque: &[bool], terminals: &TerminalsProductive) -> Vec<bool> {
    let n = bnf.rules.len();
    const NEVER: u32 = u32::MAX;
    // Productions numbered globally: `owner[k]` the nonterminal of production `k`, `missing[k]`
    // its nonterminal occurrences not known productive (`NEVER`: it has a terminal that derives
    // nothing, or it is the placeholder of an `any_order!`).
    let mut owner: Vec<u32> = Vec::new();
    let mut missing: Vec<u32> = Vec::new();
    // Occurrences of each nonterminal, as production numbers, in compressed rows.
    let mut count = vec![0u32; n + 1];
    for alts in &bnf.rules {
        for s in alts.iter().flatten() {
            if let Sym::Nt(m) = *s {
                count[m as usize + 1] += 1;
            }
        }
    }
    for i in 0..n {
        count[i + 1] += count[i];
    }
    let mut fill = count.clone();
    let mut users = vec![0u32; count[n] as usize];
    let mut productive = vec![false; n];
    let mut queue: Vec<u32> = Vec::new();
    for (nt, alts) in bnf.rules.iter().enumerate() {
        for alt in alts {
            let k = owner.len() as u32;
            owner.push(nt as u32);
            let mut need = 0u32;
            let mut dead = opaque[nt];
            for &s in alt {
                match s {
                    Sym::Nt(m) => {
                        users[fill[m as usize] as usize] = k;
                        fill[m as usize] += 1;
                        need += 1;
                    }
                    t => dead |= !terminals.get(t),
                }
            }
            missing.push(if dead { NEVER } else { need });
            if !dead && need == 0 && !productive[nt] {
                productive[nt] = true;
                queue.push(nt as u32);
            }
        }
        if opaque[nt]
            && !productive[nt]
            && any_order_productive(bnf, nt as u32, |s| match s {
                Sym::Nt(_) => false,
                t => terminals.get(t),
            })
        {
            productive[nt] = true;
            queue.push(nt as u32);
        }
    }
    while let Some(m) = queue.pop() {
        for &k in &users[count[m as usize] as usize..count[m as usize + 1] as usize] {
            let nt = owner[k as usize] as usize;
            if productive[nt] {
                continue;
            }
            if opaque[nt] {
                let ok = any_order_productive(bnf, nt as u32, |s| match s {
                    Sym::Nt(x) => productive[x as usize],
                    t => terminals.get(t),
                });
                if ok {
                    productive[nt] = true;
                    queue.push(nt as u32);
                }
                continue;
            }
            let left = &mut missing[k as usize];
            if *left != NEVER {
                *left -= 1;
                if *left == 0 {
                    productive[nt] = true;
                    queue.push(nt as u32);
                }
            }
        }
    }
    productive
}

/// Whether the `any_order!` nonterminal `nt` derives some text, given which symbols do (`ok`):
/// its separator and required members do, and at least one member does.
fn any_order_productive(bnf: &Bnf, nt: u32, ok: impl Fn(Sym) -> bool) -> bool {
    let Some(spec) = bnf.any_orders.iter().find(|a| a.nt == nt) else {
        return false;
    };
    let Some(alt) = bnf.rules[nt as usize].first() else {
        return false;
    };
    if let Some(counts) = spec.unique {
        return unique_limit(bnf, nt, ok) >= counts.min;
    }
    let skip = spec.sep as usize;
    let members = || alt[skip..].iter().zip(&spec.kinds);
    let plain = alt[..skip].iter().all(|&s| ok(s))
        && alt[skip..].iter().any(|&s| ok(s))
        && members().all(|(&s, &k)| matches!(k, MemberKind::Optional | MemberKind::Many) || ok(s));
    let Some(counts) = spec.counts else {
        return plain;
    };
    // (counts: the required members fit under the most, and enough members can be read)
    let required = members()
        .filter(|(_, &k)| matches!(k, MemberKind::Once | MemberKind::Some))
        .count();
    let repeatable =
        members().any(|(&s, &k)| matches!(k, MemberKind::Many | MemberKind::Some) && ok(s));
    let most = match repeatable && alt[..skip].iter().all(|&s| ok(s)) {
        true => u32::MAX,
        false => members().filter(|(&s, _)| ok(s)).count() as u32,
    };
    plain && required as u32 <= counts.max && most >= counts.min.max(1)
}

/// The most items the `unique!` nonterminal `nt` can hold given which symbols derive text
/// (`ok`): its counted maximum, cut at the first member that derives nothing (item `i` matches
/// member `min(i, k - 1)`), and at one item when the separator derives nothing.
fn unique_limit(bnf: &Bnf, nt: u32, ok: impl Fn(Sym) -> bool) -> u32 {
    let Some(spec) = bnf.any_orders.iter().find(|a| a.nt == nt) else {
        return 0;
    };
    let (Some(alt), Some(counts)) = (bnf.rules[nt as usize].first(), spec.unique) else {
        return 0;
    };
    let skip = spec.sep as usize;
    let members = &alt[skip..];
    let mut limit = match members.iter().position(|&s| !ok(s)) {
        Some(i) => (i as u32).min(counts.max),
        None => counts.max,
    };
    if !alt[..skip].iter().all(|&s| ok(s)) {
        limit = limit.min(1);
    }
    limit
}

fn reachable(bnf: &Bnf) -> Vec<bool> {
    let mut seen = vec![false; bnf.rules.len()];
    let mut stack = vec![bnf.start];
    seen[bnf.start as usize] = true;
    while let Some(nt) = stack.pop() {
        for alt in &bnf.rules[nt as usize] {
            for &s in alt {
                if let Sym::Nt(m) = s {
                    if !seen[m as usize] {
                        seen[m as usize] = true;
                        stack.push(m);
                    }
                }
            }
        }
    }
    seen
}

/// Replaces `A ::= B` by B's productions (transitively); unit cycles collapse.
fn remove_unit_rules(bnf: &mut Bnf) {
    let n = bnf.rules.len();
    let opaque = bnf.opaque();
    let unit = |alt: &Vec<Sym>| matches!(alt.as_slice(), [Sym::Nt(y)] if !opaque[*y as usize]);
    // The closures read the rules as they were: computed for every nonterminal with a unit
    // production first, then put in place (most rules have none and are only deduplicated).
    let mut closed: Vec<(usize, Vec<Vec<Sym>>)> = Vec::new();
    for nt in 0..n {
        if opaque[nt] || !bnf.rules[nt].iter().any(unit) {
            continue;
        }
        // Unit closure of nt by DFS (an `any_order!` nonterminal stays a symbol of its own).
        let mut seen = FxHashSet::default();
        let mut stack = vec![nt as u32];
        seen.insert(nt as u32);
        let mut out = UniqueProductions::default();
        while let Some(x) = stack.pop() {
            for alt in &bnf.rules[x as usize] {
                match alt.as_slice() {
                    [Sym::Nt(y)] if !opaque[*y as usize] => {
                        if seen.insert(*y) {
                            stack.push(*y);
                        }
                    }
                    _ => {
                        out.push_slice(alt);
                    }
                }
            }
        }
        closed.push((nt, out.into_vec()));
    }
    for nt in (0..n).filter(|&nt| !opaque[nt]) {
        dedup_productions(&mut bnf.rules[nt]);
    }
    for (nt, alts) in closed {
        bnf.rules[nt] = alts;
    }
    remove_useless(bnf);
}

/// Drops the repeats of productions, keeping the first of each (moved, not copied).
fn dedup_productions(alts: &mut Vec<Vec<Sym>>) {
    if alts.len() < 2 {
        return;
    }
    let mut out = UniqueProductions::default();
    for alt in std::mem::take(alts) {
        out.push(alt);
    }
    *alts = out.into_vec();
}

/// The single-terminal alternatives of a nonterminal (`A ::= 'x' | #"y" | ...`) become one regex
/// terminal: one DFA instead of one Earley item per alternative. Returns whether one did.
fn merge_terminal_alternations(bnf: &mut Bnf, merger: &mut Merger) -> bool {
    let opaque = bnf.opaque();
    let mut changed = false;
    for nt in (0..bnf.rules.len()).filter(|&nt| !opaque[nt]) {
        let single = |a: &Vec<Sym>| matches!(a.as_slice(), [Sym::Lit(_)] | [Sym::Regex(_)]);
        let count = bnf.rules[nt].iter().filter(|a| single(a)).count();
        if count < 2 {
            continue;
        }
        let mut parts: Vec<Sym> = bnf.rules[nt]
            .iter()
            .filter(|a| single(a))
            .map(|a| a[0])
            .collect();
        parts.sort_unstable();
        parts.dedup();
        // A union over the budget stays an alternation.
        if let Some(id) = merger.merge(bnf, Combine::Union, parts) {
            let mut alts: Vec<Vec<Sym>> = std::mem::take(&mut bnf.rules[nt])
                .into_iter()
                .filter(|a| !single(a))
                .collect();
            alts.push(vec![Sym::Regex(id)]);
            bnf.rules[nt] = alts;
            changed = true;
        }
    }
    changed
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Combine {
    Concat,
    Union,
}

/// Builds the DFAs of merged terminals from the terminals' own automata (never from regex text,
/// whose size can be the product of a run's length and its pieces' sizes), under budgets: merging
/// is an optimization, so a merge that would exceed `dfa_size_limit` or its construction steps is
/// skipped and the terminals stay separate.
///
/// Invariants: each distinct merge is attempted once (`cache`, failures included); all merges of
/// one normalization together take at most `steps_left` steps at the start (`GLOBAL_STEPS`
/// times `dfa_size_limit`), one merge at most `dfa_size_limit` steps plus a multiple of the size
/// of its parts (so that large literal unions such as long enums still merge).
struct Merger {
    cache: FxHashMap<(Combine, Vec<Sym>), Option<u32>>,
    size_limit: usize,
    steps_left: u64,
}

/// Steps for all merges of a grammar, in units of `dfa_size_limit`.
const GLOBAL_STEPS: u64 = 8;

impl Merger {
    fn new(opts: &CompileOptions) -> Merger {
        Merger {
            cache: FxHashMap::default(),
            size_limit: opts.dfa_size_limit,
            steps_left: GLOBAL_STEPS.saturating_mul(opts.dfa_size_limit as u64),
        }
    }

    /// The id of the regex terminal for the concatenation or union of `syms` (literals and
    /// regexes), or `None` when it is over budget.
    fn merge(&mut self, bnf: &mut Bnf, how: Combine, syms: Vec<Sym>) -> Option<u32> {
        let key = (how, syms);
        if let Some(&r) = self.cache.get(&key) {
            return r;
        }
        let syms = &key.1;
        // Length-counted automata are not tables: they stay separate terminals.
        if syms
            .iter()
            .any(|&s| matches!(s, Sym::Regex(r) if bnf.regexes[r as usize].dfa.is_counted()))
        {
            self.cache.insert(key, None);
            return None;
        }
        let parts: Vec<Part<'_>> = syms
            .iter()
            .map(|&s| match s {
                Sym::Lit(l) => Part::Lit(&bnf.literals[l as usize]),
                Sym::Regex(r) => Part::Dfa(&bnf.regexes[r as usize].dfa),
                Sym::Nt(_) | Sym::Except(_) => unreachable!("only literals and regexes merge"),
            })
            .collect();
        let mut seen = FxHashSet::default();
        let parts_size: u64 = syms
            .iter()
            .filter(|s| seen.insert(**s))
            .map(|&s| match s {
                Sym::Lit(l) => bnf.literals[l as usize].len() as u64,
                Sym::Regex(r) => bnf.regexes[r as usize].dfa.memory_usage() as u64,
                _ => 0,
            })
            .sum();
        let allowed = (self.size_limit as u64).saturating_add(parts_size.saturating_mul(16));
        let mut budget = CombineBudget {
            size_limit: self.size_limit,
            steps: allowed.min(self.steps_left),
        };
        let before = budget.steps;
        let built = match how {
            Combine::Concat => Dfa::concat(&parts, &mut budget),
            Combine::Union => Dfa::union(&parts, &mut budget),
        };
        self.steps_left -= before - budget.steps;
        let result = built.ok().map(|dfa| {
            let what = match how {
                Combine::Concat => "concatenation",
                Combine::Union => "union",
            };
            bnf.add_regex(format!("<{what} of {} terminals>", syms.len()), dfa)
        });
        self.cache.insert(key, result);
        result
    }
}

/// Replaces each right-linear nonterminal (every production a run of terminals, optionally followed
/// by a right-linear nonterminal) that is used elsewhere, or is the start, by one regex terminal
/// for its language (see [`RightLinear`]): an Earley set per byte of the regular part becomes a
/// DFA step, and the token-mask walk sees one lexeme. Over budget, the rules stay.
fn collapse_right_linear(bnf: &mut Bnf, merger: &mut Merger) {
    let n = bnf.rules.len();
    let terminal_ok = |s: Sym| match s {
        Sym::Lit(_) => true,
        Sym::Regex(r) => !bnf.regexes[r as usize].dfa.is_counted(),
        Sym::Nt(_) | Sym::Except(_) => false,
    };
    let body = |alt: &[Sym]| -> usize {
        match alt.last() {
            Some(Sym::Nt(_)) => alt.len() - 1,
            _ => alt.len(),
        }
    };
    let opaque = bnf.opaque();
    let mut linear: Vec<bool> = bnf
        .rules
        .iter()
        .zip(&opaque)
        .map(|(alts, &opaque)| {
            !opaque
                && !alts.is_empty()
                && alts
                    .iter()
                    .all(|alt| alt[..body(alt)].iter().all(|&s| terminal_ok(s)))
        })
        .collect();
    // Tails must be right-linear too: remove until nothing changes.
    loop {
        let mut changed = false;
        for nt in 0..n {
            if linear[nt]
                && bnf.rules[nt]
                    .iter()
                    .any(|alt| matches!(alt.last(), Some(&Sym::Nt(m)) if !linear[m as usize]))
            {
                linear[nt] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // Only nonterminals whose rules continue into others: plain alternations of terminal runs
    // are merged by the other passes already.
    let chained = |nt: usize| {
        bnf.rules[nt]
            .iter()
            .any(|alt| matches!(alt.last(), Some(Sym::Nt(_))))
    };
    let mut entry = vec![false; n];
    entry[bnf.start as usize] = linear[bnf.start as usize] && chained(bnf.start as usize);
    for (nt, alts) in bnf.rules.iter().enumerate() {
        if !linear[nt] {
            for s in alts.iter().flatten() {
                if let &Sym::Nt(m) = s {
                    entry[m as usize] |= linear[m as usize] && chained(m as usize);
                }
            }
        }
    }
    if !entry.iter().any(|&e| e) {
        return;
    }
    // Right-linear nonterminals, renumbered densely.
    let mut index = vec![u32::MAX; n];
    let mut members = Vec::new();
    for nt in (0..n).filter(|&nt| linear[nt]) {
        index[nt] = members.len() as u32;
        members.push(nt);
    }
    let built: Vec<(usize, Dfa)> = {
        let grammar = RightLinear::new(
            members
                .iter()
                .map(|&nt| {
                    bnf.rules[nt]
                        .iter()
                        .map(|alt| {
                            let k = body(alt);
                            let parts = alt[..k]
                                .iter()
                                .map(|&s| match s {
                                    Sym::Lit(l) => Part::Lit(&bnf.literals[l as usize]),
                                    Sym::Regex(r) => Part::Dfa(&bnf.regexes[r as usize].dfa),
                                    _ => unreachable!("right-linear bodies are terminals"),
                                })
                                .collect();
                            let tail = match alt.get(k) {
                                Some(&Sym::Nt(m)) => Some(index[m as usize]),
                                _ => None,
                            };
                            (parts, tail)
                        })
                        .collect()
                })
                .collect(),
        );
        let mut out = Vec::new();
        for &nt in members.iter().filter(|&&nt| entry[nt]) {
            let mut budget = CombineBudget {
                size_limit: merger.size_limit,
                steps: merger.steps_left.min(merger.size_limit as u64),
            };
            let before = budget.steps;
            let dfa = grammar.dfa(index[nt], &mut budget);
            merger.steps_left -= before - budget.steps;
            if let Ok(dfa) = dfa {
                out.push((nt, dfa));
            }
        }
        out
    };
    let mut replace = vec![None; n];
    for (nt, dfa) in built {
        let id = bnf.add_regex(format!("<regular {}>", bnf.names[nt]), dfa);
        replace[nt] = Some(Sym::Regex(id));
    }
    for (nt, alts) in bnf.rules.iter_mut().enumerate() {
        if linear[nt] {
            continue;
        }
        for s in alts.iter_mut().flatten() {
            if let &mut Sym::Nt(m) = s {
                if let Some(t) = replace[m as usize] {
                    *s = t;
                }
            }
        }
    }
    let start = bnf.start as usize;
    if let Some(t) = replace[start] {
        bnf.rules[start] = vec![vec![t]];
    }
}

/// Substitutes nonterminals defined by a single one-terminal production (not `except!`, which must
/// stay first in its own production) into their uses; returns whether it substituted any.
fn inline_single_terminals(bnf: &mut Bnf) -> bool {
    let opaque = bnf.opaque();
    let mut changed = false;
    let subst: Vec<Option<Sym>> = bnf
        .rules
        .iter()
        .enumerate()
        .map(|(nt, alts)| match alts.as_slice() {
            [alt] if nt as u32 != bnf.start && !opaque[nt] => match alt.as_slice() {
                [s @ (Sym::Lit(_) | Sym::Regex(_))] => Some(*s),
                _ => None,
            },
            _ => None,
        })
        .collect();
    for alts in bnf.rules.iter_mut() {
        for alt in alts.iter_mut() {
            for s in alt.iter_mut() {
                if let Sym::Nt(m) = *s {
                    if let Some(t) = subst[m as usize] {
                        *s = t;
                        changed = true;
                    }
                }
            }
        }
    }
    changed
}

/// Replaces each run of two or more adjacent literal/regex terminals containing a regex by one regex
/// terminal for their concatenation. Runs before nullable elimination, so nullable pieces keep their
/// full (possibly empty) meaning inside the concatenation.
fn merge_terminal_runs(bnf: &mut Bnf, merger: &mut Merger) {
    let piece = |s: &Sym| matches!(s, Sym::Lit(_) | Sym::Regex(_));
    // A run to merge: two adjacent pieces, one of them a regex (most productions have none).
    let mergeable = |alt: &[Sym]| {
        alt.windows(2).any(|w| {
            piece(&w[0])
                && piece(&w[1])
                && (matches!(w[0], Sym::Regex(_)) || matches!(w[1], Sym::Regex(_)))
        })
    };
    let mut uses = RegexUses::of(bnf);
    let opaque = bnf.opaque();
    for nt in (0..bnf.rules.len()).filter(|&nt| !opaque[nt]) {
        for a in 0..bnf.rules[nt].len() {
            if !mergeable(&bnf.rules[nt][a]) {
                continue;
            }
            let alt = bnf.rules[nt][a].clone();
            let mut out: Vec<Sym> = Vec::with_capacity(alt.len());
            let mut i = 0;
            while i < alt.len() {
                let mut j = i;
                while j < alt.len() && piece(&alt[j]) {
                    j += 1;
                }
                let run = &alt[i..j];
                let has_regex = run.iter().any(|s| matches!(s, Sym::Regex(_)));
                if run.len() >= 2 && has_regex {
                    match merger.merge(bnf, Combine::Concat, run.to_vec()) {
                        Some(id) => {
                            out.push(Sym::Regex(id));
                            uses.replace(bnf, run, id);
                        }
                        None => out.extend_from_slice(run),
                    }
                    i = j;
                } else if j > i {
                    out.extend_from_slice(run);
                    i = j;
                } else {
                    out.push(alt[i]);
                    i += 1;
                }
            }
            bnf.rules[nt][a] = out;
        }
    }
}

/// How many times each regex terminal occurs in the productions, so that a merge pass frees the
/// automaton of a terminal as soon as merges have replaced its last occurrence: the merged
/// automata copy their parts, and a grammar of many large ones (object bodies between braces)
/// would otherwise hold every part and every copy until the end of the compilation.
struct RegexUses(Vec<u32>);

impl RegexUses {
    fn of(bnf: &Bnf) -> RegexUses {
        let mut uses = vec![0u32; bnf.regexes.len()];
        for s in bnf.rules.iter().flatten().flatten() {
            if let Sym::Regex(r) = s {
                uses[*r as usize] += 1;
            }
        }
        RegexUses(uses)
    }

    /// `run` has been replaced by the regex terminal `merged` in one production.
    fn replace(&mut self, bnf: &mut Bnf, run: &[Sym], merged: u32) {
        self.0.resize(bnf.regexes.len(), 0);
        self.0[merged as usize] += 1;
        for s in run {
            if let Sym::Regex(r) = *s {
                let n = &mut self.0[r as usize];
                *n -= 1;
                if *n == 0 {
                    // No production refers to it any more, and none will: later passes only
                    // rearrange the symbols that productions already have.
                    bnf.regexes[r as usize].dfa = Dfa::empty();
                }
            }
        }
    }
}

/// Merges adjacent literals; returns whether a production changed (or repeated another).
fn merge_literal_runs(bnf: &mut Bnf) -> bool {
    let opaque = bnf.opaque();
    let mut changed = false;
    for nt in (0..bnf.rules.len()).filter(|&nt| !opaque[nt]) {
        let alts = std::mem::take(&mut bnf.rules[nt]);
        let count = alts.len();
        let mut out = UniqueProductions::default();
        for alt in alts {
            if !alt
                .windows(2)
                .any(|w| matches!(w, [Sym::Lit(_), Sym::Lit(_)]))
            {
                out.push(alt);
                continue;
            }
            let mut merged: Vec<Sym> = Vec::with_capacity(alt.len());
            for s in alt {
                if let (Sym::Lit(b), Some(Sym::Lit(a))) = (s, merged.last().copied()) {
                    let mut bytes = bnf.literals[a as usize].clone();
                    bytes.extend_from_slice(&bnf.literals[b as usize]);
                    let id = bnf.intern_literal(&bytes);
                    *merged.last_mut().expect("non-empty") = Sym::Lit(id);
                } else {
                    merged.push(s);
                }
            }
            changed = true;
            out.push(merged);
        }
        let alts = out.into_vec();
        changed |= alts.len() != count;
        bnf.rules[nt] = alts;
    }
    changed
}

/// Nonterminals with identical (sorted) production sets are merged, to a fixpoint.
fn merge_equal_nonterminals(bnf: &mut Bnf) -> bool {
    let mut merged = false;
    for _ in 0..16 {
        let mut map: Vec<u32> = (0..bnf.rules.len() as u32).collect();
        let mut changed = false;
        {
            // (keys borrow the productions, sorted by reference: nothing is copied)
            let mut canon: FxHashMap<Vec<&[Sym]>, u32> = FxHashMap::default();
            let opaque = bnf.opaque();
            for (nt, slot) in map.iter_mut().enumerate() {
                if bnf.rules[nt].is_empty() || opaque[nt] {
                    continue;
                }
                let mut key: Vec<&[Sym]> = bnf.rules[nt].iter().map(Vec::as_slice).collect();
                key.sort_unstable();
                match canon.get(&key) {
                    Some(&rep) if nt as u32 != bnf.start => {
                        *slot = rep;
                        changed = true;
                    }
                    _ => {
                        canon.insert(key, nt as u32);
                    }
                }
            }
        }
        if !changed {
            return merged;
        }
        merged = true;
        for alts in bnf.rules.iter_mut() {
            for alt in alts.iter_mut() {
                for s in alt.iter_mut() {
                    if let Sym::Nt(m) = *s {
                        *s = Sym::Nt(map[m as usize]);
                    }
                }
            }
            dedup_productions(alts);
        }
        remove_useless(bnf);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kbnf::parser;
    use crate::lnf::lower;

    fn normalized(text: &str) -> Bnf {
        let opts = CompileOptions::default();
        let ast = parser::parse(text, opts.max_repetition).unwrap();
        let mut bnf = lower::lower(&ast, &opts).unwrap();
        normalize(&mut bnf, &opts).unwrap();
        bnf
    }

    #[test]
    fn merged_parts_are_freed_with_their_last_use() {
        // `body` collapses to one automaton, merged with the braces around it (its only use);
        // `item` is also used alone, so it must stay.
        let bnf = normalized(
            "start ::= '{' body '}' | '[' start ']' | '(' item ')' | item start;\n\
             body ::= 'a' body | 'b';\n\
             item ::= #\"[0-9]+\";",
        );
        let used: FxHashSet<u32> = bnf
            .rules
            .iter()
            .flatten()
            .flatten()
            .filter_map(|s| match s {
                Sym::Regex(r) => Some(*r),
                _ => None,
            })
            .collect();
        let by_name = |name: &str| {
            bnf.regexes
                .iter()
                .position(|r| r.pattern == name)
                .unwrap_or_else(|| panic!("no regex {name}"))
        };
        let body = by_name("<regular body>");
        assert!(!used.contains(&(body as u32)));
        assert!(
            bnf.regexes[body].dfa.start() == crate::dfa::DEAD,
            "not freed"
        );
        let item = by_name("[0-9]+");
        assert!(used.contains(&(item as u32)));
        assert!(bnf.regexes[item].dfa.matches(b"42"));
        // Every automaton a production refers to is intact.
        for r in used {
            assert!(bnf.regexes[r as usize].dfa.matches_nonempty());
        }
    }
}
