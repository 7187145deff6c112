//! Process-wide caches: token indexes per vocabulary, compiled grammars per (text, options,
//! vocabulary) in memory and, when the caller names a directory, on disk (`mask::disk`).
//! Keys compare the full grammar text, so a hash collision can never return the wrong grammar.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, Weak};

pub use super::disk::write_atomic;
use super::disk::{self, LoadError};
use super::{CompiledGrammar, TokenIndex};
use crate::error::CompileError;
use crate::grammar::{CompileOptions, Grammar};
use crate::persist::Checksum;
use crate::vocab::Vocabulary;

/// Default number of compiled grammars kept alive by the cache.
pub const DEFAULT_CAPACITY: usize = 128;

/// One vocabulary's token index, kept while a vocabulary with its fingerprint is alive.
struct IndexEntry {
    index: Arc<TokenIndex>,
    /// The vocabularies that asked for it (equal fingerprints: equal vocabularies), live ones.
    owners: Vec<Weak<Vocabulary>>,
}

impl IndexEntry {
    fn needed(&self) -> bool {
        self.owners.iter().any(|w| w.strong_count() > 0) || Arc::strong_count(&self.index) > 1
    }
}

fn indexes() -> &'static Mutex<HashMap<u64, IndexEntry>> {
    static INDEXES: OnceLock<Mutex<HashMap<u64, IndexEntry>>> = OnceLock::new();
    INDEXES.get_or_init(Default::default)
}

/// The token index of a vocabulary, shared by every grammar compiled for it.
///
/// Invariant: an index lives as long as a vocabulary with its fingerprint, not only as long as
/// some grammar uses it: a grammar compiled after the last one for a vocabulary was dropped (no
/// memory cache, a cleared one, a server that drops grammars after each request) reuses it
/// instead of rebuilding it (tens of milliseconds for a 128K-token vocabulary). An entry goes
/// when all its vocabularies and every grammar using its index are gone, at the next call (for
/// any vocabulary; the map holds one entry per vocabulary in use, so the scan is short).
pub fn token_index(vocab: &Arc<Vocabulary>) -> Arc<TokenIndex> {
    let key = vocab.fingerprint();
    let mut map = indexes().lock().unwrap_or_else(|p| p.into_inner());
    map.retain(|&k, e| k == key || e.needed());
    if let Some(entry) = map.get_mut(&key) {
        entry.owners.retain(|w| w.strong_count() > 0);
        if !entry
            .owners
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(vocab)))
        {
            entry.owners.push(Arc::downgrade(vocab));
        }
        return entry.index.clone();
    }
    let index = Arc::new(TokenIndex::new(vocab));
    map.insert(
        key,
        IndexEntry {
            index: index.clone(),
            owners: vec![Arc::downgrade(vocab)],
        },
    );
    index
}

/// A memory-cache key. Hashed by a digest of the text computed once per request (the map hashes
/// a key on every lookup and insert, and a grammar text can be hundreds of KB); compared in full.
#[derive(Clone)]
struct Key {
    digest: u64,
    text: String,
    options: CompileOptions,
    vocab: u64,
}

impl Key {
    fn new(text: &str, options: &CompileOptions, vocab: u64) -> Key {
        Key {
            digest: Checksum::of(text.as_bytes()),
            text: text.to_owned(),
            options: options.clone(),
            vocab,
        }
    }
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest ^ self.vocab);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.digest == other.digest
            && self.vocab == other.vocab
            && self.options == other.options
            && self.text == other.text
    }
}

impl Eq for Key {}

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
    compile_with(text, options, vocab, None, Write::Now).map(|(g, _)| g)
}

/// When [`compile_with`] writes a grammar it compiled to the disk layer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Write {
    /// Before returning it.
    Now,
    /// Not at all: the caller writes it with [`store`] (after the request, off its path).
    Later,
}

