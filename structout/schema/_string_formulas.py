"""Languages of (decoded) strings as boolean formulas over regular expressions.

A formula is a hashable tuple:

* ``("re", ast)``: the full-match language of a regex AST (see :mod:`._regex`),
* ``("and", (f, ...))``, ``("or", (f, ...))``, ``("not", f)``,
* ``ALL`` (every string) and ``NOTHING``.

Formulas are built with :func:`f_and`, :func:`f_or`, :func:`f_not`, tested on concrete strings with
:func:`matches` and turned into a single regex (or a DFA when no small regex exists) with
:func:`realize`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Union

from . import _automata as am
from . import _charset as cs
from . import _regex as rx

Formula = tuple[Any, ...]

ALL: Formula = ("all",)
NOTHING: Formula = ("nothing",)


def f_re(node: rx.Node) -> Formula:
    if node == rx.NONE or rx.is_empty(node):
        return NOTHING
    if node[0] == "rep" and node[1] == rx.ANYCHAR and node[2] == 0 and node[3] is None:
        return ALL
    return ("re", node)


def pattern_formula(pattern: str) -> Formula:
    """The language of an ECMA-262 ``pattern`` (search semantics, leading look-aheads)."""
    parts = []
    for looks, core in rx.search_variants(rx.parse_ecma(pattern)):
        terms = [f_re(core)]
        for positive, lang in looks:
            terms.append(f_re(lang) if positive else f_not(f_re(lang)))
        parts.append(f_and(*terms))
    return f_or(*parts)


def f_len(lo: int, hi: int | None) -> Formula:
    if lo <= 0 and hi is None:
        return ALL
    return f_re(rx.rep(rx.ANYCHAR, max(lo, 0), hi))


def f_lit(*values: str) -> Formula:
    if not values:
        return NOTHING
    # (what f_re gives: literals are not empty, and none is every string)
    return ("re", rx.alt(*(rx.lit(v) for v in values)))


def f_and(*items: Formula) -> Formula:
    out: list[Formula] = []
    for it in items:
        if it == NOTHING:
            return NOTHING
        if it == ALL:
            continue
        parts = it[1] if it[0] == "and" else (it,)
        for p in parts:
            if p not in out:
                out.append(p)
    if not out:
        return ALL
    # merge pure length constraints
    lens = [p for p in out if as_length(p) is not None]
    if len(lens) > 1:
        lo = max(as_length(p)[0] for p in lens)  # type: ignore[index]
        his = [as_length(p)[1] for p in lens]  # type: ignore[index]
        fin = [h for h in his if h is not None]
        hi = min(fin) if fin else None
        out = [p for p in out if p not in lens] + [
            f_len(lo, hi) if hi is None or hi >= lo else NOTHING
        ]
        if NOTHING in out:
            return NOTHING
        out = [p for p in out if p != ALL]
        if not out:
            return ALL
    for p in out:
        if p[0] == "not" and p[1] in out:
            return NOTHING
    if len(out) > 1:
        # a small finite set (const/enum) intersected with anything: filter it exactly
        for p in out:
            if p[0] == "re":
                words = _small_finite(p[1])
                if words is not None:
                    rest = ("and", tuple(q for q in out if q is not p))
                    kept = [w for w in words if matches(rest, w)]
                    return f_lit(*kept) if kept else NOTHING
        # a small finite set excluded from the rest: only its words that the rest matches need
        # excluding (L(rest) minus W = L(rest) minus (W ∩ L(rest))); often none (named keys
        # against a patternProperties pattern), and the automaton product is avoided
        for i, p in enumerate(out):
            if p[0] == "not" and p[1][0] == "re":
                words = _small_finite(p[1][1])
                if words is not None:
                    rest = ("and", tuple(q for q in out if q is not p))
                    kept = [w for w in words if matches(rest, w)]
                    if len(kept) < len(words):
                        out[i] = f_not(f_lit(*kept)) if kept else ALL
        # a language disjoint from a positive conjunct excludes nothing more: drop it; two
        # disjoint positive conjuncts: nothing
        positives = [p[1] for p in out if p[0] == "re"]
        for i, a in enumerate(positives):
            if any(_disjoint(a, b) for b in positives[i + 1 :]):
                return NOTHING
        for i, p in enumerate(out):
            if p[0] == "not" and p[1][0] == "re" and any(_disjoint(a, p[1][1]) for a in positives):
                out[i] = ALL
        out = [p for p in out if p != ALL]
        if not out:
            return ALL
    if len(out) == 1:
        return out[0]
    return ("and", tuple(out))


@lru_cache(maxsize=8192)
def _disjoint(a: rx.Node, b: rx.Node) -> bool:
    """A cheap sufficient test that two regexes share no string: different first characters
    (and not both nullable)."""
    fa, na = rx.first_chars(a)
    fb, nb = rx.first_chars(b)
    return not (na and nb) and not cs.intersect(fa, fb)


@lru_cache(maxsize=8192)
def _small_finite(node: rx.Node) -> tuple[str, ...] | None:
    words = rx.finite_strings(node, 256)
    return None if words is None else tuple(words)


def f_or(*items: Formula) -> Formula:
    if len(items) == 1 and items[0][0] != "or":
        return items[0]  # (what the merge below gives for it)
    out: list[Formula] = []
    seen: set[Formula] = set()
    for it in items:
        if it == ALL:
            return ALL
        if it == NOTHING:
            continue
        parts = it[1] if it[0] == "or" else (it,)
        for p in parts:
            if p not in seen:
                seen.add(p)
                out.append(p)
    if not out:
        return NOTHING
    res = [p for p in out if p[0] == "re"]
    if len(res) > 1:
        merged = ("re", rx.alt(*(p[1] for p in res)))
        out = [merged] + [p for p in out if p[0] != "re"]
    for p in out:
        if p[0] == "not" and p[1] in seen:
            return ALL
    if len(out) == 1:
        return out[0]
    return ("or", tuple(out))


def f_not(item: Formula) -> Formula:
    if item == ALL:
        return NOTHING
    if item == NOTHING:
        return ALL
    if item[0] == "not":
        return item[1]  # type: ignore[no-any-return]
    return ("not", item)


def as_length(f: Formula) -> tuple[int, int | None] | None:
    if f[0] == "re":
        n = f[1]
        if n[0] == "rep" and n[1] == rx.ANYCHAR:
            return n[2], n[3]
        if n == rx.ANYCHAR:
            return 1, 1
        if n == rx.EPS:
            return 0, 0
    return None


# --- concrete matching ----------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _py_regex(node: rx.Node) -> re.Pattern[str]:
    return re.compile(rx.to_python(node), re.DOTALL)


def _literal_prefix(node: rx.Node) -> str:
    """The characters that every string of the language starts with, as far as the regex spells
    them out: its leading sets of one code point."""
    items = node[1] if node[0] == "cat" else (node,)
    chars: list[str] = []
    for x in items:
        if x[0] != "set" or len(x[1]) != 1 or x[1][0][0] != x[1][0][1]:
            break
        chars.append(chr(x[1][0][0]))
    return "".join(chars)


#: ``id(node) -> (node, _literal_prefix(node))`` of the regexes :func:`matches` tested (the node
#: is kept, so its id stays its own): a word without that prefix is refused without compiling
#: the regex (an object's named keys against a patternProperties pattern `^name_(...)$`).
_PREFIX_CACHE: dict[int, tuple[rx.Node, str]] = {}


def _full_match(node: rx.Node, s: str) -> bool:
    got = _PREFIX_CACHE.get(id(node))
    if got is None or got[0] is not node:
        if len(_PREFIX_CACHE) >= 4096:
            _PREFIX_CACHE.clear()
        got = _PREFIX_CACHE[id(node)] = (node, _literal_prefix(node))
    return s.startswith(got[1]) and _py_regex(node).fullmatch(s) is not None


def matches(f: Formula, s: str) -> bool:
    t = f[0]
    if t == "all":
        return True
    if t == "nothing":
        return False
    if t == "re":
        return _full_match(f[1], s)
    if t == "and":
        return all(matches(x, s) for x in f[1])
    if t == "or":
        return any(matches(x, s) for x in f[1])
    if t == "not":
        return not matches(f[1], s)
    if t == "cfg":
        return CFG_LANGUAGES[f[1]](s)
    raise AssertionError(t)


# Context-free string languages (formats that are not regular), by name: a membership test.
# Each must be emitted by the grammar emitter as rules; they cannot be combined with other
# string constraints (that needs automata).
CFG_LANGUAGES: dict[str, Callable[[str], bool]] = {}


class NotRegular(Exception):
    """A context-free string language was combined with constraints that need automata."""


def f_cfg(name: str) -> Formula:
    return ("cfg", name)


def finite_values(f: Formula, limit: int = 64) -> list[str] | None:
    """The members of a finite language (None when infinite or too large to list)."""
    t = f[0]
    if t == "nothing":
        return []
    if t == "re":
        return rx.finite_strings(f[1], limit)
    if t == "or":
        out: list[str] = []
        for x in f[1]:
            v = finite_values(x, limit)
            if v is None:
                return None
            out.extend(v)
        return sorted(set(out))
    if t == "and":
        for x in f[1]:
            v = finite_values(x, limit)
            if v is not None:
                return [s for s in v if matches(f, s)]
        return None
    return None


# --- realization -----------------------------------------------------------------------------


def _leaves(f: Formula, out: list[rx.Node]) -> None:
    if f[0] == "re":
        out.append(f[1])
    elif f[0] in ("and", "or"):
        for x in f[1]:
            _leaves(x, out)
    elif f[0] == "not":
        _leaves(f[1], out)


def _compiled(f: Formula) -> tuple[list[rx.Node], Callable[[tuple[bool, ...]], bool]]:
    """Leaves of ``f`` and an evaluator of ``f`` given which leaves accept."""
    leaves: list[rx.Node] = []
    ev = _evaluator(f, leaves, {})
    return leaves, ev


def _evaluator(
    g: Formula, leaves: list[rx.Node], index: dict[rx.Node, int]
) -> Callable[[tuple[bool, ...]], bool]:
    """The evaluator of ``g``, its leaves numbered in ``index`` and listed in ``leaves`` (a
    module function, not a closure calling itself: such a closure is a reference cycle)."""
    t = g[0]
    if t == "all":
        return lambda v: True
    if t == "nothing":
        return lambda v: False
    if t == "re":
        node = g[1]
        if node not in index:
            index[node] = len(leaves)
            leaves.append(node)
        i = index[node]
        return lambda v: v[i]
    if t == "not":
        inner = _evaluator(g[1], leaves, index)
        return lambda v: not inner(v)
    if t == "cfg":
        raise NotRegular(f"format {g[1]!r} combined with other string constraints")
    parts = [_evaluator(x, leaves, index) for x in g[1]]
    if t == "and":
        return lambda v: all(p(v) for p in parts)
    return lambda v: any(p(v) for p in parts)


def to_dfa(f: Formula) -> am.DFA:
    """Minimal DFA of the formula (raises AutomatonTooLarge beyond the state budget)."""
    leaves, ev = _compiled(f)
    alpha = am.Alphabet.for_nodes([rx.ANYCHAR, *leaves])
    res = am.combine(leaves, ev, alpha)
    assert isinstance(res, am.DFA)
    return res


def restrict_length(node: rx.Node, lo: int, hi: int | None) -> rx.Node | None:
    """``L(node) ∩ {s : lo <= len(s) <= hi}`` as a regex when it can be done algebraically."""
    nlo, nhi = rx.length_range(node)
    if nlo >= lo and (hi is None or (nhi is not None and nhi <= hi)):
        return node
    if hi is not None and nlo > hi:
        return rx.NONE
    if nhi is not None and nhi < lo:
        return rx.NONE
    t = node[0]
    if t == "alt":
        parts = [restrict_length(x, lo, hi) for x in node[1]]
        if any(p is None for p in parts):
            return None
        return rx.alt(*parts)  # type: ignore[arg-type]
    if t == "rep":
        node = ("cat", (node,))
        t = "cat"
    if t == "cat":
        items = list(node[1])
        var = [i for i, x in enumerate(items) if rx.length_range(x)[0] != rx.length_range(x)[1]]
        if len(var) > 1:
            # an alternation of fixed-length branches: distribute it, one variable part less
            for i in var:
                x = items[i]
                if (
                    x[0] == "alt"
                    and len(x[1]) <= 16
                    and all(rx.length_range(b)[0] == rx.length_range(b)[1] for b in x[1])
                ):
                    branches = [rx.cat(*items[:i], b, *items[i + 1 :]) for b in x[1]]
                    parts = [restrict_length(b, lo, hi) for b in branches]
                    if any(p_ is None for p_ in parts):
                        return None
                    return rx.alt(*parts)  # type: ignore[arg-type]
            return None
        if len(var) != 1:
            return None
        i = var[0]
        fixed = sum(rx.length_range(x)[0] for j, x in enumerate(items) if j != i)
        x = items[i]
        if x[0] == "rep":
            ylo, yhi = rx.length_range(x[1])
            if ylo == yhi and ylo > 0:
                m = ylo
                # counts c with lo <= fixed + c*m <= hi and x[2] <= c <= x[3]
                cmin = max(x[2], -(-(lo - fixed) // m)) if lo > fixed else x[2]
                cmax_len = None if hi is None else (hi - fixed) // m
                cmax = x[3]
                if cmax_len is not None:
                    cmax = cmax_len if cmax is None else min(cmax, cmax_len)
                if cmax is not None and cmax < cmin:
                    return rx.NONE
                items[i] = rx.rep(x[1], cmin, cmax)
                return rx.cat(*items)
            return None
        if x[0] == "alt":
            sub = restrict_length(x, max(lo - fixed, 0), None if hi is None else hi - fixed)
            if sub is None:
                return None
            items[i] = sub
            return rx.cat(*items)
    return None


def shrink_to(node: rx.Node, budget: int) -> rx.Node:
    """A sublanguage of ``node`` whose strings have at most ``budget`` code points.

    Used when the exact intersection with a length limit is too large: the budget is split
    over the parts of a concatenation (bounded parts first, the rest shared by the unbounded
    ones) and repetitions get fewer or shorter items. Never adds strings.
    """
    lo, hi = rx.length_range(node)
    if hi is not None and hi <= budget:
        return node
    if lo > budget:
        return rx.NONE
    t = node[0]
    if t == "alt":
        return rx.alt(*(shrink_to(x, budget) for x in node[1]))
    if t == "cat":
        items = node[1]
        ranges = [rx.length_range(x) for x in items]
        spare = budget - sum(r[0] for r in ranges)
        bounded_need = sum(r[1] - r[0] for r in ranges if r[1] is not None)
        unbounded = [i for i, r in enumerate(ranges) if r[1] is None]
        extra = [0] * len(items)
        if bounded_need <= spare:
            for i, r in enumerate(ranges):
                if r[1] is not None:
                    extra[i] = r[1] - r[0]
            rest = spare - bounded_need
            # unbounded parts share the rest by how varied their characters are (a run of
            # non-space characters deserves more room than the whitespace between words)
            weights = [_variety(items[i]) for i in unbounded]
            total = sum(weights)
            for i, w in zip(unbounded, weights):
                extra[i] = int(rest * w / total)
        else:
            for i, r in enumerate(ranges):
                if r[1] is not None and bounded_need:
                    extra[i] = (r[1] - r[0]) * spare // bounded_need
        return rx.cat(*(shrink_to(x, ranges[i][0] + extra[i]) for i, x in enumerate(items)))
    if t == "rep":
        x, a, b = node[1], node[2], node[3]
        xlo, xhi = rx.length_range(x)
        if xhi is not None and xhi > 0:
            c = budget // xhi if b is None else min(b, budget // xhi)
            if c >= a:
                return rx.rep(x, a, c)
            return rx.rep(shrink_to(x, budget // max(a, 1)), a, a) if a else rx.EPS
        c = b if b is not None else max(a, 1)
        c = max(min(c, budget // max(xlo, 1)), a)
        if c == 0:
            return rx.EPS
        per = budget // c
        if per < xlo:
            return rx.NONE
        return rx.rep(shrink_to(x, per), a, c)
    return node if lo <= budget else rx.NONE


def _variety(node: rx.Node) -> float:
    """A weight for length budgets: bits per character the node's character sets offer."""
    sets: list[cs.Charset] = []
    am.collect_sets(node, sets)
    return max(1.0, sum(math.log2(1 + cs.size(x)) for x in sets))


