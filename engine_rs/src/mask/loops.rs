//! Self-loop skipping: masks inside restricted free text (a URI, an e-mail address, a pattern's
//! `[a-z0-9-]+` or `.+`) without walking the whole vocabulary.
//!
//! From a terminal DFA state `s`, take a set `C` of bytes such that no UTF-8 text over `C` of at
//! most `max_len` bytes kills the automaton (it loops on them, or moves among states that all keep
//! `C` alive: a URI's host after `//`). Every token that is such a text keeps the terminal alive,
//! whatever else the grammar says (every Earley item is completable). Those tokens are added as
//! one bitmask, and the trie walk skips every subtree whose tokens all qualify.
//!
//! Invariants:
//! - bytes are grouped into [`NUM_CLASSES`] fixed classes so that sets fit a `u64`; `C` is a set
//!   of whole classes ([`Inside::classes`]) less at most [`MAX_EXCEPT`] single bytes
//!   ([`Inside::except`]: free text up to a stop word of letters, `except!('TOOLCALL')`, keeps
//!   every letter but one), and a token qualifies when all its bytes are in it, it is a UTF-8
//!   prefix (it may end inside a character) and it has at most [`Inside::max_len`] bytes;
//! - the bitmask ([`LoopIndex::inside_mask`]) and the walk's skip test ([`LoopSkip`]) use that
//!   same definition, so every token of a skipped subtree is in the bitmask;
//! - the class set is sound by construction ([`inside_classes`] explores every state such text
//!   reaches); the grouping and the length bound only decide how much is skipped;
//! - everything here depends only on the vocabulary, except [`Inside`], which is read from the
//!   DFA when a mask needs it; the tables of the single bytes given up are built for a
//!   vocabulary the first time a mask gives that byte up.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock, RwLock};

use rustc_hash::FxHashMap;

use crate::dfa::{utf8, ByteSet, Dfa, DEAD};
use crate::vocab::Vocabulary;

/// Number of byte classes (see [`class_of`]).
pub const NUM_CLASSES: usize = 50;

/// All real classes.
const CLASS_BITS: u64 = (1 << NUM_CLASSES) - 1;

/// The classes of UTF-8 continuation bytes.
const CONT_CLASSES: u64 = 1 << 7 | 0b111_1111 << 43;

/// Pseudo-class (bit) of tokens that are not UTF-8 prefixes: never inside.
const INVALID: u64 = 1 << NUM_CLASSES;

/// [`LoopIndex::below`] keeps the subtree's greatest depth (saturated at 255) from this bit on.
const DEPTH_SHIFT: u32 = 56;

/// Bounded lengths are powers of two from this one (shorter bounds shrink the class set
/// instead) up to [`MAX_BOUND`]; depths are stored saturated at 255.
const MIN_BOUND: u32 = 4;
const MAX_BOUND: u32 = 128;

/// Pairs [`inside_classes`] may visit over all its rounds before it gives up (no skipping from
/// that state): its answer is cached per state, but a first mask should not pay for more.
const MAX_SEARCH: usize = 2048;

/// Closures larger than this stop exploring: at a depth of at least [`MIN_BOUND`] they bound the
/// length, below it they give up (no skipping from that state).
const MAX_CLOSURE: usize = 512;

/// Inside-class sets whose bitmask holds fewer than this fraction (1 / `MIN_SHARE`) of the
/// text tokens are not used: the walk prunes such small sets by itself, and the bitmask would
/// only add work.
const MIN_SHARE: usize = 128;

/// At most this many inside bitmasks are kept per vocabulary (16 KB each for a 128k
/// vocabulary); when full, the table starts over.
const MAX_CACHED_MASKS: usize = 64;

