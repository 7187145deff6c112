//! The background disk writer (`mask::disk_writer`) for the Python caches: entries are handed
//! over with the interpreter lock held only to copy them; waiting (for room, for a flush, for a
//! pause) releases it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::mask::PyCompiledGrammar;
use crate::mask::disk_writer::{self, Job, Tally};

/// A timeout in seconds (None: no limit); negative or not finite is an error.
fn timeout(seconds: Option<f64>) -> PyResult<Option<Duration>> {
    seconds
        .map(|s| {
            Duration::try_from_secs_f64(s).map_err(|_| {
                PyValueError::new_err(format!("timeout must be >= 0 seconds, not {s}"))
            })
        })
        .transpose()
}

/// Submits on this process's writer with the GIL released (a full queue waits for room); runs
/// the job in the caller when no writer thread can be started.
fn submit(py: Python<'_>, job: Job, unless_removed: Option<PathBuf>, tally: Option<Arc<Tally>>) {
    match disk_writer::writer() {
        Some(w) => py.allow_threads(move || w.submit(job, unless_removed, tally)),
        None => py.allow_threads(move || disk_writer::run_now(job, unless_removed, tally)),
    }
}

/// One cache's files written in the background, and their outcomes.
#[pyclass(name = "DiskWrites", module = "structout._engine", frozen)]
pub struct PyDiskWrites {
    tally: Arc<Tally>,
}

#[pymethods]
impl PyDiskWrites {
    #[new]
    fn new() -> Self {
        PyDiskWrites {
            tally: Arc::default(),
        }
    }

    /// Queues an atomic write of `data` to `path` (a temporary file in the same directory,
    /// created with its parents, renamed over `path`), skipped if `unless_removed` names a
    /// directory that is gone by then.
    #[pyo3(signature = (path, data, unless_removed=None))]
    fn write_later(
        &self,
        py: Python<'_>,
        path: PathBuf,
        data: &[u8],
        unless_removed: Option<PathBuf>,
    ) {
        let job = Job::File {
            path,
            data: data.to_vec(),
        };
        submit(py, job, unless_removed, Some(self.tally.clone()));
    }

    /// Files written.
    #[getter]
    fn written(&self) -> u64 {
        self.tally.written()
    }

    /// Writes that failed.
    #[getter]
    fn failed(&self) -> u64 {
        self.tally.failed()
    }

    /// The first failure's message not taken yet, else None.
    fn take_error(&self) -> Option<String> {
        self.tally.take_error()
    }
}

/// Queues the write of `grammar`, compiled from `text`, under `cache_dir` (what
/// `store_compiled` does, after the jobs queued before it), skipped if `unless_removed` names a
/// directory that is gone by then; counted in `cache_stats()`.
#[pyfunction]
#[pyo3(signature = (text, grammar, cache_dir, unless_removed=None))]
fn store_compiled_later(
    py: Python<'_>,
    text: &str,
    grammar: &PyCompiledGrammar,
    cache_dir: PathBuf,
    unless_removed: Option<PathBuf>,
) {
    let job = Job::Grammar {
        dir: cache_dir,
        text: text.to_owned(),
        grammar: grammar.inner.clone(),
    };
    submit(py, job, unless_removed, None);
}

/// Waits (GIL released) until the writes queued so far are done; false when `timeout` seconds
/// passed first.
#[pyfunction]
#[pyo3(signature = (timeout_s=None))]
fn flush_disk_writes(py: Python<'_>, timeout_s: Option<f64>) -> PyResult<bool> {
    let limit = timeout(timeout_s)?;
    Ok(match disk_writer::current() {
        Some(w) => py.allow_threads(move || w.flush(limit)),
        None => true,
    })
}

/// Holds the writer between jobs: true once no write is running, false when `timeout` seconds
/// passed first (paused all the same), until as many `resume_disk_writes` calls. `start=False`
/// (before a fork) pauses only a writer that this process has started: none is started for it.
#[pyfunction]
#[pyo3(signature = (timeout_s=None, *, start=true))]
fn pause_disk_writes(py: Python<'_>, timeout_s: Option<f64>, start: bool) -> PyResult<bool> {
    let limit = timeout(timeout_s)?;
    let w = if start {
        disk_writer::writer()
    } else {
        disk_writer::current()
    };
    Ok(match w {
        Some(w) => py.allow_threads(move || w.pause(limit)),
        None => true,
    })
}

/// Ends one `pause_disk_writes` (the writer goes on after the last).
#[pyfunction]
fn resume_disk_writes() {
    if let Some(w) = disk_writer::current() {
        w.resume();
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDiskWrites>()?;
    m.add_function(wrap_pyfunction!(store_compiled_later, m)?)?;
    m.add_function(wrap_pyfunction!(flush_disk_writes, m)?)?;
    m.add_function(wrap_pyfunction!(pause_disk_writes, m)?)?;
    m.add_function(wrap_pyfunction!(resume_disk_writes, m)?)?;
    Ok(())
}
