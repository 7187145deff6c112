//! Process-wide caches: token indexes per vocabulary, compiled grammars per (text, options,
//! vocabulary). Keys compare the full grammar text, so a hash collision can never return the wrong
//! grammar.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::{CompiledGrammar, TokenIndex};
use crate::error::CompileError;
use crate::grammar::{CompileOptions, Grammar};
use crate::vocab::Vocabulary;

/// Default number of compiled grammars kept alive by the cache.
pub const DEFAULT_CAPACITY: usize = 128;

fn indexes() -> &'static Mutex<HashMap<u64, Weak<TokenIndex>>> {
    static INDEXES: OnceLock<Mutex<HashMap<u64, Weak<TokenIndex>>>> = OnceLock::new();
    INDEXES.get_or_init(Default::default)
}

/// The token index of a vocabulary, shared by every grammar compiled for it.
pub fn token_index(vocab: &Vocabulary) -> Arc<TokenIndex> {
    let key = vocab.fingerprint();
    let mut map = indexes().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(idx) = map.get(&key).and_then(Weak::upgrade) {
        return idx;
    }
    let idx = Arc::new(TokenIndex::new(vocab));
    map.retain(|_, w| w.strong_count() > 0);
    map.insert(key, Arc::downgrade(&idx));
    idx
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    text: String,
    options: CompileOptions,
    vocab: u64,
}

/// Hit/miss counters and current size of the compiled-grammar cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    pub capacity: usize,
}

struct GrammarCache {
    map: HashMap<Key, Arc<CompiledGrammar>>,
    order: VecDeque<Key>,
    stats: CacheStats,
}

fn grammars() -> &'static Mutex<GrammarCache> {
    static GRAMMARS: OnceLock<Mutex<GrammarCache>> = OnceLock::new();
    GRAMMARS.get_or_init(|| {
        Mutex::new(GrammarCache {
            map: HashMap::new(),
            order: VecDeque::new(),
            stats: CacheStats {
                capacity: DEFAULT_CAPACITY,
                ..CacheStats::default()
            },
        })
    })
}

/// Compiles `text` for `vocab`, or returns the cached compiled grammar for the same text, options
/// and vocabulary. Compilation runs outside the lock, so other threads are not blocked.
pub fn compile(
    text: &str,
    options: &CompileOptions,
    vocab: &Arc<Vocabulary>,
) -> Result<Arc<CompiledGrammar>, CompileError> {
    let key = Key {
        text: text.to_owned(),
        options: options.clone(),
        vocab: vocab.fingerprint(),
    };
    {
        let mut c = grammars().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(g) = c.map.get(&key).cloned() {
            c.stats.hits += 1;
            return Ok(g);
        }
        c.stats.misses += 1;
    }
    let grammar = Arc::new(Grammar::compile(text, options)?);
    let compiled = Arc::new(CompiledGrammar::new(grammar, vocab.clone()));
    let mut c = grammars().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(g) = c.map.get(&key).cloned() {
        // Another thread compiled it meanwhile: keep one object.
        return Ok(g);
    }
    while c.map.len() >= c.stats.capacity.max(1) {
        match c.order.pop_front() {
            Some(old) => {
                c.map.remove(&old);
            }
            None => break,
        }
    }
    c.order.push_back(key.clone());
    c.map.insert(key, compiled.clone());
    c.stats.entries = c.map.len();
    Ok(compiled)
}

pub fn stats() -> CacheStats {
    let c = grammars().lock().unwrap_or_else(|p| p.into_inner());
    CacheStats {
        entries: c.map.len(),
        ..c.stats
    }
}

/// Sets how many compiled grammars are kept (evicting the oldest) and optionally clears.
pub fn configure(capacity: usize, clear: bool) {
    let mut c = grammars().lock().unwrap_or_else(|p| p.into_inner());
    c.stats.capacity = capacity;
    if clear {
        c.map.clear();
        c.order.clear();
        c.stats.hits = 0;
        c.stats.misses = 0;
    }
    while c.map.len() > capacity {
        match c.order.pop_front() {
            Some(old) => {
                c.map.remove(&old);
            }
            None => break,
        }
    }
}
