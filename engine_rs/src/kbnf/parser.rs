//! Hand-written recursive-descent parser for KBNF text.
//!
//! The parser never panics on any input: every problem becomes a [`Diagnostic`]. After an error in a
//! rule it skips to the next `;` so that several errors are reported in one pass. Nesting depth is
//! bounded so hostile input cannot overflow the stack.

use super::ast::{Expr, ExprKind, GrammarAst, MemberKind, Rule};
use crate::error::{Diagnostic, ErrorKind, Span};

/// Deepest nesting of groups/operators accepted; deeper input is rejected with a diagnostic.
pub const MAX_NESTING: usize = 100;

pub fn parse(text: &str, max_repetition: u32) -> Result<GrammarAst, Vec<Diagnostic>> {
    let mut p = Parser {
        src: text.as_bytes(),
        pos: 0,
        depth: 0,
        max_repetition,
        comma_ends_expr: false,
        diagnostics: Vec::new(),
    };
    let mut ast = GrammarAst::default();
    loop {
        if let Err(d) = p.skip_trivia() {
            p.diagnostics.push(d);
            break;
        }
        if p.pos >= p.src.len() {
            break;
        }
        match p.rule() {
            Ok(rule) => ast.rules.push(rule),
            Err(d) => {
                p.diagnostics.push(d);
                p.recover();
            }
        }
    }
    if p.diagnostics.is_empty() {
        Ok(ast)
    } else {
        Err(p.diagnostics)
    }
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
    max_repetition: u32,
    /// Inside `except!( ... )` a comma separates the length bound instead of concatenating.
    comma_ends_expr: bool,
    diagnostics: Vec<Diagnostic>,
}

type PResult<T> = Result<T, Diagnostic>;