@dataclass(frozen=True)
class LengthBounded:
    """The strings of ``core`` with ``lo <= len <= hi`` code points, left to the engine
    (KBNF ``json_len!``), which counts the characters exactly (a table of the product when
    small, a count beside the automaton's state otherwise)."""

    core: rx.Node
    lo: int
    hi: int


Realized = Union[rx.Node, am.DFA, LengthBounded]


def _simple_regex(f: Formula, ascii_exits: bool = False) -> rx.Node | None:
    """A regex for ``f`` without automata, when the structure allows it."""
    t = f[0]
    if t == "all":
        return rx.rep(rx.ANYCHAR, 0, None)
    if t == "nothing":
        return rx.NONE
    if t == "re":
        return f[1]  # type: ignore[no-any-return]
    if t == "or":
        parts = [_simple_regex(x, ascii_exits) for x in f[1]]
        if any(p is None for p in parts):
            return None
        return rx.alt(*parts)  # type: ignore[arg-type]
    if t == "and":
        lens = [p for p in f[1] if as_length(p) is not None]
        others = [p for p in f[1] if as_length(p) is None]
        if len(others) == 1 and len(lens) == 1:
            base = _simple_regex(others[0])
            if base is None:
                return None
            lo, hi = as_length(lens[0])  # type: ignore[misc]
            return restrict_length(base, lo, hi)
        return None
    words = complement_words(f)
    if words is not None:
        return complement_of_words(words, ascii_exits)
    return None


