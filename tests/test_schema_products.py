"""Exactness of the translator's product shortcuts: every language is checked string by string
against Python's ``re`` on all short strings over a small alphabet."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from structout._engine import minimal_partition_of
from structout.schema import _automata as am
from structout.schema import _charset as cs
from structout.schema import _regex as rx
from structout.schema import _string_formulas as sl


def strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(p) for n in range(max_len + 1) for p in itertools.product(alphabet, repeat=n)]


@pytest.mark.parametrize(
    "pattern",
    [
        "^ab|ba|aab|b$",  # unanchored words: universal states after any match
        "a.*b|b",
        "(ab)*a?",
        "^(a|b)*abb$",
    ],
)
def test_universal_states_keep_the_language(pattern: str) -> None:
    f = sl.pattern_formula(pattern)
    dfa = sl.to_dfa(f)
    py = re.compile(pattern)
    for s in strings("abc", 7):
        assert dfa.matches(s) == (py.search(s) is not None), (pattern, s)


def test_unanchored_words_stay_small() -> None:
    words = ["list", "date", "time", "string", "enum", "int", "double", "long", "boolean"]
    f = sl.pattern_formula("^" + "|".join(words) + "$")
    # one state per trie position of the words (Aho-Corasick), not per subset of tracked words
    assert sl.to_dfa(f).n <= sum(len(w) for w in words) + 2


@pytest.mark.parametrize("pattern", ["^a[ab]*$", "^(ab|b)+c?$", "^[abc]{0,3}$"])
def test_minus_words_is_exact(pattern: str) -> None:
    words = ["", "a", "ab", "abc", "bb", "cab"]
    dfa = sl.to_dfa(sl.pattern_formula(pattern)).minus_words(words)
    py = re.compile(pattern)
    for s in strings("abc", 5):
        assert dfa.matches(s) == (py.search(s) is not None and s not in words), (pattern, s)


def test_realize_rest_minus_names_is_exact() -> None:
    pattern = "^(x|y)[a-c]{1,3}$"
    names = ["xa", "yb", "zz", "x"]
    f = sl.f_and(sl.pattern_formula(pattern), sl.f_not(sl.f_lit(*names)))
    real = sl.realize(f)
    py = re.compile(pattern)
    matcher = real if isinstance(real, am.DFA) else re.compile(rx.to_python(real), re.DOTALL)
    for s in strings("xyabz", 4):
        want = py.search(s) is not None and s not in names
        got = matcher.matches(s) if isinstance(matcher, am.DFA) else bool(matcher.fullmatch(s))
        assert got == want, s


def test_conjunction_shortcuts_keep_the_language() -> None:
    a = sl.pattern_formula("^a[ab]*$")
    b = sl.pattern_formula("^b[ab]*$")
    names = sl.f_lit("ab", "ba", "bb")
    # names outside ``a`` do not need excluding; ``b`` is disjoint from ``a``
    f = sl.f_and(a, sl.f_not(names), sl.f_not(b))
    assert sl.f_and(a, b) == sl.NOTHING
    overlapping = sl.f_and(a, sl.f_not(sl.pattern_formula("^aa")))  # same first character
    assert sl.matches(overlapping, "ab") and not sl.matches(overlapping, "aab")
    for s in strings("ab", 6):
        want = s.startswith("a") and s not in ("ab", "ba", "bb")
        assert sl.matches(f, s) == want, s
    assert not sl.is_empty(f)


def test_key_complement_with_plain_names_is_exact() -> None:
    names = ["ab", "a", "b/c"]
    node = sl.complement_of_words(names, ascii_exits=True)
    py = re.compile(rx.to_python(node), re.DOTALL)
    for s in strings('ab/"\\\x01é', 3):
        assert bool(py.fullmatch(s)) == (s not in names), repr(s)
    slashless = sl.complement_of_words(["ab", "a"], ascii_exits=True)
    py = re.compile(rx.to_python(slashless), re.DOTALL)
    for s in strings('ab/"\\\x01é', 3):
        assert bool(py.fullmatch(s)) == (s not in ("ab", "a")), repr(s)
    quoted = sl.complement_of_words(['a"', "b"], ascii_exits=True)  # not plain: ASCII exits
    py = re.compile(rx.to_python(quoted), re.DOTALL)
    for s in strings('ab/"\\\x01é', 3):
        assert bool(py.fullmatch(s)) == (s not in ('a"', "b")), repr(s)


def _moore_classes(dfa: am.DFA) -> int:
    """Reference: the number of states of the minimal DFA by Moore's rounds (reachable part)."""
    seen = {dfa.start}
    order = [dfa.start]
    for q in order:
        for r in dfa.trans[q]:
            if r not in seen:
                seen.add(r)
                order.append(r)
    block = {q: int(dfa.accept[q]) for q in order}
    count = len(set(block.values()))
    while True:
        keys = {q: (block[q], *(block[r] for r in dfa.trans[q])) for q in order}
        ids: dict[tuple[int, ...], int] = {}
        block = {q: ids.setdefault(k, len(ids)) for q, k in keys.items()}
        if len(ids) == count:
            return count
        count = len(ids)


