//! Automaton utilities for the schema translator (whose character-level automata are built in
//! Python): minimization.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::guard;
use crate::dfa::minimal_partition;

/// The states of the minimal automaton of a complete DFA: `transitions` holds
/// `states * classes` native-endian `u32` targets (row by row, e.g. `array('I').tobytes()`),
/// `accepting` one byte per state (non-zero: accepting). Returns each state's state in the
/// minimal automaton, numbered breadth-first from the start's (`0`) over the classes in order.
#[pyfunction]
fn minimal_partition_of(
    py: Python<'_>,
    classes: usize,
    transitions: &[u8],
    accepting: &[u8],
    start: u32,
) -> PyResult<Vec<u32>> {
    let states = accepting.len();
    if classes == 0 || transitions.len() != states * classes * 4 || start as usize >= states {
        return Err(PyValueError::new_err(format!(
            "minimal_partition_of: expected {states} states x {classes} classes of 4-byte \
             targets and a start below {states}, got {} bytes and start {start}",
            transitions.len()
        )));
    }
    let trans: Vec<u32> = transitions
        .chunks_exact(4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if let Some(bad) = trans.iter().find(|&&t| t as usize >= states) {
        return Err(PyValueError::new_err(format!(
            "minimal_partition_of: target {bad} is not one of the {states} states"
        )));
    }
    let accept: Vec<bool> = accepting.iter().map(|&a| a != 0).collect();
    guard(py, || {
        Ok(py
            .allow_threads(|| minimal_partition(classes, &trans, &accept, start))
            .0)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(minimal_partition_of, m)?)?;
    Ok(())
}
