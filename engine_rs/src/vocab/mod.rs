//! Token vocabularies: what bytes each token id of a model produces, and the token trie.
//!
//! A [`Vocabulary`] covers the model's whole output layer (`size()` ids, which may exceed the
//! tokenizer's: the extra ids are *padding*). Every id has a byte string and a *special* flag:
//! special ids (special and added-special tokens, EOS, padding, ids with no bytes) are never
//! produced by grammar text; EOS ids are listed separately ([`Vocabulary::eos_token_ids`]) and
//! are allowed only where the grammar can end, which is the matcher's business.
//!
//! The bytes of all ids live in one flat buffer indexed by an offsets array. A special token
//! keeps its literal text (e.g. `<|eot_id|>`) for display and detokenization only; grammar
//! code must consult [`Vocabulary::text_tokens`] / [`Vocabulary::is_text_token`], never the bytes
//! alone. The [`TokenTrie`] of all text tokens is built once with the vocabulary.
//!
//! Constructors: [`Vocabulary::from_byte_tokens`] (explicit bytes), [`Vocabulary::from_hf_tokens`]
//! (Hugging Face token strings in byte-level BPE / SentencePiece / raw spelling, plus added
//! tokens), [`Vocabulary::from_tiktoken`] (tiktoken rank files). Every failure is a
//! [`VocabError`].

pub mod decode;
pub mod trie;

use std::fmt;

use rustc_hash::FxHashMap;

use crate::persist::StableHasher;

pub use decode::TokenEncoding;
pub use trie::{TokenTrie, TrieNode, TrieWalker};

/// Why a vocabulary could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VocabError {
    /// A token string does not decode in the declared spelling.
    Decode {
        /// The token id.
        id: u32,
        /// The token string as the tokenizer spells it.
        token: String,
        /// The spelling it was decoded with.
        encoding: TokenEncoding,
        /// What is wrong.
        reason: String,
    },
    /// A line of a tiktoken rank file is malformed (`line` is 1-based).
    Tiktoken {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Two definitions claim the same token id.
    DuplicateId {
        /// The id.
        id: u32,
        /// Which definitions collide.
        what: String,
    },
    /// The model's vocabulary size cannot hold every token id.
    SizeTooSmall {
        /// The requested model vocabulary size.
        vocab_size: usize,
        /// The tokenizer's size (max id + 1).
        needed: usize,
        /// An id at or beyond `vocab_size` that produces text.
        id: u32,
    },
    /// An EOS id is outside the vocabulary.
    EosOutOfRange {
        /// The EOS id.
        id: u32,
        /// The vocabulary size.
        size: usize,
    },
    /// The vocabulary has no ids at all.
    Empty,
    /// A size limit of the flat layout was hit.
    TooLarge {
        /// Which limit.
        reason: String,
    },
}

impl fmt::Display for VocabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VocabError::Decode {
                id,
                token,
                encoding,
                reason,
            } => write!(
                f,
                "cannot decode token {id} ({token:?}) as {encoding}: {reason}; hint: check the \
                 tokenizer kind (byte-level BPE vs SentencePiece) or pass the kind explicitly"
            ),
            VocabError::Tiktoken { line, reason } => write!(
                f,
                "tiktoken rank file, line {line}: {reason}; hint: each line must be \
                 '<base64 token> <rank>'"
            ),
            VocabError::DuplicateId { id, what } => write!(
                f,
                "token id {id} is defined twice ({what}); hint: every id may have one definition"
            ),
            VocabError::SizeTooSmall {
                vocab_size,
                needed,
                id,
            } => write!(
                f,
                "vocab_size {vocab_size} is smaller than the tokenizer ({needed} ids; token {id} \
                 produces text); hint: pass the model's vocabulary size (the logits width) or \
                 leave it unset"
            ),
            VocabError::EosOutOfRange { id, size } => write!(
                f,
                "EOS token id {id} is outside the vocabulary of {size} ids"
            ),
            VocabError::Empty => f.write_str("the vocabulary has no tokens"),
            VocabError::TooLarge { reason } => write!(f, "vocabulary too large: {reason}"),
        }
    }
}

impl std::error::Error for VocabError {}