def complement_words(f: Formula) -> list[str] | None:
    """``¬W`` with ``W`` a finite set of at most :data:`MAX_COMPLEMENT_WORDS` strings (the names
    an object's other keys avoid): the words, sorted and distinct; else None."""
    if f[0] != "not" or f[1][0] != "re":
        return None
    return rx.finite_strings(f[1][1], MAX_COMPLEMENT_WORDS)


MAX_COMPLEMENT_WORDS = 20000


ASCII: cs.Charset = ((0x00, 0x7F),)
PLAIN: cs.Charset = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7E))  # JSON spells them as is


def complement_of_words(words: list[str], ascii_exits: bool = False) -> rx.Node:
    """All strings except the given ones, built from their trie (linear size, no automata).

    A string is outside the set when it leaves the trie (a prefix that is a trie path, then a
    character no word continues with, then anything) or stops on a trie node that does not end
    a word. With ``ascii_exits`` (used for the names of additional object keys, where the
    automata must stay small) the trie is left at ASCII characters only, and when every word is
    ASCII the strings containing any non-ASCII character are added as one separate branch:
    still exact. If some word is not ASCII, strings leaving the trie at a non-ASCII character
    are not produced (a subset, never one of the words).
    """
    # With ascii_exits and words of plain characters only (printable ASCII but '"' and '\\',
    # which JSON spells as themselves), the trie is left at plain characters and the strings
    # holding any other character form one branch: exact, and each exit encodes compactly.
    # ('/' has two JSON spellings: it counts as plain only when a word holds it)
    plain = PLAIN if any("/" in w for w in words) else cs.difference(PLAIN, cs.of_chars("/"))
    plain_words = ascii_exits and all(cs.is_subset(cs.of_chars(w), plain) for w in words)
    all_ascii = all(w.isascii() for w in words)
    trie: dict[str, Any] = {}
    for w in words:
        t = trie
        for ch in w:
            t = t.setdefault(ch, {})
        t[""] = True

    # Trie nodes repeat the same characters and the same sets of next characters: each is
    # built once per call (the same values as building them at every node).
    exit_sets: dict[str, cs.Charset] = {}
    chars: dict[str, rx.Node] = {}

    def char(k: str) -> rx.Node:
        node = chars.get(k)
        if node is None:
            node = chars[k] = rx.lit(k)
        return node

    def leave(t: dict[str, Any]) -> rx.Node:
        kids = [k for k in t if k]
        joined = "".join(kids)
        exit_set = exit_sets.get(joined)
        if exit_set is None:
            exit_set = cs.complement(cs.of_chars(joined))
            if ascii_exits:
                exit_set = cs.intersect(exit_set, plain if plain_words else ASCII)
            exit_sets[joined] = exit_set
        parts = [rx.cset(exit_set)]
        for k in kids:
            parts.append(rx.cat(char(k), leave(t[k])))
        return rx.alt(*parts)

    def stop(t: dict[str, Any]) -> rx.Node:
        parts = [] if "" in t else [rx.EPS]
        for k, sub in t.items():
            if k:
                parts.append(rx.cat(char(k), stop(sub)))
        return rx.alt(*parts)

    def on_path(t: dict[str, Any]) -> rx.Node:
        return rx.alt(rx.EPS, *(rx.cat(char(k), on_path(sub)) for k, sub in t.items() if k))

    exits = leave(trie)
    if plain_words or (ascii_exits and all_ascii):
        # Strings with a character the exits leave out: up to the first such character they
        # either left the trie already or are still on it. The second kind walks the trie in
        # step with the exits (so the automaton stays the trie's size plus one copy of that
        # character's spellings) and shares their tail.
        other = cs.complement(plain) if plain_words else cs.complement(ASCII)
        exits = rx.alt(exits, rx.cat(on_path(trie), rx.cset(other)))
    return rx.alt(rx.cat(exits, rx.rep(rx.ANYCHAR, 0, None)), stop(trie))


