//! Python class `structout._engine.Vocabulary` over [`crate::vocab::Vocabulary`].
//!
//! The public Python API (`structout.Vocabulary`, in `structout/vocab.py`) wraps this class and
//! keeps it in its `_native` attribute; [`extract_vocab`] accepts either form, so functions of
//! the native module that take a vocabulary should use it.

use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString, PyType};

use crate::vocab::{AddedToken, TokenEncoding, VocabError, Vocabulary};

/// A model vocabulary: token id → bytes, special flags, EOS ids, fingerprint and token trie.
#[pyclass(name = "Vocabulary", module = "structout._engine", frozen)]
pub struct PyVocabulary {
    /// The shared Rust vocabulary.
    pub inner: Arc<Vocabulary>,
}

/// The Rust vocabulary behind `obj`: a native `Vocabulary` or a `structout.Vocabulary`
/// (anything with a native `_native` attribute). Raises `TypeError` otherwise.
#[allow(dead_code)] // for the matcher/grammar bindings
pub fn extract_vocab(obj: &Bound<'_, PyAny>) -> PyResult<Arc<Vocabulary>> {
    if let Ok(v) = obj.downcast::<PyVocabulary>() {
        return Ok(v.get().inner.clone());
    }
    if let Ok(native) = obj.getattr("_native") {
        if let Ok(v) = native.downcast::<PyVocabulary>() {
            return Ok(v.get().inner.clone());
        }
    }
    Err(PyTypeError::new_err(format!(
        "expected a structout.Vocabulary, got {}; hint: build one with \
         structout.Vocabulary.from_hf(tokenizer)",
        obj.get_type().name()?
    )))
}

/// `structout.errors.VocabularyError(msg)` (`ValueError` if that module cannot be imported).
pub fn vocabulary_error(py: Python<'_>, msg: String) -> PyErr {
    match py
        .import("structout.errors")
        .and_then(|m| m.getattr("VocabularyError"))
        .and_then(|c| Ok(c.downcast_into::<PyType>()?))
    {
        Ok(cls) => PyErr::from_type(cls, msg),
        Err(_) => PyValueError::new_err(msg),
    }
}

/// A [`VocabError`] as `structout.errors.VocabularyError`.
pub fn vocab_error(py: Python<'_>, err: VocabError) -> PyErr {
    vocabulary_error(py, err.to_string())
}

/// Token byte strings copied into one buffer: `spans[i]` is `None` or a range of `buf`.
struct FlatTokens {
    buf: Vec<u8>,
    spans: Vec<Option<(usize, usize)>>,
}

impl FlatTokens {
    fn slices(&self) -> Vec<Option<&[u8]>> {
        self.spans
            .iter()
            .map(|s| s.map(|(a, b)| &self.buf[a..b]))
            .collect()
    }

    fn strs(&self) -> Vec<Option<&str>> {
        // Only built from `str` items, so every span is UTF-8 on char boundaries.
        self.spans
            .iter()
            .map(|s| s.and_then(|(a, b)| std::str::from_utf8(&self.buf[a..b]).ok()))
            .collect()
    }
}

/// Read a list whose items are `None` or bytes-like (`bytes`, `bytearray`) or, with
/// `allow_str`, `str` (its UTF-8); with `strings_only`, only `None`/`str` are accepted.
fn flatten_tokens(tokens: &Bound<'_, PyAny>, strings_only: bool) -> PyResult<FlatTokens> {
    let len = tokens.len().unwrap_or(0);
    let mut flat = FlatTokens {
        buf: Vec::with_capacity(len * 8),
        spans: Vec::with_capacity(len),
    };
    for (i, item) in tokens.try_iter()?.enumerate() {
        let item = item?;
        if item.is_none() {
            flat.spans.push(None);
            continue;
        }
        let start = flat.buf.len();
        if let Ok(s) = item.downcast::<PyString>() {
            flat.buf.extend_from_slice(s.to_cow()?.as_bytes());
        } else if strings_only {
            return Err(PyTypeError::new_err(format!(
                "token {i}: expected str or None, got {}",
                item.get_type().name()?
            )));
        } else if let Ok(b) = item.downcast::<PyBytes>() {
            flat.buf.extend_from_slice(b.as_bytes());
        } else if let Ok(b) = item.downcast::<PyByteArray>() {
            flat.buf.extend_from_slice(&b.to_vec());
        } else {
            return Err(PyTypeError::new_err(format!(
                "token {i}: expected bytes, str or None, got {}",
                item.get_type().name()?
            )));
        }
        flat.spans.push(Some((start, flat.buf.len())));
    }
    Ok(flat)
}

