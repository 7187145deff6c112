//! The KBNF abstract syntax tree, as written by the user (before normalization).

use crate::error::Span;

/// A parsed grammar: rules in source order (several rules may share a name).
#[derive(Clone, Debug, Default)]
pub struct GrammarAst {
    pub rules: Vec<Rule>,
}

/// `name ::= expr ;`
#[derive(Clone, Debug)]
pub struct Rule {
    pub name: String,
    pub name_span: Span,
    pub expr: Expr,
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    /// A byte string (possibly empty, possibly not UTF-8 when written with `\xHH`).
    Literal(Vec<u8>),
    /// A regex terminal `#"..."`, matched in full.
    Regex(String),
    /// A reference to a rule.
    Nonterminal(String),
    /// `except!(arg)` or `except!(arg, max)`.
    Except { arg: Box<Expr>, max: Option<u32> },
    /// `len!(arg, min, max)` (`json: false`) or `json_len!(arg, min, max)` (`json: true`): the
    /// strings of `arg` with between `min` and `max` characters (code points; for `json_len!`,
    /// code points of the decoded JSON string body).
    Len {
        arg: Box<Expr>,
        min: u32,
        max: u32,
        json: bool,
    },
    /// `json_string_except!('w1', 'w2', ...)`: a JSON string literal, quotes included, whose
    /// decoded value is none of the words (see `dfa::words` for the exact language).
    JsonStringExcept(Vec<String>),
    /// `any_order!(sep, m1, m2?, m3*, m4+)`: the members joined by `sep` (`''`: nothing between),
    /// in any order; a plain member exactly once, `?` at most once, `*` any number of times, `+`
    /// at least once. At least one member in all (see `lnf::AnyOrder`). `counts`: the least and
    /// most members read in all, every kind counted (`u32::MAX`: unbounded), when written.
    AnyOrder {
        sep: Option<Box<Expr>>,
        members: Vec<(Expr, MemberKind)>,
        counts: Option<(u32, u32)>,
    },
    /// `unique!(sep, m1, ..., mk, min, max)`: `min..=max` items joined by `sep` (`''`: nothing
    /// between), item `i` matching `m_min(i, k)` (the last member matches every item from the
    /// `k`-th on), whose texts are pairwise distinct JSON values (see `lnf::AnyOrder::unique`).
    /// `min >= 1`; `max == None` means unbounded.
    Unique {
        sep: Option<Box<Expr>>,
        members: Vec<Expr>,
        min: u32,
        max: Option<u32>,
    },
    /// Juxtaposition, at least two items.
    Concat(Vec<Expr>),
    /// `a | b | ...`, at least two items.
    Alt(Vec<Expr>),
    /// `X?`, `X*`, `X+`, `[X]`, `{X}`, `X{m}`, `X{m,}`, `X{m,n}`; `max == None` means unbounded.
    Repeat {
        expr: Box<Expr>,
        min: u32,
        max: Option<u32>,
    },
}

/// How often a member of `any_order!` occurs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberKind {
    /// Exactly once (no suffix).
    Once,
    /// At most once (`?`).
    Optional,
    /// Any number of times (`*`).
    Many,
    /// At least once (`+`).
    Some,
}
