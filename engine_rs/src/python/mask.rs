//! Compiled grammars bound to a vocabulary, matchers and bitmask filling (GIL released).

use std::sync::Arc;

use numpy::{PyArray2, PyArrayMethods, PyReadwriteArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::grammar::{compile_error, engine_error};
use super::guard;
use super::limits::compile_options;
use super::vocab::extract_vocab;
use crate::mask::{grammar_cache, CompiledGrammar, Matcher};

/// A grammar compiled for one vocabulary. Immutable and thread-safe; cached by the engine.
#[pyclass(name = "CompiledGrammar", module = "structout._engine", frozen)]
pub struct PyCompiledGrammar {
    pub(super) inner: Arc<CompiledGrammar>,
}

#[pymethods]
impl PyCompiledGrammar {
    /// A new matcher (one per generated sequence). `max_rollback_tokens` bounds how many of the
    /// last tokens `rollback` can undo (None: all); with a bound, memory stays proportional to
    /// the live parse instead of the whole output.
    #[pyo3(signature = (*, max_rollback_tokens=None))]
    fn matcher(&self, max_rollback_tokens: Option<usize>) -> PyMatcher {
        let mut inner = self.inner.matcher();
        inner.set_max_rollback_tokens(max_rollback_tokens);
        PyMatcher { inner }
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab().size()
    }

    /// 32-bit words per bitmask row: ceil(vocab_size / 32).
    #[getter]
    fn mask_words(&self) -> usize {
        self.inner.mask_words()
    }

    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.vocab().eos_token_ids().to_vec()
    }

    /// The normalized grammar (LNF), printed.
    fn lnf(&self) -> String {
        self.inner.grammar().lnf_debug()
    }

    /// Heap bytes this grammar holds now: automata, rules, the slice tables built so far and
    /// its mask cache (not the vocabulary's shared token index).
    #[getter]
    fn memory_usage(&self) -> usize {
        self.inner.memory_usage()
    }

    /// Counters and size of this grammar's mask cache: hits, misses, entries, bytes and the
    /// `mask_cache_bytes` limit it was compiled with.
    fn mask_cache_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.mask_cache_stats();
        let d = PyDict::new(py);
        d.set_item("hits", s.hits)?;
        d.set_item("misses", s.misses)?;
        d.set_item("entries", s.entries)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("limit", self.inner.grammar().options().mask_cache_bytes)?;
        Ok(d)
    }

    /// Equal when both are the same native compiled grammar (as the engine's cache returns for
    /// the same text, options and vocabulary).
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .downcast::<PyCompiledGrammar>()
            .is_ok_and(|o| Arc::ptr_eq(&self.inner, &o.borrow().inner))
    }

    fn __hash__(&self) -> u64 {
        Arc::as_ptr(&self.inner) as usize as u64
    }

    fn __repr__(&self) -> String {
        format!(
            "<structout._engine.CompiledGrammar vocab_size={} nonterminals={}>",
            self.inner.vocab().size(),
            self.inner.grammar().lnf().nt_count()
        )
    }
}

/// Borrows a bitmask argument for writing: a writeable, C-contiguous numpy int32 2-D array.
fn writable_bitmask<'py>(obj: &Bound<'py, PyAny>) -> PyResult<PyReadwriteArray2<'py, i32>> {
    let arr = obj.downcast::<PyArray2<i32>>().map_err(|_| {
        let desc = match (obj.getattr("dtype"), obj.getattr("shape")) {
            (Ok(d), Ok(s)) => format!("dtype={d} shape={s}"),
            _ => format!("type {}", obj.get_type()),
        };
        PyValueError::new_err(format!(
            "the bitmask must be a numpy int32 array of shape [batch, words], got {desc}; hint: \
             allocate it with structout.allocate_token_bitmask(batch, vocab.size)"
        ))
    })?;
    if !arr.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "the bitmask must be C-contiguous; hint: use numpy.ascontiguousarray or \
             structout.allocate_token_bitmask",
        ));
    }
    arr.try_readwrite().map_err(|e| {
        PyValueError::new_err(format!(
            "the bitmask cannot be written ({e}); pass a writeable array not in use elsewhere"
        ))
    })
}

/// Borrows row `row` of a C-contiguous int32 bitmask array as u32 words.
fn row_slice<'a>(
    bm: &'a mut PyReadwriteArray2<'_, i32>,
    row: usize,
    words: usize,
) -> PyResult<&'a mut [u32]> {
    let shape = bm.shape().to_vec();
    if row >= shape[0] {
        return Err(PyIndexError::new_err(format!(
            "row {row} out of range for a bitmask with {} rows",
            shape[0]
        )));
    }
    if shape[1] < words {
        return Err(PyValueError::new_err(format!(
            "bitmask rows have {} words but this vocabulary needs {words}; hint: allocate with \
             structout.allocate_token_bitmask(batch, vocab.size)",
            shape[1]
        )));
    }
    let cols = shape[1];
    let all = bm.as_slice_mut().map_err(|_| {
        PyValueError::new_err("the bitmask must be a C-contiguous numpy int32 array")
    })?;
    let r = &mut all[row * cols..row * cols + words];
    // i32 and u32 have the same size and alignment; bits are reinterpreted, not converted.
    Ok(bytemuck_cast(r))
}

