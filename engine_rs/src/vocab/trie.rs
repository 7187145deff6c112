//! A token trie laid flat in memory in depth-first preorder.
//!
//! # Layout and invariants
//!
//! [`TokenTrie::nodes`] is one `Vec` of 12-byte [`TrieNode`]s:
//! - node 0 is the root; it stands for the empty string, has depth 0, byte 0 and no token;
//! - nodes are in DFS preorder and children are sorted by byte, so the byte strings of the
//!   nodes appear in lexicographic order;
//! - the subtree of node `i` is exactly the index range `i..nodes[i].subtree_end()`, so
//!   `i < subtree_end <= nodes.len()`; a leaf has `subtree_end == i + 1`, and the root's
//!   `subtree_end` is `nodes.len()`;
//! - the children of node `i` are `c0 = i + 1` (when `c0 < subtree_end(i)`), then
//!   `c1 = subtree_end(c0)`, `c2 = subtree_end(c1)`, ... while `< subtree_end(i)`;
//! - `depth()` is the length of the node's byte string (the number of edges from the root);
//!   the path bytes of node `i` are the `byte()`s of its ancestors (excluding the root) and
//!   itself; the node that follows `i`'s subtree (index `subtree_end(i)`, if any) has a depth of
//!   at most `depth(i)`, and node `i + 1` has a depth of at most `depth(i) + 1`;
//! - every input token with non-empty bytes sits at exactly one node, the one whose path equals
//!   its bytes; the smallest such id is stored inline ([`TrieNode::token`]), the other ids with
//!   the same bytes (duplicates) are in a flat side table ([`TokenTrie::extra_tokens`]), sorted;
//! - every leaf carries a token (no dead branches).
//!
//! # Walking the trie without recursion
//!
//! A walker keeps a byte stack (e.g. a recognizer that can push one byte and pop bytes). Before
//! it handles node `n` it pops back to `n`'s parent, i.e. to `n.depth() - 1` bytes; this is all
//! the bookkeeping a non-recursive walk needs (the next node's depth says how many levels
//! end there). [`TokenTrie::walk`] implements this loop for a [`TrieWalker`]; hand-written
//! walkers follow the same shape:
//!
//! ```
//! # use structout_engine::vocab::TokenTrie;
//! # let trie = TokenTrie::build([(0, &b"ab"[..]), (1, &b"b"[..])]).unwrap();
//! # let mut stack: Vec<u8> = Vec::new();
//! # let accept = |path: &[u8]| path != b"b";
//! # let mut allowed = Vec::new();
//! let start = 0; // the root, or any node whose path the stack already holds
//! let base = trie.node(start).depth();
//! let end = trie.node(start).subtree_end();
//! let mut i = start + 1;
//! while i < end {
//!     let n = trie.node(i);
//!     stack.truncate(n.depth() - 1); // pop to the parent; a recognizer pops `len - (depth-1)`
//!     stack.push(n.byte());
//!     if accept(&stack) {
//!         if let Some(t) = n.token() {
//!             allowed.push(t);
//!             if n.has_extra_tokens() {
//!                 allowed.extend_from_slice(trie.extra_tokens(i));
//!             }
//!         }
//!         i += 1; // descend (or, for a leaf, go on to the next sibling or uncle)
//!     } else {
//!         stack.pop();
//!         i = n.subtree_end(); // skip the whole subtree in O(1)
//!     }
//! }
//! stack.truncate(base);
//! assert_eq!(allowed, vec![0]);
//! ```
//!
//! [`TokenTrie::root_child`] gives the child of the root for a first byte, so a walker can skip
//! whole first-byte subtrees (first-byte filtering) and walk only the subtrees it wants.

use super::VocabError;

/// Sentinel for "no token" in [`TrieNode`].
const NO_TOKEN: u32 = u32::MAX;
/// Flag: the node has more than one token id (see [`TokenTrie::extra_tokens`]).
const FLAG_EXTRA_TOKENS: u8 = 1;
/// Sentinel for "no child" in the root-children table.
const NO_NODE: u32 = u32::MAX;

/// One node of a [`TokenTrie`] (12 bytes). See the module docs for the invariants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct TrieNode {
    /// Smallest token id whose bytes equal this node's path, or [`NO_TOKEN`].
    token: u32,
    /// One past the index of the last node of this node's subtree.
    subtree_end: u32,
    /// Length of this node's path (root: 0).
    depth: u16,
    /// Last byte of the path (root: 0).
    byte: u8,
    /// [`FLAG_EXTRA_TOKENS`] or 0.
    flags: u8,
}