fn new_vocab(py: Python<'_>, r: Result<Vocabulary, VocabError>) -> PyResult<PyVocabulary> {
    match r {
        Ok(v) => Ok(PyVocabulary { inner: Arc::new(v) }),
        Err(e) => Err(vocab_error(py, e)),
    }
}

#[pymethods]
impl PyVocabulary {
    /// Build from explicit token bytes (`None` = special/unused id).
    #[staticmethod]
    #[pyo3(signature = (tokens, eos_token_ids = Vec::new(), vocab_size = None))]
    fn from_bytes(
        py: Python<'_>,
        tokens: &Bound<'_, PyAny>,
        eos_token_ids: Vec<u32>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let flat = flatten_tokens(tokens, false)?;
        let r = py.allow_threads(|| {
            Vocabulary::from_byte_tokens(&flat.slices(), &eos_token_ids, vocab_size)
        });
        new_vocab(py, r)
    }

    /// Build from Hugging Face token strings by id (`None` = undefined id), spelled in `kind`
    /// (`"byte_level"`, `"sentencepiece"` or `"raw"`), plus added tokens as
    /// `(id, content, special)`.
    #[staticmethod]
    #[pyo3(signature = (tokens, kind, added_tokens = Vec::new(), eos_token_ids = Vec::new(),
                        vocab_size = None, byte_fallback = true))]
    fn from_hf_tokens(
        py: Python<'_>,
        tokens: &Bound<'_, PyAny>,
        kind: &str,
        added_tokens: Vec<(u32, String, bool)>,
        eos_token_ids: Vec<u32>,
        vocab_size: Option<usize>,
        byte_fallback: bool,
    ) -> PyResult<Self> {
        let encoding = match kind {
            "byte_level" => TokenEncoding::ByteLevel,
            "sentencepiece" => TokenEncoding::SentencePiece { byte_fallback },
            "raw" => TokenEncoding::Raw,
            other => {
                return Err(vocabulary_error(
                    py,
                    format!(
                        "unknown tokenizer kind {other:?}; expected 'byte_level', \
                         'sentencepiece' or 'raw'"
                    ),
                ))
            }
        };
        let flat = flatten_tokens(tokens, true)?;
        let added: Vec<AddedToken> = added_tokens
            .into_iter()
            .map(|(id, content, special)| AddedToken {
                id,
                content,
                special,
            })
            .collect();
        let r = py.allow_threads(|| {
            Vocabulary::from_hf_tokens(&flat.strs(), encoding, &added, &eos_token_ids, vocab_size)
        });
        new_vocab(py, r)
    }

    /// Build from the contents of a tiktoken rank file and special tokens `(text, id)`.
    #[staticmethod]
    #[pyo3(signature = (data, special_tokens = Vec::new(), eos_token_ids = Vec::new(),
                        vocab_size = None))]
    fn from_tiktoken(
        py: Python<'_>,
        data: &[u8],
        special_tokens: Vec<(String, u32)>,
        eos_token_ids: Vec<u32>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let r = py.allow_threads(|| {
            Vocabulary::from_tiktoken(data, &special_tokens, &eos_token_ids, vocab_size)
        });
        new_vocab(py, r)
    }

    /// Number of token ids (the model's vocabulary size; bitmask width).
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    fn __len__(&self) -> usize {
        self.inner.size()
    }

    /// EOS token ids (sorted).
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.eos_token_ids().to_vec()
    }

    /// Stable 64-bit fingerprint (cache key).
    #[getter]
    fn fingerprint(&self) -> u64 {
        self.inner.fingerprint()
    }

    /// Number of text tokens (non-special, non-empty).
    #[getter]
    fn num_text_tokens(&self) -> usize {
        self.inner.num_text_tokens()
    }

    /// Number of nodes of the token trie (root included).
    #[getter]
    fn trie_nodes(&self) -> usize {
        self.inner.trie().len()
    }

    /// Length of the longest text token in bytes.
    #[getter]
    fn max_token_len(&self) -> usize {
        self.inner.max_token_len()
    }

    /// Heap memory used by the vocabulary and its trie, in bytes.
    #[getter]
    fn heap_bytes(&self) -> usize {
        self.inner.heap_bytes()
    }

    /// Bytes of token `token_id` (a special token's literal text; empty for padding).
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: i64) -> PyResult<Bound<'py, PyBytes>> {
        let b = u32::try_from(token_id)
            .ok()
            .and_then(|id| self.inner.token_bytes(id))
            .ok_or_else(|| self.index_error(token_id))?;
        Ok(PyBytes::new(py, b))
    }

    /// Bytes of every id, as a list (index = id).
    fn all_token_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let v = &self.inner;
        PyList::new(
            py,
            (0..v.size() as u32).map(|id| PyBytes::new(py, v.token_bytes(id).unwrap_or_default())),
        )
    }

    /// Concatenated bytes of a token sequence.
    fn decode<'py>(&self, py: Python<'py>, token_ids: Vec<i64>) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::new();
        for id in token_ids {
            let b = u32::try_from(id)
                .ok()
                .and_then(|i| self.inner.token_bytes(i))
                .ok_or_else(|| self.index_error(id))?;
            out.extend_from_slice(b);
        }
        Ok(PyBytes::new(py, &out))
    }

    /// Whether the id is never produced by grammar text (special, EOS or padding).
    fn is_special(&self, token_id: i64) -> bool {
        u32::try_from(token_id).map_or(true, |id| self.inner.is_special(id))
    }

    /// Whether the id is padding (beyond the tokenizer or undefined).
    fn is_padding(&self, token_id: i64) -> bool {
        u32::try_from(token_id).map_or(true, |id| self.inner.is_padding(id))
    }

    /// Whether the id is a text token (may be produced by grammar text).
    fn is_text_token(&self, token_id: i64) -> bool {
        u32::try_from(token_id).is_ok_and(|id| self.inner.is_text_token(id))
    }

    /// Ids of all special tokens (special, EOS and padding), ascending.
    fn special_token_ids(&self) -> Vec<u32> {
        (0..self.inner.size() as u32)
            .filter(|&id| self.inner.is_special(id))
            .collect()
    }

    fn __repr__(&self) -> String {
        let v = &self.inner;
        format!(
            "Vocabulary(size={}, text_tokens={}, eos_token_ids={:?}, fingerprint=0x{:016x})",
            v.size(),
            v.num_text_tokens(),
            v.eos_token_ids(),
            v.fingerprint()
        )
    }
}

impl PyVocabulary {
    fn index_error(&self, id: i64) -> PyErr {
        PyIndexError::new_err(format!(
            "token id {id} is out of range for a vocabulary of {} ids",
            self.inner.size()
        ))
    }
}

/// Add `Vocabulary` to the native module.
/// The GPT-2 byte-level alphabet: character `i` of the result spells byte `i` in byte-level
/// BPE token strings (`Ġ` for a space). The engine's own table, so Python needs no copy.
#[pyfunction]
fn byte_level_alphabet() -> String {
    (0..=255u8)
        .map(crate::vocab::decode::byte_level_char)
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyVocabulary>()?;
    m.add_function(wrap_pyfunction!(byte_level_alphabet, m)?)?;
    Ok(())
}
