//! The translator's common path (see `crate::schema`): a schema given as Python data → KBNF.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

use super::guard;
use crate::schema::{translate, Json, ASSERTING, FIXED_NAMES};

/// Deepest nesting of Python data converted, and most values: beyond either the schema declines
/// (the Python translator's own limits, 256 levels and 100,000 subschemas, count what the fast
/// path never reads, e.g. unreferenced definitions; and shared or cyclic Python data must not
/// make the conversion explode).
const MAX_DEPTH: usize = 64;
const MAX_VALUES: usize = 100_000;
/// Largest magnitude of a number whose value the fast path reads (floats are exact up to it).
const MAX_EXACT: u64 = 1 << 53;

/// The schema as JSON data (`None`: past [`MAX_DEPTH`] or [`MAX_VALUES`]); anything else than
/// JSON data (tuples, non-string keys, other objects) is `Json::Other`.
fn json_of(v: &Bound<'_, PyAny>, depth: usize, budget: &mut usize) -> Option<Json> {
    if depth > MAX_DEPTH || *budget == 0 {
        return None;
    }
    *budget -= 1;
    // (`bool` before `int`: Python's booleans are integers)
    Some(if let Ok(d) = v.downcast_exact::<PyDict>() {
        let mut members = Vec::with_capacity(d.len());
        for (k, x) in d.iter() {
            let Ok(k) = k.downcast_exact::<PyString>() else {
                return Some(Json::Other);
            };
            let Ok(k) = k.to_cow() else {
                return Some(Json::Other);
            };
            members.push((k.into_owned(), json_of(&x, depth + 1, budget)?));
        }
        Json::Object(members)
    } else if let Ok(s) = v.downcast_exact::<PyString>() {
        s.to_cow()
            .map_or(Json::Other, |s| Json::Str(s.into_owned()))
    } else if let Ok(b) = v.downcast_exact::<PyBool>() {
        Json::Bool(b.is_true())
    } else if v.is_none() {
        Json::Null
    } else if let Ok(i) = v.downcast_exact::<PyInt>() {
        Json::Number(
            i.extract::<i64>()
                .ok()
                .filter(|x| x.unsigned_abs() <= MAX_EXACT),
        )
    } else if let Ok(f) = v.downcast_exact::<PyFloat>() {
        let x = f.value();
        // (an integer-valued float is the integer: `_ir.to_fraction` reads it exactly)
        Json::Number((x.fract() == 0.0 && x.abs() <= MAX_EXACT as f64).then_some(x as i64))
    } else if let Ok(l) = v.downcast_exact::<PyList>() {
        let mut items = Vec::with_capacity(l.len());
        for x in l.iter() {
            items.push(json_of(&x, depth + 1, budget)?);
        }
        Json::Array(items)
    } else {
        Json::Other
    })
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
    guard(py, || Ok(common_kbnf(schema, max_number_length)))
}

/// [`translate_common_schema`]'s text, for the bindings that translate on the way (the embedded
/// schemas of a structural tag): `None` outside the common shape.
pub(super) fn common_kbnf(
    schema: &Bound<'_, PyAny>,
    max_number_length: Option<u32>,
) -> Option<String> {
    let mut budget = MAX_VALUES;
    json_of(schema, 0, &mut budget).and_then(|json| translate(&json, max_number_length))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(translate_common_schema, m)?)?;
    m.add("ASSERTING_SCHEMA_KEYWORDS", ASSERTING.to_vec())?;
    m.add("COMMON_SCHEMA_FIXED_NAMES", FIXED_NAMES.to_vec())?;
    Ok(())
}
