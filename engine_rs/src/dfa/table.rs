//! Exploring an automaton from its start state into a flat table, then pruning it to the
//! co-reachable states, minimizing it and deriving the per-state tables (the invariants of
//! [`Dfa`]). Constructions whose states are already distinct (or whose ids others refer to)
//! finish without minimizing: [`Explored::finish_as_explored`].

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::minimize::{minimal_states, Preds};
use super::{ByteSet, Dfa, DfaError, DEAD};

/// A DFA explored from its start state, before pruning.
pub(super) struct Explored {
    pub(super) stride: usize,
    /// `trans[s * stride + c]`, with `DEAD` for missing transitions; explored state ids start at 1.
    pub(super) trans: Vec<u32>,
    pub(super) accept: Vec<bool>,
    pub(super) reps: Vec<u8>,
}

/// Byte classes of a product automaton: bytes with equal `key` (their classes in each factor)
/// share a class. Returns the classes and one representative byte per class.
pub(super) fn product_classes(key: impl Fn(u8) -> (u8, u32)) -> ([u8; 256], Vec<u8>) {
    // (each byte's key computed once)
    let mut cls = [0u16; 256];
    let mut second = [0u32; 256];
    for b in 0..=255u8 {
        let (first, k) = key(b);
        cls[b as usize] = u16::from(first);
        second[b as usize] = k;
    }
    refine_classes(&mut cls, |b| second[b as usize]);
    classes_and_reps(&cls)
}

/// The classes of `base` with each byte of `singles` in a class of its own, numbered by first
/// byte, and one representative byte per class: what
/// `product_classes(|b| (base[b], if singles.contains(b) { b + 1 } else { 0 }))` returns (the
/// classes of an automaton of words, built for every `json_string_except!`), in one pass.
pub(super) fn split_out(base: &[u8; 256], singles: &ByteSet) -> ([u8; 256], Vec<u8>) {
    const UNSEEN: u16 = u16::MAX;
    let mut new_of = [UNSEEN; 256]; // a class of `base` → its class here (bytes not in `singles`)
    let mut classes = [0u8; 256];
    let mut reps = Vec::with_capacity(64);
    for b in 0..=255u8 {
        let class = if singles.contains(b) {
            reps.push(b);
            reps.len() - 1
        } else {
            let slot = &mut new_of[usize::from(base[b as usize])];
            if *slot == UNSEEN {
                *slot = reps.len() as u16;
                reps.push(b);
            }
            usize::from(*slot)
        };
        classes[b as usize] = class as u8;
    }
    (classes, reps)
}

/// Refines byte classes in place: two bytes keep sharing a class when they shared one and have
/// equal `key`; the new classes are numbered in order of their first byte. Each class keeps the
/// few keys its bytes have shown in a short list (no hashing: this runs for every combination).
pub(super) fn refine_classes(cls: &mut [u16; 256], key: impl Fn(u8) -> u32) {
    const NONE: u16 = u16::MAX;
    // `head[c]`: the last entry made for old class `c`; entries: (key, new class, previous entry).
    let mut head = [NONE; 256];
    let mut entries: Vec<(u32, u16, u16)> = Vec::with_capacity(64);
    for b in 0..=255u8 {
        let (old, k) = (usize::from(cls[b as usize]), key(b));
        let mut e = head[old];
        while e != NONE && entries[e as usize].0 != k {
            e = entries[e as usize].2;
        }
        cls[b as usize] = if e != NONE {
            entries[e as usize].1
        } else {
            let new = entries.len() as u16;
            entries.push((k, new, head[old]));
            head[old] = new;
            new
        };
    }
}

/// Classes numbered in order of their first byte (as [`refine_classes`] leaves them) as the
/// table's class map and one representative byte per class.
pub(super) fn classes_and_reps(cls: &[u16; 256]) -> ([u8; 256], Vec<u8>) {
    let mut classes = [0u8; 256];
    let mut reps = Vec::new();
    for b in 0..=255u8 {
        let c = cls[b as usize];
        if usize::from(c) == reps.len() {
            reps.push(b);
        }
        classes[b as usize] = c as u8;
    }
    (classes, reps)
}

