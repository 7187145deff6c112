"""Finite automata over code points, used where a language needs intersection or complement.

Every DFA in a computation shares one partition of the code points into *atoms* (disjoint
charsets that no leaf charset splits), so transitions are per-atom integer tables. DFAs are
total: state 0 is not special, a dead state exists whenever some atom leads nowhere.

Work is bounded: :class:`AutomatonTooLarge` is raised when a construction exceeds its budget.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Iterable, Sequence
from heapq import heapify, heappop, heappush
from itertools import chain, repeat
from typing import Generic, TypeVar

from structout._engine import minimal_partition_of

from . import _charset as cs
from . import _regex as rx

MAX_NFA_STATES = 60_000
MAX_DFA_STATES = 30_000
K = TypeVar("K", bound=Hashable)
MAX_ELIMINATION_STATES = 64


class AutomatonTooLarge(Exception):
    """A construction exceeded its state budget."""


def collect_sets(node: rx.Node, out: list[cs.Charset]) -> None:
    t = node[0]
    if t == "set":
        out.append(node[1])
    elif t in ("cat", "alt"):
        for x in node[1]:
            collect_sets(x, out)
    elif t == "rep":
        collect_sets(node[1], out)


def make_atoms(sets: Iterable[cs.Charset]) -> list[cs.Charset]:
    """The coarsest partition of all code points refining every given charset."""
    # a sweep over the boundaries: bit i of `sig` says whether the i-th distinct set holds the
    # current code point; each boundary toggles the bits of the sets entered or left there
    toggles = {0: 0, cs.MAX_CP + 1: 0}
    for i, s in enumerate(dict.fromkeys(sets)):
        bit = 1 << i
        for lo, hi in s:
            toggles[lo] = toggles.get(lo, 0) ^ bit
            toggles[hi + 1] = toggles.get(hi + 1, 0) ^ bit
    points = sorted(toggles)
    groups: dict[int, list[cs.Interval]] = {}
    sig = 0
    for a, b in zip(points, points[1:]):
        sig ^= toggles[a]
        groups.setdefault(sig, []).append((a, b - 1))
    return [cs.make(v) for v in groups.values()]


class Alphabet:
    """A partition of code points into atoms, with charset → atom-bitmask lookup."""

    def __init__(self, atoms: list[cs.Charset]) -> None:
        self.atoms = atoms
        self._starts = sorted((lo, i) for i, a in enumerate(atoms) for lo, _ in a)
        self._cache: dict[cs.Charset, int] = {}
        self._sets: dict[int, cs.Charset] = {}

    def atom_of(self, cp: int) -> int:
        lo_i, hi_i = 0, len(self._starts)
        while lo_i + 1 < hi_i:
            mid = (lo_i + hi_i) // 2
            if self._starts[mid][0] <= cp:
                lo_i = mid
            else:
                hi_i = mid
        return self._starts[lo_i][1]

    def mask(self, s: cs.Charset) -> int:
        m = self._cache.get(s)
        if m is None:
            m = 0
            for i, a in enumerate(self.atoms):
                if a and cs.contains(s, a[0][0]):
                    m |= 1 << i
            self._cache[s] = m
        return m

    def charset(self, mask: int) -> cs.Charset:
        got = self._sets.get(mask)
        if got is None:
            got = self._sets[mask] = cs.union(
                *(a for i, a in enumerate(self.atoms) if mask >> i & 1)
            )
        return got

    @classmethod
    def for_nodes(cls, nodes: Sequence[rx.Node]) -> Alphabet:
        sets: list[cs.Charset] = []
        for n in nodes:
            collect_sets(n, sets)
        return cls(make_atoms(sets))


class _Numbering(Generic[K]):
    """Ids of a construction's states in discovery order (``order[id]`` is the state), at most
    ``limit`` of them. Callers look up ``index`` inline (the hot path) and :meth:`add` a miss."""

    __slots__ = ("index", "limit", "message", "order")

    def __init__(self, limit: int, message: str) -> None:
        self.index: dict[K, int] = {}
        self.order: list[K] = []
        self.limit = limit
        self.message = message

    def add(self, key: K) -> int:
        """Number a new state; ``AutomatonTooLarge`` past the limit."""
        if len(self.order) >= self.limit:
            raise AutomatonTooLarge(self.message)
        j = self.index[key] = len(self.order)
        self.order.append(key)
        return j


def _dfa_states(start: K) -> _Numbering[K]:
    """A numbering under the DFA state budget, holding ``start`` as state 0."""
    states: _Numbering[K] = _Numbering(MAX_DFA_STATES, "DFA state budget exceeded")
    states.add(start)
    return states


class _NFA:
    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int]]] = []
        # state -> its ε-closure, filled by `closure` (which runs once the NFA is built)
        self._closures: dict[int, frozenset[int]] = {}

    def closure(self, states: Iterable[int]) -> frozenset[int]:
        """The states ``states`` reach by ε-moves (``states`` included): the union of each
        state's closure, found once per state. Only for a finished NFA (no ``build`` after)."""
        closures = self._closures
        parts = []
        for q in states:
            got = closures.get(q)
            if got is None:
                got = closures[q] = self._closure_of(q)
            parts.append(got)
        if len(parts) == 1:
            return parts[0]
        return frozenset().union(*parts)

    def _closure_of(self, q: int) -> frozenset[int]:
        eps = self.eps
        stack = [q]
        seen = {q}
        while stack:
            for r in eps[stack.pop()]:
                if r not in seen:
                    seen.add(r)
                    stack.append(r)
        return frozenset(seen)

    def new(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise AutomatonTooLarge("NFA state budget exceeded")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node: rx.Node, alpha: Alphabet) -> tuple[int, int]:
        t = node[0]
        if t == "eps":
            s = self.new()
            return s, s
        if t == "none":
            return self.new(), self.new()
        if t == "set":
            s, e = self.new(), self.new()
            m = alpha.mask(node[1])
            if m:
                self.edges[s].append((m, e))
            return s, e
        if t == "cat":
            s, e = self.build(node[1][0], alpha)
            for x in node[1][1:]:
                s2, e2 = self.build(x, alpha)
                self.eps[e].append(s2)
                e = e2
            return s, e
        if t == "alt":
            s, e = self.new(), self.new()
            for x in node[1]:
                s2, e2 = self.build(x, alpha)
                self.eps[s].append(s2)
                self.eps[e2].append(e)
            return s, e
        if t == "rep":
            inner, lo, hi = node[1], node[2], node[3]
            s = self.new()
            cur = s
            for _ in range(lo):
                a, b = self.build(inner, alpha)
                self.eps[cur].append(a)
                cur = b
            if hi is None:
                a, b = self.build(inner, alpha)
                self.eps[cur].append(a)
                self.eps[b].append(a)
                end = self.new()
                self.eps[cur].append(end)
                self.eps[b].append(end)
                return s, end
            end = self.new()
            self.eps[cur].append(end)
            for _ in range(hi - lo):
                a, b = self.build(inner, alpha)
                self.eps[cur].append(a)
                self.eps[b].append(end)
                cur = b
            return s, end
        raise AssertionError(f"unexpected regex node {t}")