def realize(
    f: Formula, max_regex_size: int = 3000, key_mode: bool = False, engine_length: bool = False
) -> Realized:
    """A regex AST for the language, else a minimized DFA (raises AutomatonTooLarge).

    Not cached globally (automata can be large); the emitter memoizes per translation.

    ``key_mode``: the language of additional object keys, where complements of the named keys
    may leave the named keys' trie only at printable ASCII characters (a smaller subset).
    ``engine_length``: a length bound on a regular core may come back as :class:`LengthBounded`
    (exact, the engine builds the product) instead of a product DFA built here.
    """
    simple = _simple_regex(f, key_mode)
    if simple is not None:
        return simple
    if engine_length:
        bounded = _length_bounded(f, max_regex_size, key_mode)
        if bounded is not None:
            return bounded
    dfa = _length_product(f)
    if dfa is None:
        excluded = _excluded_words(f)
        if excluded is not None:
            rest, words = excluded
            dfa = _cached_dfa(rest).minus_words(words)
        else:
            dfa = to_dfa(f)
    node = dfa.to_regex(max_regex_size)
    if node is not None:
        return node
    return dfa


def _excluded_words(f: Formula) -> tuple[Formula, tuple[str, ...]] | None:
    """``rest ∧ ¬W`` with ``W`` a small finite set: ``(rest, W)`` (the names of an object's
    properties excluded from its other keys; ``rest`` is shared by objects alike)."""
    if f[0] != "and":
        return None
    for p in f[1]:
        if p[0] == "not" and p[1][0] == "re":
            words = _small_finite(p[1][1])
            if words is not None:
                return f_and(*(q for q in f[1] if q is not p)), words
    return None