/// The class of a byte: `0-9`, `a-f`, `g-z`, `A-F`, `G-Z` one class each (hexadecimal digits
/// apart from other letters), every other printable ASCII byte its own class, then control
/// bytes, DEL, UTF-8 lead bytes and bytes never in UTF-8 one class each, and UTF-8 continuation
/// bytes in eight classes of eight (so that a few excluded characters, such as the line
/// separators `.` leaves out, cost only the tokens with a byte of their class).
pub const fn class_of(b: u8) -> usize {
    match b {
        b'0'..=b'9' => 0,
        b'a'..=b'f' => 1,
        b'g'..=b'z' => 2,
        b'A'..=b'F' => 3,
        b'G'..=b'Z' => 4,
        0x00..=0x1F => 5,
        0x7F => 6,
        0x80..=0x87 => 7,
        0x88..=0xBF => 43 + ((b - 0x88) >> 3) as usize, // 43..=49
        0xC2..=0xF4 => 8,
        0xC0 | 0xC1 | 0xF5..=0xFF => 42,
        // The 33 other printable ASCII bytes (space, punctuation), in order.
        b' '..=b'/' => 9 + (b - b' ') as usize,  // 9..=24
        b':'..=b'@' => 25 + (b - b':') as usize, // 25..=31
        b'['..=b'`' => 32 + (b - b'[') as usize, // 32..=37
        b'{'..=b'~' => 38 + (b - b'{') as usize, // 38..=41
    }
}

/// The bytes of each class.
pub(super) fn class_bytes() -> &'static [ByteSet; NUM_CLASSES] {
    static TABLE: OnceLock<[ByteSet; NUM_CLASSES]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [ByteSet::EMPTY; NUM_CLASSES];
        for b in 0..=255u8 {
            t[class_of(b)].insert(b);
        }
        t
    })
}

/// The classes of letters and digits: `0-9`, `a-f`, `g-z`, `A-F`, `G-Z`.
const WORDY: u64 = 0b11111;

/// Weight of classes when choosing what to give up: letters and digits make most tokens.
fn weight(classes: u64) -> u32 {
    (classes & WORDY).count_ones() * 16 + (classes & !WORDY).count_ones()
}

/// Most single bytes an [`Inside`] gives up inside its classes.
pub const MAX_EXCEPT: usize = 4;

/// What a DFA state keeps alive: see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Inside {
    /// Class set (0: nothing).
    pub classes: u64,
    /// Longest qualifying token in bytes, `u32::MAX` for no bound.
    pub max_len: u32,
    /// Bytes of [`Inside::classes`] that are not inside: the first `except_len`, ascending.
    pub except: [u8; MAX_EXCEPT],
    pub except_len: u8,
}

impl Inside {
    pub const NONE: Inside = Inside {
        classes: 0,
        max_len: 0,
        except: [0; MAX_EXCEPT],
        except_len: 0,
    };

    /// The bytes given up inside the classes.
    pub fn except(&self) -> &[u8] {
        &self.except[..self.except_len as usize]
    }

    /// Whether byte `b` is inside.
    #[inline]
    pub fn has_byte(&self, b: u8) -> bool {
        self.classes & (1 << class_of(b)) != 0 && !self.except().contains(&b)
    }
}

/// A pair of [`inside_classes`]' search: (DFA state, UTF-8 state).
type Pair = (u32, u8);

