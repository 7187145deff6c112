//! Token masks: a grammar bound to a vocabulary, and per-sequence matchers that compute which
//! tokens keep the output completable.
//!
//! [`CompiledGrammar`] = grammar + vocabulary + the vocabulary's [`TokenIndex`] (token tries split
//! into slices) + per-DFA slice depths. It is immutable and shared; compiled grammars are cached by
//! (grammar text, options, vocabulary fingerprint) in [`cache`]. A [`Matcher`] holds one sequence's
//! recognizer and computes bitmasks by walking the token tries with recognizer push/pop.

pub mod cache;
mod matcher;
pub mod slices;

use std::sync::Arc;

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
}

impl CompiledGrammar {
    pub fn new(grammar: Arc<Grammar>, vocab: Arc<Vocabulary>) -> CompiledGrammar {
        let index = cache::token_index(&vocab);
        let lnf = grammar.lnf();
        let mut bounded = vec![false; lnf.dfas.len()];
        for e in &lnf.excepts {
            if e.max != u32::MAX {
                bounded[e.dfa as usize] = true;
            }
        }
        let depths = lnf
            .dfas
            .iter()
            .zip(bounded)
            .map(|(d, b)| if b { Vec::new() } else { index.slice_depths(d) })
            .collect();
        CompiledGrammar {
            grammar,
            vocab,
            index,
            depths,
        }
    }

    pub fn grammar(&self) -> &Arc<Grammar> {
        &self.grammar
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Number of 32-bit words in one bitmask row.
    pub fn mask_words(&self) -> usize {
        self.index.words
    }

    pub fn matcher(self: &Arc<Self>) -> Matcher {
        Matcher::new(self.clone())
    }

    /// Slice depth of a scanned terminal in a given state (0 when it cannot take slices).
    #[inline]
    fn slice_depth(&self, sym: LSym, state: u32) -> u8 {
        let d = match sym {
            LSym::Regex(d) => d,
            LSym::Except(x) => self.grammar.lnf().excepts[x as usize].dfa,
            _ => return 0,
        };
        self.depths[d as usize]
            .get(state as usize)
            .copied()
            .unwrap_or(0)
    }
}
