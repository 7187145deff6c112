//! structout's engine: KBNF grammars → LNF → byte-level Earley recognizer → token masks.
//!
//! Layers, bottom up: [`dfa`] (regex and `except!` automata), [`kbnf`] (parsing), [`lnf`]
//! (normalization into flat buffers), [`grammar`] (compilation entry point), [`earley`] (the
//! recognizer), [`vocab`] (token vocabularies and the flat token trie). Python bindings live in `python`, behind the `python` feature.

pub mod dfa;
pub mod earley;
pub mod error;
pub mod grammar;
pub mod kbnf;
pub mod lnf;
pub mod mask;
mod persist;
pub mod vocab;

#[cfg(feature = "python")]
mod python;

pub use dfa::ByteSet;
pub use earley::{Recognizer, ScanItem};
pub use error::{CompileError, Diagnostic, EngineError, ErrorKind};
pub use grammar::{CompileOptions, Grammar};
pub use mask::{CompiledGrammar, MaskCacheStats, Matcher};

/// Grammars shipped with the engine, by name.
pub fn builtin_grammar(name: &str) -> Option<&'static str> {
    match name {
        "json" => Some(include_str!("../../schemas/json.kbnf")),
        _ => None,
    }
}