/// Reads [`Inside`] off `dfa` at `state` (every state of a [`Dfa`] is co-reachable, so a text
/// that never meets a dead transition keeps it alive).
///
/// Explores, breadth first, the (DFA state, UTF-8 state) pairs that texts over the class set
/// reach, starting from every class. A pair that kills some classes of the set is a text that
/// kills; it costs the classes of one of its steps, or the classes it kills, whichever weighs
/// least: `%` into a URI's percent escape kills letters, giving up `%` is cheaper; free text up
/// to a stop word (`except!('<tool_call>')`) dies at the word's last byte, giving up `>` (or
/// the `<` it starts with) keeps every other character — and the exploration starts over. At
/// least [`MIN_BOUND`] bytes deep, when every such choice would give up a class of letters or
/// digits, the length is bounded below that depth instead (a `maxLength` counted in the
/// automaton's states). Every pair less deep than the bound has been checked when this
/// returns. Gives up (nothing) after [`MAX_SEARCH`] pairs in all.
pub fn inside_classes(dfa: &Dfa, state: u32) -> Inside {
    // Continuation bytes only ever follow a lead byte: without leads they are not inside.
    let tidy = |f: u64| {
        if f & 1 << class_of(0xC2) == 0 {
            f & !CONT_CLASSES
        } else {
            f
        }
    };
    let mut f = CLASS_BITS & !(1 << class_of(0xFF));
    // Single bytes given up inside `f`.
    let mut except = ByteSet::EMPTY;
    let inside = |f: u64, except: &ByteSet, max_len: u32| {
        let classes = tidy(f);
        let mut out = Inside {
            classes,
            max_len,
            ..Inside::NONE
        };
        for b in except.iter().filter(|&b| classes & 1 << class_of(b) != 0) {
            out.except[out.except_len as usize] = b;
            out.except_len += 1;
        }
        out
    };
    // Each pair reached, with the pair it was first reached from.
    let mut seen: FxHashMap<Pair, Option<Pair>> = FxHashMap::default();
    let mut queue: VecDeque<(u32, u8, u32)> = VecDeque::new();
    let bounded = |depth: u32| {
        let mut b = MIN_BOUND;
        while b * 2 <= depth.min(MAX_BOUND) {
            b *= 2;
        }
        b
    };
    let mut budget = MAX_SEARCH;
    'shrink: while f != 0 {
        // One byte per (DFA class, UTF-8 kind) among the bytes of `F`, with the classes and
        // the bytes it stands for.
        let mut reps: Vec<(u8, u64, ByteSet)> = Vec::new();
        let mut slot: FxHashMap<(u8, u8), usize> = FxHashMap::default();
        for b in 0..=255u8 {
            let c = 1u64 << class_of(b);
            if f & c == 0 || except.contains(b) {
                continue;
            }
            let i = *slot
                .entry((dfa.byte_class(b), utf8::class(b)))
                .or_insert_with(|| {
                    reps.push((b, 0, ByteSet::EMPTY));
                    reps.len() - 1
                });
            reps[i].1 |= c;
            reps[i].2.insert(b);
        }
        seen.clear();
        queue.clear();
        seen.insert((state, utf8::BOUNDARY), None);
        queue.push_back((state, utf8::BOUNDARY, 0));
        while let Some((t, u, depth)) = queue.pop_front() {
            let mut killed = (0u64, ByteSet::EMPTY);
            for &(b, classes, ref bytes) in &reps {
                if utf8::next(u, b) != utf8::INVALID && dfa.next(t, b) == DEAD {
                    killed.0 |= classes;
                    killed.1.union_with(bytes);
                }
            }
            if killed.0 != 0 {
                // Giving up the classes of any step of the text that leads here (all the
                // classes that make that step: fewer would leave it open), or the killed ones;
                // or else the bytes of one of those (the fewest).
                let (mut give_up, mut fewest) = (killed.0, killed.1);
                let mut at = (t, u);
                while let Some(&Some((pt, pu))) = seen.get(&at) {
                    let mut step = (0u64, ByteSet::EMPTY);
                    for (_, classes, bytes) in reps
                        .iter()
                        .filter(|&&(b, _, _)| utf8::next(pu, b) == at.1 && dfa.next(pt, b) == at.0)
                    {
                        step.0 |= classes;
                        step.1.union_with(bytes);
                    }
                    if step.0 != 0 && weight(step.0) < weight(give_up) {
                        give_up = step.0;
                    }
                    if step.0 != 0 && step.1.len() < fewest.len() {
                        fewest = step.1;
                    }
                    at = (pt, pu);
                }
                if give_up & WORDY == 0 {
                    f &= !give_up;
                } else if except.len() + fewest.len() <= MAX_EXCEPT {
                    // A few letters or digits (a stop word's): those bytes, not their classes.
                    except.union_with(&fewest);
                } else if depth >= MIN_BOUND {
                    return inside(f, &except, bounded(depth));
                } else {
                    f &= !give_up;
                }
                continue 'shrink;
            }
            for &(b, _, _) in &reps {
                let u2 = utf8::next(u, b);
                if u2 == utf8::INVALID {
                    continue;
                }
                let t2 = dfa.next(t, b);
                if let std::collections::hash_map::Entry::Vacant(e) = seen.entry((t2, u2)) {
                    e.insert(Some((t, u)));
                    budget = budget.saturating_sub(1);
                    if budget == 0 {
                        return Inside::NONE;
                    }
                    if seen.len() > MAX_CLOSURE {
                        // Pairs up to `depth` are not all checked yet; those before it are.
                        return if depth >= MIN_BOUND {
                            inside(f, &except, bounded(depth))
                        } else {
                            Inside::NONE
                        };
                    }
                    queue.push_back((t2, u2, depth + 1));
                }
            }
        }
        return inside(f, &except, u32::MAX);
    }
    Inside::NONE
}

