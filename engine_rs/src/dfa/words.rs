//! `json_string_except!(w1, …)`: JSON string literals (quotes included) whose decoded value is
//! none of the words — the names an object's additional keys must avoid.
//!
//! Built directly, in time and size linear in the words' total length (no regex text, no subset
//! construction): while the decoded prefix is a path of the words' trie the state is that trie
//! node (plus the bytes of a character being read, when the character could still continue a
//! word); once a character no word continues with is read, the string can no longer be a word and
//! the state becomes the ordinary JSON-string automaton's ([`BODY`], built once per process),
//! which also decides every question of JSON syntax.
//!
//! The language, exactly: every JSON string whose decoded value is not a word, except those that
//! spell a character of `P` with an escape while the decoded prefix before it is still a prefix
//! of a word, where `P` is the set of printable ASCII characters other than `"` and `\` that occur
//! in the words. (So `"\u0061pi"` is refused when a word starts with `a`, as `"api"` spelled
//! alike. Without this rule each trie node would need its own copy of the `\uXXXX` states; with
//! it, one shared copy serves every node: a subset, never a word.)

use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use super::{
    explore_rows, product_classes, split_out, ByteSet, Dfa, DfaError, StateIds, StateIndex, DEAD,
};

/// The rest of a JSON string after its opening quote: characters in every spelling JSON allows
/// (raw, short escapes, `\uXXXX` in either case, surrogate pairs; lone surrogates refused), then
/// the closing quote. The same language as the translator's generic string terminal.
const BODY: &str = r#"(?:[ !#-\[\]-\x{D7FF}\x{E000}-\x{10FFFF}]|\\["/\\bfnrt]|\\u(?:[0-9A-Ca-c][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2}|[EFef][0-9A-Fa-f]{3})|\\u[Dd][89ABab][0-9A-Fa-f]{2}\\u[Dd][C-Fc-f][0-9A-Fa-f]{2})*""#;

