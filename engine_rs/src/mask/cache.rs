//! Process-wide caches: token indexes per vocabulary, compiled grammars per (text, options,
//! vocabulary) in memory and, when the caller names a directory, on disk (`mask::disk`).
//! Keys compare the full grammar text, so a hash collision can never return the wrong grammar.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::disk::{self, LoadError};
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
    /// Requests answered from memory.
    pub hits: u64,
    /// Requests not in memory (each then loaded from disk or compiled).
    pub misses: u64,
    /// Misses answered by an entry on disk.
    pub disk_hits: u64,
    /// Compiled grammars written to disk.
    pub disk_writes: u64,
    /// Disk entries that could not be used (corrupt, truncated, foreign: then recompiled and
    /// rewritten) or not be read or written (I/O errors).
    pub disk_errors: u64,
    /// Compiled grammars held in memory.
    pub entries: usize,
    /// Most compiled grammars held in memory.
    pub capacity: usize,
}

/// Where [`compile_with`] found a compiled grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// In this process's memory cache.
    Memory,
    /// In the disk cache (written by this or an earlier process).
    Disk,
    /// Nowhere: compiled now.
    Compiled,
}

impl Origin {
    /// `"memory"`, `"disk"` or `"compiled"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Memory => "memory",
            Origin::Disk => "disk",
            Origin::Compiled => "compiled",
        }
    }
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
/// and vocabulary (memory only). Compilation runs outside the lock, so other threads are not
/// blocked.
pub fn compile(
    text: &str,
    options: &CompileOptions,
    vocab: &Arc<Vocabulary>,
) -> Result<Arc<CompiledGrammar>, CompileError> {
    compile_with(text, options, vocab, None).map(|(g, _)| g)
}

/// [`compile`], with a disk layer under `disk` when given: a memory miss loads the entry a
/// process (this one or an earlier one) wrote there, and a grammar compiled now is written there.
/// An entry that cannot be used is counted in `disk_errors` and replaced; disk problems never fail
/// the request, they only cost the compilation.
pub fn compile_with(
    text: &str,
    options: &CompileOptions,
    vocab: &Arc<Vocabulary>,
    disk: Option<&Path>,
) -> Result<(Arc<CompiledGrammar>, Origin), CompileError> {
    let key = Key {
        text: text.to_owned(),
        options: options.clone(),
        vocab: vocab.fingerprint(),
    };
    {
        let mut c = grammars().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(g) = c.map.get(&key).cloned() {
            c.stats.hits += 1;
            return Ok((g, Origin::Memory));
        }
        c.stats.misses += 1;
    }
    let path = disk.map(|dir| disk::entry_path(dir, text, options, key.vocab));
    let (compiled, origin) = match path.as_deref().map(|p| disk::load(p, text, options, vocab)) {
        Some(Ok(g)) => (Arc::new(g), Origin::Disk),
        found => {
            if matches!(found, Some(Err(LoadError::Io | LoadError::Invalid))) {
                count(|s| s.disk_errors += 1);
            }
            let grammar = Arc::new(Grammar::compile(text, options)?);
            let compiled = Arc::new(CompiledGrammar::new(grammar, vocab.clone()));
            if let Some(p) = &path {
                match disk::store(p, text, &compiled) {
                    Ok(()) => count(|s| s.disk_writes += 1),
                    Err(_) => count(|s| s.disk_errors += 1),
                }
            }
            (compiled, Origin::Compiled)
        }
    };
    let mut c = grammars().lock().unwrap_or_else(|p| p.into_inner());
    if origin == Origin::Disk {
        c.stats.disk_hits += 1;
    }
    if let Some(g) = c.map.get(&key).cloned() {
        // Another thread compiled it meanwhile: keep one object.
        return Ok((g, origin));
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
    Ok((compiled, origin))
}

fn count(f: impl FnOnce(&mut CacheStats)) {
    let mut c = grammars().lock().unwrap_or_else(|p| p.into_inner());
    f(&mut c.stats);
}

/// A snapshot of the compiled-grammar cache's counters and size.
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
        c.stats = CacheStats {
            capacity,
            ..CacheStats::default()
        };
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