/// A cached inside bitmask and the number of tokens it holds, or `None` when it holds too few
/// to be used.
type KeptMask = Option<(Arc<[u32]>, u32)>;

/// Per-vocabulary tables for self-loop skipping.
pub struct LoopIndex {
    /// Per node of the vocabulary's trie: the classes of the bytes strictly below it, [`INVALID`]
    /// when a node of its subtree (itself included) is not a UTF-8 prefix, and the subtree's
    /// greatest depth from [`DEPTH_SHIFT`] on.
    below: Vec<u64>,
    /// Per class, and [`INVALID`] last: the text tokens with a byte of that class (not UTF-8
    /// prefixes).
    class_tokens: Vec<Vec<u32>>,
    /// Per bound of [`bounded lengths`](MIN_BOUND), ascending: the text tokens longer than it.
    longer: Vec<(u32, Vec<u32>)>,
    /// All text tokens.
    text: Vec<u32>,
    /// Bitmasks with fewer tokens than this are not used (see [`MIN_SHARE`]).
    min_tokens: u32,
    /// Inside → the bitmask, or `None` when it holds too few tokens.
    masks: RwLock<FxHashMap<Inside, KeptMask>>,
    /// Per byte, built the first time an [`Inside`] gives it up.
    bytes: Vec<OnceLock<ByteTables>>,
}

/// The tokens and trie nodes of one byte, for [`Inside::except`].
struct ByteTables {
    /// The text tokens with that byte.
    tokens: Box<[u32]>,
    /// The nodes of the vocabulary's trie reached by that byte, ascending (preorder: a node's
    /// subtree is the nodes from it up to its `subtree_end`).
    nodes: Box<[u32]>,
}

