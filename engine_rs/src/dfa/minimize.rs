//! Minimization of a pruned table (Hopcroft's partition refinement, `O(k·n·log n)` for `n` states
//! and `k` byte classes).
//!
//! Constructions explore the states their keys tell apart (NFA state sets, products, unrolled
//! repetitions), which can be many times the states the language needs: a language-tag pattern
//! determinizes to thousands of states where 150 suffice. Every later cost is per state (merges
//! copy tables, slice tables are per state, the disk cache stores them), so each finished
//! automaton is made minimal once, here.
//!
//! Invariants: the input is co-reachable and reachable from `start` with state `0` dead (what
//! [`super::table`] leaves); equivalent states have equal languages, hence equal acceptance and
//! equal distance to acceptance; the output numbers blocks breadth-first from the start's block
//! over the classes in order, so the dead block is `0` and the start is `1` (as exploration
//! numbers them).

use super::DEAD;

/// For each state, its state in the minimal automaton, and the minimal automaton's state count;
/// `None` when the table is already minimal (the caller keeps it, ids unchanged). `preds`: the
/// table's predecessor lists when the caller has them (see [`Preds::of`]).
pub(super) fn minimal_states(
    stride: usize,
    trans: &[u32],
    accept: &[bool],
    start: u32,
    preds: Option<Preds<u8>>,
) -> Option<(Vec<u32>, usize)> {
    let n = accept.len();
    if n <= 2 {
        return None;
    }
    // Byte classes: at most 256, one byte each.
    let preds = preds.unwrap_or_else(|| Preds::of(stride, trans, n, true));
    let blocks = Partition::coarsest(stride, &preds, accept, true);
    if blocks.count() == n {
        return None;
    }
    Some(blocks.renumbered(stride, trans, &[DEAD, start]))
}

/// The predecessors of each state by target, with the class of the transition:
/// `state[at[t]..at[t + 1]]` (in order of source state, then class) and `class[…]` alike. With
/// a dead state (`0`), its row and the transitions into it are left out.
pub(super) struct Preds<C> {
    pub(super) at: Vec<u32>,
    pub(super) state: Vec<u32>,
    class: Vec<C>,
}

impl<C: ClassId> Preds<C> {
    /// The predecessor lists of a table of `n` states (two passes over the table).
    pub(super) fn of(stride: usize, trans: &[u32], n: usize, dead: bool) -> Preds<C> {
        let skip = usize::from(dead);
        let listed = |t: u32| !dead || t != 0;
        let mut at = vec![0u32; n + 1];
        for &t in &trans[skip * stride..] {
            // (a branch, not `+= listed(t) as u32`: most entries are dead, and adding 0 to the
            // same counter for each makes one long chain of dependent stores)
            if listed(t) {
                at[t as usize + 1] += 1;
            }
        }
        for i in 0..n {
            at[i + 1] += at[i];
        }
        // Kept apart, a byte class in one byte: with the sorting buffer of the minimization,
        // at most 9 bytes per transition of the engine's tables, about twice the 4-byte table
        // (`dfa_size_limit`).
        let mut fill = at.clone();
        let mut state = vec![0u32; at[n] as usize];
        let mut class = vec![C::new(0); at[n] as usize];
        for (s, row) in trans.chunks_exact(stride).enumerate().skip(skip) {
            for (c, &t) in row.iter().enumerate() {
                if listed(t) {
                    let i = fill[t as usize] as usize;
                    state[i] = s as u32;
                    class[i] = C::new(c);
                    fill[t as usize] += 1;
                }
            }
        }
        Preds { at, state, class }
    }
}

/// For each state of any complete table (`trans[s * stride + c]`, every entry a state), its
/// state in the minimal automaton, numbered breadth-first from the start's (`0`) over the
/// classes in order (states not reachable from the start, if any, after those), and the minimal
/// automaton's state count. For automata built elsewhere (the schema translator's
/// character-level ones, through the bindings, which check the table first).
#[cfg(feature = "python")]
pub fn minimal_partition(
    stride: usize,
    trans: &[u32],
    accept: &[bool],
    start: u32,
) -> (Vec<u32>, usize) {
    // Checked by the caller (the bindings refuse a malformed table with a `ValueError`).
    debug_assert!(stride >= 1 && trans.len() == accept.len() * stride);
    debug_assert!((start as usize) < accept.len());
    debug_assert!(trans.iter().all(|&t| (t as usize) < accept.len()));
    // Any number of classes (the translator's alphabets can exceed 256 atoms).
    let preds = Preds::<u32>::of(stride, trans, accept.len(), false);
    Partition::coarsest(stride, &preds, accept, false).renumbered(stride, trans, &[start])
}

