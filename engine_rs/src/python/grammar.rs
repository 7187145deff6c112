//! Byte-level grammar and recognizer classes.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::{guard, structout_error};
use crate::error::ErrorKind;
use crate::{CompileError, CompileOptions, EngineError, Grammar, Recognizer};

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

/// Builds compile options from Python keyword arguments (None keeps the default).
#[allow(clippy::too_many_arguments)]
pub(crate) fn options(
    start: &str,
    dfa_size_limit: Option<usize>,
    max_repetition: Option<u32>,
    max_grammar_symbols: Option<usize>,
    max_items_per_set: Option<usize>,
    max_total_items: Option<usize>,
    max_work_per_byte: Option<usize>,
) -> CompileOptions {
    let d = CompileOptions::default();
    CompileOptions {
        start: start.to_owned(),
        dfa_size_limit: dfa_size_limit.unwrap_or(d.dfa_size_limit),
        max_repetition: max_repetition.unwrap_or(d.max_repetition),
        max_grammar_symbols: max_grammar_symbols.unwrap_or(d.max_grammar_symbols),
        max_items_per_set: max_items_per_set.unwrap_or(d.max_items_per_set),
        max_total_items: max_total_items.unwrap_or(d.max_total_items),
        max_work_per_byte: max_work_per_byte.unwrap_or(d.max_work_per_byte),
        mask_cache_bytes: d.mask_cache_bytes,
        regular_terminals: d.regular_terminals,
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
#[pyo3(signature = (text, start="start", *, dfa_size_limit=None, max_repetition=None,
    max_grammar_symbols=None, max_items_per_set=None, max_total_items=None, max_work_per_byte=None))]
#[allow(clippy::too_many_arguments)]
fn compile_grammar(
    py: Python<'_>,
    text: &str,
    start: &str,
    dfa_size_limit: Option<usize>,
    max_repetition: Option<u32>,
    max_grammar_symbols: Option<usize>,
    max_items_per_set: Option<usize>,
    max_total_items: Option<usize>,
    max_work_per_byte: Option<usize>,
) -> PyResult<PyGrammar> {
    let opts = options(
        start,
        dfa_size_limit,
        max_repetition,
        max_grammar_symbols,
        max_items_per_set,
        max_total_items,
        max_work_per_byte,
    );
    guard(py, || {
        let text = text.to_owned();
        let result =
            py.allow_threads(move || Grammar::compile(&text, &opts).map_err(|e| (e, text)));
        match result {
            Ok(g) => Ok(PyGrammar { inner: Arc::new(g) }),
            Err((e, _)) => Err(compile_error(py, &e)),
        }
    })
}

/// The text of a grammar bundled with the engine (e.g. "json").
#[pyfunction]
fn builtin_grammar(name: &str) -> PyResult<&'static str> {
    crate::builtin_grammar(name).ok_or_else(|| {
        pyo3::exceptions::PyKeyError::new_err(format!("no bundled grammar named {name:?}"))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGrammar>()?;
    m.add_class::<PyRecognizer>()?;
    m.add_function(wrap_pyfunction!(compile_grammar, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_grammar, m)?)?;
    Ok(())
}