impl LoopIndex {
    pub fn new(vocab: &Vocabulary) -> LoopIndex {
        let words = vocab.size().div_ceil(32);
        let mut class_tokens = vec![vec![0u32; words]; NUM_CLASSES + 1];
        let mut text = vec![0u32; words];
        let mut bounds = Vec::new();
        let mut b = MIN_BOUND;
        while b <= MAX_BOUND {
            bounds.push(b);
            b *= 2;
        }
        let mut longer: Vec<(u32, Vec<u32>)> =
            bounds.iter().map(|&b| (b, vec![0u32; words])).collect();
        for (id, bytes) in vocab.text_tokens() {
            let (w, bit) = (id as usize / 32, 1u32 << (id % 32));
            text[w] |= bit;
            let mut u = utf8::BOUNDARY;
            for &b in bytes {
                class_tokens[class_of(b)][w] |= bit;
                if u != utf8::INVALID {
                    u = utf8::next(u, b);
                }
            }
            if u == utf8::INVALID {
                class_tokens[NUM_CLASSES][w] |= bit;
            }
            for (bound, m) in &mut longer {
                if bytes.len() > *bound as usize {
                    m[w] |= bit;
                }
            }
        }
        let trie = vocab.trie();
        let nodes = trie.nodes();
        let parent = trie.parents();
        // Per node: the UTF-8 state after its path (`utf8::INVALID` once it is not a prefix).
        let mut at = vec![utf8::BOUNDARY; nodes.len()];
        for i in 1..nodes.len() {
            at[i] = match at[parent[i] as usize] {
                utf8::INVALID => utf8::INVALID,
                u => utf8::next(u, nodes[i].byte()),
            };
        }
        // Folded into parents in reverse: the classes below (and INVALID), the greatest depth.
        let mut flags: Vec<u64> = at
            .iter()
            .map(|&u| if u == utf8::INVALID { INVALID } else { 0 })
            .collect();
        let mut depth: Vec<usize> = nodes.iter().map(|n| n.depth()).collect();
        for i in (1..nodes.len()).rev() {
            let p = parent[i] as usize;
            flags[p] |= flags[i] | 1u64 << class_of(nodes[i].byte());
            depth[p] = depth[p].max(depth[i]);
        }
        let below = flags
            .iter()
            .zip(&depth)
            .map(|(&f, &d)| f | (d.min(255) as u64) << DEPTH_SHIFT)
            .collect();
        LoopIndex {
            below,
            class_tokens,
            longer,
            text,
            min_tokens: (vocab.num_text_tokens() / MIN_SHARE).max(1) as u32,
            masks: RwLock::new(FxHashMap::default()),
            bytes: (0..256).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The tables of byte `b` (`vocab` is the vocabulary this index was built from).
    fn byte_tables(&self, vocab: &Vocabulary, b: u8) -> &ByteTables {
        self.bytes[b as usize].get_or_init(|| {
            let mut tokens = vec![0u32; self.text.len()];
            for (id, bytes) in vocab.text_tokens() {
                if bytes.contains(&b) {
                    tokens[id as usize / 32] |= 1 << (id % 32);
                }
            }
            let nodes = vocab.trie().nodes();
            ByteTables {
                tokens: tokens.into(),
                nodes: (1..nodes.len() as u32)
                    .filter(|&i| nodes[i as usize].byte() == b)
                    .collect(),
            }
        })
    }

    /// What a walk of `vocab`'s trie needs to skip the subtrees of `inside` (see [`LoopSkip`]).
    pub fn skip<'a>(&'a self, vocab: &Vocabulary, inside: Inside) -> LoopSkip<'a> {
        let mut except: [&'a [u32]; MAX_EXCEPT] = [&[]; MAX_EXCEPT];
        for (e, &b) in except.iter_mut().zip(inside.except()) {
            *e = &self.byte_tables(vocab, b).nodes;
        }
        LoopSkip {
            index: self,
            inside,
            except,
        }
    }

    /// The bitmask of the tokens that qualify for `inside` (see the module docs) and their
    /// number, or `None` when it holds too few to be worth using.
    pub fn inside_mask(&self, vocab: &Vocabulary, inside: Inside) -> KeptMask {
        let key = inside;
        // Shared by every grammar of the vocabulary, so by every row of a batch: lookups share
        // the lock, and a miss computes without holding it (two threads missing the same key
        // compute the same mask; the first stored is kept).
        if let Some(m) = self
            .masks
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return m.clone();
        }
        let mut mask = self.text.clone();
        for &b in inside.except() {
            for (m, t) in mask
                .iter_mut()
                .zip(self.byte_tables(vocab, b).tokens.iter())
            {
                *m &= !t;
            }
        }
        let outside = !inside.classes & (CLASS_BITS | INVALID);
        for (c, tokens) in self.class_tokens.iter().enumerate() {
            if outside & (1 << c) != 0 {
                for (m, t) in mask.iter_mut().zip(tokens) {
                    *m &= !t;
                }
            }
        }
        if let Some((_, tokens)) = self.longer.iter().find(|(b, _)| *b == inside.max_len) {
            for (m, t) in mask.iter_mut().zip(tokens) {
                *m &= !t;
            }
        }
        let count: u32 = mask.iter().map(|w| w.count_ones()).sum();
        let kept: KeptMask = (count >= self.min_tokens).then(|| (mask.into(), count));
        let mut masks = self.masks.write().unwrap_or_else(|p| p.into_inner());
        if masks.len() >= MAX_CACHED_MASKS {
            masks.clear();
        }
        masks.entry(key).or_insert(kept).clone()
    }
}