def test_minimize_is_minimal_and_keeps_the_language() -> None:
    """The engine's partition refinement on random total DFAs with many equivalent states:
    Moore's count, the same strings, start 0, breadth-first numbering."""
    rng = random.Random(3)
    alpha = am.Alphabet(am.make_atoms([cs.make([(ord(c), ord(c))]) for c in "abc"]))
    k = len(alpha.atoms)
    shrunk = 0
    for _ in range(150):
        n = rng.randint(1, 25)
        trans = [[rng.randrange(min(n, 4)) for _ in range(k)] for _ in range(n)]
        for q in range(1, n):  # every state reachable from state 0
            trans[rng.randrange(q)][rng.randrange(k)] = q
        accept = [rng.random() < 0.3 for _ in range(n)]
        dfa = am.DFA(alpha, trans, accept, 0)
        m = dfa.minimize()
        assert m.n == _moore_classes(dfa) == _moore_classes(m)
        assert m.start == 0
        for s in strings("abc", 5):
            assert m.matches(s) == dfa.matches(s), s
        # breadth-first numbering from the start, over the atoms in order
        order = [0]
        for q in order:
            order.extend(r for r in dict.fromkeys(m.trans[q]) if r not in order)
        assert order == list(range(m.n))
        shrunk += m.n < n
    assert shrunk > 50


def test_minimal_partition_refuses_malformed_tables() -> None:
    with pytest.raises(ValueError, match="4-byte targets"):
        minimal_partition_of(2, b"\x00" * 12, b"\x01\x00", 0)
    with pytest.raises(ValueError, match="not one of the 2 states"):
        minimal_partition_of(1, (5).to_bytes(4, "little") * 2, b"\x01\x00", 0)
    with pytest.raises(ValueError, match="start"):
        minimal_partition_of(1, b"\x00" * 8, b"\x01\x00", 2)
    assert minimal_partition_of(1, (1).to_bytes(4, "little") * 2, b"\x00\x00", 0) == [0, 0]


def test_minimize_over_more_than_256_atoms() -> None:
    """Alphabets of the translator can exceed 256 atoms (unlike the engine's byte classes): a
    DFA that distinguishes its states only through atom 300 must not be merged, one whose atoms
    257+ lead alike must be."""
    alpha = am.Alphabet(am.make_atoms([cs.make([(0x100 + i, 0x100 + i)]) for i in range(400)]))
    k = len(alpha.atoms)
    assert k > 300
    # states 0, 1, 2: 1 and 2 differ only in where atom 300 leads (accepting 3 vs dead 4)
    trans = [[4] * k for _ in range(5)]
    trans[0][1] = 1
    trans[0][2] = 2
    trans[1][300] = 3
    trans[2][300 - 256] = 3  # the same atom modulo 256: still a different transition
    accept = [False, False, False, True, False]
    m = am.DFA(alpha, trans, accept, 0).minimize()
    assert m.n == _moore_classes(am.DFA(alpha, trans, accept, 0)) == 5
    first = alpha.atoms[1][0][0]
    assert m.matches(chr(first) + chr(alpha.atoms[300][0][0]))
    assert not m.matches(chr(first) + chr(alpha.atoms[44][0][0]))
    # now 1 and 2 agree: merged
    trans[2][300 - 256] = 4
    trans[2][300] = 3
    m = am.DFA(alpha, trans, accept, 0).minimize()
    assert m.n == 4


def test_constructions_number_their_states_breadth_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The constructions that skip minimize's renumbering (``numbered=True``) hand it tables
    numbered breadth-first from the start over the atoms in order, every state reachable: the
    numbering minimize would give them, so the minimal tables are the same."""
    original = am.DFA.minimize
    seen: list[str] = []

    def checking(self: am.DFA, numbered: bool = False) -> am.DFA:
        if numbered:
            order = [self.start]
            for q in order:
                order.extend(r for r in dict.fromkeys(self.trans[q]) if r not in order)
            assert order == list(range(self.n))
            renumbered = original(self)
            got = original(self, numbered=True)
            assert (got.trans, got.accept) == (renumbered.trans, renumbered.accept)
            seen.append("checked")
        return original(self, numbered)

    monkeypatch.setattr(am.DFA, "minimize", checking)
    first = sl.pattern_formula("^(ab|b)+c?[a-c]{0,2}$")[1]
    second = sl.pattern_formula("^[ab]*c$")[1]
    alpha = am.Alphabet.for_nodes([rx.ANYCHAR, first, second])
    a = am.DFA.from_regex(first, alpha)
    b = am.DFA.from_regex(second, alpha)
    a.product(b, "or")
    a.minus_words(["ab", "bbc", "x"])
    sl.to_dfa(sl.f_and(sl.pattern_formula("a.*b"), sl.f_not(sl.pattern_formula("^b+a"))))
    assert len(seen) >= 5