/// A token the tokenizer adds on top of its model vocabulary (HF `added_tokens`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedToken {
    /// The token id.
    pub id: u32,
    /// The literal text of the token (never decoded: added tokens produce their content).
    pub content: String,
    /// Special tokens (`<|eot_id|>`, `<s>`, ...) are never produced by grammar text.
    pub special: bool,
}

/// Per-id flag: never produced by grammar text.
const FLAG_SPECIAL: u8 = 1;
/// Per-id flag: beyond the tokenizer or unused id (implies special).
const FLAG_PADDING: u8 = 2;

/// A model vocabulary: token id → exact bytes, special flags, EOS ids and the token trie.
///
/// Invariants: `offsets.len() == size + 1`, `offsets[0] == 0`, non-decreasing, last ==
/// `bytes.len()`; `flags.len() == size`; padding ids are special with empty bytes; EOS ids are
/// `< size`, sorted, distinct and special; the trie holds exactly the text tokens
/// (non-special, non-empty) with their bytes.
#[derive(Clone)]
pub struct Vocabulary {
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    flags: Vec<u8>,
    eos: Vec<u32>,
    num_text_tokens: usize,
    fingerprint: u64,
    trie: TokenTrie,
}

impl fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocabulary")
            .field("size", &self.size())
            .field("text_tokens", &self.num_text_tokens)
            .field("eos_token_ids", &self.eos)
            .field("fingerprint", &format_args!("{:016x}", self.fingerprint))
            .finish()
    }
}

/// Accumulates ids in order into the flat layout.
struct Builder {
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    flags: Vec<u8>,
}

impl Builder {
    fn with_capacity(size: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(size + 1);
        offsets.push(0);
        Builder {
            bytes: Vec::with_capacity(bytes),
            offsets,
            flags: Vec::with_capacity(size),
        }
    }

    /// Close the id whose bytes were appended to `self.bytes` since the last call.
    fn finish_id(&mut self, flags: u8) -> Result<(), VocabError> {
        let end = u32::try_from(self.bytes.len()).map_err(|_| VocabError::TooLarge {
            reason: "token bytes exceed 4 GiB in total".to_string(),
        })?;
        self.offsets.push(end);
        self.flags.push(flags);
        Ok(())
    }

    fn push(&mut self, bytes: &[u8], flags: u8) -> Result<(), VocabError> {
        self.bytes.extend_from_slice(bytes);
        self.finish_id(flags)
    }

    fn len(&self) -> usize {
        self.flags.len()
    }

    fn finish(self, eos_token_ids: &[u32]) -> Result<Vocabulary, VocabError> {
        let Builder {
            bytes,
            offsets,
            mut flags,
        } = self;
        let size = flags.len();
        if size == 0 {
            return Err(VocabError::Empty);
        }
        if size > u32::MAX as usize {
            return Err(VocabError::TooLarge {
                reason: format!("{size} token ids (at most {})", u32::MAX),
            });
        }
        let mut eos: Vec<u32> = eos_token_ids.to_vec();
        eos.sort_unstable();
        eos.dedup();
        for &id in &eos {
            if id as usize >= size {
                return Err(VocabError::EosOutOfRange { id, size });
            }
            flags[id as usize] |= FLAG_SPECIAL;
        }
        let is_text = |id: usize| flags[id] & FLAG_SPECIAL == 0 && offsets[id + 1] > offsets[id];
        let trie = TokenTrie::build((0..size).filter(|&id| is_text(id)).map(|id| {
            (
                id as u32,
                &bytes[offsets[id] as usize..offsets[id + 1] as usize],
            )
        }))?;
        let num_text_tokens = trie.num_tokens();
        let fingerprint = fingerprint(&bytes, &offsets, &flags, &eos);
        Ok(Vocabulary {
            bytes,
            offsets,
            flags,
            eos,
            num_text_tokens,
            fingerprint,
            trie,
        })
    }
}