fn syntax(span: Span, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::new(ErrorKind::Syntax, span, msg)
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn here(&self) -> Span {
        let end = (self.pos + 1).min(self.src.len());
        Span::new(self.pos, end)
    }

    /// Skips whitespace and `(* ... *)` comments.
    fn skip_trivia(&mut self) -> PResult<()> {
        loop {
            while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                self.pos += 1;
            }
            if self.src.get(self.pos..).unwrap_or(&[]).starts_with(b"(*") {
                let start = self.pos;
                match find(&self.src[self.pos + 2..], b"*)") {
                    Some(i) => self.pos += 2 + i + 2,
                    None => {
                        self.pos = self.src.len();
                        return Err(syntax(Span::new(start, start + 2), "unterminated comment")
                            .hint("close the comment with `*)`"));
                    }
                }
            } else {
                return Ok(());
            }
        }
    }

    /// Skips past the next `;` (outside literals) after an error.
    fn recover(&mut self) {
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                b';' => return,
                b'\'' | b'"' => {
                    while let Some(d) = self.peek() {
                        self.pos += 1;
                        if d == b'\\' {
                            self.pos = (self.pos + 1).min(self.src.len());
                        } else if d == c || d == b'\n' {
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn expect(&mut self, token: &[u8], what: &str, hint: &str) -> PResult<()> {
        self.skip_trivia()?;
        if self.src.get(self.pos..).unwrap_or(&[]).starts_with(token) {
            self.pos += token.len();
            Ok(())
        } else {
            Err(syntax(
                self.here(),
                format!("expected {what}, found {}", self.describe()),
            )
            .hint(hint.to_owned()))
        }
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "end of input".to_owned(),
            Some(_) => {
                let rest = self.src.get(self.pos..).unwrap_or(&[]);
                let s = String::from_utf8_lossy(&rest[..rest.len().min(12)]);
                let first = s.split_whitespace().next().unwrap_or("").to_owned();
                format!("`{first}`")
            }
        }
    }

    fn ident(&mut self) -> Option<(String, Span)> {
        let start = self.pos;
        match self.peek() {
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {}
            _ => return None,
        }
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            self.pos += 1;
        }
        let name = String::from_utf8_lossy(&self.src[start..self.pos]).into_owned();
        Some((name, Span::new(start, self.pos)))
    }

    fn rule(&mut self) -> PResult<Rule> {
        let Some((name, name_span)) = self.ident() else {
            return Err(syntax(
                self.here(),
                format!("expected a rule name, found {}", self.describe()),
            )
            .hint("a rule looks like `name ::= 'text' other_rule;`"));
        };
        self.expect(b"::=", "`::=`", "a rule looks like `name ::= expression;`")?;
        let expr = self.alternation()?;
        self.skip_trivia()?;
        if self.peek() != Some(b';') {
            return Err(syntax(
                self.here(),
                format!(
                    "expected `;` or an operator after the expression, found {}",
                    self.describe()
                ),
            )
            .hint("end every rule with `;`"));
        }
        self.pos += 1;
        Ok(Rule {
            name,
            name_span,
            expr,
        })
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(Diagnostic::new(
                ErrorKind::Limit,
                self.here(),
                format!("expression nested deeper than {MAX_NESTING} levels"),
            )
            .hint("split the expression into named rules"));
        }
        Ok(())
    }

    fn alternation(&mut self) -> PResult<Expr> {
        self.enter()?;
        let first = self.concatenation()?;
        let start = first.span.start as usize;
        let mut items = vec![first];
        loop {
            self.skip_trivia()?;
            if self.peek() == Some(b'|') {
                self.pos += 1;
                items.push(self.concatenation()?);
            } else {
                break;
            }
        }
        self.depth -= 1;
        Ok(if items.len() == 1 {
            items.pop().expect("one item")
        } else {
            let end = items.last().map_or(start, |e| e.span.end as usize);
            Expr {
                kind: ExprKind::Alt(items),
                span: Span::new(start, end),
            }
        })
    }

    fn starts_primary(&self) -> bool {
        match self.peek() {
            Some(c) => {
                c.is_ascii_alphabetic()
                    || matches!(c, b'_' | b'\'' | b'"' | b'#' | b'[' | b'{')
                    || (c == b'(' && self.src.get(self.pos + 1) != Some(&b'*'))
            }
            None => false,
        }
    }

    fn concatenation(&mut self) -> PResult<Expr> {
        self.skip_trivia()?;
        let start = self.pos;
        let mut items = Vec::new();
        loop {
            self.skip_trivia()?;
            if !items.is_empty() && self.peek() == Some(b',') && !self.comma_ends_expr {
                self.pos += 1;
                self.skip_trivia()?;
                if !self.starts_primary() {
                    return Err(syntax(
                        self.here(),
                        format!(
                            "expected an expression after `,`, found {}",
                            self.describe()
                        ),
                    ));
                }
            }
            if !self.starts_primary() {
                break;
            }
            items.push(self.postfix()?);
        }
        if items.is_empty() {
            return Err(syntax(
                self.here(),
                format!("expected an expression, found {}", self.describe()),
            )
            .hint("write `''` for the empty string"));
        }
        Ok(if items.len() == 1 {
            items.pop().expect("one item")
        } else {
            let end = items.last().map_or(start, |e| e.span.end as usize);
            Expr {
                kind: ExprKind::Concat(items),
                span: Span::new(start, end),
            }
        })
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut expr = self.primary()?;
        let start = expr.span.start as usize;
        loop {
            // Postfix operators bind tightly: no whitespace check needed, but allow trivia.
            let save = self.pos;
            self.skip_trivia()?;
            let (min, max) = match self.peek() {
                Some(b'?') => {
                    self.pos += 1;
                    (0, Some(1))
                }
                Some(b'*') => {
                    self.pos += 1;
                    (0, None)
                }
                Some(b'+') => {
                    self.pos += 1;
                    (1, None)
                }
                Some(b'{') if self.counted_ahead() => self.counted()?,
                _ => {
                    self.pos = save;
                    break;
                }
            };
            expr = Expr {
                kind: ExprKind::Repeat {
                    expr: Box::new(expr),
                    min,
                    max,
                },
                span: Span::new(start, self.pos),
            };
        }
        Ok(expr)
    }

    /// Whether `{` at the cursor opens a counted repetition `{m}`, `{m,}` or `{m,n}`.
    fn counted_ahead(&self) -> bool {
        let mut i = self.pos + 1;
        while self.src.get(i).is_some_and(|c| *c == b' ') {
            i += 1;
        }
        let digits = i;
        while self.src.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        if i == digits {
            return false;
        }
        while self.src.get(i).is_some_and(|c| *c == b' ') {
            i += 1;
        }
        matches!(self.src.get(i), Some(b'}') | Some(b','))
    }

    fn number(&mut self) -> PResult<u32> {
        self.skip_trivia()?;
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
        let span = Span::new(start, self.pos);
        match text.parse::<u64>() {
            Ok(n) if n <= self.max_repetition as u64 => Ok(n as u32),
            Ok(_) | Err(_) if !text.is_empty() => Err(Diagnostic::new(
                ErrorKind::Limit,
                span,
                format!(
                    "repetition count {text} exceeds the limit max_repetition = {}",
                    self.max_repetition
                ),
            )
            .hint("raise `max_repetition` in the compile options or use `*`/`+`")),
            _ => Err(syntax(
                self.here(),
                format!("expected a number, found {}", self.describe()),
            )),
        }
    }

    fn counted(&mut self) -> PResult<(u32, Option<u32>)> {
        let open = self.pos;
        self.pos += 1;
        let min = self.number()?;
        self.skip_trivia()?;
        let max = if self.peek() == Some(b',') {
            self.pos += 1;
            self.skip_trivia()?;
            if self.peek() == Some(b'}') {
                None
            } else {
                Some(self.number()?)
            }
        } else {
            Some(min)
        };
        self.expect(
            b"}",
            "`}`",
            "counted repetition is `X{m}`, `X{m,}` or `X{m,n}`",
        )?;
        if let Some(max) = max {
            if max < min {
                return Err(syntax(
                    Span::new(open, self.pos),
                    format!("repetition `{{{min},{max}}}` has its maximum below its minimum"),
                )
                .hint("write `{m,n}` with m <= n"));
            }
        }
        Ok((min, max))
    }

    fn primary(&mut self) -> PResult<Expr> {
        self.skip_trivia()?;
        let start = self.pos;
        match self.peek() {
            Some(b'\'') | Some(b'"') => {
                let bytes = self.literal()?;
                Ok(Expr {
                    kind: ExprKind::Literal(bytes),
                    span: Span::new(start, self.pos),
                })
            }
            Some(b'#') => {
                self.pos += 1;
                if self.peek() != Some(b'"') {
                    return Err(syntax(self.here(), "expected `\"` after `#`")
                        .hint("regex terminals are written `#\"[a-z]+\"`"));
                }
                let pattern = self.regex_body()?;
                Ok(Expr {
                    kind: ExprKind::Regex(pattern),
                    span: Span::new(start, self.pos),
                })
            }
            Some(b'(') => self.group(b')', start, None),
            Some(b'[') => self.group(b']', start, Some((0, Some(1)))),
            Some(b'{') => self.group(b'}', start, Some((0, None))),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let (name, span) = self.ident().expect("starts with a letter");
                if name == "except" && self.peek() == Some(b'!') {
                    self.pos += 1;
                    return self.except(start);
                }
                if (name == "len" || name == "json_len") && self.peek() == Some(b'!') {
                    self.pos += 1;
                    return self.len(start, name == "json_len");
                }
                if name == "json_string_except" && self.peek() == Some(b'!') {
                    self.pos += 1;
                    return self.json_string_except(start);
                }
                if name == "any_order" && self.peek() == Some(b'!') {
                    self.pos += 1;
                    return self.any_order(start);
                }
                if name == "unique" && self.peek() == Some(b'!') {
                    self.pos += 1;
                    return self.unique(start);
                }
                if self.peek() == Some(b'!') {
                    return Err(syntax(
                        Span::new(start, self.pos + 1),
                        format!("unknown special nonterminal `{name}!`"),
                    )
                    .hint(
                        "the special nonterminals are `except!(X)` / `except!(X, n)`, \
                         `len!(X, min, max)`, `json_len!(X, min, max)`, \
                         `json_string_except!('w1', 'w2', ...)`, \
                         `any_order!(sep, a, b?, c*)` and `unique!(sep, item, min, max)`",
                    ));
                }
                Ok(Expr {
                    kind: ExprKind::Nonterminal(name),
                    span,
                })
            }
            _ => Err(syntax(
                self.here(),
                format!("expected an expression, found {}", self.describe()),
            )),
        }
    }

    fn group(&mut self, close: u8, start: usize, rep: Option<(u32, Option<u32>)>) -> PResult<Expr> {
        self.pos += 1;
        let outer = std::mem::replace(&mut self.comma_ends_expr, false);
        let inner = self.alternation();
        self.comma_ends_expr = outer;
        let inner = inner?;
        self.skip_trivia()?;
        if self.peek() != Some(close) {
            return Err(syntax(
                self.here(),
                format!(
                    "expected `{}` to close the group opened at this position, found {}",
                    close as char,
                    self.describe()
                ),
            )
            .hint(format!("add `{}`", close as char)));
        }
        self.pos += 1;
        let span = Span::new(start, self.pos);
        Ok(match rep {
            None => Expr {
                kind: inner.kind,
                span,
            },
            Some((min, max)) => Expr {
                kind: ExprKind::Repeat {
                    expr: Box::new(inner),
                    min,
                    max,
                },
                span,
            },
        })
    }

    fn except(&mut self, start: usize) -> PResult<Expr> {
        self.expect(b"(", "`(`", "write `except!(X)` or `except!(X, n)`")?;
        self.skip_trivia()?;
        let outer = std::mem::replace(&mut self.comma_ends_expr, true);
        let arg = self.alternation();
        self.comma_ends_expr = outer;
        let arg = arg?;
        self.skip_trivia()?;
        let max = if self.peek() == Some(b',') {
            self.pos += 1;
            self.skip_trivia()?;
            let at = self.pos;
            let n = self.number()?;
            if n == 0 {
                return Err(syntax(
                    Span::new(at, self.pos),
                    "`except!` length bound must be at least 1",
                ));
            }
            Some(n)
        } else {
            None
        };
        self.expect(b")", "`)`", "write `except!(X)` or `except!(X, n)`")?;
        Ok(Expr {
            kind: ExprKind::Except {
                arg: Box::new(arg),
                max,
            },
            span: Span::new(start, self.pos),
        })
    }

    /// `len!(X, min, max)` / `json_len!(X, min, max)`; the cursor is after the `!`.
    fn len(&mut self, start: usize, json: bool) -> PResult<Expr> {
        let name = if json { "json_len" } else { "len" };
        let usage = format!("write `{name}!(X, min, max)`");
        self.expect(b"(", "`(`", &usage)?;
        self.skip_trivia()?;
        let outer = std::mem::replace(&mut self.comma_ends_expr, true);
        let arg = self.alternation();
        self.comma_ends_expr = outer;
        let arg = arg?;
        self.expect(b",", "`,` and the minimum length", &usage)?;
        self.skip_trivia()?;
        let min_at = self.pos;
        let min = self.number()?;
        self.expect(b",", "`,` and the maximum length", &usage)?;
        let max = self.number()?;
        if min > max {
            return Err(Diagnostic::new(
                ErrorKind::Semantic,
                Span::new(min_at, self.pos),
                format!("`{name}!` minimum length {min} is greater than its maximum {max}"),
            )
            .hint(format!("write `{name}!(X, min, max)` with min <= max")));
        }
        self.expect(b")", "`)`", &usage)?;
        Ok(Expr {
            kind: ExprKind::Len {
                arg: Box::new(arg),
                min,
                max,
                json,
            },
            span: Span::new(start, self.pos),
        })
    }

    /// `any_order!(sep, m1, m2?, m3*, m4+, min, max)`; the cursor is after the `!`. A member's
    /// top-level `?`, `*` or `+` is its kind (see [`MemberKind`]); other counted repetitions are
    /// refused. The counts are optional and come after the members (an argument that starts
    /// with a digit is a count): the least and most members read in all.
    fn any_order(&mut self, start: usize) -> PResult<Expr> {
        let usage = "write `any_order!(sep, a, b?, c*)`: a separator (`''` for none), then \
                     members; `?` at most once, `*` any number, `+` at least once, none: once; \
                     then optionally the least and most members in all";
        let (sep, members, counts) =
            self.separated_members(start, "any_order", "member", usage, |member| {
                Ok(match member.kind {
                    ExprKind::Repeat { expr, min, max } => {
                        let kind = match (min, max) {
                            (0, Some(1)) => MemberKind::Optional,
                            (0, None) => MemberKind::Many,
                            (1, None) => MemberKind::Some,
                            _ => {
                                return Err(syntax(
                                    member.span,
                                    "an `any_order!` member may end in `?`, `*` or `+` only",
                                )
                                .hint(usage.to_owned()))
                            }
                        };
                        (*expr, kind)
                    }
                    _ => (member, MemberKind::Once),
                })
            })?;
        let counts = match counts {
            (None, _) => None,
            (Some(min), max) => Some((min, max.unwrap_or(u32::MAX))),
        };
        if let Some((min, max)) = counts {
            if max == 0 || min > max {
                return Err(Diagnostic::new(
                    ErrorKind::Semantic,
                    Span::new(start, self.pos),
                    "`any_order!` needs 0 <= min <= max members and max >= 1",
                )
                .hint("it matches at least one member: write nothing as an alternative"));
            }
        }
        Ok(Expr {
            kind: ExprKind::AnyOrder {
                sep,
                members,
                counts,
            },
            span: Span::new(start, self.pos),
        })
    }

    /// `unique!(sep, m1, ..., mk, min, max)`; the cursor is after the `!`. The counts are
    /// optional (`min` defaults to 1, `max` to unbounded) and come after the members: an
    /// argument that starts with a digit is a count.
    fn unique(&mut self, start: usize) -> PResult<Expr> {
        let usage = "write `unique!(sep, item)` or `unique!(sep, p1, p2, item, min, max)`: a \
                     separator (`''` for none), the items (item i matches the i-th member, the \
                     last member every item after), then optionally the least and most items";
        let (sep, members, counts) = self.separated_members(start, "unique", "item", usage, Ok)?;
        let (min, max) = (counts.0.unwrap_or(1), counts.1);
        if min == 0 || max.is_some_and(|m| m < min) {
            return Err(Diagnostic::new(
                ErrorKind::Semantic,
                Span::new(start, self.pos),
                "`unique!` needs 1 <= min <= max items",
            )
            .hint("it matches a non-empty list: write the empty list as an alternative"));
        }
        Ok(Expr {
            kind: ExprKind::Unique {
                sep,
                members,
                min,
                max,
            },
            span: Span::new(start, self.pos),
        })
    }

    /// Whether another argument of a special nonterminal follows (then the cursor is on it,
    /// past its `,`).
    fn next_arg(&mut self) -> PResult<bool> {
        self.skip_trivia()?;
        if self.peek() != Some(b',') {
            return Ok(false);
        }
        self.pos += 1;
        self.skip_trivia()?;
        Ok(true)
    }

    /// `name!(sep, m1, ..., mk, min, max)` after the `!` (`start`: where the call starts, for
    /// messages): the separator (`None` for `''`), the
    /// members as `member` makes them from their expressions, and the optional counts, which
    /// come after the members (an argument that starts with a digit is a count). `what` names a
    /// member in messages.
    #[allow(clippy::type_complexity)]
    fn separated_members<M>(
        &mut self,
        start: usize,
        name: &str,
        what: &str,
        usage: &str,
        member: impl Fn(Expr) -> PResult<M>,
    ) -> PResult<(Option<Box<Expr>>, Vec<M>, (Option<u32>, Option<u32>))> {
        self.expect(b"(", "`(`", usage)?;
        self.skip_trivia()?;
        let outer = std::mem::replace(&mut self.comma_ends_expr, true);
        let args = self.separated_member_args(name, what, usage, member);
        self.comma_ends_expr = outer;
        let (sep, members, counts) = args?;
        self.expect(b")", "`)`", usage)?;
        let counts = match counts.as_slice() {
            [] => (None, None),
            [min] => (Some(*min), None),
            [min, max] => (Some(*min), Some(*max)),
            _ => {
                return Err(syntax(
                    Span::new(start, self.pos),
                    format!("`{name}!` takes at most two counts (the least and the most {what}s)"),
                )
                .hint(usage.to_owned()))
            }
        };
        let sep = match sep.kind {
            ExprKind::Literal(ref b) if b.is_empty() => None,
            _ => Some(Box::new(sep)),
        };
        Ok((sep, members, counts))
    }

    /// The arguments of [`Parser::separated_members`], inside the parentheses.
    fn separated_member_args<M>(
        &mut self,
        name: &str,
        what: &str,
        usage: &str,
        member: impl Fn(Expr) -> PResult<M>,
    ) -> PResult<(Expr, Vec<M>, Vec<u32>)> {
        let sep = self.alternation()?;
        let mut members = Vec::new();
        let mut counts = Vec::new();
        while self.next_arg()? {
            if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                counts.push(self.number()?);
            } else if counts.is_empty() {
                members.push(member(self.alternation()?)?);
            } else {
                return Err(syntax(
                    self.here(),
                    format!("`{name}!` counts come after the {what}s"),
                )
                .hint(usage.to_owned()));
            }
        }
        if members.is_empty() {
            return Err(
                syntax(self.here(), format!("`{name}!` needs at least one {what}"))
                    .hint(usage.to_owned()),
            );
        }
        Ok((sep, members, counts))
    }

    /// `json_string_except!('w1', 'w2', ...)` (no words: any JSON string); the cursor is after
    /// the `!`.
    fn json_string_except(&mut self, start: usize) -> PResult<Expr> {
        let usage = "write `json_string_except!('w1', 'w2', ...)` with string literals";
        self.expect(b"(", "`(`", usage)?;
        let mut words = Vec::new();
        loop {
            self.skip_trivia()?;
            match self.peek() {
                Some(b')') if words.is_empty() => break,
                Some(b'\'' | b'"') => {}
                _ => {
                    return Err(syntax(
                        self.here(),
                        format!("expected a string literal, found {}", self.describe()),
                    )
                    .hint(usage))
                }
            }
            let at = self.pos;
            let bytes = self.literal()?;
            match String::from_utf8(bytes) {
                Ok(w) => words.push(w),
                Err(_) => {
                    return Err(Diagnostic::new(
                        ErrorKind::Semantic,
                        Span::new(at, self.pos),
                        "a `json_string_except!` word is not valid UTF-8",
                    )
                    .hint("words are decoded JSON string values: write characters or `\\u{HHHH}`"))
                }
            }
            self.skip_trivia()?;
            if self.peek() == Some(b',') {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.expect(b")", "`)`", usage)?;
        Ok(Expr {
            kind: ExprKind::JsonStringExcept(words),
            span: Span::new(start, self.pos),
        })
    }

    /// Parses a quoted literal with escapes; the cursor is on the opening quote.
    fn literal(&mut self) -> PResult<Vec<u8>> {
        let quote = self.src[self.pos];
        let open = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek().filter(|&c| c != b'\n') else {
                return Err(
                    syntax(Span::new(open, open + 1), "unterminated string literal")
                        .hint(format!("close the literal with `{}`", quote as char)),
                );
            };
            match c {
                b'\\' => {
                    let esc_start = self.pos;
                    self.pos += 1;
                    let Some(e) = self.peek() else { continue };
                    self.pos += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'\\' => out.push(b'\\'),
                        b'\'' => out.push(b'\''),
                        b'"' => out.push(b'"'),
                        b'x' => {
                            let hex = self.src.get(self.pos..self.pos + 2);
                            match hex.and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| {
                                u8::from_str_radix(h, 16)
                                    .ok()
                                    .filter(|_| h.bytes().all(|b| b.is_ascii_hexdigit()))
                            }) {
                                Some(b) => {
                                    out.push(b);
                                    self.pos += 2;
                                }
                                None => {
                                    return Err(syntax(
                                        Span::new(esc_start, self.pos + 2),
                                        "invalid `\\x` escape",
                                    )
                                    .hint("`\\xHH` takes exactly two hex digits"))
                                }
                            }
                        }
                        b'u' => {
                            let bad = |p: &Self| {
                                syntax(Span::new(esc_start, p.pos), "invalid `\\u` escape").hint(
                                    "write `\\u{HHHH}` with 1-6 hex digits of a valid code point",
                                )
                            };
                            if self.peek() != Some(b'{') {
                                return Err(bad(self));
                            }
                            self.pos += 1;
                            let hs = self.pos;
                            while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                                self.pos += 1;
                            }
                            let digits = std::str::from_utf8(&self.src[hs..self.pos]).unwrap_or("");
                            if self.peek() != Some(b'}') || digits.is_empty() || digits.len() > 6 {
                                return Err(bad(self));
                            }
                            self.pos += 1;
                            let ch = u32::from_str_radix(digits, 16)
                                .ok()
                                .and_then(char::from_u32);
                            match ch {
                                Some(ch) => {
                                    let mut buf = [0u8; 4];
                                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                                }
                                None => return Err(bad(self)),
                            }
                        }
                        _ => {
                            return Err(syntax(
                                Span::new(esc_start, self.pos),
                                format!("unknown escape `\\{}`", e as char),
                            )
                            .hint("escapes are \\n \\r \\t \\\\ \\' \\\" \\xHH \\u{HHHH}"))
                        }
                    }
                }
                c if c == quote => {
                    self.pos += 1;
                    return Ok(out);
                }
                _ => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// Reads a regex body verbatim; the cursor is on the opening `"`.
    fn regex_body(&mut self) -> PResult<String> {
        let open = self.pos;
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                None => {
                    return Err(syntax(
                        Span::new(open - 1, open + 1),
                        "unterminated regex terminal",
                    )
                    .hint("close the regex with `\"`; write `\\\"` for a quote inside it"))
                }
                Some(b'\\') => self.pos = (self.pos + 2).min(self.src.len()),
                Some(b'"') => break,
                Some(_) => self.pos += 1,
            }
        }
        let end = self.pos.min(self.src.len());
        self.pos = (end + 1).min(self.src.len());
        match std::str::from_utf8(&self.src[start..end]) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(syntax(Span::new(start, end), "regex is not valid UTF-8")),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> GrammarAst {
        parse(text, 100_000).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn parses_operators_and_escapes() {
        let g = ok("start ::= 'a\\x41\\u{e9}' , b | [c] {d} e? f* g+ h{2} i{1,} j{1,3} (k);");
        assert_eq!(g.rules.len(), 1);
        let ExprKind::Alt(alts) = &g.rules[0].expr.kind else {
            panic!()
        };
        let ExprKind::Concat(first) = &alts[0].kind else {
            panic!()
        };
        let ExprKind::Literal(l) = &first[0].kind else {
            panic!()
        };
        assert_eq!(l, &b"aA\xc3\xa9".to_vec());
        let ExprKind::Concat(second) = &alts[1].kind else {
            panic!()
        };
        assert_eq!(second.len(), 9);
    }

    #[test]
    fn regex_and_except_and_comments() {
        let g = ok("(* c *) s ::= #\"[a-z\\\"]+\" except!('\\n\\n', 200) (* x *) except!(#\"a\");");
        let ExprKind::Concat(items) = &g.rules[0].expr.kind else {
            panic!()
        };
        let ExprKind::Regex(r) = &items[0].kind else {
            panic!()
        };
        assert_eq!(r, "[a-z\\\"]+");
        assert!(matches!(
            items[1].kind,
            ExprKind::Except { max: Some(200), .. }
        ));
    }

    #[test]
    fn json_string_except_words() {
        let g = ok("s ::= json_string_except!('a', \"b\\u{e9}\" , '') json_string_except!();");
        let ExprKind::Concat(items) = &g.rules[0].expr.kind else {
            panic!()
        };
        let ExprKind::JsonStringExcept(words) = &items[0].kind else {
            panic!()
        };
        assert_eq!(words, &["a", "b\u{e9}", ""]);
        assert!(matches!(&items[1].kind, ExprKind::JsonStringExcept(w) if w.is_empty()));
        for (text, expected) in [
            ("s ::= json_string_except!(a);", "expected a string literal"),
            (
                "s ::= json_string_except!('a',);",
                "expected a string literal",
            ),
            ("s ::= json_string_except!('a' 'b');", "expected `)`"),
            ("s ::= json_string_except!('\\xff');", "not valid UTF-8"),
        ] {
            let errs = parse(text, 1000).unwrap_err();
            assert!(errs[0].message.contains(expected), "{text}: {errs:?}");
        }
    }

    #[test]
    fn reports_several_errors_with_positions() {
        let errs = parse("a ::= 'x' ;\nb ::= 'y\nc ::= ;\nd ::= e{3,1};", 1000).unwrap_err();
        assert!(errs.len() >= 2, "{errs:?}");
        let errs = parse("a ::= 'x' \nb ::= 'y';", 1000).unwrap_err();
        assert!(errs[0].message.contains("expected `;`"), "{errs:?}");
    }

    #[test]
    fn never_panics_on_garbage() {
        for text in [
            "",
            "a",
            "a ::=",
            "a ::= '",
            "a ::= #",
            "a ::= #\"",
            "a ::= json_string_except!(",
            "a ::= json_string_except!('x',",
            "a ::= (",
            "a ::= 'x'{",
            "a ::= 'x'{99999999999}",
            "a ::= except!(",
            "a ::= '\\u{110000}';",
            "(*",
            "a ::= '\\x4';",
            "a ::= foo!(x);",
            "::=",
            "a ::= b ;;",
        ] {
            let _ = parse(text, 1000);
        }
        let deep = format!("a ::= {}'x'{};", "(".repeat(10_000), ")".repeat(10_000));
        let errs = parse(&deep, 1000).unwrap_err();
        assert!(errs[0].message.contains("nested deeper"));
    }
}