fn bytemuck_cast(s: &mut [i32]) -> &mut [u32] {
    // SAFETY: i32 and u32 have identical size, alignment and no invalid bit patterns.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u32>(), s.len()) }
}

/// The parse state of one generated sequence.
#[pyclass(name = "Matcher", module = "structout._engine")]
pub struct PyMatcher {
    inner: Matcher,
}

#[pymethods]
impl PyMatcher {
    /// Fills row `row` of `bitmask` (numpy int32 [batch, words]) with the allowed tokens.
    #[pyo3(signature = (bitmask, row=0))]
    fn fill_next_token_bitmask(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        row: usize,
    ) -> PyResult<()> {
        let mut bitmask = writable_bitmask(bitmask)?;
        let words = self.inner.compiled().mask_words();
        let out = row_slice(&mut bitmask, row, words)?;
        let m = &mut self.inner;
        guard(py, || {
            py.allow_threads(|| m.fill_next_token_bitmask(out))
                .map_err(|e| engine_error(py, &e))
        })
    }

    /// Accepts a token id; False (state unchanged) if it would make the output invalid.
    fn accept_token(&mut self, py: Python<'_>, token_id: i64) -> PyResult<bool> {
        let size = self.inner.compiled().vocab().size();
        if token_id < 0 || token_id as usize >= size {
            return Err(PyIndexError::new_err(format!(
                "token id {token_id} out of range for a vocabulary of {size} tokens"
            )));
        }
        guard(py, || {
            self.inner
                .accept_token(token_id as u32)
                .map_err(|e| engine_error(py, &e))
        })
    }

    /// Accepts raw bytes as one step; False (state unchanged) if they do not fit.
    fn accept_bytes(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<bool> {
        guard(py, || {
            self.inner
                .accept_bytes(data)
                .map_err(|e| engine_error(py, &e))
        })
    }

    /// Undoes the last `num_tokens` accepted steps (raises RollbackError beyond the window).
    #[pyo3(signature = (num_tokens=1))]
    fn rollback(&mut self, py: Python<'_>, num_tokens: usize) -> PyResult<()> {
        self.inner
            .rollback(num_tokens)
            .map_err(|e| engine_error(py, &e))
    }

    /// How many of the last tokens `rollback` can undo now.
    #[getter]
    fn rollback_window(&self) -> usize {
        self.inner.rollback_window()
    }

    /// Heap bytes held by this matcher's parse state.
    #[getter]
    fn memory_usage(&self) -> usize {
        self.inner.memory_usage()
    }

    #[getter]
    fn max_rollback_tokens(&self) -> Option<usize> {
        self.inner.max_rollback_tokens()
    }

    fn reset(&mut self) {
        self.inner.reset();
    }

    /// True once EOS was accepted, or the output is complete and nothing more can follow.
    fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// True when the output so far is complete (EOS allowed now).
    fn can_finish(&self) -> bool {
        self.inner.can_finish()
    }

    /// Bytes that every valid continuation starts with (jump-forward).
    fn forced_bytes<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = guard(py, || Ok(self.inner.forced_bytes()))?;
        Ok(PyBytes::new(py, &b))
    }

    /// An independent copy of this matcher (fork).
    fn fork(&self) -> PyMatcher {
        PyMatcher {
            inner: self.inner.clone(),
        }
    }

    fn __copy__(&self) -> PyMatcher {
        self.fork()
    }

    #[getter]
    fn num_tokens(&self) -> usize {
        self.inner.num_tokens()
    }

    /// Bytes accepted so far.
    #[getter]
    fn num_bytes(&self) -> usize {
        self.inner.recognizer().len()
    }
}