/// Resolve the model vocabulary size against the tokenizer's, checking that no text-producing
/// id would be cut off. `text_id_at_or_beyond(limit)` returns an id ≥ `limit` that produces
/// text, if any (only consulted when `vocab_size < tokenizer_size`).
fn resolve_size(
    tokenizer_size: usize,
    vocab_size: Option<usize>,
    text_id_at_or_beyond: impl Fn(usize) -> Option<u32>,
) -> Result<usize, VocabError> {
    match vocab_size {
        None => Ok(tokenizer_size),
        Some(v) if v >= tokenizer_size => Ok(v),
        Some(v) => match text_id_at_or_beyond(v) {
            Some(id) => Err(VocabError::SizeTooSmall {
                vocab_size: v,
                needed: tokenizer_size,
                id,
            }),
            // Only special tokens are cut off: the model can never emit them anyway.
            None => Ok(v),
        },
    }
}

impl Vocabulary {
    /// Build from explicit bytes per id: `Some(bytes)` is a text token, `None` a special or
    /// unused id. `vocab_size` (the model's logits width) defaults to `tokens.len()`; larger
    /// sizes add padding ids, smaller ones are an error unless only `None` ids are cut off.
    /// EOS ids become special.
    pub fn from_byte_tokens<T: AsRef<[u8]>>(
        tokens: &[Option<T>],
        eos_token_ids: &[u32],
        vocab_size: Option<usize>,
    ) -> Result<Self, VocabError> {
        let size = resolve_size(tokens.len(), vocab_size, |limit| {
            tokens[limit..]
                .iter()
                .position(|t| t.is_some())
                .map(|p| (limit + p) as u32)
        })?;
        let total: usize = tokens.iter().flatten().map(|t| t.as_ref().len()).sum();
        let mut b = Builder::with_capacity(size, total);
        for id in 0..size {
            match tokens.get(id) {
                Some(Some(t)) => b.push(t.as_ref(), 0)?,
                Some(None) => b.push(b"", FLAG_SPECIAL)?,
                None => b.push(b"", FLAG_SPECIAL | FLAG_PADDING)?,
            }
        }
        b.finish(eos_token_ids)
    }

    /// Build from Hugging Face token strings indexed by id (`None` for ids the model vocabulary
    /// does not define) spelled in `encoding`, plus the added tokens (which take precedence over
    /// the model vocabulary at their ids and produce their literal `content`; special ones are
    /// flagged). The tokenizer's size is the larger of `tokens.len()` and the largest added id
    /// plus one; ids no one defines and ids up to `vocab_size` are padding.
    pub fn from_hf_tokens<S: AsRef<str>>(
        tokens: &[Option<S>],
        encoding: TokenEncoding,
        added_tokens: &[AddedToken],
        eos_token_ids: &[u32],
        vocab_size: Option<usize>,
    ) -> Result<Self, VocabError> {
        let mut added: FxHashMap<u32, &AddedToken> = FxHashMap::default();
        for a in added_tokens {
            if let Some(prev) = added.insert(a.id, a) {
                if prev.content != a.content || prev.special != a.special {
                    return Err(VocabError::DuplicateId {
                        id: a.id,
                        what: format!("added tokens {:?} and {:?}", prev.content, a.content),
                    });
                }
            }
        }
        let max_added = added.keys().map(|&id| id as usize + 1).max().unwrap_or(0);
        let tokenizer_size = tokens.len().max(max_added);
        let size = resolve_size(tokenizer_size, vocab_size, |limit| {
            (limit..tokenizer_size).find_map(|id| {
                let text = match added.get(&(id as u32)) {
                    Some(a) => !a.special,
                    None => matches!(tokens.get(id), Some(Some(_))),
                };
                text.then_some(id as u32)
            })
        })?;
        let total: usize = tokens
            .iter()
            .flatten()
            .map(|t| t.as_ref().len())
            .sum::<usize>()
            + added_tokens.iter().map(|a| a.content.len()).sum::<usize>();
        let mut b = Builder::with_capacity(size, total);
        for id in 0..size {
            if let Some(a) = added.get(&(id as u32)) {
                let flags = if a.special { FLAG_SPECIAL } else { 0 };
                b.push(a.content.as_bytes(), flags)?;
                continue;
            }
            match tokens.get(id) {
                Some(Some(t)) => {
                    let t = t.as_ref();
                    let start = b.bytes.len();
                    if let Err(reason) = decode::decode_token(encoding, t, &mut b.bytes) {
                        b.bytes.truncate(start);
                        return Err(VocabError::Decode {
                            id: id as u32,
                            token: t.to_string(),
                            encoding,
                            reason,
                        });
                    }
                    b.finish_id(0)?;
                }
                _ => b.push(b"", FLAG_SPECIAL | FLAG_PADDING)?,
            }
        }
        b.finish(eos_token_ids)
    }

