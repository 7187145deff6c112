//! Byte-level grammar and recognizer classes.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::limits::compile_options;
use super::{guard, structout_error};
use crate::error::ErrorKind;
use crate::{CompileError, EngineError, Grammar, Recognizer};

pub(crate) fn compile_error(py: Python<'_>, e: &CompileError) -> PyErr {
    let class = match e.kind() {
        ErrorKind::Limit => "LimitExceededError",
        _ => "GrammarError",
    };
    structout_error(py, class, e.to_string())
}

pub(crate) fn engine_error(py: Python<'_>, e: &EngineError) -> PyErr {
    match e {
        EngineError::Limit { .. } => structout_error(py, "LimitExceededError", e.to_string()),
        EngineError::Rollback { .. } => structout_error(py, "RollbackError", e.to_string()),
    }
}

/// A compiled KBNF grammar (byte level, no vocabulary). Immutable and thread-safe.
#[pyclass(name = "Grammar", module = "structout._engine", frozen)]
pub struct PyGrammar {
    pub(crate) inner: Arc<Grammar>,
}

#[pymethods]
impl PyGrammar {
    /// Whether `data` is a complete sentence of the grammar.
    fn accepts(&self, py: Python<'_>, data: &[u8]) -> PyResult<bool> {
        guard(py, || {
            let g = self.inner.clone();
            let data = data.to_vec();
            py.allow_threads(move || {
                let mut r = Recognizer::new(g);
                match r.try_feed(&data) {
                    Ok(true) => Ok(r.is_complete()),
                    Ok(false) => Ok(false),
                    Err(e) => Err(e),
                }
            })
            .map_err(|e| engine_error(py, &e))
        })
    }

    /// A fresh incremental recognizer.
    fn recognizer(&self) -> PyRecognizer {
        PyRecognizer {
            inner: Recognizer::new(self.inner.clone()),
        }
    }

    /// The normalized grammar (LNF), printed.
    fn lnf(&self) -> String {
        self.inner.lnf_debug()
    }

    #[getter]
    fn memory_usage(&self) -> usize {
        self.inner.memory_usage()
    }

    fn __repr__(&self) -> String {
        format!(
            "<structout._engine.Grammar start={:?} nonterminals={}>",
            self.inner.options().start,
            self.inner.lnf().nt_count()
        )
    }
}

/// An incremental byte-level recognizer.
#[pyclass(name = "Recognizer", module = "structout._engine")]
pub struct PyRecognizer {
    inner: Recognizer,
}

#[pymethods]
impl PyRecognizer {
    /// Feeds bytes atomically; returns False (state unchanged) if they cannot continue a sentence.
    fn feed(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<bool> {
        guard(py, || {
            self.inner.try_feed(data).map_err(|e| engine_error(py, &e))
        })
    }

    fn feed_byte(&mut self, py: Python<'_>, byte: u8) -> PyResult<bool> {
        guard(py, || {
            self.inner
                .try_feed_byte(byte)
                .map_err(|e| engine_error(py, &e))
        })
    }

    fn is_complete(&self) -> bool {
        self.inner.is_complete()
    }

    fn is_dead(&self) -> bool {
        self.inner.is_dead()
    }

    /// The bytes that may come next, ascending.
    fn allowed_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let set = self.inner.allowed_bytes();
        let v: Vec<u8> = set.iter().collect();
        PyBytes::new(py, &v)
    }

    fn rollback_to(&mut self, length: usize) -> PyResult<()> {
        if self.inner.rollback_to(length) {
            Ok(())
        } else {
            Err(pyo3::exceptions::PyValueError::new_err(format!(
                "cannot roll back to length {length}: history before {} was released",
                self.inner.horizon()
            )))
        }
    }

    fn reset(&mut self) {
        self.inner.reset();
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// Compiles KBNF text into a byte-level grammar; raises GrammarError / LimitExceededError.
#[pyfunction]
#[pyo3(signature = (text, start="start", **limits))]
fn compile_grammar(
    py: Python<'_>,
    text: &str,
    start: &str,
    limits: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyGrammar> {
    let opts = compile_options("compile_grammar", start, limits, false)?;
    guard(py, || {
        let text = text.to_owned();
        py.allow_threads(move || Grammar::compile(&text, &opts))
            .map(|g| PyGrammar { inner: Arc::new(g) })
            .map_err(|e| compile_error(py, &e))
    })
}

/// The text of a grammar bundled with the engine (e.g. "json").
#[pyfunction]
fn builtin_grammar(name: &str) -> PyResult<&'static str> {
    crate::builtin_grammar(name).ok_or_else(|| {
        pyo3::exceptions::PyKeyError::new_err(format!("no bundled grammar named {name:?}"))
    })
}

/// Grammars embedded in one larger grammar with every rule written once up to renaming (see
/// `crate::kbnf::share`; `structout.kbnf_text.SharedRules` is its Python face).
#[pyclass(name = "SharedRules", module = "structout._engine")]
pub struct PySharedRules {
    inner: crate::kbnf::share::SharedRules,
}

#[pymethods]
impl PySharedRules {
    #[new]
    fn new() -> Self {
        PySharedRules {
            inner: crate::kbnf::share::SharedRules::new(),
        }
    }

    /// The rule lines to write for `kbnf` under `prefix` and its start rule's name; `None` when
    /// `kbnf` is not one rule per line (every name it uses defined once, `start` among them).
    fn add(
        &mut self,
        py: Python<'_>,
        kbnf: &str,
        prefix: &str,
    ) -> PyResult<Option<(Vec<String>, String)>> {
        guard(py, || Ok(self.inner.add(kbnf, prefix)))
    }

    /// [`Self::add`] of the KBNF `translate_common_schema(schema, max_number_length)` returns,
    /// in one call (the text never goes through Python); `None` when the schema is outside the
    /// common shape or `add` would return `None` for its text (translate and add it then).
    #[pyo3(signature = (schema, prefix, max_number_length=None))]
    fn add_common_schema(
        &mut self,
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        prefix: &str,
        max_number_length: Option<u32>,
    ) -> PyResult<Option<(Vec<String>, String)>> {
        guard(py, || {
            Ok(super::schema::common_kbnf(schema, max_number_length)
                .and_then(|kbnf| self.inner.add(&kbnf, prefix)))
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGrammar>()?;
    m.add_class::<PySharedRules>()?;
    m.add_class::<PyRecognizer>()?;
    m.add_function(wrap_pyfunction!(compile_grammar, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_grammar, m)?)?;
    m.add(
        "PREBUILT_PATTERNS",
        pyo3::types::PyTuple::new(m.py(), crate::PREBUILT_PATTERNS)?,
    )?;
    Ok(())
}