/// Fills one bitmask row per matcher (rows 0..n, or `rows`) with the GIL released, on the caller
/// and the helpers of the engine's worker pool ([`crate::mask::fill_next_token_bitmasks`]).
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, rows=None, num_threads=None))]
fn fill_next_token_bitmasks(
    py: Python<'_>,
    matchers: Vec<Bound<'_, PyMatcher>>,
    bitmask: &Bound<'_, PyAny>,
    rows: Option<Vec<usize>>,
    num_threads: Option<usize>,
) -> PyResult<()> {
    let mut bitmask = writable_bitmask(bitmask)?;
    let rows = rows.unwrap_or_else(|| (0..matchers.len()).collect());
    if rows.len() != matchers.len() {
        return Err(PyValueError::new_err(format!(
            "{} matchers but {} rows",
            matchers.len(),
            rows.len()
        )));
    }
    let shape = bitmask.shape().to_vec();
    let mut seen = vec![false; shape[0]];
    for &r in &rows {
        if r >= shape[0] || std::mem::replace(&mut seen[r], true) {
            return Err(PyIndexError::new_err(format!(
                "row {r} is out of range or used twice (bitmask has {} rows)",
                shape[0]
            )));
        }
    }
    let mut guards: Vec<PyRefMut<'_, PyMatcher>> = Vec::with_capacity(matchers.len());
    for m in &matchers {
        guards.push(
            m.try_borrow_mut().map_err(|_| {
                PyValueError::new_err("a matcher is in use elsewhere or listed twice")
            })?,
        );
    }
    let cols = shape[1];
    for g in &guards {
        if g.inner.compiled().mask_words() > cols {
            return Err(PyValueError::new_err(format!(
                "bitmask rows have {cols} words, too few for a matcher's vocabulary"
            )));
        }
    }
    let all = bytemuck_cast(bitmask.as_slice_mut().map_err(|_| {
        PyValueError::new_err("the bitmask must be a C-contiguous numpy int32 array")
    })?);
    // Split the buffer into disjoint rows, then pair each matcher with its row.
    let mut row_slices: Vec<Option<&mut [u32]>> = all.chunks_mut(cols.max(1)).map(Some).collect();
    let mut jobs: Vec<(&mut Matcher, &mut [u32])> = Vec::with_capacity(rows.len());
    for (g, &r) in guards.iter_mut().zip(&rows) {
        let slice = row_slices[r].take().expect("rows checked unique");
        jobs.push((&mut g.inner, slice));
    }
    let threads = num_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let result = guard(py, || {
        Ok(py.allow_threads(|| crate::mask::fill_next_token_bitmasks(&mut jobs, threads)))
    })?;
    result.map_err(|e| engine_error(py, &e))
}

/// Compiles KBNF text for a vocabulary, through the engine's cache (and its disk layer under
/// `cache_dir` when given).
#[pyfunction]
#[pyo3(signature = (text, vocab, start="start", cache_dir=None, **limits))]
fn compile_kbnf(
    py: Python<'_>,
    text: &str,
    vocab: &Bound<'_, PyAny>,
    start: &str,
    cache_dir: Option<std::path::PathBuf>,
    limits: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyCompiledGrammar> {
    cached_compile(
        py,
        "compile_kbnf",
        text,
        vocab,
        start,
        cache_dir,
        limits,
        grammar_cache::Write::Now,
    )
    .map(|(g, _)| g)
}

/// [`compile_kbnf`], also saying where the grammar came from: `"memory"`, `"disk"` or
/// `"compiled"`; with `defer_write`, a grammar compiled now is not written under `cache_dir`
/// (the caller writes it later with [`store_compiled`]).
#[pyfunction]
#[pyo3(signature = (text, vocab, start="start", cache_dir=None, *, defer_write=false, **limits))]
#[allow(clippy::too_many_arguments)]
fn load_or_compile(
    py: Python<'_>,
    text: &str,
    vocab: &Bound<'_, PyAny>,
    start: &str,
    cache_dir: Option<std::path::PathBuf>,
    defer_write: bool,
    limits: Option<&Bound<'_, PyDict>>,
) -> PyResult<(PyCompiledGrammar, &'static str)> {
    let write = if defer_write {
        grammar_cache::Write::Later
    } else {
        grammar_cache::Write::Now
    };
    cached_compile(
        py,
        "load_or_compile",
        text,
        vocab,
        start,
        cache_dir,
        limits,
        write,
    )
    .map(|(g, origin)| (g, origin.as_str()))
}

/// Writes `grammar`, compiled from `text`, under `cache_dir` where [`load_or_compile`] looks for
/// it (GIL released); false when the write failed or `text` is not the grammar's (counted in
/// `disk_errors`).
#[pyfunction]
fn store_compiled(
    py: Python<'_>,
    text: &str,
    grammar: &PyCompiledGrammar,
    cache_dir: std::path::PathBuf,
) -> PyResult<bool> {
    guard(py, || {
        let text = text.to_owned();
        let compiled = grammar.inner.clone();
        Ok(py.allow_threads(move || grammar_cache::store(&cache_dir, &text, &compiled)))
    })
}

#[allow(clippy::too_many_arguments)]
fn cached_compile(
    py: Python<'_>,
    caller: &str,
    text: &str,
    vocab: &Bound<'_, PyAny>,
    start: &str,
    cache_dir: Option<std::path::PathBuf>,
    limits: Option<&Bound<'_, PyDict>>,
    write: grammar_cache::Write,
) -> PyResult<(PyCompiledGrammar, grammar_cache::Origin)> {
    let vocab = extract_vocab(vocab)?;
    let opts = compile_options(caller, start, limits, true)?;
    guard(py, || {
        let text = text.to_owned();
        py.allow_threads(move || {
            grammar_cache::compile_with(&text, &opts, &vocab, cache_dir.as_deref(), write)
        })
        .map(|(inner, origin)| (PyCompiledGrammar { inner }, origin))
        .map_err(|e| compile_error(py, &e))
    })
}

/// Hit/miss statistics of the compiled-grammar cache.
#[pyfunction]
fn cache_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let s = grammar_cache::stats();
    let d = PyDict::new(py);
    d.set_item("hits", s.hits)?;
    d.set_item("misses", s.misses)?;
    d.set_item("disk_hits", s.disk_hits)?;
    d.set_item("disk_writes", s.disk_writes)?;
    d.set_item("disk_errors", s.disk_errors)?;
    d.set_item("entries", s.entries)?;
    d.set_item("capacity", s.capacity)?;
    Ok(d)
}

