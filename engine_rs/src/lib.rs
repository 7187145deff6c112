//! structout engine: KBNF grammars, a byte-level Earley recognizer and token masks.

pub mod vocab;

#[cfg(feature = "python")]
mod python;