/// What a trie walk of the vocabulary's trie needs to skip subtrees: the vocabulary's tables and
/// the [`Inside`] whose bitmask has already been added to the mask being computed.
/// Made by [`LoopIndex::skip`].
#[derive(Clone, Copy)]
pub struct LoopSkip<'a> {
    index: &'a LoopIndex,
    inside: Inside,
    /// Per byte of [`Inside::except`]: the trie nodes it reaches (see [`ByteTables::nodes`]).
    except: [&'a [u32]; MAX_EXCEPT],
}

impl LoopSkip<'_> {
    /// Whether `b` is inside.
    #[inline]
    pub fn byte_inside(&self, b: u8) -> bool {
        self.inside.has_byte(b)
    }

    /// Whether every token of node `i`'s subtree (the nodes before `end`) qualifies, given that
    /// `i`'s path has inside bytes only.
    #[inline]
    pub fn subtree_inside(&self, i: usize, end: usize) -> bool {
        let below = self.index.below[i];
        below & !self.inside.classes & (CLASS_BITS | INVALID) == 0
            && (below >> DEPTH_SHIFT) as u32 <= self.inside.max_len
            && self.except[..self.inside.except_len as usize]
                .iter()
                .all(|nodes| {
                    // No node of the byte strictly below `i`.
                    let k = nodes.partition_point(|&n| n as usize <= i);
                    nodes.get(k).is_none_or(|&n| n as usize >= end)
                })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::utf8::tests::is_utf8_prefix;
    use rustc_hash::FxHashSet;

    fn vocab() -> Vocabulary {
        let words: &[&[u8]] = &[
            b"a",
            b"ab",
            b"abc",
            b"ab-",
            b"ab c",
            b"0x1F",
            b"-",
            b"--",
            b"Z",
            b"\xC3\xA9",
            b"\xC3",
            b"\xA9",
            b"\xC3\xA9t\xC3",
            b"\xE0\x80",
            b"{",
            b"{\"",
            b"http",
            b"https://",
            b"x.y",
            b"x.y z",
            b"abcabcabcabcabcabc",
            b"ab", // a duplicate of "ab"
        ];
        let toks: Vec<Option<Vec<u8>>> = std::iter::once(None) // EOS
            .chain(words.iter().map(|w| Some(w.to_vec())))
            .collect();
        Vocabulary::from_byte_tokens(&toks, &[0], None).unwrap()
    }

    #[test]
    fn classes_cover_every_byte_once() {
        let mut seen = [0usize; NUM_CLASSES];
        for b in 0..=255u8 {
            seen[class_of(b)] += 1;
        }
        assert!(
            seen.iter().all(|&n| n > 0),
            "every class has a byte: {seen:?}"
        );
        for b in 0..=255u8 {
            let cont = (0x80..=0xBF).contains(&b);
            assert_eq!(CONT_CLASSES & 1 << class_of(b) != 0, cont, "{b:#x}");
        }
        // Printable ASCII outside digits and letters: one class each.
        for b in (b' '..=b'~').filter(|b| !b.is_ascii_alphanumeric()) {
            assert_eq!(seen[class_of(b)], 1, "{}", b as char);
        }
    }

    #[test]
    fn below_and_inside_masks_equal_brute_force() {
        let v = vocab();
        let index = LoopIndex::new(&v);
        let nodes = v.trie().nodes();
        for (i, n) in nodes.iter().enumerate() {
            let sub = i..n.subtree_end();
            let classes = (i + 1..n.subtree_end())
                .map(|k| 1u64 << class_of(nodes[k].byte()))
                .fold(0, |a, b| a | b);
            let depth = sub.clone().map(|k| nodes[k].depth()).max().unwrap();
            let path = |k: usize| v.trie().path_of(k);
            let invalid = sub.clone().any(|k| k > 0 && !is_utf8_prefix(&path(k)));
            let want = classes | if invalid { INVALID } else { 0 } | (depth as u64) << DEPTH_SHIFT;
            assert_eq!(index.below[i], want, "node {i} {:?}", path(i));
        }
        // Inside masks: exactly the text tokens over the classes less the bytes given up, UTF-8
        // prefixes, short enough; and the skip test: exactly the subtrees of such tokens.
        let sets: [(&[u8], &[u8], u32); 8] = [
            (b"abc", b"", u32::MAX),
            (b"abcx.y-", b"", u32::MAX),
            (b"a0x1F", b"", u32::MAX),
            (b"ab c-htps:/\xC3\xA9", b"", u32::MAX),
            (b"abc", b"", 16),
            (b"abc", b"c", u32::MAX),
            (b"abcx.y-Z", b"bxZ", u32::MAX),
            (b"ab c-htps:/\xC3\xA9", b"\xA9-t", 8),
        ];
        for (bytes, except, max_len) in sets {
            let classes = bytes.iter().fold(0u64, |a, &b| a | 1 << class_of(b));
            let mut inside = Inside {
                classes,
                max_len,
                ..Inside::NONE
            };
            let mut except = except.to_vec();
            except.sort_unstable();
            inside.except[..except.len()].copy_from_slice(&except);
            inside.except_len = except.len() as u8;
            let Some((mask, count)) = index.inside_mask(&v, inside) else {
                panic!("{bytes:?}: a set with tokens is kept (tiny vocabulary)");
            };
            for (id, tok) in v.text_tokens() {
                let want = tok.iter().all(|&b| classes & (1 << class_of(b)) != 0)
                    && !tok.iter().any(|b| except.contains(b))
                    && is_utf8_prefix(tok)
                    && tok.len() as u64 <= max_len as u64;
                let got = mask[id as usize / 32] & (1 << (id % 32)) != 0;
                assert_eq!(
                    got, want,
                    "{tok:?} in {bytes:?} less {except:?} up to {max_len}"
                );
            }
            let skip = index.skip(&v, inside);
            for (i, n) in nodes.iter().enumerate() {
                let end = n.subtree_end();
                let want = (i + 1..end).all(|k| inside.has_byte(nodes[k].byte()))
                    && (i..end).all(|k| k == 0 || is_utf8_prefix(&v.trie().path_of(k)))
                    && (i..end).all(|k| nodes[k].depth() as u64 <= max_len as u64);
                assert_eq!(
                    skip.subtree_inside(i, end),
                    want,
                    "node {i} {:?} in {bytes:?} less {except:?} up to {max_len}",
                    v.trie().path_of(i)
                );
            }
            assert_eq!(mask[0] & 1, 0, "EOS is not a text token");
            let ones: u32 = mask.iter().map(|w| w.count_ones()).sum();
            assert_eq!(count, ones, "{bytes:?}: the count is the mask's");
        }
    }

    /// Brute force for [`inside_classes`]: no UTF-8 text over the classes of at most `max_len`
    /// (capped at `cap`) bytes kills `dfa` from `state`.
    fn sound(dfa: &Dfa, state: u32, inside: Inside, cap: usize) -> bool {
        let bytes: Vec<u8> = (0..=255u8).filter(|&b| inside.has_byte(b)).collect();
        let limit = (inside.max_len as usize).min(cap);
        let mut frontier: Vec<(u32, u8)> = vec![(state, utf8::BOUNDARY)];
        let mut seen: FxHashSet<(u32, u8)> = frontier.iter().copied().collect();
        for _ in 0..limit {
            let mut next = Vec::new();
            for &(t, u) in &frontier {
                for &b in &bytes {
                    let u2 = utf8::next(u, b);
                    if u2 == utf8::INVALID {
                        continue;
                    }
                    let t2 = dfa.next(t, b);
                    if t2 == DEAD {
                        return false;
                    }
                    if seen.insert((t2, u2)) {
                        next.push((t2, u2));
                    }
                }
            }
            frontier = next;
        }
        true
    }

    #[test]
    fn inside_classes_are_sound_and_useful() {
        let cases: [(&str, &[u8], &[u8]); 8] = [
            // (regex, input that leads to the state, bytes that must be inside there)
            (
                r"https?://[a-z0-9.-]+(?:%[0-9A-F]{2})?(?:/[a-z/]*)?",
                b"https://",
                b"az09.-",
            ),
            (r"[a-f0-9]{8,16}-[0-9]+", b"ab", b""),
            (r".+:[0-9]+", b"x", b"az :\xC3\xA9"),
            (r"[A-Za-z][A-Za-z0-9_-]{0,40}", b"Ab", b"azAZ09_-"),
            (r"[a-z]{0,5}x", b"", b""),
            // Many classes lead into the state that kills `[` and `(`: giving those two up keeps
            // the rest (giving up one entry class at a time would lose them all).
            (r"[\[(][0-9]+[\])]|[a-z.!-]+", b"", b"az.!-"),
            // Text without line terminators (what `.` means): most other characters stay.
            ("[^\n\r\u{2028}\u{2029}]+", b"x", "az ü日".as_bytes()),
            (r"\d+\.\d+", b"1", b"09"),
        ];
        for (regex, input, must) in cases {
            let dfa = Dfa::from_regex(regex, 1 << 22).unwrap();
            let mut s = dfa.start();
            for &b in input {
                s = dfa.next(s, b);
            }
            let inside = inside_classes(&dfa, s);
            assert!(
                sound(&dfa, s, inside, 40),
                "{regex} after {input:?}: {inside:?}"
            );
            for &b in must {
                assert!(
                    inside.classes & (1 << class_of(b)) != 0,
                    "{regex} after {input:?}: {:?} not inside ({inside:?})",
                    b as char
                );
            }
            // Every state of the automaton: sound.
            for t in 1..dfa.state_count() as u32 {
                let inside = inside_classes(&dfa, t);
                assert!(sound(&dfa, t, inside, 40), "{regex} at {t}: {inside:?}");
            }
        }
        // Free text up to a stop word: unbounded, every state sound, and from the start (and
        // after a partial match) every byte but one of the word's.
        for (word, kept) in [
            ("<tool_call>", &b"<tool_call ax\xC3\xA9"[..]),
            ("TOOLCALL", b"TOOCAax<"),
            // After "```" the rest has no backquote: one of its letters is given up.
            ("```json", b"ax<"),
        ] {
            let dfa = Dfa::except(&regex_syntax::escape(word), 1 << 22).unwrap();
            let mut s = dfa.start();
            for &b in &word.as_bytes()[..word.len() - 1] {
                let inside = inside_classes(&dfa, s);
                assert_eq!(inside.max_len, u32::MAX, "{word} at {s}: {inside:?}");
                assert!(sound(&dfa, s, inside, 40), "{word} at {s}: {inside:?}");
                for &k in kept {
                    assert!(
                        inside.has_byte(k),
                        "{word} at {s}: {:?} {inside:?}",
                        k as char
                    );
                }
                let given_up = word.bytes().filter(|&b| !inside.has_byte(b)).count();
                assert!(
                    given_up >= 1 && inside.except_len <= 1,
                    "{word}: {inside:?}"
                );
                s = dfa.next(s, b);
            }
            for t in 1..dfa.state_count() as u32 {
                let inside = inside_classes(&dfa, t);
                assert!(sound(&dfa, t, inside, 40), "{word} at {t}: {inside:?}");
            }
        }
        // Length bounds in the states: bounded, not empty.
        let dfa = Dfa::from_regex("[a-f0-9]{8,16}-", 1 << 22).unwrap();
        let s = b"ab".iter().fold(dfa.start(), |s, &b| dfa.next(s, b));
        assert_eq!(
            inside_classes(&dfa, s),
            Inside {
                classes: 0b11,
                max_len: 8,
                ..Inside::NONE
            }
        );
        let dfa = Dfa::from_regex("[a-z]{1,88}", 1 << 22).unwrap();
        let s = dfa.next(dfa.start(), b'a');
        let inside = inside_classes(&dfa, s);
        assert_eq!(inside.max_len, 64, "{inside:?}");
        assert!(inside.classes & (1 << class_of(b'q')) != 0);
    }
}