const _: () = assert!(std::mem::size_of::<TrieNode>() == 12);

impl TrieNode {
    /// The byte on the edge from the parent to this node (0 for the root).
    #[inline(always)]
    pub fn byte(&self) -> u8 {
        self.byte
    }

    /// Length of the node's byte string: 0 for the root, 1 for its children, ...
    #[inline(always)]
    pub fn depth(&self) -> usize {
        self.depth as usize
    }

    /// One past the last node of this node's subtree: skip the subtree by jumping here.
    #[inline(always)]
    pub fn subtree_end(&self) -> usize {
        self.subtree_end as usize
    }

    /// The smallest token id whose bytes equal this node's path, if any.
    #[inline(always)]
    pub fn token(&self) -> Option<u32> {
        if self.token == NO_TOKEN {
            None
        } else {
            Some(self.token)
        }
    }

    /// Whether more token ids share this node's bytes ([`TokenTrie::extra_tokens`]).
    #[inline(always)]
    pub fn has_extra_tokens(&self) -> bool {
        self.flags & FLAG_EXTRA_TOKENS != 0
    }
}

/// The operations a trie walk needs from the thing that checks bytes (e.g. a recognizer).
pub trait TrieWalker {
    /// Try to append `byte` to the current path; on `false` the state must be unchanged.
    fn push_byte(&mut self, byte: u8) -> bool;
    /// Remove the last `n` bytes pushed (n may be 0).
    fn pop_bytes(&mut self, n: usize);
}

/// A set of tokens as a flat DFS-preorder trie over their bytes (see the module docs).
#[derive(Clone, Debug)]
pub struct TokenTrie {
    nodes: Vec<TrieNode>,
    /// Sorted indices of the nodes with [`FLAG_EXTRA_TOKENS`].
    extra_nodes: Vec<u32>,
    /// `extra_ids[extra_starts[k]..extra_starts[k + 1]]` are the extra ids of `extra_nodes[k]`.
    extra_starts: Vec<u32>,
    extra_ids: Vec<u32>,
    /// Child of the root for each first byte, or [`NO_NODE`].
    root_children: Box<[u32; 256]>,
    num_tokens: usize,
    max_depth: usize,
}

