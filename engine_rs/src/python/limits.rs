//! Engine limits across the FFI: one table from Python keyword name to [`CompileOptions`] field.
//!
//! Every binding that compiles takes its limits as one `**limits` mapping and builds its
//! [`CompileOptions`] with [`compile_options`]; `structout._engine.ENGINE_LIMITS` publishes the
//! table (name → default) so Python checks its `structout.Limits` fields against it. Adding a
//! limit: a field of `CompileOptions`, a row of [`LIMITS`] and a field of `structout.Limits`.
//!
//! Invariant: a name not in the table (or, for byte-level grammars, a vocabulary-only limit) is a
//! `TypeError`, exactly as an unknown keyword argument of a Python function; `None` keeps the
//! default.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::CompileOptions;

/// Reads or writes one limit of [`CompileOptions`]; values cross as Python ints.
enum Field {
    Usize(fn(&mut CompileOptions) -> &mut usize),
    U32(fn(&mut CompileOptions) -> &mut u32),
}

/// One engine limit as Python names it.
struct Limit {
    name: &'static str,
    field: Field,
    /// Applies to grammars compiled for a vocabulary only (token masks), not byte-level ones.
    vocabulary_only: bool,
}

/// Every engine limit, in the order `structout.Limits` lists them.
const LIMITS: &[Limit] = &[
    Limit {
        name: "dfa_size_limit",
        field: Field::Usize(|o| &mut o.dfa_size_limit),
        vocabulary_only: false,
    },
    Limit {
        name: "max_repetition",
        field: Field::U32(|o| &mut o.max_repetition),
        vocabulary_only: false,
    },
    Limit {
        name: "max_grammar_symbols",
        field: Field::Usize(|o| &mut o.max_grammar_symbols),
        vocabulary_only: false,
    },
    Limit {
        name: "max_items_per_set",
        field: Field::Usize(|o| &mut o.max_items_per_set),
        vocabulary_only: false,
    },
    Limit {
        name: "max_total_items",
        field: Field::Usize(|o| &mut o.max_total_items),
        vocabulary_only: false,
    },
    Limit {
        name: "max_work_per_byte",
        field: Field::Usize(|o| &mut o.max_work_per_byte),
        vocabulary_only: false,
    },
    Limit {
        name: "mask_cache_bytes",
        field: Field::Usize(|o| &mut o.mask_cache_bytes),
        vocabulary_only: true,
    },
];

/// Compile options for `start` with the limits of `limits` (`None` values keep the defaults).
/// `function` names the Python function in errors; `vocabulary` says whether it compiles for a
/// vocabulary (which takes the vocabulary-only limits too).
pub(crate) fn compile_options(
    function: &str,
    start: &str,
    limits: Option<&Bound<'_, PyDict>>,
    vocabulary: bool,
) -> PyResult<CompileOptions> {
    let mut opts = CompileOptions {
        start: start.to_owned(),
        ..CompileOptions::default()
    };
    let Some(limits) = limits else {
        return Ok(opts);
    };
    for (key, value) in limits.iter() {
        let name: String = key.extract()?;
        let limit = LIMITS
            .iter()
            .find(|l| l.name == name && (vocabulary || !l.vocabulary_only))
            .ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "{function}() got an unexpected keyword argument '{name}'"
                ))
            })?;
        if value.is_none() {
            continue;
        }
        let named = |e: PyErr| {
            if e.is_instance_of::<PyTypeError>(limits.py()) {
                PyTypeError::new_err(format!("argument '{name}': {}", e.value(limits.py())))
            } else {
                e
            }
        };
        match limit.field {
            Field::Usize(f) => *f(&mut opts) = value.extract().map_err(named)?,
            Field::U32(f) => *f(&mut opts) = value.extract().map_err(named)?,
        }
    }
    Ok(opts)
}

/// `ENGINE_LIMITS`: every limit's name and default, in table order.
fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    let mut opts = CompileOptions::default();
    for limit in LIMITS {
        match limit.field {
            Field::Usize(f) => d.set_item(limit.name, *f(&mut opts))?,
            Field::U32(f) => d.set_item(limit.name, *f(&mut opts))?,
        }
    }
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ENGINE_LIMITS", defaults(m.py())?)?;
    Ok(())
}