/// A class index as stored per listed transition: `u8` for byte classes (the engine's tables,
/// at most 256), `u32` for any alphabet.
pub(super) trait ClassId: Copy {
    fn new(c: usize) -> Self;
    fn get(self) -> usize;
}

impl ClassId for u8 {
    #[inline]
    fn new(c: usize) -> u8 {
        u8::try_from(c).expect("a byte class below 256")
    }
    #[inline]
    fn get(self) -> usize {
        usize::from(self)
    }
}

impl ClassId for u32 {
    #[inline]
    fn new(c: usize) -> u32 {
        c as u32
    }
    #[inline]
    fn get(self) -> usize {
        self as usize
    }
}

/// A partition of the states into blocks, each a contiguous range of `elems`.
struct Partition {
    /// States, grouped by block.
    elems: Vec<u32>,
    /// Position of each state in `elems`.
    pos: Vec<u32>,
    /// Block of each state.
    block: Vec<u32>,
    /// Per block: its range `start..end` of `elems`, and how many of its first elements are
    /// marked by the current splitter.
    start: Vec<u32>,
    end: Vec<u32>,
    marked: Vec<u32>,
}

impl Partition {
    fn count(&self) -> usize {
        self.start.len()
    }

    /// Each state's block, the blocks numbered breadth-first: `first` in order, then blocks in
    /// order of discovery from them over the classes in order.
    fn renumbered(&self, stride: usize, trans: &[u32], first: &[u32]) -> (Vec<u32>, usize) {
        const UNSEEN: u32 = u32::MAX;
        let mut id_of_block = vec![UNSEEN; self.count()];
        let mut order: Vec<u32> = Vec::with_capacity(self.count());
        for &s in first {
            let b = self.block[s as usize] as usize;
            if id_of_block[b] == UNSEEN {
                id_of_block[b] = order.len() as u32;
                order.push(s);
            }
        }
        let mut next = 0;
        while next < order.len() {
            let s = order[next] as usize;
            for &t in &trans[s * stride..(s + 1) * stride] {
                let b = self.block[t as usize] as usize;
                if id_of_block[b] == UNSEEN {
                    id_of_block[b] = order.len() as u32;
                    order.push(t);
                }
            }
            next += 1;
        }
        // Blocks not reachable from `first` (none in the tables of this crate) come last.
        for id in id_of_block.iter_mut().filter(|id| **id == UNSEEN) {
            *id = order.len() as u32;
            order.push(u32::MAX);
        }
        let map = self
            .block
            .iter()
            .map(|&b| id_of_block[b as usize])
            .collect();
        (map, order.len())
    }

