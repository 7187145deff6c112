//! Plain BNF, the working form of normalization (nested vectors are fine here: it is compile-time
//! only; the recognizer reads the flat [`super::Lnf`]).

use std::collections::hash_map::Entry;
use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

use crate::dfa::Dfa;
use crate::error::Span;
use crate::kbnf::ast::MemberKind;

/// A grammar symbol. Terminals in LNF always stand for *non-empty* matches: empty matches are
/// handled by nullable elimination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sym {
    Nt(u32),
    Lit(u32),
    Regex(u32),
    Except(u32),
}

impl Sym {
    pub fn is_terminal(self) -> bool {
        !matches!(self, Sym::Nt(_))
    }
}

#[derive(Clone, Debug)]
pub struct RegexTerm {
    pub pattern: String,
    pub dfa: Dfa,
}

#[derive(Clone, Debug)]
pub struct ExceptTerm {
    pub dfa: Dfa,
    pub max: Option<u32>,
}

#[derive(Clone, Debug, Default)]
pub struct Bnf {
    pub names: Vec<String>,
    /// Productions per nonterminal.
    pub rules: Vec<Vec<Vec<Sym>>>,
    pub start: u32,
    pub literals: Vec<Vec<u8>>,
    pub literal_ids: FxHashMap<Vec<u8>, u32>,
    pub regexes: Vec<RegexTerm>,
    pub regex_ids: FxHashMap<String, u32>,
    pub excepts: Vec<ExceptTerm>,
    /// The `any_order!` nonterminals: each has one placeholder production (see
    /// [`AnyOrderSpec`]) that normalization never rewrites, merges or inlines, only renames.
    pub any_orders: Vec<AnyOrderSpec>,
}

/// An `any_order!` (or `unique!`) nonterminal: its placeholder production is the separator (when
/// `sep`) then one symbol per member, of the kinds listed (all `Once` for `unique!`).
#[derive(Clone, Debug)]
pub struct AnyOrderSpec {
    pub nt: u32,
    pub sep: bool,
    pub kinds: Vec<MemberKind>,
    /// `Some` for `unique!`: its members are positional (item `i` matches member
    /// `min(i, k - 1)`), never dropped or reordered, and the items are distinct values.
    pub unique: Option<UniqueCounts>,
    /// For `any_order!` with counts: the least and most members read in all, every kind
    /// counted (`min` may be 0; `max >= 1`, `u32::MAX`: unbounded).
    pub counts: Option<UniqueCounts>,
    pub span: Span,
}

/// The item counts of a `unique!`: `1 <= min <= max` (`u32::MAX`: unbounded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniqueCounts {
    pub min: u32,
    pub max: u32,
}

impl Bnf {
    pub fn add_nt(&mut self, name: String) -> u32 {
        self.names.push(name);
        self.rules.push(Vec::new());
        (self.rules.len() - 1) as u32
    }

    pub fn intern_literal(&mut self, bytes: &[u8]) -> u32 {
        if let Some(&id) = self.literal_ids.get(bytes) {
            return id;
        }
        let id = self.literals.len() as u32;
        self.literals.push(bytes.to_vec());
        self.literal_ids.insert(bytes.to_vec(), id);
        id
    }

    pub fn intern_regex(&mut self, pattern: String, dfa: Dfa) -> u32 {
        if let Some(&id) = self.regex_ids.get(&pattern) {
            return id;
        }
        let id = self.regexes.len() as u32;
        self.regex_ids.insert(pattern.clone(), id);
        self.regexes.push(RegexTerm { pattern, dfa });
        id
    }

    /// Adds a regex terminal that is not interned by its pattern (`description` is only for
    /// debugging: merged terminals are built from automata, not from pattern text).
    pub fn add_regex(&mut self, description: String, dfa: Dfa) -> u32 {
        let id = self.regexes.len() as u32;
        self.regexes.push(RegexTerm {
            pattern: description,
            dfa,
        });
        id
    }

    /// Per nonterminal: whether it is an `any_order!` or `unique!` placeholder (kept as written).
    pub fn opaque(&self) -> Vec<bool> {
        let mut out = vec![false; self.rules.len()];
        for a in &self.any_orders {
            out[a.nt as usize] = true;
        }
        out
    }

    pub fn symbol_count(&self) -> usize {
        self.rules
            .iter()
            .flat_map(|alts| alts.iter())
            .map(|a| a.len() + 1)
            .sum()
    }
}

/// Productions in order of first appearance, each kept once: the passes of normalization that
/// rewrite productions drop the repeats they make. A production is found again by a hash of its
/// symbols (then compared in full), so no second copy of each is kept as a set key.
#[derive(Default)]
pub struct UniqueProductions {
    list: Vec<Vec<Sym>>,
    /// Hash of a production -> index of the first production with that hash (built once the
    /// list is long).
    first: FxHashMap<u64, u32>,
}

impl UniqueProductions {
    /// Adds `alt` unless an equal production is already in; says whether it was added.
    pub fn push(&mut self, alt: Vec<Sym>) -> bool {
        if self.is_new(&alt) {
            self.list.push(alt);
            true
        } else {
            false
        }
    }

    /// [`UniqueProductions::push`] of a borrowed production (copied only when it is new).
    pub fn push_slice(&mut self, alt: &[Sym]) -> bool {
        if self.is_new(alt) {
            self.list.push(alt.to_vec());
            true
        } else {
            false
        }
    }

    /// Whether `alt` is not in yet (recording its hash for the index it will take if it is).
    /// Short lists (most nonterminals have a few productions) are scanned; the hash index is
    /// built when a list grows past them.
    fn is_new(&mut self, alt: &[Sym]) -> bool {
        const SCAN: usize = 8;
        let hash = |a: &[Sym]| {
            let mut h = FxHasher::default();
            a.hash(&mut h);
            h.finish()
        };
        if self.list.len() < SCAN {
            return !self.list.iter().any(|a| a == alt);
        }
        if self.first.is_empty() {
            for (i, a) in self.list.iter().enumerate() {
                self.first.entry(hash(a)).or_insert(i as u32);
            }
        }
        match self.first.entry(hash(alt)) {
            Entry::Vacant(e) => {
                e.insert(self.list.len() as u32);
                true
            }
            // Equal hashes: the first production with this hash, else (a collision) all of them.
            Entry::Occupied(e) => {
                let first = *e.get() as usize;
                self.list[first] != alt && !self.list[first..].iter().any(|a| a == alt)
            }
        }
    }

    /// The productions, in order.
    pub fn into_vec(self) -> Vec<Vec<Sym>> {
        self.list
    }
}