/// [`compile`], with a disk layer under `disk` when given: a memory miss loads the entry a
/// process (this one or an earlier one) wrote there, and a grammar compiled now is written there
/// (by [`store`], now or later as `write` says). An entry that cannot be used is counted in
/// `disk_errors` and replaced; disk problems never fail the request, they only cost the
/// compilation.
pub fn compile_with(
    text: &str,
    options: &CompileOptions,
    vocab: &Arc<Vocabulary>,
    disk: Option<&Path>,
    write: Write,
) -> Result<(Arc<CompiledGrammar>, Origin), CompileError> {
    let key = Key::new(text, options, vocab.fingerprint());
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
            if let (Some(dir), Write::Now) = (disk, write) {
                store(dir, text, &compiled);
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

/// Writes `compiled` to the disk layer under `dir`, where [`compile_with`] looks for it under
/// `text` (the text it was compiled from: another text is refused, as that entry would give a
/// wrong grammar) and the options it was compiled with; counted in `disk_writes`, or
/// `disk_errors` (false) when refused or when the write fails.
pub fn store(dir: &Path, text: &str, compiled: &CompiledGrammar) -> bool {
    let grammar = &compiled.grammar;
    let stored = grammar.source == Checksum::of(text.as_bytes()) && {
        let path = disk::entry_path(dir, text, grammar.options(), compiled.vocab.fingerprint());
        disk::store(&path, text, compiled).is_ok()
    };
    if stored {
        count(|s| s.disk_writes += 1);
    } else {
        count(|s| s.disk_errors += 1);
    }
    stored
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    fn hash(k: &Key) -> u64 {
        let mut h = DefaultHasher::new();
        k.hash(&mut h);
        h.finish()
    }

    fn byte_vocab(extra: &[u8]) -> Arc<Vocabulary> {
        let mut toks: Vec<Option<&[u8]>> = vec![Some(b"{"), Some(b"}"), Some(b"a"), Some(extra)];
        toks.push(None);
        Arc::new(Vocabulary::from_byte_tokens(&toks, &[4], None).expect("vocabulary"))
    }

    /// The index outlives the grammars that use it while its vocabulary lives, and goes once
    /// both are gone.
    #[test]
    fn token_index_lives_with_its_vocabulary() {
        let vocab = byte_vocab(b"index-lifetime-test");
        let grammar =
            Arc::new(Grammar::compile("start ::= \"a\";", &CompileOptions::default()).unwrap());
        let first = CompiledGrammar::new(grammar.clone(), vocab.clone());
        let index = Arc::downgrade(&first.index);
        drop(first);
        // No grammar holds the index now; the vocabulary does.
        let kept = index.upgrade().expect("the index outlives the grammar");
        let second = CompiledGrammar::new(grammar, vocab.clone());
        assert!(Arc::ptr_eq(&second.index, &kept));
        // An equal vocabulary (same fingerprint) shares it too.
        let twin = byte_vocab(b"index-lifetime-test");
        assert!(Arc::ptr_eq(&token_index(&twin), &kept));
        // The first vocabulary gone, its twin still holds the index.
        drop((kept, second, vocab));
        let _ = token_index(&byte_vocab(b"index-lifetime-third"));
        assert!(Arc::ptr_eq(
            &token_index(&twin),
            &index.upgrade().expect("kept for the twin")
        ));
        drop(twin);
        // Vocabularies and grammars gone: the next call for another vocabulary drops the entry.
        let key = byte_vocab(b"index-lifetime-test").fingerprint();
        let other = byte_vocab(b"index-lifetime-other");
        let _ = token_index(&other);
        let map = indexes().lock().unwrap_or_else(|p| p.into_inner());
        assert!(!map.contains_key(&key));
        assert!(map.contains_key(&other.fingerprint()));
        drop(map);
        assert!(index.upgrade().is_none(), "freed with its entry");
    }

    /// `Write::Later` leaves the entry to [`store`], which writes what a later load accepts.
    #[test]
    fn a_deferred_write_is_stored_later() {
        let dir = std::env::temp_dir().join(format!("structout-defer-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let vocab = byte_vocab(b"deferred-write-test");
        let o = CompileOptions::default();
        let text =
            "start ::= \"{\" deferred_write_test \"}\"; deferred_write_test ::= #\"[a-z]{1,5}\";";
        let (compiled, origin) = compile_with(text, &o, &vocab, Some(&dir), Write::Later).unwrap();
        assert_eq!(origin, Origin::Compiled);
        let path = disk::entry_path(&dir, text, &o, vocab.fingerprint());
        assert!(!path.exists(), "nothing written before `store`");
        assert!(
            !store(&dir, "start ::= \"other\";", &compiled),
            "another text is refused"
        );
        assert!(!path.exists());
        assert!(store(&dir, text, &compiled));
        let loaded = disk::load(&path, text, &o, &vocab).expect("the stored entry loads");
        assert_eq!(loaded.grammar().lnf_debug(), compiled.grammar().lnf_debug());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Keys hash by their digest but compare in full: a digest collision is never a hit.
    #[test]
    fn keys_compare_every_field() {
        let o = CompileOptions::default();
        let a = Key::new("start ::= \"a\" ;", &o, 7);
        assert!(a == Key::new("start ::= \"a\" ;", &o, 7));
        assert_eq!(hash(&a), hash(&Key::new("start ::= \"a\" ;", &o, 7)));
        let mut forged = Key::new("start ::= \"b\" ;", &o, 7);
        assert!(forged != a);
        forged.digest = a.digest;
        assert_eq!(hash(&forged), hash(&a));
        assert!(forged != a, "same digest, other text");
        assert!(Key::new("start ::= \"a\" ;", &o, 8) != a);
        let other = CompileOptions {
            max_items_per_set: 3,
            ..CompileOptions::default()
        };
        assert!(Key::new("start ::= \"a\" ;", &other, 7) != a);
    }
}