impl Explored {
    /// Merges byte classes whose transitions agree in every state (a product's classes may
    /// distinguish bytes that no reachable state does), narrowing the table.
    pub(super) fn merge_equal_classes(self, classes: [u8; 256]) -> (Explored, [u8; 256]) {
        let n = self.accept.len();
        let (trans_in, stride_in) = (&self.trans, self.stride);
        let column = |c: usize| (0..n).map(move |s| trans_in[s * stride_in + c]);
        // Columns are compared in full only when their hashes agree: linear in the table. The
        // hashes are accumulated row by row (the table's order in memory: a large table is read
        // once, not once per column with a stride).
        let mut hash = vec![0u64; stride_in];
        for row in trans_in.chunks_exact(stride_in) {
            for (h, &t) in hash.iter_mut().zip(row) {
                *h = (h.rotate_left(5) ^ u64::from(t)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
            }
        }
        let mut kept: Vec<usize> = Vec::new();
        let mut map = vec![0u8; self.stride];
        for c in 0..self.stride {
            match kept
                .iter()
                .position(|&k| hash[k] == hash[c] && column(k).eq(column(c)))
            {
                Some(i) => map[c] = i as u8,
                None => {
                    map[c] = kept.len() as u8;
                    kept.push(c);
                }
            }
        }
        if kept.len() == self.stride {
            return (self, classes);
        }
        let stride = kept.len();
        let mut trans = Vec::with_capacity(n * stride);
        for s in 0..n {
            trans.extend(kept.iter().map(|&c| self.trans[s * self.stride + c]));
        }
        let reps = kept.iter().map(|&c| self.reps[c]).collect();
        let classes = classes.map(|c| map[c as usize]);
        (
            Explored {
                stride,
                trans,
                accept: self.accept,
                reps,
            },
            classes,
        )
    }
}

/// Explores the automaton whose states are the keys reachable from `start` (breadth-first over
/// the representative bytes `reps`, so state ids follow discovery order), within `size_limit`
/// bytes of table. `next(key, byte)` is the successor, `None` for the dead state.
pub(super) fn explore<K, N, A>(
    start: K,
    reps: &[u8],
    mut next: N,
    accept: A,
    size_limit: usize,
) -> Result<Explored, DfaError>
where
    K: Clone + Eq + std::hash::Hash,
    N: FnMut(&K, u8) -> Result<Option<K>, DfaError>,
    A: Fn(&K) -> bool,
{
    explore_rows(
        start,
        reps,
        |key, row, ids| {
            for (c, &b) in reps.iter().enumerate() {
                if let Some(t) = next(key, b)? {
                    row[c] = ids.id(&t)?;
                }
            }
            Ok(())
        },
        accept,
        size_limit,
        &mut FxHashMap::default(),
    )
}

/// The ids of the states found so far, by key.
pub(super) trait StateIndex<K> {
    fn get(&self, key: &K) -> Option<u32>;
    fn insert(&mut self, key: &K, id: u32);
}

impl<K: Clone + Eq + std::hash::Hash> StateIndex<K> for FxHashMap<K, u32> {
    fn get(&self, key: &K) -> Option<u32> {
        FxHashMap::get(self, key).copied()
    }
    fn insert(&mut self, key: &K, id: u32) {
        FxHashMap::insert(self, key.clone(), id);
    }
}

/// [`explore`] for keys that own memory (state sets): `next(key, byte, scratch)` writes the
/// successor into a reused scratch key and says whether it is live, so a successor found again
/// (most of them) costs no allocation; `index` finds the ids of keys seen before (a hash map, or
/// something cheaper for the keys a construction knows to be common).
pub(super) fn explore_into<K, N, A, I>(
    start: K,
    reps: &[u8],
    mut next: N,
    accept: A,
    size_limit: usize,
    index: &mut I,
) -> Result<Explored, DfaError>
where
    K: Clone,
    N: FnMut(&K, u8, &mut K) -> Result<bool, DfaError>,
    A: Fn(&K) -> bool,
    I: StateIndex<K>,
{
    let mut scratch = start.clone();
    explore_rows(
        start,
        reps,
        |key, row, ids| {
            for (c, &b) in reps.iter().enumerate() {
                if next(key, b, &mut scratch)? {
                    row[c] = ids.id(&scratch)?;
                }
            }
            Ok(())
        },
        accept,
        size_limit,
        index,
    )
}

/// The states found so far during an exploration: [`StateIds::id`] gives a key's state id,
/// handing out the next one (and queueing the key) for a key not seen before.
pub(super) struct StateIds<'a, K, I> {
    /// `keys[id - 1]`: the key of state `id` until its row is filled (then the index alone holds
    /// it: the frontier is all this keeps, and a key is moved out, not cloned).
    keys: Vec<Option<K>>,
    index: &'a mut I,
    stride: usize,
    size_limit: usize,
}

impl<K: Clone, I: StateIndex<K>> StateIds<'_, K, I> {
    /// The id of `key`'s state (a new one, within the size limit, if it was not seen before).
    pub(super) fn id(&mut self, key: &K) -> Result<u32, DfaError> {
        if let Some(id) = self.index.get(key) {
            return Ok(id);
        }
        let id = self.keys.len() as u32 + 1;
        if (id as usize + 1) * (self.stride * 4 + 40) > self.size_limit {
            return Err(DfaError::TooBig {
                limit: self.size_limit,
            });
        }
        self.index.insert(key, id);
        self.keys.push(Some(key.clone()));
        Ok(id)
    }
}

