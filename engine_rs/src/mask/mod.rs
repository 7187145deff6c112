//! Token masks: a grammar bound to a vocabulary, and per-sequence matchers that compute which
//! tokens keep the output completable.
//!
//! [`CompiledGrammar`] = grammar + vocabulary + the vocabulary's [`TokenIndex`] (token tries split
//! into slices) + per-DFA slice depths. It is immutable and shared; compiled grammars are cached by
//! (grammar text, options, vocabulary fingerprint) in [`cache`]. A [`Matcher`] holds one sequence's
//! recognizer and computes bitmasks by walking the token tries with recognizer push/pop.

mod apply;
pub mod cache;
mod disk;
mod matcher;
pub mod slices;

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

pub use apply::{apply_bitmask, Logit};
pub use matcher::Matcher;
pub use slices::TokenIndex;

use crate::grammar::Grammar;
use crate::lnf::LSym;
use crate::vocab::Vocabulary;

/// A grammar bound to a vocabulary. Immutable, `Send + Sync`.
pub struct CompiledGrammar {
    grammar: Arc<Grammar>,
    vocab: Arc<Vocabulary>,
    index: Arc<TokenIndex>,
    /// Slice depths per LNF DFA (see [`slices::slice_depths`]); empty for bounded `except!`.
    depths: Vec<Vec<u8>>,
    /// Slice-stable states per LNF DFA (see [`TokenIndex::slice_stable`]).
    stable: Vec<Vec<bool>>,
    /// Masks of expensive states, keyed by [`crate::Recognizer::state_key`].
    mask_cache: Mutex<MaskCache>,
}

/// Counters and size of one compiled grammar's mask cache (see
/// [`crate::CompileOptions::mask_cache_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MaskCacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    /// Bytes of keys and masks held; never more than `mask_cache_bytes`.
    pub bytes: usize,
}

/// Longest state key worth caching (deeper parse stacks are recomputed).
pub const MASK_CACHE_MAX_KEY: usize = 4096;

#[derive(Default)]
struct MaskCache {
    map: FxHashMap<Box<[u32]>, Box<[u32]>>,
    bytes: usize,
    hits: u64,
    misses: u64,
}

impl CompiledGrammar {
    pub fn new(grammar: Arc<Grammar>, vocab: Arc<Vocabulary>) -> CompiledGrammar {
        let index = cache::token_index(&vocab);
        let lnf = grammar.lnf();
        // No slice tables for bounded `except!`; a length-counted automaton gets those of its
        // base automaton (see `slice_depth`).
        let mut bounded = vec![false; lnf.dfas.len()];
        for e in &lnf.excepts {
            if e.max != u32::MAX {
                bounded[e.dfa as usize] = true;
            }
        }
        let depths: Vec<Vec<u8>> = lnf
            .dfas
            .iter()
            .zip(bounded)
            .map(|(d, b)| {
                if b {
                    Vec::new()
                } else if let Some(base) = d.counted_base() {
                    index.slice_depths(&base)
                } else {
                    index.slice_depths(d)
                }
            })
            .collect();
        let stable = lnf
            .dfas
            .iter()
            .zip(&depths)
            .map(|(d, dep)| {
                if d.is_counted() {
                    Vec::new()
                } else {
                    index.slice_stable(d, dep)
                }
            })
            .collect();
        CompiledGrammar {
            grammar,
            vocab,
            index,
            depths,
            stable,
            mask_cache: Mutex::new(MaskCache::default()),
        }
    }

    pub fn grammar(&self) -> &Arc<Grammar> {
        &self.grammar
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Sizes for diagnostics: (slice bucket token counts, rest token count, rest trie nodes).
    pub fn index_stats(&self) -> (Vec<usize>, usize, usize) {
        (
            self.index
                .buckets
                .iter()
                .map(|b| b.trie.num_tokens())
                .collect(),
            self.index.rest.num_tokens(),
            self.index.suffixes.len(),
        )
    }

    /// Number of 32-bit words in one bitmask row.
    pub fn mask_words(&self) -> usize {
        self.index.words
    }

    pub fn matcher(self: &Arc<Self>) -> Matcher {
        Matcher::new(self.clone())
    }

    /// Copies the cached mask for `key` into `out`; false on a miss.
    fn cached_mask(&self, key: &[u32], out: &mut [u32]) -> bool {
        let mut c = self.mask_cache.lock().unwrap_or_else(|p| p.into_inner());
        match c.map.get(key) {
            Some(m) => {
                out.copy_from_slice(m);
                c.hits += 1;
                true
            }
            None => {
                c.misses += 1;
                false
            }
        }
    }

    fn store_mask(&self, key: &[u32], mask: &[u32]) {
        let mut c = self.mask_cache.lock().unwrap_or_else(|p| p.into_inner());
        let size = (key.len() + mask.len()) * 4;
        let limit = self.grammar.options().mask_cache_bytes;
        if size > limit {
            return;
        }
        if c.bytes + size > limit {
            // Simple bound: start over rather than track recency on the hot path.
            c.map.clear();
            c.bytes = 0;
        }
        if c.map.insert(key.into(), mask.into()).is_none() {
            c.bytes += size;
        }
    }

    /// Counters and current size of this grammar's mask cache.
    pub fn mask_cache_stats(&self) -> MaskCacheStats {
        let c = self.mask_cache.lock().unwrap_or_else(|p| p.into_inner());
        MaskCacheStats {
            hits: c.hits,
            misses: c.misses,
            entries: c.map.len(),
            bytes: c.bytes,
        }
    }

    /// Whether a scanned regex terminal is in a slice-stable state.
    #[inline]
    fn is_slice_stable(&self, sym: LSym, state: u32) -> bool {
        match sym {
            LSym::Regex(d) => self.stable[d as usize]
                .get(state as usize)
                .copied()
                .unwrap_or(false),
            _ => false,
        }
    }

    /// Slice depth of a scanned terminal in a given state (0 when it cannot take slices).
    #[inline]
    fn slice_depth(&self, sym: LSym, state: u32) -> u8 {
        let d = match sym {
            LSym::Regex(d) => d,
            LSym::Except(x) => self.grammar.lnf().excepts[x as usize].dfa,
            _ => return 0,
        };
        let dfa = &self.grammar.lnf().dfas[d as usize];
        // A counted state (t, n): the base automaton's depth at t, unless fewer characters than
        // that bring the count to where it matters (each byte adds at most one character).
        if let Some((t, slack)) = dfa.counted_parts(state, u32::from(slices::DEPTH_CAP)) {
            let base = self.depths[d as usize]
                .get(t as usize)
                .copied()
                .unwrap_or(0);
            return base.min(slack as u8);
        }
        self.depths[d as usize]
            .get(state as usize)
            .copied()
            .unwrap_or(0)
    }
}