impl TokenTrie {
    /// Build the trie of `(token id, bytes)` pairs.
    ///
    /// Pairs with empty bytes are skipped (an empty token can never be part of a walk); pairs
    /// are otherwise taken as given, so pass only the tokens the grammar may produce (e.g.
    /// [`super::Vocabulary::text_tokens`] or any subset of it). Several ids may share bytes.
    /// Errors: a token longer than 65,535 bytes, the id `u32::MAX`, or more than `u32::MAX - 1`
    /// nodes.
    pub fn build<'a, I>(tokens: I) -> Result<Self, VocabError>
    where
        I: IntoIterator<Item = (u32, &'a [u8])>,
    {
        let mut toks: Vec<(u32, &'a [u8])> = Vec::new();
        let mut total_bytes = 0usize;
        for (id, bytes) in tokens {
            if bytes.is_empty() {
                continue;
            }
            if id == NO_TOKEN {
                return Err(VocabError::TooLarge {
                    reason: format!("token id {id} is reserved (u32::MAX) and cannot be used"),
                });
            }
            if bytes.len() > u16::MAX as usize {
                return Err(VocabError::TooLarge {
                    reason: format!(
                        "token {id} is {} bytes long; the token trie supports tokens of at most \
                         {} bytes",
                        bytes.len(),
                        u16::MAX
                    ),
                });
            }
            total_bytes += bytes.len();
            toks.push((id, bytes));
        }
        sort_tokens(&mut toks);

        // A trie of n tokens typically has ~2n nodes; total bytes is an upper bound.
        let mut nodes: Vec<TrieNode> =
            Vec::with_capacity((toks.len() * 2 + 1).min(total_bytes + 1));
        nodes.push(TrieNode {
            token: NO_TOKEN,
            subtree_end: 0,
            depth: 0,
            byte: 0,
            flags: 0,
        });
        // stack[d] = index of the node at depth d on the current path.
        let mut stack: Vec<u32> = vec![0];
        let mut extra_nodes: Vec<u32> = Vec::new();
        let mut extra_starts: Vec<u32> = Vec::new();
        let mut extra_ids: Vec<u32> = Vec::new();
        let mut prev: &[u8] = &[];
        let mut max_depth = 0usize;

        for &(id, bytes) in &toks {
            let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            if lcp == bytes.len() {
                // Sorted, so `bytes >= prev`; being a prefix of `prev` means `bytes == prev`:
                // a duplicate of the token just placed at the top of the stack.
                let node = *stack.last().expect("stack holds the root") as usize;
                nodes[node].flags |= FLAG_EXTRA_TOKENS;
                if extra_nodes.last() != Some(&(node as u32)) {
                    extra_nodes.push(node as u32);
                    extra_starts.push(extra_ids.len() as u32);
                }
                extra_ids.push(id);
                continue;
            }
            let end = u32::try_from(nodes.len()).map_err(|_| too_many_nodes())?;
            while stack.len() > lcp + 1 {
                let n = stack.pop().expect("non-empty") as usize;
                nodes[n].subtree_end = end;
            }
            for (d, &b) in bytes.iter().enumerate().skip(lcp) {
                let idx = u32::try_from(nodes.len())
                    .ok()
                    .filter(|&i| i < NO_NODE)
                    .ok_or_else(too_many_nodes)?;
                nodes.push(TrieNode {
                    token: NO_TOKEN,
                    subtree_end: 0,
                    depth: (d + 1) as u16,
                    byte: b,
                    flags: 0,
                });
                stack.push(idx);
            }
            let last = nodes.len() - 1;
            nodes[last].token = id;
            max_depth = max_depth.max(bytes.len());
            prev = bytes;
        }
        let end = u32::try_from(nodes.len()).map_err(|_| too_many_nodes())?;
        for &n in &stack {
            nodes[n as usize].subtree_end = end;
        }
        extra_starts.push(extra_ids.len() as u32);

        let mut root_children = Box::new([NO_NODE; 256]);
        let mut c = 1;
        while c < nodes.len() {
            root_children[nodes[c].byte as usize] = c as u32;
            c = nodes[c].subtree_end as usize;
        }
        nodes.shrink_to_fit();
        Ok(TokenTrie {
            nodes,
            extra_nodes,
            extra_starts,
            extra_ids,
            root_children,
            num_tokens: toks.len(),
            max_depth,
        })
    }

    /// All nodes, root first, in DFS preorder.
    #[inline(always)]
    pub fn nodes(&self) -> &[TrieNode] {
        &self.nodes
    }

    /// Node `i` (panics when `i >= len()`, like slice indexing).
    #[inline(always)]
    pub fn node(&self, i: usize) -> &TrieNode {
        &self.nodes[i]
    }

    /// Number of nodes, root included (always ≥ 1).
    #[inline]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the trie holds no token (only the root).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// Number of tokens (ids) in the trie, duplicates included.
    #[inline]
    pub fn num_tokens(&self) -> usize {
        self.num_tokens
    }

    /// Length in bytes of the longest token (the deepest node's depth).
    #[inline]
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The token ids at node `i` besides [`TrieNode::token`], sorted ascending; empty unless
    /// [`TrieNode::has_extra_tokens`].
    pub fn extra_tokens(&self, i: usize) -> &[u32] {
        if i >= self.nodes.len() || !self.nodes[i].has_extra_tokens() {
            return &[];
        }
        match self.extra_nodes.binary_search(&(i as u32)) {
            Ok(k) => {
                &self.extra_ids[self.extra_starts[k] as usize..self.extra_starts[k + 1] as usize]
            }
            Err(_) => &[],
        }
    }

    /// Every token id at node `i` (inline one first, then the extras).
    pub fn tokens_at(&self, i: usize) -> impl Iterator<Item = u32> + '_ {
        self.nodes
            .get(i)
            .and_then(|n| n.token())
            .into_iter()
            .chain(self.extra_tokens(i).iter().copied())
    }

    /// The child of the root whose byte is `b`, if any token starts with `b`.
    #[inline(always)]
    pub fn root_child(&self, b: u8) -> Option<usize> {
        let c = self.root_children[b as usize];
        if c == NO_NODE {
            None
        } else {
            Some(c as usize)
        }
    }

    /// The child of node `i` with byte `b`, if any (linear scan over the children).
    pub fn child(&self, i: usize, b: u8) -> Option<usize> {
        if i == 0 {
            return self.root_child(b);
        }
        let end = self.nodes.get(i)?.subtree_end();
        let mut c = i + 1;
        while c < end {
            let n = &self.nodes[c];
            if n.byte == b {
                return Some(c);
            }
            if n.byte > b {
                return None;
            }
            c = n.subtree_end();
        }
        None
    }

    /// The node whose path is `bytes` (the root for `b""`), if it exists.
    pub fn find(&self, bytes: &[u8]) -> Option<usize> {
        bytes.iter().try_fold(0, |node, &b| self.child(node, b))
    }

    /// Walk the subtree below node `start` with `walker`, calling `on_token` for every token
    /// whose whole byte string the walker accepts (the bytes after `start`'s path).
    ///
    /// The walker's path must equal `start`'s path when called (usually `start = 0` and an
    /// empty path); it is left the same afterwards. This is the reference loop from the module
    /// docs; a specialised walker may inline it.
    #[inline]
    pub fn walk<W: TrieWalker>(&self, start: usize, walker: &mut W, mut on_token: impl FnMut(u32)) {
        let Some(s) = self.nodes.get(start) else {
            return;
        };
        let base = s.depth();
        let end = s.subtree_end();
        // Bytes pushed so far, counting from the root (the walker holds `base` of them).
        let mut depth = base;
        let mut i = start + 1;
        while i < end {
            let n = &self.nodes[i];
            let parent_depth = n.depth() - 1;
            walker.pop_bytes(depth - parent_depth);
            depth = parent_depth;
            if walker.push_byte(n.byte) {
                depth += 1;
                if n.token != NO_TOKEN {
                    on_token(n.token);
                    if n.has_extra_tokens() {
                        self.extra_tokens(i).iter().for_each(|&t| on_token(t));
                    }
                }
                i += 1;
            } else {
                i = n.subtree_end();
            }
        }
        walker.pop_bytes(depth - base);
    }

    /// Per node, the index of its parent (the root's is 0). In preorder a parent comes before
    /// its children: a forward pass can derive per-node values from the parent's, a reverse
    /// pass fold children into parents.
    pub fn parents(&self) -> Vec<u32> {
        let mut parent = vec![0u32; self.nodes.len()];
        // The nodes on the path to the current one, by depth.
        let mut path: Vec<u32> = vec![0];
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            path.truncate(n.depth());
            parent[i] = path[n.depth() - 1];
            path.push(i as u32);
        }
        parent
    }