    /// The coarsest partition compatible with acceptance and the transitions (the states of the
    /// minimal automaton). With `dead`, state `0` is the dead state, alone in its block (the
    /// other states are co-reachable) and never a splitter: its many predecessors are not listed.
    fn coarsest<C: ClassId>(
        stride: usize,
        preds: &Preds<C>,
        accept: &[bool],
        dead: bool,
    ) -> Partition {
        let n = accept.len();
        let (at, pred_state, pred_class) = (&preds.at, &preds.state, &preds.class);

        // Initial blocks: the dead state (if any), the accepting states, the other states.
        let mut p = Partition {
            elems: Vec::with_capacity(n),
            pos: vec![0; n],
            block: vec![0; n],
            start: Vec::with_capacity(n),
            end: Vec::with_capacity(n),
            marked: Vec::with_capacity(n),
        };
        let is_dead = |s: usize| dead && s == 0;
        let groups: [&dyn Fn(usize) -> bool; 3] =
            [&|s| is_dead(s), &|s| !is_dead(s) && accept[s], &|s| {
                !is_dead(s) && !accept[s]
            }];
        for member in groups {
            let from = p.elems.len() as u32;
            for s in (0..n).filter(|&s| member(s)) {
                p.pos[s] = p.elems.len() as u32;
                p.block[s] = p.start.len() as u32;
                p.elems.push(s as u32);
            }
            if p.elems.len() as u32 > from {
                p.start.push(from);
                p.end.push(p.elems.len() as u32);
                p.marked.push(0);
            }
        }

        // Hopcroft's worklist of splitter blocks (each with every class); a block split while
        // waiting keeps both halves waiting, otherwise only the smaller half needs to wait. All
        // initial blocks but one must wait (the last one's predecessors are the others'
        // complement): the first does not (the dead state's, with by far the most predecessors,
        // when there is one; its predecessors were not even listed).
        let mut waiting: Vec<u32> = Vec::with_capacity(n);
        waiting.extend(1..p.count() as u32);
        let mut in_waiting = Vec::with_capacity(n);
        in_waiting.extend((0..p.count()).map(|b| b != 0));
        // The current splitter's predecessors, sorted by class (a counting sort into a flat
        // buffer sized for the largest splitter: no allocation per splitter).
        let mut sorted = vec![0u32; pred_state.len()];
        let mut count = vec![0u32; stride + 1];
        let mut touched: Vec<u32> = Vec::with_capacity(n);
        while let Some(b) = waiting.pop() {
            in_waiting[b as usize] = false;
            // Read before any split moves states around.
            let splitter = &p.elems[p.start[b as usize] as usize..p.end[b as usize] as usize];
            let listed_into = |t: u32| at[t as usize] as usize..at[t as usize + 1] as usize;
            count.fill(0);
            for &t in splitter {
                for &c in &pred_class[listed_into(t)] {
                    count[c.get() + 1] += 1;
                }
            }
            for c in 0..stride {
                count[c + 1] += count[c];
            }
            for &t in splitter {
                let r = listed_into(t);
                for (&s, &c) in pred_state[r.clone()].iter().zip(&pred_class[r]) {
                    sorted[count[c.get()] as usize] = s;
                    count[c.get()] += 1;
                }
            }
            // Now `count[c]` ends class `c`'s run (and starts class `c + 1`'s).
            let mut from = 0;
            for &end in &count[..stride] {
                let to = end as usize;
                if from == to {
                    continue;
                }
                for &s in &sorted[from..to] {
                    p.mark(s, &mut touched);
                }
                from = to;
                for x in touched.drain(..) {
                    if let Some(y) = p.split(x) {
                        in_waiting.push(false);
                        let (x, y) = (x as usize, y as usize);
                        if in_waiting[x] {
                            waiting.push(y as u32);
                            in_waiting[y] = true;
                        } else {
                            let smaller = if p.end[y] - p.start[y] <= p.end[x] - p.start[x] {
                                y
                            } else {
                                x
                            };
                            waiting.push(smaller as u32);
                            in_waiting[smaller] = true;
                        }
                    }
                }
            }
        }
        p
    }

    /// Moves `s` into the marked prefix of its block (once per splitter: a state has one
    /// successor per class, so it is listed once among a splitter's predecessors).
    #[inline]
    fn mark(&mut self, s: u32, touched: &mut Vec<u32>) {
        let x = self.block[s as usize] as usize;
        if self.marked[x] == 0 {
            touched.push(x as u32);
        }
        let to = self.start[x] + self.marked[x];
        let from = self.pos[s as usize];
        let other = self.elems[to as usize];
        self.elems.swap(to as usize, from as usize);
        self.pos[other as usize] = from;
        self.pos[s as usize] = to;
        self.marked[x] += 1;
    }