class DFA:
    """A total DFA over the atoms of ``alpha``; never changed once built."""

    def __init__(self, alpha: Alphabet, trans: list[list[int]], accept: list[bool], start: int):
        self.alpha = alpha
        self.trans = trans
        self.accept = accept
        self.start = start
        self._live_edges: tuple[list[bool], list[dict[int, cs.Charset]]] | None = None

    @property
    def n(self) -> int:
        return len(self.trans)

    # --- construction ---

    @classmethod
    def from_regex(cls, node: rx.Node, alpha: Alphabet) -> DFA:
        nfa = _NFA()
        s, e = nfa.build(node, alpha)
        natoms = len(alpha.atoms)
        closure = nfa.closure
        start = closure([s])
        states = _dfa_states(start)
        index, order = states.index, states.order
        trans: list[list[int]] = []
        accept: list[bool] = []
        i = 0
        while i < len(order):
            cur = order[i]
            i += 1
            accept.append(e in cur)
            row = []
            targets: list[list[int]] = [[] for _ in range(natoms)]
            for q in cur:
                for m, r in nfa.edges[q]:
                    a = 0
                    while m:
                        if m & 1:
                            targets[a].append(r)
                        m >>= 1
                        a += 1
            for a in range(natoms):
                nxt = closure(targets[a]) if targets[a] else frozenset()
                j = index.get(nxt)
                row.append(states.add(nxt) if j is None else j)
            trans.append(row)
        return cls(alpha, trans, accept, 0).minimize(numbered=True)

    def bounded_length(self, lo: int, hi: int, max_states: int) -> DFA:
        """Strings of this DFA with lo <= length <= hi: the product with a length counter.

        States are (state, length) pairs reachable from the start, without minimization
        (a product of a minimal DFA with a counter is nearly minimal already).
        """
        natoms = len(self.alpha.atoms)
        live = self.live_states()
        states: _Numbering[tuple[int, int]] = _Numbering(
            max_states, "length-bounded automaton too large"
        )
        index, order = states.index, states.order
        trans: list[list[int]] = []
        accept: list[bool] = []

        def state(key: tuple[int, int]) -> int:
            j = index.get(key)
            return states.add(key) if j is None else j

        state((self.start, 0))
        i = 0
        while i < len(order):
            q, k = order[i]
            i += 1
            accept.append(q >= 0 and self.accept[q] and lo <= k)
            row = []
            for a in range(natoms):
                r = self.trans[q][a] if q >= 0 else -1
                if q < 0 or k >= hi or not live[r]:
                    row.append(state((-1, 0)))
                else:
                    row.append(state((r, k + 1)))
            trans.append(row)
        return DFA(self.alpha, trans, accept, 0)

    def complement(self) -> DFA:
        return DFA(self.alpha, self.trans, [not a for a in self.accept], self.start)

    def product(self, other: DFA, op: str) -> DFA:
        assert self.alpha is other.alpha
        natoms = len(self.alpha.atoms)
        states = _dfa_states((self.start, other.start))
        index, order = states.index, states.order
        trans: list[list[int]] = []
        accept: list[bool] = []
        i = 0
        while i < len(order):
            p, q = order[i]
            i += 1
            a1, a2 = self.accept[p], other.accept[q]
            accept.append((a1 and a2) if op == "and" else (a1 or a2))
            row = []
            for a in range(natoms):
                key = (self.trans[p][a], other.trans[q][a])
                j = index.get(key)
                row.append(states.add(key) if j is None else j)
            trans.append(row)
        return DFA(self.alpha, trans, accept, 0).minimize(numbered=True)

    def minus_words(self, words: Sequence[str]) -> DFA:
        """The language without the given words: the product with their trie (at most
        ``n * (1 + total word length)`` states), on an alphabet refined so that every character
        of a word is an atom of its own."""
        chars = sorted({ord(c) for w in words for c in w})
        alpha = Alphabet(make_atoms([*self.alpha.atoms, *(cs.single(c) for c in chars)]))
        old_atom = [self.alpha.atom_of(a[0][0]) for a in alpha.atoms]
        trie: list[dict[int, int]] = [{}]  # node -> atom -> child; node 0 is the root
        ends: set[int] = set()
        for w in words:
            t = 0
            for c in w:
                a = alpha.atom_of(ord(c))
                nxt = trie[t].get(a)
                if nxt is None:
                    nxt = trie[t][a] = len(trie)
                    trie.append({})
                t = nxt
            ends.add(t)
        atoms = range(len(alpha.atoms))
        states = _dfa_states((self.start, 0))
        index, order = states.index, states.order
        trans: list[list[int]] = []
        accept: list[bool] = []
        i = 0
        while i < len(order):
            q, t = order[i]
            i += 1
            accept.append(self.accept[q] and t not in ends)
            row = []
            children = map(trie[t].get, atoms, repeat(-1)) if t >= 0 else repeat(-1)
            for key in zip(map(self.trans[q].__getitem__, old_atom), children):
                j = index.get(key)
                row.append(states.add(key) if j is None else j)
            trans.append(row)
        return DFA(alpha, trans, accept, 0).minimize(numbered=True)

    def minimize(self, numbered: bool = False) -> DFA:
        """The minimal DFA of the reachable part: Hopcroft's partition refinement, in the
        engine (:func:`structout._engine.minimal_partition_of`). States are numbered
        breadth-first from the start (``0``) over the atoms in order, so equal languages over
        the same alphabet give equal tables.

        ``numbered``: this DFA's states are numbered so already, every one reachable (as the
        constructions here number the states they discover), so renumbering is skipped."""
        if numbered:
            tr = self.trans
            acc = self.accept
        else:
            seen = {self.start: 0}
            order = [self.start]
            for q in order:  # breadth-first; the loop sees states appended while it runs
                for r in self.trans[q]:
                    if r not in seen:
                        seen[r] = len(order)
                        order.append(r)
            number = seen.__getitem__
            tr = [list(map(number, self.trans[q])) for q in order]
            acc = [self.accept[q] for q in order]
        # (an alphabet has at least one atom: its atoms partition all code points)
        block_of = minimal_partition_of(
            len(self.alpha.atoms), array("I", chain.from_iterable(tr)).tobytes(), bytes(acc), 0
        )
        nb = max(block_of) + 1
        trans: list[list[int]] = [[]] * nb  # each block's row, from its first state (never empty)
        accept = [False] * nb
        for q, bid in enumerate(block_of):
            if not trans[bid]:
                trans[bid] = [block_of[r] for r in tr[q]]
                accept[bid] = acc[q]
        return DFA(self.alpha, trans, accept, 0)

    # --- queries ---

    def live_states(self) -> list[bool]:
        """States from which an accepting state is reachable."""
        n = self.n
        rev: list[list[int]] = [[] for _ in range(n)]
        for q in range(n):
            for r in set(self.trans[q]):
                rev[r].append(q)
        live = [False] * n
        stack = [q for q in range(n) if self.accept[q]]
        for q in stack:
            live[q] = True
        while stack:
            q = stack.pop()
            for p in rev[q]:
                if not live[p]:
                    live[p] = True
                    stack.append(p)
        return live

    def is_empty(self) -> bool:
        return not self.live_states()[self.start]

    def matches(self, text: str) -> bool:
        q = self.start
        for ch in text:
            q = self.trans[q][self.alpha.atom_of(ord(ch))]
        return self.accept[q]

    def live_edges(self) -> tuple[list[bool], list[dict[int, cs.Charset]]]:
        """Live states and, per live state, live target → charset of the transition (computed
        once per DFA: realizing a DFA asks for them twice, for its regex and for its rules)."""
        if self._live_edges is not None:
            return self._live_edges
        live = self.live_states()
        bits = [1 << a for a in range(len(self.alpha.atoms))]
        charset = self.alpha.charset
        out: list[dict[int, cs.Charset]] = []
        for q, row in enumerate(self.trans):
            d: dict[int, int] = {}
            if live[q]:
                for r, bit in zip(row, bits):
                    if live[r]:
                        d[r] = d.get(r, 0) | bit
            out.append({r: charset(m) for r, m in d.items()})
        self._live_edges = live, out
        return live, out

    # --- conversion back to a regex ---

    def to_regex(self, max_size: int = 4000) -> rx.Node | None:
        """State elimination; None when the result would exceed ``max_size`` AST nodes."""
        live, edges = self.live_edges()
        if not live[self.start]:
            return rx.NONE
        states = [q for q in range(self.n) if live[q]]
        if len(states) > MAX_ELIMINATION_STATES:
            return None
        S, F = -1, -2
        # edge map: (i, j) -> node
        fwd: dict[int, dict[int, rx.Node]] = {q: {} for q in states}
        fwd[S] = {self.start: rx.EPS}
        bwd: dict[int, dict[int, rx.Node]] = {q: {} for q in states}
        bwd[F] = {}
        bwd[self.start][S] = rx.EPS
        for q in states:
            for r, chars in edges[q].items():
                node = rx.cset(chars)
                fwd[q][r] = node
                bwd[r][q] = node
            if self.accept[q]:
                fwd[q][F] = rx.EPS
                bwd[F][q] = rx.EPS
        remaining = set(states)
        total = 0
        # rx.size memoized by identity: edges are rebuilt from the same sub-nodes over and over,
        # a full re-measure each time is quadratic. Measured nodes are kept alive in `measured`,
        # so no id is reused while the memo holds it.
        size_memo: dict[int, int] = {}
        measured: list[rx.Node] = []

        def cost(s: int) -> int:
            return (len(bwd[s]) - (s in bwd[s])) * (len(fwd[s]) - (s in fwd[s]))

        # eliminate the state with the smallest in*out product, on ties the one farthest from
        # the start (the highest breadth-first number: nesting grows on the right, as the
        # regex reads); a heap with lazy deletion, holding each remaining state's current cost
        # (and possibly stale ones)
        heap = [(cost(s), -s) for s in states]
        heapify(heap)
        while remaining:
            c, k = heappop(heap)
            k = -k
            if k not in remaining or c != cost(k):
                continue
            remaining.discard(k)
            loop = fwd[k].pop(k, None)
            bwd[k].pop(k, None)
            star = rx.rep(loop, 0, None) if loop is not None else rx.EPS
            ins = list(bwd[k].items())
            outs = list(fwd[k].items())
            for i, _ in ins:
                fwd[i].pop(k, None)
            for j, _ in outs:
                bwd[j].pop(k, None)
            for i, r1 in ins:
                for j, r2 in outs:
                    path = rx.cat(r1, star, r2)
                    old = fwd[i].get(j)
                    new = path if old is None else rx.alt(old, path)
                    new = simplify_chain(new)
                    total = _sized(new, size_memo, measured)
                    if total > max_size:
                        return None
                    fwd[i][j] = new
                    bwd[j][i] = new
            del fwd[k]
            del bwd[k]
            # only the neighbours' edge maps changed
            for s in {i for i, _ in ins}.union(j for j, _ in outs).intersection(remaining):
                heappush(heap, (cost(s), -s))
        res = fwd[S].get(F, rx.NONE)
        return res