    /// Build from a tiktoken rank file (`<base64 token> <rank>` per line; the rank is the id;
    /// empty lines are skipped; ids may have gaps, which become padding) and the special tokens
    /// as `(text, id)`.
    pub fn from_tiktoken(
        data: &[u8],
        special_tokens: &[(String, u32)],
        eos_token_ids: &[u32],
        vocab_size: Option<usize>,
    ) -> Result<Self, VocabError> {
        // Decode every line into one buffer, remembering (id, start, end).
        let mut raw: Vec<u8> = Vec::with_capacity(data.len());
        let mut spans: Vec<(u32, u32, u32)> = Vec::with_capacity(data.len() / 8);
        for (lineno, line) in data.split(|&c| c == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(|c| c.is_ascii_whitespace()) {
                continue;
            }
            let err = |reason: String| VocabError::Tiktoken {
                line: lineno + 1,
                reason,
            };
            let mut parts = line
                .split(|c| c.is_ascii_whitespace())
                .filter(|p| !p.is_empty());
            let (Some(tok), Some(rank), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(err(format!(
                    "expected two fields, got {:?}",
                    String::from_utf8_lossy(line)
                )));
            };
            let id: u32 = std::str::from_utf8(rank)
                .ok()
                .and_then(|r| r.parse().ok())
                .filter(|&r: &u32| r != u32::MAX)
                .ok_or_else(|| {
                    err(format!(
                        "rank {:?} is not an integer id",
                        String::from_utf8_lossy(rank)
                    ))
                })?;
            let start = raw.len();
            decode::decode_base64(tok, &mut raw).map_err(&err)?;
            let too_large = || VocabError::TooLarge {
                reason: "token bytes exceed 4 GiB in total".to_string(),
            };
            let s = u32::try_from(start).map_err(|_| too_large())?;
            let e = u32::try_from(raw.len()).map_err(|_| too_large())?;
            spans.push((id, s, e));
        }
        let n_ranks = spans.iter().map(|s| s.0 as usize + 1).max().unwrap_or(0);
        let n_special = special_tokens
            .iter()
            .map(|s| s.1 as usize + 1)
            .max()
            .unwrap_or(0);
        let tokenizer_size = n_ranks.max(n_special);
        // slot[id] = index into spans + 1 (0 = none).
        let mut slot: Vec<u32> = vec![0; tokenizer_size];
        for (k, &(id, _, _)) in spans.iter().enumerate() {
            let s = &mut slot[id as usize];
            if *s != 0 {
                let (_, a, b) = spans[*s as usize - 1];
                return Err(VocabError::DuplicateId {
                    id,
                    what: format!(
                        "rank file tokens {:?} and {:?}",
                        String::from_utf8_lossy(&raw[a as usize..b as usize]),
                        String::from_utf8_lossy(&raw[spans[k].1 as usize..spans[k].2 as usize])
                    ),
                });
            }
            *s = k as u32 + 1;
        }
        let mut special: FxHashMap<u32, &str> = FxHashMap::default();
        for (text, id) in special_tokens {
            if slot[*id as usize] != 0 {
                return Err(VocabError::DuplicateId {
                    id: *id,
                    what: format!("special token {text:?} and a rank file token"),
                });
            }
            if let Some(prev) = special.insert(*id, text) {
                if prev != text {
                    return Err(VocabError::DuplicateId {
                        id: *id,
                        what: format!("special tokens {prev:?} and {text:?}"),
                    });
                }
            }
        }
        let size = resolve_size(tokenizer_size, vocab_size, |limit| {
            slot[limit..]
                .iter()
                .position(|&s| s != 0)
                .map(|p| (limit + p) as u32)
        })?;
        let mut b = Builder::with_capacity(size, raw.len());
        for id in 0..size {
            if let Some(text) = special.get(&(id as u32)) {
                b.push(text.as_bytes(), FLAG_SPECIAL)?;
                continue;
            }
            match slot.get(id) {
                Some(&s) if s != 0 => {
                    let (_, a, e) = spans[s as usize - 1];
                    b.push(&raw[a as usize..e as usize], 0)?;
                }
                _ => b.push(b"", FLAG_SPECIAL | FLAG_PADDING)?,
            }
        }
        debug_assert_eq!(b.len(), size);
        b.finish(eos_token_ids)
    }