    /// The bytes of node `i`'s path, found by descending from the root (tests).
    #[cfg(test)]
    pub fn path_of(&self, i: usize) -> Vec<u8> {
        let nodes = &self.nodes;
        let (mut out, mut j) = (Vec::new(), 0usize);
        while j != i {
            let mut c = j + 1;
            while nodes[c].subtree_end() <= i {
                c = nodes[c].subtree_end();
            }
            out.push(nodes[c].byte());
            j = c;
        }
        out
    }

    /// Bytes of heap memory the trie uses (for stats).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<TrieNode>()
            + (self.extra_nodes.capacity()
                + self.extra_starts.capacity()
                + self.extra_ids.capacity())
                * 4
            + std::mem::size_of::<[u32; 256]>()
    }
}

/// Sort by bytes, then id.
///
/// LSD radix sort on a big-endian key of the first 8 bytes (zero-padded), then a comparison
/// sort of each run of equal keys. Correct because `key(a) < key(b)` implies `a < b`
/// lexicographically (a zero pad byte can only stand where the shorter string ended).
fn sort_tokens(toks: &mut [(u32, &[u8])]) {
    #[inline]
    fn key(b: &[u8]) -> u64 {
        let mut buf = [0u8; 8];
        let n = b.len().min(8);
        buf[..n].copy_from_slice(&b[..n]);
        u64::from_be_bytes(buf)
    }
    let n = toks.len();
    let mut keyed: Vec<(u64, u32)> = toks
        .iter()
        .enumerate()
        .map(|(i, &(_, b))| (key(b), i as u32))
        .collect();
    let mut scratch: Vec<(u64, u32)> = vec![(0, 0); n];
    for pass in 0..8 {
        let shift = pass * 8;
        let mut counts = [0usize; 256];
        for &(k, _) in &keyed {
            counts[((k >> shift) & 0xFF) as usize] += 1;
        }
        if counts.contains(&n) {
            continue; // every key has the same byte here
        }
        let mut pos = [0usize; 256];
        let mut sum = 0;
        for (p, c) in pos.iter_mut().zip(counts) {
            *p = sum;
            sum += c;
        }
        for &e in &keyed {
            let d = ((e.0 >> shift) & 0xFF) as usize;
            scratch[pos[d]] = e;
            pos[d] += 1;
        }
        std::mem::swap(&mut keyed, &mut scratch);
    }
    let mut sorted: Vec<(u32, &[u8])> = keyed.iter().map(|&(_, i)| toks[i as usize]).collect();
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && keyed[end].0 == keyed[start].0 {
            end += 1;
        }
        if end - start > 1 {
            sorted[start..end].sort_unstable_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(&b.0)));
        }
        start = end;
    }
    toks.copy_from_slice(&sorted);
}

