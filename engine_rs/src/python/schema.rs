//! The translator's common path (see `crate::schema`): a schema given as Python data → KBNF.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

use super::guard;
use crate::schema::{translate, Json, ASSERTING};

/// Deepest nesting of Python data converted; deeper values become `Json::Other` (the fast path
/// declines schemas nested that deep anyway).
const MAX_DEPTH: usize = 64;

/// The schema as JSON data; anything else (tuples, non-string keys, other objects) is
/// `Json::Other`.
fn json_of(v: &Bound<'_, PyAny>, depth: usize) -> Json {
    if depth > MAX_DEPTH {
        return Json::Other;
    }
    // (`bool` before `int`: Python's booleans are integers)
    if let Ok(d) = v.downcast_exact::<PyDict>() {
        let mut members = Vec::with_capacity(d.len());
        for (k, x) in d.iter() {
            let Ok(k) = k.downcast_exact::<PyString>() else {
                return Json::Other;
            };
            let Ok(k) = k.to_cow() else {
                return Json::Other;
            };
            members.push((k.into_owned(), json_of(&x, depth + 1)));
        }
        Json::Object(members)
    } else if let Ok(s) = v.downcast_exact::<PyString>() {
        s.to_cow()
            .map_or(Json::Other, |s| Json::Str(s.into_owned()))
    } else if let Ok(b) = v.downcast_exact::<PyBool>() {
        Json::Bool(b.is_true())
    } else if v.is_none() {
        Json::Null
    } else if v.downcast_exact::<PyInt>().is_ok() || v.downcast_exact::<PyFloat>().is_ok() {
        Json::Number
    } else if let Ok(l) = v.downcast_exact::<PyList>() {
        Json::Array(l.iter().map(|x| json_of(&x, depth + 1)).collect())
    } else {
        Json::Other
    }
}

/// The KBNF of a JSON Schema (plain `dict`/`list`/`str`/number/`bool`/`None` data) in the
/// compact layout with default limits, exactly as `structout.schema.to_kbnf` prints it, when
/// the schema is of the common shape the engine translates; `None` otherwise (translate it in
/// Python then).
#[pyfunction]
#[pyo3(signature = (schema, max_number_length=None))]
fn translate_common_schema(
    py: Python<'_>,
    schema: &Bound<'_, PyAny>,
    max_number_length: Option<u32>,
) -> PyResult<Option<String>> {
    guard(py, || {
        let json = json_of(schema, 0);
        Ok(translate(&json, max_number_length))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(translate_common_schema, m)?)?;
    m.add("ASSERTING_SCHEMA_KEYWORDS", ASSERTING.to_vec())?;
    Ok(())
}