    /// Number of token ids (the model's vocabulary size, padding included); masks have this
    /// many bits.
    #[inline]
    pub fn size(&self) -> usize {
        self.flags.len()
    }

    /// The bytes token `id` produces (a special token's literal text, empty for padding), or
    /// `None` when `id >= size()`.
    #[inline]
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        let id = id as usize;
        if id >= self.flags.len() {
            return None;
        }
        Some(&self.bytes[self.offsets[id] as usize..self.offsets[id + 1] as usize])
    }

    /// Whether `id` is never produced by grammar text (special, EOS, padding, or out of range).
    #[inline]
    pub fn is_special(&self, id: u32) -> bool {
        self.flags
            .get(id as usize)
            .is_none_or(|f| f & FLAG_SPECIAL != 0)
    }

    /// Whether `id` is padding: beyond the tokenizer, or an id the tokenizer leaves undefined.
    #[inline]
    pub fn is_padding(&self, id: u32) -> bool {
        self.flags
            .get(id as usize)
            .is_none_or(|f| f & FLAG_PADDING != 0)
    }

    /// Whether `id` is a text token: not special and non-empty (exactly the trie's tokens).
    #[inline]
    pub fn is_text_token(&self, id: u32) -> bool {
        let i = id as usize;
        i < self.flags.len()
            && self.flags[i] & FLAG_SPECIAL == 0
            && self.offsets[i + 1] > self.offsets[i]
    }

    /// The text tokens `(id, bytes)` in id order (what [`TokenTrie::build`] takes).
    pub fn text_tokens(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        (0..self.size() as u32)
            .filter(|&id| self.is_text_token(id))
            .map(|id| (id, self.token_bytes(id).unwrap_or_default()))
    }

    /// Number of text tokens.
    #[inline]
    pub fn num_text_tokens(&self) -> usize {
        self.num_text_tokens
    }

    /// EOS token ids, sorted and distinct (all special).
    #[inline]
    pub fn eos_token_ids(&self) -> &[u32] {
        &self.eos
    }

    /// A stable 64-bit hash of the size, every id's bytes and flags, and the EOS ids: equal
    /// vocabularies have equal fingerprints on every platform and run (for cache keys).
    #[inline]
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The trie of all text tokens.
    #[inline]
    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// Length in bytes of the longest text token.
    pub fn max_token_len(&self) -> usize {
        self.trie.max_depth()
    }

    /// Concatenated bytes of a token sequence (special tokens contribute their text), or the
    /// first id that is out of range.
    pub fn decode(&self, ids: &[u32]) -> Result<Vec<u8>, u32> {
        let mut out = Vec::new();
        for &id in ids {
            out.extend_from_slice(self.token_bytes(id).ok_or(id)?);
        }
        Ok(out)
    }

    /// Bytes of heap memory used (for stats).
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
            + self.offsets.capacity() * 4
            + self.flags.capacity()
            + self.eos.capacity() * 4
            + self.trie.heap_bytes()
    }
}

fn fingerprint(bytes: &[u8], offsets: &[u32], flags: &[u8], eos: &[u32]) -> u64 {
    let mut h = StableHasher::new(1);
    h.word(flags.len() as u64);
    h.bytes(bytes);
    // Offsets fix the token boundaries; hash them as little-endian u32 words.
    let mut buf = Vec::with_capacity(offsets.len() * 4);
    for o in offsets {
        buf.extend_from_slice(&o.to_le_bytes());
    }
    h.bytes(&buf);
    h.bytes(flags);
    h.word(eos.len() as u64);
    for &e in eos {
        h.word(e as u64);
    }
    h.finish()
}

#[cfg(test)]
mod tests;