fn too_many_nodes() -> VocabError {
    VocabError::TooLarge {
        reason: "the token trie would have more than 4,294,967,294 nodes".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// Path bytes of every node, computed from the parent structure implied by the layout.
    fn node_paths(trie: &TokenTrie) -> Vec<Vec<u8>> {
        let mut paths: Vec<Vec<u8>> = vec![Vec::new(); trie.len()];
        // Non-recursive: the parent of node i is the last node before i with depth - 1.
        let mut stack: Vec<usize> = vec![0];
        for i in 1..trie.len() {
            let n = trie.node(i);
            stack.truncate(n.depth());
            let parent = *stack.last().unwrap();
            let mut p = paths[parent].clone();
            p.push(n.byte());
            paths[i] = p;
            stack.push(i);
        }
        paths
    }

    /// Check every invariant from the module docs against the token list.
    #[allow(clippy::needless_range_loop)] // indexes nodes, paths and the node after a subtree
    fn check_invariants(trie: &TokenTrie, tokens: &[(u32, Vec<u8>)]) {
        let nodes = trie.nodes();
        assert_eq!(nodes[0].depth(), 0);
        assert_eq!(nodes[0].token(), None);
        assert_eq!(nodes[0].subtree_end(), nodes.len());
        let paths = node_paths(trie);
        for i in 0..nodes.len() {
            let n = &nodes[i];
            let end = n.subtree_end();
            assert!(i < end && end <= nodes.len(), "node {i}: end {end}");
            // subtree_end is exactly one past the last descendant: all nodes in (i, end) are
            // deeper than i and have i's path as a prefix; the node at `end` is not.
            for j in i + 1..end {
                assert!(nodes[j].depth() > n.depth(), "node {j} in subtree of {i}");
                assert!(paths[j].starts_with(&paths[i]));
            }
            if end < nodes.len() {
                assert!(nodes[end].depth() <= n.depth());
                assert!(!paths[end].starts_with(&paths[i]) || i == 0);
            }
            if i + 1 < nodes.len() {
                assert!(nodes[i + 1].depth() <= n.depth() + 1);
            }
            // Leaves carry a token.
            if end == i + 1 && i != 0 {
                assert!(n.token().is_some(), "leaf {i} without token");
            }
            // Children in increasing byte order.
            let mut c = i + 1;
            let mut last: Option<u8> = None;
            while c < end {
                assert_eq!(nodes[c].depth(), n.depth() + 1);
                assert!(last < Some(nodes[c].byte()));
                last = Some(nodes[c].byte());
                assert_eq!(trie.child(i, nodes[c].byte()), Some(c));
                c = nodes[c].subtree_end();
            }
            assert_eq!(c, end);
        }
        // Preorder = lexicographic order of paths.
        for w in paths.windows(2) {
            assert!(w[0] < w[1]);
        }
        // Every non-empty token reachable exactly once, at the node of its bytes.
        let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
        for i in 0..nodes.len() {
            let ids: Vec<u32> = trie.tokens_at(i).collect();
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "ids sorted at node {i}"
            );
            assert_eq!(nodes[i].has_extra_tokens(), ids.len() > 1);
            for id in ids {
                assert!(seen.insert(id, i).is_none(), "token {id} at two nodes");
            }
        }
        let want: BTreeMap<u32, &Vec<u8>> = tokens
            .iter()
            .filter(|(_, b)| !b.is_empty())
            .map(|(id, b)| (*id, b))
            .collect();
        assert_eq!(seen.len(), want.len());
        assert_eq!(trie.num_tokens(), want.len());
        for (id, bytes) in &want {
            let node = seen[id];
            assert_eq!(&&paths[node], bytes, "token {id}");
            assert_eq!(trie.find(bytes), Some(node));
            assert_eq!(nodes[node].depth(), bytes.len());
        }
        assert_eq!(
            trie.max_depth(),
            want.values().map(|b| b.len()).max().unwrap_or(0)
        );
        for b in 0..=255u8 {
            assert_eq!(trie.root_child(b), trie.find(&[b]));
        }
    }

    fn build(tokens: &[(u32, Vec<u8>)]) -> TokenTrie {
        TokenTrie::build(tokens.iter().map(|(i, b)| (*i, b.as_slice()))).unwrap()
    }

    #[test]
    fn small_trie_layout() {
        let toks: Vec<(u32, Vec<u8>)> = [
            (0, "a"),
            (1, "ab"),
            (2, "abc"),
            (3, "b"),
            (4, "ba"),
            (5, "ab"),
            (6, ""),
            (7, "abd"),
        ]
        .iter()
        .map(|(i, s)| (*i, s.as_bytes().to_vec()))
        .collect();
        let trie = build(&toks);
        check_invariants(&trie, &toks);
        // root, a, ab, abc, abd, b, ba
        let summary: Vec<(u8, usize, usize, Option<u32>)> = trie
            .nodes()
            .iter()
            .map(|n| (n.byte(), n.depth(), n.subtree_end(), n.token()))
            .collect();
        assert_eq!(
            summary,
            vec![
                (0, 0, 7, None),
                (b'a', 1, 5, Some(0)),
                (b'b', 2, 5, Some(1)),
                (b'c', 3, 4, Some(2)),
                (b'd', 3, 5, Some(7)),
                (b'b', 1, 7, Some(3)),
                (b'a', 2, 7, Some(4)),
            ]
        );
        assert_eq!(trie.extra_tokens(2), &[5]);
        assert_eq!(trie.tokens_at(2).collect::<Vec<_>>(), vec![1, 5]);
        assert_eq!(trie.find(b"abx"), None);
        assert_eq!(trie.find(b""), Some(0));
    }

    #[test]
    fn inner_nodes_without_tokens_and_many_duplicates() {
        let toks: Vec<(u32, Vec<u8>)> = vec![
            (9, b"xyz".to_vec()),
            (3, b"xyz".to_vec()),
            (4, b"xyz".to_vec()),
            (1, b"xq".to_vec()),
            (2, vec![0xFF, 0x00]),
            (8, vec![0x00]),
        ];
        let trie = build(&toks);
        check_invariants(&trie, &toks);
        let n = trie.find(b"xyz").unwrap();
        assert_eq!(trie.node(n).token(), Some(3));
        assert_eq!(trie.extra_tokens(n), &[4, 9]);
        assert_eq!(trie.node(trie.find(b"xy").unwrap()).token(), None);
    }

    #[test]
    fn empty_trie() {
        let trie = TokenTrie::build(std::iter::empty()).unwrap();
        assert!(trie.is_empty());
        assert_eq!(trie.len(), 1);
        assert_eq!(trie.node(0).subtree_end(), 1);
        let mut w = StackWalker::new(|_: &[u8]| true);
        let mut got = Vec::new();
        trie.walk(0, &mut w, |t| got.push(t));
        assert!(got.is_empty());
        let only_empty = TokenTrie::build([(0, &b""[..])]).unwrap();
        assert!(only_empty.is_empty());
    }

    #[test]
    fn rejects_bad_input() {
        let long = vec![b'a'; 70_000];
        let err = TokenTrie::build([(5, long.as_slice())]).unwrap_err();
        assert!(err.to_string().contains("token 5 is 70000 bytes"), "{err}");
        let err = TokenTrie::build([(u32::MAX, &b"a"[..])]).unwrap_err();
        assert!(err.to_string().contains("reserved"), "{err}");
        // The longest allowed token works.
        let max = vec![b'z'; u16::MAX as usize];
        let trie = TokenTrie::build([(1, max.as_slice())]).unwrap();
        assert_eq!(trie.max_depth(), u16::MAX as usize);
    }

    /// A walker with an explicit byte stack and a prefix predicate.
    struct StackWalker<F: Fn(&[u8]) -> bool> {
        stack: Vec<u8>,
        accept: F,
        pushes: usize,
    }

    impl<F: Fn(&[u8]) -> bool> StackWalker<F> {
        fn new(accept: F) -> Self {
            StackWalker {
                stack: Vec::new(),
                accept,
                pushes: 0,
            }
        }
    }

    impl<F: Fn(&[u8]) -> bool> TrieWalker for StackWalker<F> {
        fn push_byte(&mut self, byte: u8) -> bool {
            self.pushes += 1;
            self.stack.push(byte);
            if (self.accept)(&self.stack) {
                true
            } else {
                self.stack.pop();
                false
            }
        }
        fn pop_bytes(&mut self, n: usize) {
            assert!(n <= self.stack.len(), "popped below the root");
            self.stack.truncate(self.stack.len() - n);
        }
    }

    /// A random DFA over bytes (states 0..k, -1 = dead): accepting a path means every prefix
    /// is live, which is the prefix-closed condition a recognizer gives.
    struct Dfa {
        next: Vec<[i32; 256]>,
    }

    impl Dfa {
        fn random(rng: &mut SmallRng, states: usize, live_prob: f64) -> Self {
            let next = (0..states)
                .map(|_| {
                    let mut row = [-1i32; 256];
                    for cell in row.iter_mut() {
                        if rng.gen_bool(live_prob) {
                            *cell = rng.gen_range(0..states as i32);
                        }
                    }
                    row
                })
                .collect();
            Dfa { next }
        }
        fn run(&self, bytes: &[u8]) -> bool {
            let mut s = 0i32;
            for &b in bytes {
                s = self.next[s as usize][b as usize];
                if s < 0 {
                    return false;
                }
            }
            true
        }
    }

    /// A walker that keeps DFA states on a stack, like a recognizer with push/pop.
    struct DfaWalker<'a> {
        dfa: &'a Dfa,
        states: Vec<i32>,
    }

    impl TrieWalker for DfaWalker<'_> {
        fn push_byte(&mut self, byte: u8) -> bool {
            let s = self.dfa.next[*self.states.last().unwrap() as usize][byte as usize];
            if s < 0 {
                return false;
            }
            self.states.push(s);
            true
        }
        fn pop_bytes(&mut self, n: usize) {
            assert!(n < self.states.len(), "popped below the root");
            self.states.truncate(self.states.len() - n);
        }
    }

    fn random_tokens(rng: &mut SmallRng, n: usize, alphabet: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut toks: Vec<(u32, Vec<u8>)> = Vec::new();
        for id in 0..n as u32 {
            // Mix of fresh random tokens, extensions of earlier tokens and exact duplicates.
            let bytes = match rng.gen_range(0..10) {
                0 if !toks.is_empty() => toks[rng.gen_range(0..toks.len())].1.clone(),
                1..=4 if !toks.is_empty() => {
                    let mut b = toks[rng.gen_range(0..toks.len())].1.clone();
                    b.truncate(rng.gen_range(0..=b.len()));
                    for _ in 0..rng.gen_range(1..4) {
                        b.push(alphabet[rng.gen_range(0..alphabet.len())]);
                    }
                    b
                }
                _ => (0..rng.gen_range(0..7))
                    .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                    .collect(),
            };
            toks.push((id, bytes));
        }
        toks
    }

    #[test]
    fn random_tries_satisfy_invariants() {
        let mut rng = SmallRng::seed_from_u64(7);
        for round in 0..40 {
            let alphabet: Vec<u8> = if round % 2 == 0 {
                b"ab\x00\xff".to_vec()
            } else {
                (0..=255).collect()
            };
            let n = rng.gen_range(0..300);
            let toks = random_tokens(&mut rng, n, &alphabet);
            let trie = build(&toks);
            check_invariants(&trie, &toks);
        }
    }

    #[test]
    fn long_tokens_with_shared_prefixes() {
        // Radix keys cover 8 bytes: ties beyond them and zero bytes vs. end of string.
        let mut rng = SmallRng::seed_from_u64(5);
        let mut toks: Vec<(u32, Vec<u8>)> = Vec::new();
        for id in 0..600u32 {
            let mut b = b"        ".to_vec();
            b.truncate(rng.gen_range(0..=8));
            for _ in 0..rng.gen_range(0..8) {
                b.push(*[0u8, 1, b' ', 0xFF].get(rng.gen_range(0..4)).unwrap());
            }
            toks.push((id, b));
        }
        let mut sorted: Vec<(u32, &[u8])> = toks.iter().map(|(i, b)| (*i, b.as_slice())).collect();
        let mut want = sorted.clone();
        want.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(&b.0)));
        sort_tokens(&mut sorted);
        assert_eq!(sorted, want);
        check_invariants(&build(&toks), &toks);
    }

    #[test]
    fn walk_matches_brute_force() {
        let mut rng = SmallRng::seed_from_u64(11);
        for round in 0..60 {
            let alphabet: Vec<u8> = if round % 3 == 0 {
                (0..=255).collect()
            } else {
                b"abc{}\" ".to_vec()
            };
            let n = rng.gen_range(1..400);
            let toks = random_tokens(&mut rng, n, &alphabet);
            let trie = build(&toks);
            let (states, live) = (rng.gen_range(1..6), rng.gen_range(0.2..0.95));
            let dfa = Dfa::random(&mut rng, states, live);
            let mut want: Vec<u32> = toks
                .iter()
                .filter(|(_, b)| !b.is_empty() && dfa.run(b))
                .map(|(id, _)| *id)
                .collect();
            want.sort_unstable();

            // The reference walk with a DFA-state stack.
            let mut w = DfaWalker {
                dfa: &dfa,
                states: vec![0],
            };
            let mut got = Vec::new();
            trie.walk(0, &mut w, |t| got.push(t));
            assert_eq!(w.states, vec![0], "walk restores the walker");
            got.sort_unstable();
            assert_eq!(got, want, "round {round}");

            // The hand-written loop from the module docs with a byte stack.
            let mut stack: Vec<u8> = Vec::new();
            let mut got2 = Vec::new();
            let end = trie.node(0).subtree_end();
            let mut i = 1;
            while i < end {
                let n = trie.node(i);
                stack.truncate(n.depth() - 1);
                stack.push(n.byte());
                if dfa.run(&stack) {
                    got2.extend(trie.tokens_at(i));
                    i += 1;
                } else {
                    stack.pop();
                    i = n.subtree_end();
                }
            }
            got2.sort_unstable();
            assert_eq!(got2, want, "round {round} (doc loop)");
        }
    }

    #[test]
    fn walk_from_inner_node_and_skips_rejected_subtrees() {
        let toks: Vec<(u32, Vec<u8>)> = ["a", "ab", "abc", "abd", "ac", "b", "bcd"]
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u32, s.as_bytes().to_vec()))
            .collect();
        let trie = build(&toks);
        // Predicate: no 'b' after the first byte. Walk below "a": the walker holds "a".
        let start = trie.find(b"a").unwrap();
        let mut w = StackWalker::new(|p: &[u8]| !p[1..].contains(&b'b'));
        w.stack.push(b'a');
        let mut got = Vec::new();
        trie.walk(start, &mut w, |t| got.push(t));
        assert_eq!(got, vec![4]); // "ac"
        assert_eq!(w.stack, b"a");
        // Rejecting "ab" skipped "abc"/"abd": only "ab" and "ac" were tried.
        assert_eq!(w.pushes, 2);
    }

    #[test]
    fn prefix_closed_subset_walk() {
        // Accept paths made only of lowercase letters with at most two 'a's.
        let mut rng = SmallRng::seed_from_u64(3);
        let toks = random_tokens(&mut rng, 2000, b"aabcz0 ");
        let trie = build(&toks);
        let pred = |p: &[u8]| {
            p.iter().all(|b| b.is_ascii_lowercase())
                && p.iter().filter(|&&b| b == b'a').count() <= 2
        };
        let mut w = StackWalker::new(pred);
        let mut got = Vec::new();
        trie.walk(0, &mut w, |t| got.push(t));
        got.sort_unstable();
        let want: Vec<u32> = toks
            .iter()
            .filter(|(_, b)| !b.is_empty() && pred(b))
            .map(|(i, _)| *i)
            .collect();
        assert_eq!(got, want);
        assert!(!want.is_empty() && want.len() < toks.len());
    }
}