/// The automaton of [`BODY`], built on first use (a constant of the engine), with the fewest
/// byte classes: those of the pattern's ranges merged where every state steps alike (every
/// automaton of words starts from these classes, see [`classes_for`]).
fn body() -> Result<&'static Dfa, DfaError> {
    static BODY_DFA: OnceLock<Result<Dfa, DfaError>> = OnceLock::new();
    BODY_DFA
        .get_or_init(|| {
            let dfa = Dfa::from_regex(BODY, 1 << 22)?;
            let (table, classes) = dfa.as_explored().merge_equal_classes(dfa.classes);
            Ok(table.finish_as_explored(classes))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// No trie node: inside an escape that can only spell a character no word continues with here,
/// or one of `P` (refused).
const NO_NODE: u32 = u32::MAX;

/// The longest spelling of one character: a surrogate pair `\uD83D\uDE00`.
const MAX_SPELLING: usize = 12;

/// The bytes of a character read so far (a proper prefix of its spelling), packed in one
/// 128-bit word: byte 0 is the length, bytes `1..=len` the bytes read, the rest zero (so equal
/// prefixes are equal values). One word because states are compared and hashed once per
/// transition while the automaton is explored, and built in registers (no byte stores to reload).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Partial(u128);

impl Partial {
    fn len(self) -> usize {
        (self.0 & 0xFF) as usize
    }
    fn with(self, b: u8) -> Option<Partial> {
        let n = self.len();
        (n < MAX_SPELLING).then(|| Partial(self.0 + 1 + ((b as u128) << (8 * (n + 1)))))
    }
    /// The word's bytes: the bytes read are `[1..=len]`.
    fn bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum State {
    /// Before the opening quote.
    Open,
    /// The decoded prefix is the path of `node` (or, for [`NO_NODE`], was one before the
    /// escape being read); `partial` holds the current character's bytes, and `at` is the
    /// [`BODY`] state they lead to from its start (a function of `partial`, kept so that a step
    /// is one transition, not a rerun of the character).
    Trie {
        node: u32,
        partial: Partial,
        at: u32,
    },
    /// Off the trie: a state of the [`BODY`] automaton.
    Free(u32),
}

/// Ids of the explored states: trie nodes between characters and body states (nearly all of
/// them) by a flat array, trie nodes first, states inside a character by hashing.
struct WordIndex {
    trie_nodes: usize,
    dense: Vec<u32>,
    other: FxHashMap<State, u32>,
}

impl WordIndex {
    fn dense_key(&self, s: &State) -> Option<usize> {
        match *s {
            State::Trie { node, partial, .. } if partial.len() == 0 && node != NO_NODE => {
                Some(node as usize)
            }
            State::Free(g) => Some(self.trie_nodes + g as usize),
            _ => None,
        }
    }
}

impl StateIndex<State> for WordIndex {
    fn get(&self, s: &State) -> Option<u32> {
        match self.dense_key(s) {
            Some(k) => Some(self.dense[k]).filter(|&id| id != 0),
            None => self.other.get(s).copied(),
        }
    }
    fn insert(&mut self, s: &State, id: u32) {
        match self.dense_key(s) {
            Some(k) => self.dense[k] = id,
            None => {
                self.other.insert(*s, id);
            }
        }
    }
}

/// The words' trie over code points: children sorted by code point. Its last node is a childless
/// non-word that no path reaches (see [`Dfa::json_string_except`]).
struct Trie {
    children: Vec<Vec<(u32, u32)>>,
    word_end: Vec<bool>,
}

impl Trie {
    fn new(words: &[String]) -> Trie {
        let mut trie = Trie {
            children: vec![Vec::new()],
            word_end: vec![false],
        };
        for w in words {
            let mut node = 0usize;
            for ch in w.chars() {
                let cp = ch as u32;
                let kids = &trie.children[node];
                node = match kids.binary_search_by_key(&cp, |&(c, _)| c) {
                    Ok(i) => kids[i].1 as usize,
                    Err(i) => {
                        let id = trie.children.len();
                        trie.children[node].insert(i, (cp, id as u32));
                        trie.children.push(Vec::new());
                        trie.word_end.push(false);
                        id
                    }
                };
            }
            trie.word_end[node] = true;
        }
        trie.children.push(Vec::new());
        trie.word_end.push(false);
        trie
    }

    fn child(&self, node: u32, cp: u32) -> Option<u32> {
        let kids = self.children.get(node as usize)?;
        kids.binary_search_by_key(&cp, |&(c, _)| c)
            .ok()
            .map(|i| kids[i].1)
    }

    /// Whether every child's code point is printable ASCII other than `"` and `\\` (so in `P`):
    /// such a node's row is the row of a childless node but at its children's bytes (see
    /// [`Dfa::json_string_except`]).
    fn has_plain_children(&self, node: u32) -> bool {
        self.children[node as usize]
            .iter()
            .all(|&(c, _)| (0x20..0x7F).contains(&c) && c != 0x22 && c != 0x5C)
    }

    /// Whether a child's code point lies in `lo..=hi` and is not in `P`.
    fn child_outside_p_in(&self, node: u32, lo: u32, hi: u32, p: &CharSet) -> bool {
        let Some(kids) = self.children.get(node as usize) else {
            return false;
        };
        let from = kids.partition_point(|&(c, _)| c < lo);
        kids[from..]
            .iter()
            .take_while(|&&(c, _)| c <= hi)
            .any(|&(c, _)| !p.contains(c))
    }
}

/// `P`: the printable ASCII characters (but `"` and `\`) occurring in the words, as a bit set
/// (asked once per state and byte class while the automaton is explored: O(1) range tests).
struct CharSet(u128);

impl CharSet {
    fn insert(&mut self, cp: u32) {
        self.0 |= 1 << cp;
    }
    fn contains(&self, cp: u32) -> bool {
        cp < 128 && self.0 >> cp & 1 == 1
    }
    /// Whether a character of `lo..=hi` is in the set.
    fn meets(&self, lo: u32, hi: u32) -> bool {
        if lo > hi || lo >= 128 {
            return false;
        }
        let hi = hi.min(127);
        // Bits lo..=hi.
        let mask = (u128::MAX >> (127 - hi)) & (u128::MAX << lo);
        self.0 & mask != 0
    }
}

/// What a (valid) prefix of one character's spelling decodes to.
enum Decoded {
    /// A whole character; `escaped` when spelled with `\`.
    Char { cp: u32, escaped: bool },
    /// Not yet whole: the character is in one of these ranges (a superset is fine: it only keeps
    /// a state on the trie a little longer).
    Pending([(u32, u32); 2]),
}

fn hex(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0, |v, &b| {
        v * 16
            + (b as char)
                .to_digit(16)
                .expect("validated by the body automaton")
    })
}

/// Code points whose 4-hex-digit escape starts with `digits` (0 to 3 of them).
fn hex_range(digits: &[u8]) -> (u32, u32) {
    let free = 4 * (4 - digits.len() as u32);
    let v = hex(digits) << free;
    (v, v + (1 << free) - 1)
}

/// Decodes a prefix of one character's spelling that the [`BODY`] automaton accepts as a
/// prefix (so its syntax is valid).
fn decode(p: &[u8]) -> Decoded {
    const NONE: (u32, u32) = (1, 0);
    match p[0] {
        b'\\' => match p.get(1) {
            None => Decoded::Pending([(0, 0x10FFFF), NONE]),
            Some(b'u') => {
                let high = &p[2..p.len().min(6)];
                if high.len() < 4 {
                    let (lo, hi) = hex_range(high);
                    // A high-surrogate prefix may become any astral character of those halves.
                    let (hs_lo, hs_hi) = (lo.max(0xD800), hi.min(0xDBFF));
                    let astral = if hs_lo <= hs_hi {
                        (
                            0x10000 + ((hs_lo - 0xD800) << 10),
                            0x10000 + ((hs_hi - 0xD800) << 10) + 0x3FF,
                        )
                    } else {
                        NONE
                    };
                    return Decoded::Pending([(lo, hi), astral]);
                }
                let h = hex(high);
                if !(0xD800..=0xDBFF).contains(&h) {
                    return Decoded::Char {
                        cp: h,
                        escaped: true,
                    };
                }
                let base = 0x10000 + ((h - 0xD800) << 10);
                let low = p.get(8..).unwrap_or(&[]);
                if low.len() < 4 {
                    let (lo, hi) = hex_range(low);
                    let (lo, hi) = (lo.max(0xDC00), hi.min(0xDFFF));
                    return Decoded::Pending([(base + lo - 0xDC00, base + hi - 0xDC00), NONE]);
                }
                Decoded::Char {
                    cp: base + hex(low) - 0xDC00,
                    escaped: true,
                }
            }
            Some(&e) => Decoded::Char {
                cp: match e {
                    b'b' => 0x08,
                    b'f' => 0x0C,
                    b'n' => 0x0A,
                    b'r' => 0x0D,
                    b't' => 0x09,
                    other => other as u32, // `"`, `\`, `/`
                },
                escaped: true,
            },
        },
        lead if lead < 0x80 => Decoded::Char {
            cp: lead as u32,
            escaped: false,
        },
        lead => {
            let n = match lead {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
            let payload = |fill: u8| {
                let mut v = (lead as u32) & (0x7F >> n);
                for i in 1..n {
                    v = (v << 6) | (p.get(i).copied().unwrap_or(fill) as u32 & 0x3F);
                }
                v
            };
            if p.len() == n {
                Decoded::Char {
                    cp: payload(0),
                    escaped: false,
                }
            } else {
                Decoded::Pending([(payload(0x80), payload(0xBF)), NONE])
            }
        }
    }
}

/// The automaton of `json_string_except!()` (every JSON string: the generic string of every
/// schema that allows other keys or any value), built once per process, with the table size its
/// construction checks against the size limit.
fn no_words() -> Result<&'static (Dfa, usize), DfaError> {
    static NO_WORDS: OnceLock<Result<(Dfa, usize), DfaError>> = OnceLock::new();
    NO_WORDS
        .get_or_init(|| except_words(&[], usize::MAX))
        .as_ref()
        .map_err(Clone::clone)
}

impl Dfa {
    /// The automaton of `json_string_except!(words…)` (see the module documentation for the
    /// exact language), within `size_limit` bytes.
    pub fn json_string_except(words: &[String], size_limit: usize) -> Result<Dfa, DfaError> {
        if words.is_empty() {
            let (dfa, size) = no_words()?;
            if *size <= size_limit {
                return Ok(dfa.clone());
            }
        }
        except_words(words, size_limit).map(|(dfa, _)| dfa)
    }
}

/// [`Dfa::json_string_except`] built, with the size of the explored table as the size limit
/// counts it (the limit it needs).
fn except_words(words: &[String], size_limit: usize) -> Result<(Dfa, usize), DfaError> {
    let body = body()?;
    let trie = Trie::new(words);
    let mut p = CharSet(0);
    for w in words {
        for ch in w.chars() {
            if (' '..='~').contains(&ch) && ch != '"' && ch != '\\' {
                p.insert(ch as u32);
            }
        }
    }
    let (classes, reps) = classes_for(words, body);
    // A trie node between characters (`at` is then the body's start).
    let boundary = |node: u32| State::Trie {
        node,
        partial: Partial::default(),
        at: body.start(),
    };
    let mut index = WordIndex {
        trie_nodes: trie.word_end.len(),
        dense: vec![0; trie.word_end.len() + body.state_count()],
        other: FxHashMap::default(),
    };
    let step = |s: &State, b: u8| -> Result<Option<State>, DfaError> {
        Ok(match *s {
            State::Open => (b == b'"').then(|| boundary(0)),
            State::Free(g) => Some(body.next(g, b))
                .filter(|&t| t != DEAD)
                .map(State::Free),
            State::Trie { node, partial, at } => {
                if partial.len() == 0 && b == b'"' {
                    // The closing quote: the value is this node's path.
                    let is_word = node != NO_NODE && trie.word_end[node as usize];
                    return Ok((!is_word).then(|| State::Free(body.next(body.start(), b))));
                }
                let Some(partial) = partial.with(b) else {
                    return Ok(None);
                };
                let g = body.next(at, b);
                if g == DEAD {
                    return Ok(None);
                }
                let raw = partial.bytes();
                let bytes = &raw[1..=partial.len()];
                match decode(bytes) {
                    Decoded::Char { cp, escaped } => {
                        if escaped && p.contains(cp) {
                            None
                        } else {
                            match trie.child(node, cp) {
                                Some(child) => Some(boundary(child)),
                                None => Some(State::Free(g)),
                            }
                        }
                    }
                    Decoded::Pending(ranges) => {
                        let keeps_node = ranges
                            .iter()
                            .any(|&(lo, hi)| trie.child_outside_p_in(node, lo, hi, &p));
                        if keeps_node {
                            Some(State::Trie {
                                node,
                                partial,
                                at: g,
                            })
                        } else if bytes[0] == b'\\'
                            && ranges.iter().any(|&(lo, hi)| lo <= hi && p.meets(lo, hi))
                        {
                            Some(State::Trie {
                                node: NO_NODE,
                                partial,
                                at: g,
                            })
                        } else {
                            Some(State::Free(g))
                        }
                    }
                }
            }
        })
    };
    // A node whose children are all plain (see `Trie::has_plain_children`) steps like a
    // childless node that is no word, except at its children's bytes (each its own class:
    // bytes of the words, see `classes_for`) and, for a word, at the closing quote: its row
    // is that shared row with those entries overwritten. The shared row is the row of `leaf`, a childless
    // node no path leads to, computed with the first such node (so every state it names is
    // a successor of that node). Other states step byte by byte.
    let leaf = trie.word_end.len() as u32 - 1;
    let quote = classes[b'"' as usize] as usize;
    let mut shared_row: Option<Vec<u32>> = None;
    let step_row = |key: &State, row: &mut [u32], ids: &mut StateIds<'_, State, WordIndex>| {
        for (c, &b) in reps.iter().enumerate() {
            if let Some(t) = step(key, b)? {
                row[c] = ids.id(&t)?;
            }
        }
        Ok(())
    };
    // A body state's row: the body's row read through the classes (each class here lies in
    // one class of the body's, being split out of them).
    let body_class: Vec<usize> = reps
        .iter()
        .map(|&b| body.classes[b as usize] as usize)
        .collect();
    let body_stride = body.stride as usize;
    let table = explore_rows(
        State::Open,
        &reps,
        |key, row, ids| match *key {
            State::Free(g) => {
                let from = &body.trans[g as usize * body_stride..][..body_stride];
                for (to, &c) in row.iter_mut().zip(&body_class) {
                    if from[c] != DEAD {
                        *to = ids.id(&State::Free(from[c]))?;
                    }
                }
                Ok(())
            }
            State::Trie { node, partial, .. }
                if partial.len() == 0 && node != NO_NODE && trie.has_plain_children(node) =>
            {
                if shared_row.is_none() {
                    let mut leaf_row = vec![DEAD; reps.len()];
                    step_row(&boundary(leaf), &mut leaf_row, ids)?;
                    shared_row = Some(leaf_row);
                }
                row.copy_from_slice(shared_row.as_deref().expect("computed above"));
                for &(cp, child) in &trie.children[node as usize] {
                    row[classes[cp as usize] as usize] = ids.id(&boundary(child))?;
                }
                if trie.word_end[node as usize] {
                    row[quote] = DEAD;
                }
                Ok(())
            }
            _ => step_row(key, row, ids),
        },
        |s| matches!(*s, State::Free(g) if body.is_accept(g)),
        size_limit,
        &mut index,
    )?;
    let size = table.accept.len() * (table.stride * 4 + 40);
    let dist = distances(&table.trans, table.stride, &index, body);
    #[cfg(test)]
    assert_eq!(dist.as_ref(), Some(&table.distances()), "words {words:?}");
    // Near-minimal by construction (states are trie nodes of distinct words): minimizing would
    // cost about four times the construction to remove under a fifth of the states. Classes are
    // not merged either: `classes_for` splits the body's only where a trie state may tell
    // bytes apart, and comparing the columns would cost more than the few it could merge.
    let dfa = match dist {
        Some(dist) => table.finish_as_explored_with_distances(classes, dist),
        None => table.finish_as_explored(classes),
    };
    Ok((dfa, size))
}

/// The byte classes of the automaton for `words`: the body's, each refined by what a trie
/// state can tell apart within it (so every state steps alike on the bytes of a class, and a
/// body state by the body's class alone), and one representative byte per class.
///
/// Within one body class a trie state tells bytes apart only by the character they spell or
/// begin: a byte of the words (a child's byte, raw; not a control character's); a short escape
/// `\b \f \n \r \t` whose character occurs in the words (`\" \\ \/` spell themselves, their bytes
/// are then bytes of the words); a hex digit by its value (`\u` escapes, either case). Any other
/// byte leaves the trie, as the body steps.
fn classes_for(words: &[String], body: &Dfa) -> ([u8; 256], Vec<u8>) {
    // The body's classes with hex digits apart by value: the same for all words.
    static BY_HEX_VALUE: OnceLock<[u8; 256]> = OnceLock::new();
    let base = BY_HEX_VALUE.get_or_init(|| {
        product_classes(|b| {
            let value = (b as char).to_digit(16).map_or(0, |v| v + 1);
            (body.classes[b as usize], value)
        })
        .0
    });
    let mut singles = ByteSet::EMPTY;
    let mut chars = ByteSet::EMPTY; // (the ASCII characters of the words)
    for w in words {
        for b in w.bytes() {
            // (a control character is only ever escaped: its raw byte ends every string)
            if b >= 0x20 {
                singles.insert(b);
            }
            if b.is_ascii() {
                chars.insert(b);
            }
        }
    }
    for (letter, c) in [
        (b'b', 0x08),
        (b'f', 0x0C),
        (b'n', 0x0A),
        (b'r', 0x0D),
        (b't', 0x09),
    ] {
        if chars.contains(c) {
            singles.insert(letter);
        }
    }
    split_out(base, &singles)
}

/// Each explored state's distance to acceptance (`u32::MAX`: none, and for the dead state 0),
/// without a reverse search: a body state's is the body automaton's, and the other states
/// (the opening quote, states on the trie) form an acyclic graph — each step reads a deeper
/// trie node, or one more byte of a character, or leaves the trie — so each takes one more
/// than the least of its successors', found depth-first. `None` if a cycle is met after all
/// (the reverse search then decides).
fn distances(trans: &[u32], stride: usize, index: &WordIndex, body: &Dfa) -> Option<Vec<u32>> {
    const UNKNOWN: u32 = u32::MAX - 1;
    const ON_PATH: u32 = u32::MAX - 2;
    let n = trans.len() / stride;
    let mut dist = vec![UNKNOWN; n];
    dist[DEAD as usize] = u32::MAX;
    for (g, &id) in index.dense[index.trie_nodes..].iter().enumerate() {
        if id != 0 {
            dist[id as usize] = body.min_to_accept(g as u32);
        }
    }
    let mut stack: Vec<(u32, usize)> = Vec::new();
    for root in 1..n {
        if dist[root] != UNKNOWN {
            continue;
        }
        stack.push((root as u32, 0));
        dist[root] = ON_PATH;
        while let Some(&mut (s, ref mut c)) = stack.last_mut() {
            let row = &trans[s as usize * stride..(s as usize + 1) * stride];
            // Descend into the first successor whose distance is unknown.
            match row[*c..]
                .iter()
                .position(|&t| matches!(dist[t as usize], UNKNOWN | ON_PATH))
            {
                Some(k) => {
                    let t = row[*c + k];
                    if dist[t as usize] == ON_PATH {
                        return None;
                    }
                    *c += k + 1;
                    dist[t as usize] = ON_PATH;
                    stack.push((t, 0));
                }
                None => {
                    let least = row
                        .iter()
                        .map(|&t| dist[t as usize])
                        .min()
                        .unwrap_or(u32::MAX);
                    dist[s as usize] = least.saturating_add(1);
                    stack.pop();
                }
            }
        }
    }
    Some(dist)
}

#[cfg(test)]
mod tests {
    use rand::{rngs::SmallRng, Rng, SeedableRng};

    use super::*;

    /// The reference: a valid JSON string whose value is not a word, and which spells no
    /// character of `P` with an escape while the decoded prefix is a prefix of a word.
    fn reference(words: &[String], input: &[u8]) -> bool {
        let Ok(value) = serde_json::from_slice::<String>(input) else {
            return false;
        };
        if words.contains(&value) {
            return false;
        }
        let in_p = |c: char| {
            (' '..='~').contains(&c) && c != '"' && c != '\\' && words.iter().any(|w| w.contains(c))
        };
        // Walk the spellings (the input is valid JSON here).
        let body = &input[1..input.len() - 1];
        let (mut i, mut decoded) = (0, String::new());
        while i < body.len() {
            let (c, escaped, len) = if body[i] == b'\\' {
                if body[i + 1] == b'u' {
                    let h =
                        u32::from_str_radix(std::str::from_utf8(&body[i + 2..i + 6]).unwrap(), 16)
                            .unwrap();
                    if (0xD800..0xDC00).contains(&h) {
                        let l = u32::from_str_radix(
                            std::str::from_utf8(&body[i + 8..i + 12]).unwrap(),
                            16,
                        )
                        .unwrap();
                        let cp = 0x10000 + ((h - 0xD800) << 10) + (l - 0xDC00);
                        (char::from_u32(cp).unwrap(), true, 12)
                    } else {
                        (char::from_u32(h).unwrap(), true, 6)
                    }
                } else {
                    let c = match body[i + 1] {
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        o => o as char,
                    };
                    (c, true, 2)
                }
            } else {
                let c = std::str::from_utf8(&body[i..])
                    .unwrap()
                    .chars()
                    .next()
                    .unwrap();
                (c, false, c.len_utf8())
            };
            let on_trie = words.iter().any(|w| w.starts_with(&decoded));
            if on_trie && escaped && in_p(c) {
                return false;
            }
            decoded.push(c);
            i += len;
        }
        true
    }

    const CHARS: &[char] = &[
        'a', 'b', 'A', '/', ' ', '"', '\\', '\n', '\t', '\u{1f}', 'é', '€', '😀', 'z', 'F', '7',
    ];

    /// One random JSON spelling of `c` (raw, short escape, `\u` in either case).
    fn spell(c: char, rng: &mut SmallRng, out: &mut Vec<u8>) {
        let short = match c {
            '"' => Some(b'"'),
            '\\' => Some(b'\\'),
            '/' => Some(b'/'),
            '\n' => Some(b'n'),
            '\t' => Some(b't'),
            _ => None,
        };
        let raw_ok = c >= ' ' && c != '"' && c != '\\';
        match rng.gen_range(0..3) {
            0 if raw_ok => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            1 if short.is_some() => out.extend_from_slice(&[b'\\', short.unwrap()]),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let h = format!("\\u{u:04x}");
                    let h = if rng.gen() {
                        h.to_uppercase().replace("\\U", "\\u")
                    } else {
                        h
                    };
                    out.extend_from_slice(h.as_bytes());
                }
            }
        }
    }

    fn random_word(rng: &mut SmallRng) -> String {
        let n = rng.gen_range(0..4);
        (0..n)
            .map(|_| CHARS[rng.gen_range(0..CHARS.len())])
            .collect()
    }

    /// `count` random words of `len` characters of `alphabet`.
    fn random_words(
        rng: &mut SmallRng,
        alphabet: &[char],
        count: std::ops::Range<usize>,
        len: std::ops::Range<usize>,
    ) -> Vec<String> {
        (0..rng.gen_range(count))
            .map(|_| {
                (0..rng.gen_range(len.clone()))
                    .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                    .collect()
            })
            .collect()
    }

    /// The distances found depth-first are the reverse search's (`except_words` asserts it in
    /// tests), on word sets dense in printable ASCII (escapes of `P` then lead nowhere, so some
    /// states are pruned) and of longer words.
    #[test]
    fn distances_match_the_reverse_search() {
        let mut rng = SmallRng::seed_from_u64(11);
        let alphabet: Vec<char> = (0x20u8..0x7F).map(char::from).chain(['é', '😀']).collect();
        for _ in 0..300 {
            let words = random_words(&mut rng, &alphabet, 0..40, 0..12);
            let dfa = Dfa::json_string_except(&words, 1 << 24).unwrap();
            assert!(dfa.state_count() > 1);
        }
    }

    #[test]
    fn matches_the_reference_on_random_spellings() {
        let mut rng = SmallRng::seed_from_u64(7);
        for round in 0..300 {
            let words: Vec<String> = (0..rng.gen_range(0..5))
                .map(|_| random_word(&mut rng))
                .collect();
            let dfa = Dfa::json_string_except(&words, 1 << 24).unwrap();
            for _ in 0..400 {
                // Mostly a word or a near-word, spelled at random; sometimes damaged.
                let mut chars: Vec<char> = if !words.is_empty() && rng.gen_bool(0.6) {
                    words[rng.gen_range(0..words.len())].chars().collect()
                } else {
                    random_word(&mut rng).chars().collect()
                };
                if rng.gen_bool(0.3) {
                    chars.push(CHARS[rng.gen_range(0..CHARS.len())]);
                }
                let mut input = vec![b'"'];
                for &c in &chars {
                    spell(c, &mut rng, &mut input);
                }
                input.push(b'"');
                if rng.gen_bool(0.15) {
                    let at = rng.gen_range(0..input.len());
                    input[at] =
                        [b'\\', b'u', b'"', b'x', 0xC3, 0xA9, b'0', 0x80][rng.gen_range(0..8)];
                }
                assert_eq!(
                    dfa.matches(&input),
                    reference(&words, &input),
                    "round {round}, words {words:?}, input {:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
    }

    #[test]
    fn char_set_ranges_match_a_scan() {
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..50 {
            let mut set = CharSet(0);
            let members: Vec<u32> = (0..rng.gen_range(0..6))
                .map(|_| rng.gen_range(0..128))
                .collect();
            members.iter().for_each(|&c| set.insert(c));
            for lo in 0..140 {
                for hi in 0..140 {
                    let scan = (lo..=hi).any(|c| members.contains(&c));
                    assert_eq!(set.meets(lo, hi), scan, "{members:?} {lo}..={hi}");
                }
            }
        }
    }

    #[test]
    fn named_cases() {
        let words: Vec<String> = ["apiVersion", "kind", "é", "a\"b"]
            .map(String::from)
            .to_vec();
        let dfa = Dfa::json_string_except(&words, 1 << 24).unwrap();
        let cases: [(&[u8], bool); 12] = [
            (b"\"apiVersio\"", true),
            (b"\"kinds\"", true),
            (b"\"\\u00e8\"", true),
            (b"\"a\\\"\"", true),
            (b"\"\"", true),
            // Off the trie every spelling is fine.
            (b"\"x\\u0061\"", true),
            (b"\"apiVersion\"", false),
            (b"\"kind\"", false),
            (b"\"\\u00E9\"", false),
            (b"\"\xc3\xa9\"", false),
            (b"\"a\\u0022b\"", false),
            (b"\"\\u0061pi\"", false),
        ];
        for (s, expected) in cases {
            assert_eq!(dfa.matches(s), expected, "{}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn the_constant_without_words_keeps_the_size_limit() {
        // The shared automaton of `json_string_except!()` is used only under a limit its own
        // construction would pass: below that the construction runs (and fails) as before.
        let (built, size) = except_words(&[], usize::MAX).unwrap();
        let shared = Dfa::json_string_except(&[], size).unwrap();
        assert_eq!(shared.trans, built.trans);
        assert_eq!(shared.classes, built.classes);
        assert!(matches!(
            Dfa::json_string_except(&[], size - 1),
            Err(DfaError::TooBig { .. })
        ));
    }

    /// `classes_for` splits the body's classes no further than the states tell bytes apart,
    /// but for hex digits (kept apart by value, whether or not an escape of them could spell
    /// a word's character): any two classes with equal columns are of hex digits. (No less
    /// than needed: the language tests above.)
    #[test]
    fn classes_are_those_the_states_tell_apart() {
        let mut rng = SmallRng::seed_from_u64(5);
        let alphabet: Vec<char> = (0x20u8..0x7F)
            .map(char::from)
            .chain(['\n', '\t', 'é'])
            .collect();
        for _ in 0..300 {
            let words = random_words(&mut rng, &alphabet, 0..8, 1..10);
            let dfa = Dfa::json_string_except(&words, 1 << 24).unwrap();
            let reps = dfa.class_reps();
            let (_, merged) = dfa.as_explored().merge_equal_classes(dfa.classes);
            for (c, &a) in reps.iter().enumerate() {
                for &b in &reps[c + 1..] {
                    if merged[a as usize] == merged[b as usize] {
                        assert!(
                            a.is_ascii_hexdigit() && b.is_ascii_hexdigit(),
                            "{:?} and {:?} step alike, words {words:?}",
                            a as char,
                            b as char
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn size_is_linear_in_the_words() {
        let words: Vec<String> = (0..2000).map(|i| format!("property_name_{i}")).collect();
        let dfa = Dfa::json_string_except(&words, 1 << 26).unwrap();
        // Trie nodes (~2,400 here) plus a few dozen shared escape and body states.
        assert!(dfa.state_count() < 3_000, "{}", dfa.state_count());
    }
}