/// The exploration loop under [`explore_into`]: `row(key, row, ids)` writes the successors of
/// state `key` (one per class of `reps`, ids from `ids`; the row comes filled with `DEAD`), so
/// a construction that knows whole rows at once (rows shared by many states) can write them
/// without stepping byte by byte. State ids follow discovery order; ids are handed out in the
/// order `row` asks for them, and rows are filled in id order (breadth-first when `row` asks
/// in class order).
pub(super) fn explore_rows<K, R, A, I>(
    start: K,
    reps: &[u8],
    mut row: R,
    accept: A,
    size_limit: usize,
    index: &mut I,
) -> Result<Explored, DfaError>
where
    K: Clone,
    R: FnMut(&K, &mut [u32], &mut StateIds<'_, K, I>) -> Result<(), DfaError>,
    A: Fn(&K) -> bool,
    I: StateIndex<K>,
{
    let stride = reps.len();
    let mut ids = StateIds {
        keys: Vec::with_capacity(16),
        index,
        stride,
        size_limit,
    };
    // The start state is 1 whatever the limit (the limit counts the states found from it).
    ids.index.insert(&start, 1);
    ids.keys.push(Some(start));
    // Row 0 is the dead state.
    let mut trans = vec![DEAD; stride];
    let mut acc = vec![false];
    let mut id = 1;
    while id <= ids.keys.len() {
        let key = ids.keys[id - 1].take().expect("each row is filled once");
        acc.push(accept(&key));
        let at = trans.len();
        trans.resize(at + stride, DEAD);
        row(&key, &mut trans[at..], &mut ids)?;
        id += 1;
    }
    Ok(Explored {
        stride,
        trans,
        accept: acc,
        reps: reps.to_vec(),
    })
}

impl Dfa {
    /// One representative byte per class (the smallest), in class order.
    pub(super) fn class_reps(&self) -> Vec<u8> {
        let mut reps = vec![0u8; self.stride as usize];
        for b in (0..=255u8).rev() {
            reps[self.classes[b as usize] as usize] = b;
        }
        reps
    }

    /// This automaton's table as an exploration, to be finished again.
    pub(super) fn as_explored(&self) -> Explored {
        Explored {
            stride: self.stride as usize,
            trans: self.trans.clone(),
            accept: self.accept.clone(),
            reps: self.class_reps(),
        }
    }
}

impl Explored {
    /// Prunes states that cannot reach acceptance, renumbers densely, merges equivalent states
    /// ([`minimal_states`]) and fills derived tables.
    ///
    /// Pruning is linear in the table: one pass builds the reverse edges (each predecessor
    /// listed once per target), a reverse BFS from the accepting states gives co-reachability
    /// and distances, one pass renumbers (skipped when every state is co-reachable: ids are then
    /// unchanged). Minimizing is `O(k·n·log n)` and keeps the table when nothing merges.
    pub(super) fn finish(self, classes: [u8; 256]) -> Dfa {
        self.finish_with(classes, true, None)
    }

    /// [`Explored::finish`] without minimization: every co-reachable state keeps its place (a
    /// length-counted automaton's base, whose ids the counter layers refer to, or a construction
    /// whose states are already distinct).
    pub(super) fn finish_as_explored(self, classes: [u8; 256]) -> Dfa {
        self.finish_with(classes, false, None)
    }

    /// [`Explored::finish_as_explored`] given each state's distance to acceptance (`u32::MAX`:
    /// none; index 0, the dead state, ignored), as a construction that knows them computes
    /// them: the reverse search is skipped, the result is the same.
    pub(super) fn finish_as_explored_with_distances(
        self,
        classes: [u8; 256],
        dist: Vec<u32>,
    ) -> Dfa {
        debug_assert_eq!(dist.len(), self.accept.len());
        self.finish_with(classes, false, Some(dist))
    }

    /// Each state's distance to acceptance (`u32::MAX`: none), by a reverse breadth-first
    /// search.
    #[cfg(test)]
    pub(super) fn distances(&self) -> Vec<u32> {
        let n = self.accept.len();
        let preds = Preds::<u8>::of(self.stride, &self.trans, n, true);
        reverse_distances(&preds, &self.accept)
    }

    fn finish_with(self, classes: [u8; 256], minimize: bool, known: Option<Vec<u32>>) -> Dfa {
        let Explored {
            stride,
            trans: old,
            accept: old_accept,
            reps,
        } = self;
        debug_assert_eq!(reps.len(), stride);
        let n = old_accept.len();
        let rows = || old.chunks_exact(stride).enumerate().skip(1);
        // Reverse edges (the minimization's predecessor lists, which it reuses when no state is
        // pruned), for the distances to acceptance, unless the construction gave those.
        let (dist, preds) = match known {
            Some(dist) => (dist, None),
            None => {
                let preds = Preds::<u8>::of(stride, &old, n, true);
                (reverse_distances(&preds, &old_accept), Some(preds))
            }
        };
        let all_live = dist[1..].iter().all(|&d| d != u32::MAX);
        let (trans, accept, min_to_accept, start, preds) = if all_live {
            let preds = if minimize { preds } else { None };
            (old, old_accept, dist, if n > 1 { 1 } else { DEAD }, preds)
        } else {
            // (freed before minimizing, which lists the pruned table's predecessors)
            drop(preds);
            let mut new_id = vec![DEAD; n];
            let mut count = 1u32;
            for s in 1..n {
                if dist[s] != u32::MAX {
                    new_id[s] = count;
                    count += 1;
                }
            }
            let m = count as usize;
            let mut trans = Vec::with_capacity(m * stride);
            trans.extend(std::iter::repeat_n(DEAD, stride));
            let mut accept = vec![false; m];
            let mut min_to_accept = vec![u32::MAX; m];
            for (s, row) in rows() {
                let ns = new_id[s] as usize;
                if ns != 0 {
                    accept[ns] = old_accept[s];
                    min_to_accept[ns] = dist[s];
                    trans.extend(row.iter().map(|&t| new_id[t as usize]));
                }
            }
            drop(old);
            (
                trans,
                accept,
                min_to_accept,
                new_id.get(1).copied().unwrap_or(DEAD),
                None,
            )
        };
        let minimal = if minimize {
            minimal_states(stride, &trans, &accept, start, preds)
        } else {
            None
        };
        let (trans, accept, min_to_accept, start) = match minimal {
            None => (trans, accept, min_to_accept, start),
            Some((map, m)) => {
                // Each new state takes the row of its first old state (equivalent states have
                // equal acceptance and distance, and rows equal up to `map`).
                let mut new_trans = vec![DEAD; m * stride];
                let mut new_accept = vec![false; m];
                let mut new_min = vec![u32::MAX; m];
                let mut filled = vec![false; m];
                filled[DEAD as usize] = true;
                for (s, row) in trans.chunks_exact(stride).enumerate() {
                    let j = map[s] as usize;
                    if !filled[j] {
                        filled[j] = true;
                        new_accept[j] = accept[s];
                        new_min[j] = min_to_accept[s];
                        for (to, &t) in new_trans[j * stride..(j + 1) * stride].iter_mut().zip(row)
                        {
                            *to = map[t as usize];
                        }
                    }
                }
                (new_trans, new_accept, new_min, map[start as usize])
            }
        };
        // Live bytes: the union of the byte sets of the classes with a transition.
        let mut class_bytes = vec![ByteSet::EMPTY; stride];
        for b in 0..=255u8 {
            class_bytes[classes[b as usize] as usize].insert(b);
        }
        let live_bytes = trans
            .chunks_exact(stride)
            .enumerate()
            .map(|(s, row)| {
                let mut live = ByteSet::EMPTY;
                if s != DEAD as usize {
                    for (set, &t) in class_bytes.iter().zip(row) {
                        // Branch-free: a dead target contributes no bytes.
                        let keep = 0u64.wrapping_sub((t != DEAD) as u64);
                        for (l, w) in live.0.iter_mut().zip(set.0) {
                            *l |= w & keep;
                        }
                    }
                }
                live
            })
            .collect();
        Dfa {
            classes,
            stride: stride as u32,
            trans,
            accept,
            live_bytes,
            min_to_accept,
            start,
            counter: None,
        }
    }
}

/// Each state's distance to acceptance (`u32::MAX`: none; index 0, the dead state, skipped), by
/// a breadth-first search from the accepting states over the predecessor lists.
fn reverse_distances(preds: &Preds<u8>, accept: &[bool]) -> Vec<u32> {
    let n = accept.len();
    let mut dist = vec![u32::MAX; n];
    let mut queue = VecDeque::new();
    for (s, d) in dist.iter_mut().enumerate().skip(1) {
        if accept[s] {
            *d = 0;
            queue.push_back(s);
        }
    }
    while let Some(t) = queue.pop_front() {
        for &s in &preds.state[preds.at[t] as usize..preds.at[t + 1] as usize] {
            if dist[s as usize] == u32::MAX {
                dist[s as usize] = dist[t] + 1;
                queue.push_back(s as usize);
            }
        }
    }
    dist
}