@lru_cache(maxsize=32)
def _cached_dfa(f: Formula) -> am.DFA:
    return to_dfa(f)


MAX_LENGTH_PRODUCT = 60_000
#: Largest length bound left to the engine's ``json_len!`` (its default ``max_repetition``). The
#: engine tabulates small products and counts characters beside the automaton otherwise, so its
#: size does not grow with the bound.
MAX_ENGINE_LENGTH = 1 << 20


def split_length(f: Formula) -> tuple[Formula, int, int] | None:
    """``(core, lo, hi)`` when ``f`` is ``core ∧ lo <= length <= hi`` with one finite length
    bound and a non-trivial core; else None."""
    if f[0] != "and":
        return None
    lens = [p for p in f[1] if as_length(p) is not None]
    core = [p for p in f[1] if as_length(p) is None]
    if len(lens) != 1 or not core:
        return None
    lo, hi = as_length(lens[0])  # type: ignore[misc]
    if hi is None:
        return None
    return f_and(*core), lo, hi


def _length_bounded(f: Formula, max_regex_size: int, key_mode: bool) -> Realized | None:
    """``core ∧ lo <= length <= hi`` as :class:`LengthBounded` (or a plain regex when the bound
    folds into the core's regex, or ``rx.NONE`` when no length fits); None when ``f`` has
    another shape, the core is not a small regular language or the bound is over
    :data:`MAX_ENGINE_LENGTH`."""
    split = split_length(f)
    if split is None or split[2] > MAX_ENGINE_LENGTH:
        return None
    core_f, lo, hi = split
    node = _simple_regex(core_f, key_mode)
    if node is None:
        try:
            node = to_dfa(core_f).to_regex(max(max_regex_size, 20_000))
        except am.AutomatonTooLarge:
            return None
    if node is None:
        return None
    if node == rx.NONE or rx.is_empty(node):
        return rx.NONE
    nlo, nhi = rx.length_range(node)
    if nlo > hi or (nhi is not None and nhi < lo):
        return rx.NONE
    folded = restrict_length(node, lo, hi)
    if folded is not None:
        return folded
    shortest = _shortest(node)
    if shortest is not None and lo <= shortest <= hi:
        return LengthBounded(node, lo, hi)  # the shortest string fits: not empty
    try:
        if is_empty(f_and(f_re(node), f_len(lo, hi))):
            return rx.NONE
    except am.AutomatonTooLarge:
        # Too large to decide here (a bound in the tens of thousands unrolled): the engine's
        # `json_len!` counts instead of unrolling, and a terminal with no string is pruned there.
        pass
    return LengthBounded(node, lo, hi)


