//! structout's engine: KBNF grammars → LNF → byte-level Earley recognizer → token masks.
//!
//! Layers, bottom up: `options` (compile options, a leaf), `dfa` (regex and `except!`
//! automata), `kbnf` (parsing), `lnf` (normalization into flat buffers), `grammar` (the
//! compilation entry point), `earley` (the recognizer), [`vocab`] (token vocabularies and the
//! flat token trie), `mask` (grammars bound to a vocabulary, matchers, the compiled-grammar
//! [`grammar_cache`] with its disk layer and the [`disk_writer`] thread that writes it in the
//! background), `persist` (the disk codec). Python bindings live in `python`, behind the `python`
//! feature.
//!
//! The public surface is what this root re-exports plus [`vocab`], [`grammar_cache`] and
//! [`disk_writer`]; the layers are crate-private so they can change without breaking users.

#![warn(missing_docs)]

mod dfa;
mod earley;
mod error;
mod grammar;
mod kbnf;
mod lnf;
mod mask;
mod options;
mod persist;
pub mod schema;
pub mod vocab;

#[cfg(feature = "python")]
mod python;

pub use dfa::{ByteSet, PREBUILT_PATTERNS};
pub use earley::{Recognizer, ScanItem};
pub use error::{CompileError, Diagnostic, EngineError, ErrorKind};
pub use grammar::Grammar;
pub use kbnf::share::SharedRules;
pub use mask::{
    apply_bitmask, disk_writer, fill_next_token_bitmasks, grammar_cache, CompiledGrammar, Logit,
    MaskCacheStats, Matcher,
};
pub use options::CompileOptions;

/// Grammars shipped with the engine, by name.
pub fn builtin_grammar(name: &str) -> Option<&'static str> {
    match name {
        "json" => Some(include_str!("../../schemas/json.kbnf")),
        _ => None,
    }
}
