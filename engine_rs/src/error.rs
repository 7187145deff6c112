//! Diagnostics for grammar compilation and typed engine errors.
//!
//! A [`CompileError`] carries every problem found in one pass over the grammar text, each with a byte
//! span. Rendering resolves spans to `line:col`, prints the offending line with a caret and a hint.

use std::fmt;

/// A half-open byte range `start..end` into the grammar text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end.max(start) as u32,
        }
    }
}

/// What kind of problem a diagnostic reports; lets callers map errors onto exception classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The text does not follow KBNF syntax.
    Syntax,
    /// The grammar is well-formed text but meaningless (undefined name, bad `except!`, empty language).
    Semantic,
    /// A regular expression failed to parse.
    Regex,
    /// A user-settable resource limit was exceeded.
    Limit,
}

/// One problem in a grammar, located by a span in the source text.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    /// What kind of problem.
    pub kind: ErrorKind,
    /// What is wrong, in one sentence.
    pub message: String,
    /// Where in the grammar text.
    pub span: Span,
    /// How to fix it, when there is a useful suggestion.
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A diagnostic without a hint.
    pub fn new(kind: ErrorKind, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            kind,
            message: message.into(),
            span,
            hint: None,
        }
    }

    /// This diagnostic with a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }
}

/// All problems found while compiling one grammar text.
#[derive(Clone, Debug)]
pub struct CompileError {
    source: String,
    /// Every problem found, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl CompileError {
    /// The error for `diagnostics` (at least one) in `source`.
    pub fn new(source: &str, mut diagnostics: Vec<Diagnostic>) -> CompileError {
        debug_assert!(!diagnostics.is_empty());
        // Spans never point past the text, whatever produced them.
        let len = source.len() as u32;
        for d in &mut diagnostics {
            d.span.start = d.span.start.min(len);
            d.span.end = d.span.end.clamp(d.span.start, len);
        }
        CompileError {
            source: source.to_owned(),
            diagnostics,
        }
    }

    /// The kind of the first (most relevant) diagnostic.
    pub fn kind(&self) -> ErrorKind {
        self.diagnostics
            .first()
            .map_or(ErrorKind::Semantic, |d| d.kind)
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        line_col(&self.source, offset as usize)
    }
}

pub(crate) fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(source, offset.min(source.len()));
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = source[line_start..offset].chars().count() + 1;
    (line, col)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, d) in self.diagnostics.iter().enumerate() {
            if n > 0 {
                writeln!(f)?;
            }
            let start = d.span.start as usize;
            let (line, col) = line_col(&self.source, start);
            writeln!(f, "error at {line}:{col}: {}", d.message)?;
            let line_text = self.source.lines().nth(line - 1).unwrap_or("");
            // Long lines (e.g. generated grammars) are clipped around the caret.
            let chars: Vec<char> = line_text.chars().collect();
            let from = (col - 1).saturating_sub(60);
            let to = (col - 1 + 60).min(chars.len());
            let excerpt: String = chars[from.min(to)..to].iter().collect();
            let prefix = if from > 0 { "..." } else { "" };
            writeln!(f, "  | {prefix}{excerpt}")?;
            let width = {
                let end = (d.span.end as usize).min(self.source.len());
                let (eline, ecol) = line_col(&self.source, end);
                if eline == line && ecol > col {
                    (ecol - col).min(60)
                } else {
                    1
                }
            };
            write!(
                f,
                "  | {}{}",
                " ".repeat(col - 1 - from + prefix.len()),
                "^".repeat(width)
            )?;
            if let Some(h) = &d.hint {
                write!(f, "\n  = hint: {h}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for CompileError {}

/// Errors raised while running a recognizer or matcher (never panics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineError {
    /// A resource limit was hit while processing input; the state is unchanged.
    Limit {
        /// The limit's name (as in `CompileOptions`).
        limit: &'static str,
        /// Its value.
        value: usize,
    },
    /// A rollback reached beyond the tokens a matcher keeps (its `max_rollback_tokens`); the
    /// state is unchanged.
    Rollback {
        /// Steps asked to undo.
        requested: usize,
        /// Steps that can be undone.
        available: usize,
    },
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Limit { limit, value } => write!(
                f,
                "limit `{limit}` ({value}) exceeded while parsing; raise it in the compile options"
            ),
            EngineError::Rollback {
                requested,
                available,
            } => write!(
                f,
                "cannot roll back {requested} tokens: only the last {available} can be rolled back \
                 (`max_rollback_tokens`); raise it when creating the matcher"
            ),
        }
    }
}

impl std::error::Error for EngineError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_line_col_caret_and_hint() {
        let src = "a ::= 'x';\nb ::= c ;\n";
        let e = CompileError::new(
            src,
            vec![
                Diagnostic::new(ErrorKind::Semantic, Span::new(17, 18), "undefined `c`")
                    .hint("define it"),
            ],
        );
        let text = e.to_string();
        assert!(text.starts_with("error at 2:7: undefined `c`"), "{text}");
        assert!(text.contains("  | b ::= c ;\n  |       ^"), "{text}");
        assert!(text.ends_with("= hint: define it"), "{text}");
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("é\nxé y", 6), (2, 3));
        assert_eq!(line_col("ab", 99), (1, 3));
    }
}