def _sized(node: rx.Node, size_memo: dict[int, int], measured: list[rx.Node]) -> int:
    """``rx.size(node)``, memoized by identity in ``size_memo`` (the nodes measured are kept in
    ``measured``); see :meth:`DFA.to_regex`."""
    got = size_memo.get(id(node))
    if got is not None:
        return got
    t = node[0]
    if t in ("cat", "alt"):
        n = 1
        for x in node[1]:  # most children are measured already: no call for them
            got = size_memo.get(id(x))
            n += _sized(x, size_memo, measured) if got is None else got
    elif t == "rep":
        n = 1 + _sized(node[1], size_memo, measured)
    else:
        n = rx.size(node)
    size_memo[id(node)] = n
    measured.append(node)
    return n


def simplify_chain(node: rx.Node) -> rx.Node:
    """Fold ``X(X(X)?)?`` style nests that state elimination produces into counted repeats."""
    if node[0] == "cat" and len(node[1]) == 2:
        x, y = node[1]
        if y[0] == "rep" and y[2] == 0 and y[3] == 1:
            inner = y[1]
            if inner == x:
                return rx.rep(x, 1, 2)
            if inner[0] == "rep" and inner[1] == x and inner[2] <= 1:
                hi = None if inner[3] is None else inner[3] + 1
                return rx.rep(x, 1, hi)
    if node[0] == "rep" and node[2] == 0 and node[3] == 1:
        inner = node[1]
        if inner[0] == "rep" and inner[2] == 1:
            return rx.rep(inner[1], 0, inner[3])
    return node