/// Sets the compiled-grammar cache capacity; `clear=True` empties it and resets the counters.
#[pyfunction]
#[pyo3(signature = (capacity=grammar_cache::DEFAULT_CAPACITY, clear=false))]
fn configure_cache(capacity: usize, clear: bool) {
    grammar_cache::configure(capacity, clear);
}

/// Applies `bitmask` (int32 `[1 or >= rows, words]`, C-contiguous) to `logits` (a writeable
/// C-contiguous float32 or float64 `[rows, vocab]` numpy array) in place, with the GIL released.
/// False when `logits` has another dtype or layout (the caller then uses its generic path).
#[pyfunction]
fn apply_token_bitmask_inplace(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let bm = bitmask
        .downcast::<PyArray2<i32>>()
        .map_err(|_| {
            PyValueError::new_err("the bitmask must be a numpy int32 array of shape [batch, words]")
        })?
        .try_readonly()
        .map_err(|e| PyValueError::new_err(format!("the bitmask cannot be read ({e})")))?;
    let (bm_rows, cols) = (bm.shape()[0], bm.shape()[1]);
    let words: &[i32] = bm
        .as_slice()
        .map_err(|_| PyValueError::new_err("the bitmask must be C-contiguous"))?;
    if let Ok(arr) = logits.downcast::<PyArray2<f32>>() {
        return apply_rows(py, arr, words, bm_rows, cols);
    }
    if let Ok(arr) = logits.downcast::<PyArray2<f64>>() {
        return apply_rows(py, arr, words, bm_rows, cols);
    }
    Ok(false)
}

fn apply_rows<T: crate::mask::Logit + numpy::Element + Send>(
    py: Python<'_>,
    arr: &Bound<'_, PyArray2<T>>,
    words: &[i32],
    bm_rows: usize,
    cols: usize,
) -> PyResult<bool> {
    if !arr.is_c_contiguous() {
        return Ok(false);
    }
    let mut rw = arr
        .try_readwrite()
        .map_err(|e| PyValueError::new_err(format!("the logits cannot be written ({e})")))?;
    let (rows, vocab) = (rw.shape()[0], rw.shape()[1]);
    if bm_rows != 1 && bm_rows < rows {
        return Err(PyValueError::new_err(format!(
            "bitmask has {bm_rows} rows but logits have {rows}"
        )));
    }
    let all = rw
        .as_slice_mut()
        .map_err(|_| PyValueError::new_err("the logits must be C-contiguous"))?;
    // SAFETY: i32 and u32 have identical size, alignment and no invalid bit patterns.
    let words: &[u32] =
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u32>(), words.len()) };
    guard(py, || {
        py.allow_threads(|| {
            for (r, row) in all.chunks_mut(vocab.max(1)).enumerate().take(rows) {
                let w = if bm_rows == 1 { 0 } else { r };
                crate::mask::apply_bitmask(row, &words[w * cols..(w + 1) * cols]);
            }
        });
        Ok(true)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCompiledGrammar>()?;
    m.add_class::<PyMatcher>()?;
    m.add_function(wrap_pyfunction!(compile_kbnf, m)?)?;
    m.add_function(wrap_pyfunction!(load_or_compile, m)?)?;
    m.add_function(wrap_pyfunction!(store_compiled, m)?)?;
    m.add_function(wrap_pyfunction!(fill_next_token_bitmasks, m)?)?;
    m.add_function(wrap_pyfunction!(cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(configure_cache, m)?)?;
    m.add_function(wrap_pyfunction!(apply_token_bitmask_inplace, m)?)?;
    Ok(())
}
