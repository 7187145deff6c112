//! Python bindings (`structout._engine`), compiled only with the `python` feature.

use pyo3::prelude::*;

pub mod vocab;

/// The native module `structout._engine`.
#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    vocab::register(m)?;
    Ok(())
}