# --- boolean combinations, explored lazily -----------------------------------------------------


# Universal-state detection is skipped for leaves with more candidate states than this.
MAX_UNIVERSAL_CANDIDATES = 256


def _universal_states(
    nfa: _NFA,
    rev: dict[int, list[int]],
    end: int,
    natoms: int,
) -> set[int]:
    """NFA states from which every string reaches ``end``: the greatest set U of states whose
    closure holds ``end`` and, for every atom, an edge into a state that reaches U by ε-moves.

    Sound by coinduction: from a state of U the empty string is accepted and each character
    leads to a set that again holds a state of U. Empty when there are too many candidates.
    """

    def reaching(targets: Iterable[int], limit: int) -> set[int] | None:
        seen = set(targets)
        stack = list(seen)
        while stack:
            q = stack.pop()
            for p in rev.get(q, ()):
                if p not in seen:
                    seen.add(p)
                    if len(seen) > limit:
                        return None
                    stack.append(p)
        return seen

    cand = reaching([end], MAX_UNIVERSAL_CANDIDATES)
    if cand is None:
        return set()
    full = (1 << natoms) - 1
    closures = {q: nfa.closure([q]) for q in cand}
    u = set(cand)
    while u:
        into_u = reaching(u, len(nfa.eps))
        assert into_u is not None
        drop = []
        for q in u:
            covered = 0
            for p in closures[q]:
                for m, r in nfa.edges[p]:
                    if r in into_u:
                        covered |= m
            if covered != full:
                drop.append(q)
        if not drop:
            break
        u.difference_update(drop)
    return u