def _shortest(node: rx.Node) -> int | None:
    """The length of the shortest string of ``node``; None when it has none (or holds an
    assertion, not decided here), so that None never claims a string exists."""
    t = node[0]
    if t == "eps":
        return 0
    if t == "none":
        return None
    if t == "set":
        return 1 if node[1] else None
    if t == "cat":
        total = 0
        for x in node[1]:
            n = _shortest(x)
            if n is None:
                return None
            total += n
        return total
    if t == "alt":
        lengths = [n for n in map(_shortest, node[1]) if n is not None]
        return min(lengths) if lengths else None
    if t == "rep":
        if node[2] == 0:
            return 0
        n = _shortest(node[1])
        return None if n is None else n * int(node[2])
    return None  # (assertions: not decided here)


def _length_product(f: Formula) -> am.DFA | None:
    """``core ∧ length <= hi`` as the minimal DFA of ``core`` times a length counter.

    Cheaper than exploring the combined automaton (which can blow up on unanchored patterns);
    None when ``f`` has no such shape or the product would be too large.
    """
    split = split_length(f)
    if split is None:
        return None
    core_f, lo, hi = split
    try:
        core_dfa = to_dfa(core_f)
    except am.AutomatonTooLarge:
        return None
    if core_dfa.n * (hi + 1) > MAX_LENGTH_PRODUCT:
        return None
    return core_dfa.bounded_length(lo, hi, MAX_LENGTH_PRODUCT)


def is_empty(f: Formula) -> bool:
    """Exact emptiness (may raise AutomatonTooLarge)."""
    if f == NOTHING:
        return True
    if f == ALL:
        return False
    if f[0] == "re":
        return rx.is_empty(f[1])
    if f[0] == "or":
        return all(is_empty(x) for x in f[1])
    if f[0] == "cfg":
        return False
    if complement_words(f) is not None:
        return False  # the complement of a finite set is infinite
    if matches(f, ""):  # a witness without automata (e.g. keys outside a pattern)
        return False
    try:
        leaves, ev = _compiled(f)
    except NotRegular:
        return False
    alpha = am.Alphabet.for_nodes([rx.ANYCHAR, *leaves])
    return not am.combine(leaves, ev, alpha, stop_at_accept=True)