    /// Splits block `x`'s marked prefix into a new block, returned; `None` (and the marks
    /// cleared) when every state of `x` is marked.
    fn split(&mut self, x: u32) -> Option<u32> {
        let x = x as usize;
        let m = std::mem::take(&mut self.marked[x]);
        if self.start[x] + m == self.end[x] {
            return None;
        }
        let y = self.start.len() as u32;
        let (from, to) = (self.start[x], self.start[x] + m);
        self.start.push(from);
        self.end.push(to);
        self.marked.push(0);
        self.start[x] = to;
        for &s in &self.elems[from as usize..to as usize] {
            self.block[s as usize] = y;
        }
        Some(y)
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::Explored;
    use super::super::tests::same_language;
    use super::super::{Dfa, DEAD};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use rustc_hash::FxHashMap;

    /// The states of the minimal automaton by Moore's refinement (the reference: rounds of
    /// "same acceptance and same blocks of successors" until nothing splits).
    fn moore_count(d: &Dfa, reps: &[u8]) -> usize {
        let n = d.state_count();
        let mut block: Vec<usize> = (0..n as u32)
            .map(|s| {
                if s == DEAD {
                    0
                } else if d.is_accept(s) {
                    1
                } else {
                    2
                }
            })
            .collect();
        let mut count = 0;
        loop {
            let mut ids: FxHashMap<Vec<usize>, usize> = FxHashMap::default();
            let next: Vec<usize> = (0..n as u32)
                .map(|s| {
                    let mut key = vec![block[s as usize]];
                    key.extend(reps.iter().map(|&b| block[d.next(s, b) as usize]));
                    let fresh = ids.len();
                    *ids.entry(key).or_insert(fresh)
                })
                .collect();
            if ids.len() == count {
                return count;
            }
            count = ids.len();
            block = next;
        }
    }

    /// A random table over `stride` classes whose states are all reachable from state 1, many
    /// of them equivalent (successors drawn from a few targets, few accepting states).
    fn random_table(rng: &mut SmallRng, states: usize, stride: usize) -> Explored {
        let n = states + 1;
        let mut trans = vec![DEAD; n * stride];
        for s in 1..n {
            for c in 0..stride {
                if rng.gen_bool(0.6) {
                    trans[s * stride + c] = rng.gen_range(1..n.min(6)) as u32;
                }
            }
        }
        // A spanning tree from state 1, each link in its own slot (a later link must not
        // overwrite an earlier one: exploration never yields unreachable states).
        let mut linked = vec![false; n * stride];
        for s in 2..n {
            loop {
                let slot = rng.gen_range(1..s) * stride + rng.gen_range(0..stride);
                if !linked[slot] {
                    linked[slot] = true;
                    trans[slot] = s as u32;
                    break;
                }
            }
        }
        let mut accept: Vec<bool> = (0..n).map(|s| s != 0 && rng.gen_bool(0.2)).collect();
        accept[n - 1] = true;
        Explored {
            stride,
            trans,
            accept,
            reps: (0..stride as u8).collect(),
        }
    }

    fn classes(stride: usize) -> [u8; 256] {
        std::array::from_fn(|b| if b < stride { b as u8 } else { 0 })
    }

    #[test]
    fn finish_gives_the_minimal_automaton_of_the_same_language() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut shrunk = 0;
        for round in 0..400 {
            let stride = 1 + round % 5;
            let states = rng.gen_range(1..60);
            let table = random_table(&mut rng, states, stride);
            let again = Explored {
                stride,
                trans: table.trans.clone(),
                accept: table.accept.clone(),
                reps: table.reps.clone(),
            };
            let plain = table.finish_as_explored(classes(stride));
            let min = again.finish(classes(stride));
            let reps: Vec<u8> = (0..stride as u8).collect();
            // Same strings, and along them the same live bytes and distances to acceptance.
            if let Err(e) = same_language(&plain, &min) {
                panic!("round {round}: {e}");
            }
            assert_eq!(
                min.state_count(),
                moore_count(&plain, &reps),
                "round {round}"
            );
            assert_eq!(moore_count(&min, &reps), min.state_count(), "round {round}");
            if min.state_count() > 1 {
                assert_eq!(min.start(), 1, "round {round}");
            }
            shrunk += usize::from(min.state_count() < plain.state_count());
        }
        assert!(
            shrunk > 100,
            "the random tables exercise merging ({shrunk})"
        );
    }

    /// A pattern whose subset construction has many equivalent states (a language tag) comes
    /// out minimal, with the same strings matched.
    #[test]
    fn a_language_tag_pattern_is_minimal() {
        let tag = r#""x_(?:(?:[A-Za-z]{2,3}(?:-[A-Za-z]{3}(?:-[A-Za-z]{3}){0,2})?|[A-Za-z]{4}|[A-Za-z]{5,8})(?:-[A-Za-z]{4})?(?:-(?:[A-Za-z]{2}|[0-9]{3}))?(?:-(?:[0-9A-Za-z]{5,8}|[0-9][0-9A-Za-z]{3}))*(?:-[0-9A-WYZa-wyz](?:-[0-9A-Za-z]{2,8})+)*(?:-x(?:-[0-9A-Za-z]{1,8})+)?|x(?:-[0-9A-Za-z]{1,8})+)""#;
        let d = Dfa::from_regex(tag, 1 << 24).unwrap();
        let reps = d.class_reps();
        let n = d.state_count();
        assert_eq!(moore_count(&d, &reps), n);
        assert!(n < 400, "{n} states");
        for (text, ok) in [
            (r#""x_en""#, true),
            (r#""x_en-Latn-US""#, true),
            (r#""x_zh-yue-HK""#, true),
            (r#""x_x-private""#, true),
            (r#""x_e""#, false),
            (r#""x_en-""#, false),
            (r#""x_abcdefghi""#, false),
        ] {
            assert_eq!(d.matches(text.as_bytes()), ok, "{text}");
        }
    }
}