def combine(
    leaves: list[rx.Node],
    evaluate: Callable[[tuple[bool, ...]], bool],
    alpha: Alphabet,
    stop_at_accept: bool = False,
) -> DFA | bool:
    """The DFA of a boolean combination of regexes, exploring only reachable state tuples.

    Each DFA state is a tuple of NFA state sets, one per leaf; it accepts when ``evaluate``
    (given which leaves accept) is true. With ``stop_at_accept`` the search stops at the first
    accepting state and returns True (False when none is reachable): an emptiness test.
    """
    nfa = _NFA()
    ends = []
    starts = []
    for leaf in leaves:
        s, e = nfa.build(leaf, alpha)
        starts.append(s)
        ends.append(e)
    natoms = len(alpha.atoms)
    cache: dict[frozenset[int], frozenset[int]] = {}
    closure = nfa.closure

    # A leaf's state set that holds a universal state accepts every continuation: all such
    # sets are one state of the leaf (its canonical universal set), so `.*a.*|.*b.*` does not
    # track the other words after one matched.
    universal_of: dict[int, frozenset[int]] = {}
    rev: dict[int, list[int]] = {}  # reverse ε-edges
    for q, outs in enumerate(nfa.eps):
        for r in outs:
            rev.setdefault(r, []).append(q)
    for end in [] if stop_at_accept else ends:
        found = _universal_states(nfa, rev, end, natoms)
        if found:
            representative = closure([min(found)])
            for q in found:
                universal_of[q] = representative

    def canonical(states: frozenset[int]) -> frozenset[int]:
        if universal_of:
            for q in states:
                got = universal_of.get(q)
                if got is not None:
                    return got
        return states

    atoms_of: dict[int, list[int]] = {}  # atom mask -> its atoms
    nothing: frozenset[int] = frozenset()
    all_atoms = (1 << natoms) - 1

    def step(states: frozenset[int]) -> list[frozenset[int]]:
        """Per atom, the (canonical) closure of the targets of the edges on that atom."""
        on_mask: dict[int, list[int]] = {}  # edge mask -> targets of the edges on it
        for q in states:
            for m, r in nfa.edges[q]:
                rs = on_mask.get(m)
                if rs is None:
                    on_mask[m] = [r]
                else:
                    rs.append(r)
        out = [nothing] * natoms
        if len(on_mask) == 1:  # (most state sets: one mask, its atoms one class)
            ((m, rs),) = on_mask.items()
            classes = [m]
            keys = [frozenset(rs)]
        else:
            # atoms that no edge mask separates (as masks) share one target set
            classes = [all_atoms]
            for m in on_mask:
                classes = [part for c in classes for part in (c & m, c & ~m) if part]
            keys = [
                frozenset(chain.from_iterable(rs for m, rs in on_mask.items() if m & c))
                for c in classes
            ]
        for c, key in zip(classes, keys):
            if not key:
                continue
            target = cache.get(key)
            if target is None:
                target = cache[key] = canonical(closure(key))
            members = atoms_of.get(c)
            if members is None:
                members = atoms_of[c] = [a for a in range(natoms) if c >> a & 1]
            for a in members:
                out[a] = target
        return out

    step_cache: dict[frozenset[int], list[frozenset[int]]] = {}
    start = tuple(canonical(closure([s])) for s in starts)
    states = _dfa_states(start)
    index, order = states.index, states.order
    trans: list[list[int]] = []
    accept: list[bool] = []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        acc = evaluate(tuple(map(frozenset.__contains__, cur, ends)))
        if stop_at_accept and acc:
            return True
        accept.append(acc)
        nexts = []
        for st in cur:
            got = step_cache.get(st)
            if got is None:
                got = step(st)
                step_cache[st] = got
            nexts.append(got)
        row = []
        for key in zip(*nexts):  # per atom, the tuple of the leaves' next state sets
            j = index.get(key)
            row.append(states.add(key) if j is None else j)
        trans.append(row)
    if stop_at_accept:
        return False
    return DFA(alpha, trans, accept, 0).minimize(numbered=True)
