//! The translator's common path: JSON Schemas of the most common shape → KBNF, in Rust.
//!
//! Most schemas a server sees (function and tool parameters, response formats) are objects of
//! typed properties, arrays of them, strings, numbers, enums and definitions they refer to. Translating those in
//! Python costs about half of a new schema's compile; here it costs a few microseconds.
//!
//! Invariants:
//! - [`translate`] returns `Some(text)` only for a schema in the subset (`common_shape.rs`), and
//!   then `text` is byte for byte what the Python translator (`structout.schema.to_kbnf`, compact
//!   layout, default limits) prints for it, so every exactness guarantee of that translator
//!   carries over. The Python translator is the reference: `tests/test_schema_fast_path.py`
//!   compares the two on every schema of the MaskBench share and the JSON Schema Test Suite.
//! - Anything outside the subset, or anything it is unsure of, is `None`: the caller translates
//!   in Python (which also reports errors and warnings). Declining is always correct.
//! - Work and memory are linear in the schema (bounded nesting and subschema count, no
//!   automata).

mod emit;

pub use emit::FIXED_NAMES;
mod common_shape;
mod enums;
mod formats;
mod numbers;
mod patterns;

pub use common_shape::{Json, ASSERTING};

/// The KBNF of `schema` (see the module invariants), with numbers limited to
/// `max_number_length` characters when given (the Python translator's option of that name);
/// `None` when the schema is outside the subset.
pub fn translate(schema: &Json, max_number_length: Option<u32>) -> Option<String> {
    let nodes = common_shape::Nodes::of(schema)?;
    emit::Emitter::new(&nodes, max_number_length).run()
}

#[cfg(test)]
mod tests;
