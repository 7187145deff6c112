//! pyo3 bindings: the `structout._engine` extension module.
//!
//! Every entry point converts engine errors into the exception classes of `structout.errors` and
//! catches panics, so no panic crosses the FFI boundary.

mod automata;
mod disk;
mod grammar;
mod heap;
mod limits;
mod mask;
mod schema;
pub mod vocab;

use pyo3::prelude::*;

/// The extension's allocator. Compiling a grammar makes thousands of short-lived allocations
/// (automaton rows, production vectors, hash tables): mimalloc serves them 10-15% faster overall
/// than the C library's `malloc`. Only this module sets it, so the engine as a Rust library
/// leaves the choice to its users.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Raises `structout.errors.<class_name>(message)`.
pub(crate) fn structout_error(py: Python<'_>, class_name: &str, message: String) -> PyErr {
    let made = py
        .import("structout.errors")
        .and_then(|m| m.getattr(class_name))
        .and_then(|cls| cls.call1((message.clone(),)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

/// Runs `f`, turning a panic into `structout.errors.StructoutError` instead of unwinding into Python.
pub(crate) fn guard<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(structout_error(
                py,
                "StructoutError",
                format!("internal engine error (please report): {msg}"),
            ))
        }
    }
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // First, before the engine's heap holds anything (see `heap`).
    heap::reserve_small_page_arena();
    heap::purge_by_reset();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    automata::register(m)?;
    grammar::register(m)?;
    vocab::register(m)?;
    mask::register(m)?;
    disk::register(m)?;
    limits::register(m)?;
    schema::register(m)?;
    Ok(())
}
