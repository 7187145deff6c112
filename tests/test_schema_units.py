"""Unit tests of the translator's building blocks, checked against ground truth in Python.

The regexes the translator prints use syntax shared by Rust's ``regex`` crate and Python's
``re``, so most checks run without the engine: the printed regex must accept exactly the JSON
spellings of the values that satisfy the constraint (numbers), or exactly the encodings of the
strings in the language (string formulas).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

import pytest

from structout.errors import LimitExceededError, SchemaError, UnsupportedSchemaError
from structout.schema import _automata as am
from structout.schema import _charset as cs
from structout.schema import _json_text as tr
from structout.schema import _numbers as nm
from structout.schema import _regex as rx
from structout.schema import _string_formulas as sl
from structout.schema import canonical_schema_key, to_kbnf, translate

PLAIN_OR_EXP = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _spellings(v: float) -> set[str]:
    out = {json.dumps(v)}
    if isinstance(v, int):
        out |= {f"{v}.0", f"{v}.00", json.dumps(float(v)) if abs(v) < 1e15 else str(v)}
    else:
        out |= {repr(v), f"{v:.6f}", f"{v:.3e}", f"{v:.10g}", f"{v:E}"}
    return {s for s in out if PLAIN_OR_EXP.fullmatch(s)}


def _matcher(f: nm.NumFormula):  # type: ignore[no-untyped-def]
    real = nm.realize(f)
    if isinstance(real, am.DFA):
        return real.matches
    pat = re.compile(tr.to_rust(real))
    return lambda s: pat.fullmatch(s) is not None


NUMBER_CASES = [
    nm.n_iv(Fraction(0), True, None, False),
    nm.n_iv(Fraction(0), False, None, False),
    nm.n_iv(Fraction(1), True, Fraction(100), True),
    nm.n_iv(Fraction("-1.5"), False, Fraction("2.25"), True),
    nm.n_iv(None, False, Fraction(3), False),
    nm.n_iv(Fraction("0.001"), True, Fraction("0.0015"), True),
    nm.n_iv(Fraction("1e-6"), False, Fraction("1e20"), False),
    nm.n_and(("int",), nm.n_iv(Fraction(1), True, Fraction(65535), True)),
    nm.n_and(("int",), nm.n_iv(Fraction(-10), False, None, False)),
    ("int",),
    ("mult", Fraction("0.01")),
    ("mult", Fraction(7)),
    nm.n_and(("mult", Fraction("1.5")), nm.n_iv(Fraction(0), True, Fraction(100), True)),
    nm.n_not(("int",)),
    nm.n_not(nm.n_iv(Fraction(1), True, Fraction(5), False)),
    nm.n_and(("int",), nm.n_not(("mult", Fraction(3)))),
]


@pytest.mark.parametrize("formula", NUMBER_CASES, ids=[str(i) for i in range(len(NUMBER_CASES))])
def test_number_languages_are_exact(formula: nm.NumFormula) -> None:
    rnd = random.Random(7)
    match = _matcher(formula)
    pool: list[float | int] = [
        0,
        1,
        -1,
        2,
        3,
        5,
        7,
        10,
        14,
        21,
        100,
        101,
        1000,
        -1000,
        65535,
        65536,
        0.5,
        1.5,
        -0.5,
        2.25,
        2.2500001,
        1e-05,
        3e-7,
        1e16,
        1.5e20,
        -2.5e-8,
        0.1,
        0.25,
        9.99,
        10.01,
        99.5,
        0.001,
        0.0015,
        0.00150001,
        12345678901234567890,
    ]
    pool += [rnd.randint(-300, 300) for _ in range(300)]
    pool += [round(rnd.uniform(-300, 300), rnd.randint(0, 4)) for _ in range(300)]
    exp_ok = "int" not in str(formula) and "mult" not in str(formula)
    for v in pool:
        for s in _spellings(v):
            truth = nm.n_matches(formula, Fraction(Decimal(s)))
            got = match(s)
            assert not (got and not truth), f"accepts {s} outside {formula}"
            if truth and ("e" not in s.lower() or exp_ok):
                assert got, f"refuses {s} inside {formula}"


def _encodings(s: str) -> set[str]:
    return {json.dumps(s), json.dumps(s, ensure_ascii=False)}


@pytest.mark.parametrize(
    ("pattern", "samples"),
    [
        ("^[a-z]+$", ["abc", "", "aB", "z"]),
        ("a+", ["xxaayy", "b", "a", "ba"]),
        ("^\\d{3}-\\d{4}$", ["123-4567", "12-4567", "١٢٣-4567"]),
        ("^(foo|bar)$", ["foo", "bar", "foobar", "fo"]),
        ("\\p{Letter}cole", ["l'école", "l'ecole", "L'ÉCOLE", "1cole"]),
        ("^\\S$", [" ", "a", "é", "\u00a0", "\n"]),
        ("^.$", ["\n", "\r", "a", "😀", "\u2028"]),
        ("^(?!^[-+.]*$)[+-]?0*\\d*\\.?\\d*$", ["1.5", "+.", "", "-", "007", ".5", "a"]),
        ("^\\cC$", ["\x03", "cC"]),
        ("[^\\]x]", ["]", "x", "y", "]y"]),
    ],
)
def test_patterns_follow_ecma_semantics(pattern: str, samples: list[str]) -> None:
    f = sl.pattern_formula(pattern)
    real = sl.realize(f)
    assert not isinstance(real, am.DFA)
    text = re.compile(tr.to_rust(tr.json_string_regex(real)))
    py = re.compile(pattern.replace("\\p{Letter}", "[^\\W\\d_]").replace("\\cC", "\\x03"))
    for s in samples:
        truth = py.search(s) is not None
        if pattern.startswith("^.$"):
            truth = len(s) == 1 and s not in "\n\r\u2028\u2029"
        if pattern == "^\\S$":
            truth = len(s) == 1 and not s.isspace()
        if pattern.startswith("^(?!"):
            truth = re.fullmatch(r"[+-]?0*\d*\.?\d*", s) is not None and not re.fullmatch(
                r"[-+.]*", s
            )
        if pattern == "^\\d{3}-\\d{4}$":
            truth = re.fullmatch(r"[0-9]{3}-[0-9]{4}", s) is not None
        assert sl.matches(f, s) == truth, (pattern, s)
        for enc in _encodings(s):
            accepted = text.fullmatch(enc) is not None
            assert not (accepted and not truth), (pattern, enc)
        # raw UTF-8 spellings are always accepted
        assert (text.fullmatch(json.dumps(s, ensure_ascii=False)) is not None) == truth, (
            pattern,
            s,
        )


@pytest.mark.parametrize(
    "pattern",
    ["(a)\\1", "a(?=b)", "(?<=a)b", "\\bword\\b"],
)
def test_inexpressible_patterns_are_reported(pattern: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        to_kbnf({"type": "string", "pattern": pattern})
    assert info.value.keyword == "pattern"


def test_anchors_in_the_middle_never_match_there() -> None:
    f = sl.pattern_formula("/^[0-9]{4}$/")  # a character before '^': nothing matches
    assert sl.is_empty(f)
    g = sl.pattern_formula("^(a|$)b")  # '$' in the middle: only the 'a' branch remains
    assert sl.matches(g, "ab") and not sl.matches(g, "b")


def test_invalid_pattern_is_a_schema_error() -> None:
    with pytest.raises(SchemaError):
        to_kbnf({"type": "string", "pattern": "(unclosed"})


def test_length_counts_code_points_and_escapes() -> None:
    f = sl.f_len(2, 3)
    pat = re.compile(tr.to_rust(tr.json_string_regex(sl.realize(f))))  # type: ignore[arg-type]
    assert pat.fullmatch('"ab"')
    assert pat.fullmatch('"\\n\\u00e9x"')  # escapes count as one code point each
    assert pat.fullmatch('"\\ud83d\\ude00a"')  # a surrogate pair is one code point
    assert pat.fullmatch('"😀😀😀"')
    assert not pat.fullmatch('"a"')
    assert not pat.fullmatch('"abcd"')
    assert not pat.fullmatch('"\\ud83d"')  # lone surrogate escapes are refused


def test_complement_of_words_is_exact() -> None:
    words = ["name", "nam", "age", "", "a\u00e9"]
    f = sl.f_not(sl.f_lit(*words))
    pat = re.compile(tr.to_rust(tr.json_string_regex(sl.realize(f))))  # type: ignore[arg-type]
    rnd = random.Random(3)
    probes = words + ["na", "ages", "x", "n", "namex", "ag", "a", "a\u00e9\u00e9", "A"]
    probes += [
        "".join(rnd.choice("name\u00e9") for _ in range(rnd.randint(0, 5))) for _ in range(200)
    ]
    for s in probes:
        for enc in _encodings(s):
            assert (pat.fullmatch(enc) is not None) == (s not in words), repr(enc)


def test_automaton_combination_agrees_with_matching() -> None:
    f = sl.f_and(sl.pattern_formula("^[a-c]+$"), sl.f_not(sl.pattern_formula("ab")), sl.f_len(2, 5))
    dfa = sl.to_dfa(f)
    rnd = random.Random(5)
    for _ in range(500):
        s = "".join(rnd.choice("abcd") for _ in range(rnd.randint(0, 7)))
        want = re.fullmatch("[a-c]+", s) is not None and "ab" not in s and 2 <= len(s) <= 5
        assert dfa.matches(s) == want == sl.matches(f, s), s
    assert not sl.is_empty(f)
    assert sl.is_empty(sl.f_and(sl.pattern_formula("^a+$"), sl.pattern_formula("^b")))


def test_hex_ranges() -> None:
    node = tr.hex_range(0x00E9, 0x0FFF)
    pat = re.compile(tr.to_rust(node))
    for v in range(0, 0x2000, 7):
        for text in (f"{v:04x}", f"{v:04X}"):
            assert (pat.fullmatch(text) is not None) == (0xE9 <= v <= 0xFFF), text


def test_literals_in_kbnf_are_escaped() -> None:
    text = to_kbnf({"const": {"it's": "a\\b\n\u00e9"}})
    assert "'\"it\\'s\"'" in text


def test_layout_options_validate() -> None:
    with pytest.raises(ValueError):
        to_kbnf(True, whitespace="loose")
    with pytest.raises(ValueError):
        to_kbnf(True, indent=-1)
    flexible = to_kbnf({"type": "array"}, whitespace="flexible", max_whitespace=5)
    assert "{1,5}" in flexible


def test_schema_errors_have_pointers() -> None:
    with pytest.raises(SchemaError) as info:
        to_kbnf({"properties": {"a": {"$ref": "#/definitions/missing"}}})
    assert "/definitions/missing" in str(info.value)
    with pytest.raises(SchemaError) as info2:
        to_kbnf({"properties": {"a": {"minLength": -1}}})
    assert info2.value.pointer.startswith("/properties/a")
    with pytest.raises(SchemaError):
        to_kbnf({"type": "strin"})


def test_limits_are_enforced() -> None:
    nested: dict = {"type": "string"}
    for _ in range(60):
        nested = {"type": "array", "items": nested}
    with pytest.raises(LimitExceededError):
        to_kbnf(nested, max_schema_depth=30)
    with pytest.raises(LimitExceededError):
        to_kbnf({"properties": {f"p{i}": {"type": "string"} for i in range(50)}}, max_subschemas=20)


def test_lenient_mode_warns_and_approximates() -> None:
    schema = {"type": "array", "contains": {"type": "object"}, "uniqueItems": True}
    with pytest.raises(UnsupportedSchemaError) as info:
        to_kbnf(schema)
    assert info.value.keyword == "uniqueItems"
    from structout.schema import SchemaApproximationWarning

    with pytest.warns(SchemaApproximationWarning):
        to_kbnf({"type": "string", "pattern": "(a)\\1"}, lenient=True)


def test_annotations_are_ignored() -> None:
    plain = to_kbnf({"type": "integer"})
    annotated = to_kbnf(
        {
            "type": "integer",
            "title": "t",
            "description": "d",
            "examples": [1],
            "default": 3,
            "$comment": "c",
            "deprecated": True,
            "x-custom": {"pattern": "(a)\\1"},
        }
    )
    assert plain == annotated


def test_canonical_schema_key_is_stable_and_sensitive() -> None:
    a = canonical_schema_key({"type": "object", "properties": {"a": {"type": "integer"}}})
    b = canonical_schema_key({"properties": {"a": {"type": "integer"}}, "type": "object"})
    c = canonical_schema_key({"type": "object", "properties": {"a": {"type": "integer"}}}, indent=2)
    d = canonical_schema_key({"type": "object", "properties": {"a": {"type": "number"}}})
    e = canonical_schema_key({"type": "object", "properties": {"a": {"type": "integer"}}})
    # Key order is part of the key: the translation follows it.
    assert a == e
    assert len({a, b, c, d}) == 4
    assert canonical_schema_key({"type": "integer"}, whitespace="compact") == canonical_schema_key(
        {"type": "integer"}
    )


def test_serializer_orders_keys_like_the_grammar() -> None:
    t = translate(
        {
            "type": "object",
            "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
            "required": ["a"],
        }
    )
    assert t.dumps({"a": 1, "zz": None, "b": 2}) == '{"b": 2, "a": 1, "zz": null}'
    assert translate(True, indent=2).dumps({"x": [1]}) == '{\n  "x": [\n    1\n  ]\n}'


# --- differential tests against Python's re on random patterns --------------------------------

from hypothesis import given, settings
from hypothesis import strategies as st

_ATOMS = ["a", "b", "c", ".", "[ab]", "[^a]", "[a-c]", "\\d", "\\w", "\\s", "x", "0", "-"]


@st.composite
def _patterns(draw: st.DrawFn, depth: int = 0) -> str:
    n = draw(st.integers(1, 3))
    parts = []
    for _ in range(n):
        if depth < 2 and draw(st.booleans()) and draw(st.booleans()):
            inner = "|".join(draw(st.lists(_patterns(depth + 1), min_size=1, max_size=2)))
            atom = f"({inner})" if draw(st.booleans()) else f"(?:{inner})"
        else:
            atom = draw(st.sampled_from(_ATOMS))
        q = draw(st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}"]))
        parts.append(atom + q)
    body = "".join(parts)
    if depth == 0:
        body = draw(st.sampled_from(["", "^"])) + body + draw(st.sampled_from(["", "$"]))
    return body


_TEXTS = st.text(alphabet="abcx0- \t", max_size=9)


@settings(max_examples=300, deadline=None)
@given(
    _patterns(),
    st.lists(_TEXTS, min_size=5, max_size=12),
    st.integers(0, 4),
    st.one_of(st.none(), st.integers(0, 8)),
)
def test_random_patterns_match_python_re(
    pattern: str, texts: list[str], min_len: int, max_len: int | None
) -> None:
    py = re.compile(pattern, re.ASCII)
    f = sl.pattern_formula(pattern)
    for s in texts:
        assert sl.matches(f, s) == (py.search(s) is not None), (pattern, s)
    try:
        real = sl.realize(f)
    except am.AutomatonTooLarge:
        return
    enc = (
        re.compile(tr.to_rust(tr.json_string_regex(real))) if not isinstance(real, am.DFA) else None
    )
    for s in texts:
        truth = py.search(s) is not None
        if enc is not None:
            assert (enc.fullmatch(json.dumps(s)) is not None) == truth, (pattern, s)
        else:
            assert real.matches(s) == truth, (pattern, s)
    # with length bounds (algebraic restriction or automata)
    g = sl.f_and(f, sl.f_len(min_len, max_len))
    try:
        rg = sl.realize(g)
    except am.AutomatonTooLarge:
        return  # the translator reports such combinations as unsupported (never inexact)
    for s in texts:
        truth = py.search(s) is not None and min_len <= len(s) <= (
            max_len if max_len is not None else 99
        )
        if isinstance(rg, am.DFA):
            assert rg.matches(s) == truth, (pattern, min_len, max_len, s)
        else:
            got = re.compile(tr.to_rust(rg)).fullmatch(s) is not None
            assert got == truth, (pattern, min_len, max_len, s)


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        (
            "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)$",
            ["SGVsbG8gd29ybGQh", "abcd", "abc="],
            ["InvalidBase64", "abcde", "ab="],
        ),
        ("^(ab){2,3}$", ["abab", "ababab"], ["ab", "abababab", "aba"]),
        ("^(a{2,3}){2}$", ["aaaa", "aaaaa", "aaaaaa"], ["aaa", "aaaaaaa"]),
    ],
)
def test_nested_counted_repetitions(pattern: str, yes: list[str], no: list[str]) -> None:
    from structout._engine import compile_grammar

    g = compile_grammar(to_kbnf({"type": "string", "pattern": pattern}))
    for s in yes:
        assert g.accepts(json.dumps(s).encode()), s
    for s in no:
        assert not g.accepts(json.dumps(s).encode()), s


def test_additional_keys_exclude_named_keys_exactly() -> None:
    from structout._engine import compile_grammar

    schema = {"type": "object", "properties": {"name": {"type": "integer"}, "nam": {}}}
    g = compile_grammar(to_kbnf(schema))
    assert g.accepts(b'{"name": 1}')
    assert not g.accepts(b'{"name": "x"}')
    for key in ["na", "names", "n\u00e9", "name\u201d: ", "x", "", "NAME", "nam\n"]:
        doc = json.dumps({"name": 1, key: "x"}, ensure_ascii=False).encode()
        assert g.accepts(doc), key
    # a named key cannot come back as an additional key with another value
    assert not g.accepts(b'{"nam": 1, "name": "x"}')
    assert not g.accepts(b'{"name": 1, "name": "x"}')


def test_integers_are_plain_and_their_complements_exact() -> None:
    from structout._engine import compile_grammar

    d4, d7, d2020 = (
        f"http://json-schema.org/{d}/schema#" for d in ("draft-04", "draft-07", "draft/2020-12")
    )
    for draft in (d4, d7, d2020):
        g = compile_grammar(to_kbnf({"$schema": draft, "type": "integer"}))
        assert g.accepts(b"5") and g.accepts(b"-12") and g.accepts(b"0")
        assert not g.accepts(b"5.0") and not g.accepts(b"5e0") and not g.accepts(b"-0.0")
    # draft-04: 5.0 is not an integer, so `not integer` admits it; later drafts: 5.0 is an
    # integer (only its spelling is left out of `integer`), so `not integer` must refuse it
    g4 = compile_grammar(to_kbnf({"$schema": d4, "type": "number", "not": {"type": "integer"}}))
    assert g4.accepts(b"5.0") and g4.accepts(b"5.5") and not g4.accepts(b"5")
    for draft in (d7, d2020):
        g = compile_grammar(
            to_kbnf({"$schema": draft, "type": "number", "not": {"type": "integer"}})
        )
        assert g.accepts(b"5.5") and not g.accepts(b"5.0") and not g.accepts(b"5"), draft
    # ranges and multipleOf keep their exact bounds on the plain spellings
    g = compile_grammar(to_kbnf({"type": "integer", "minimum": -3, "exclusiveMaximum": 10}))
    assert [v for v in range(-6, 14) if g.accepts(str(v).encode())] == list(range(-3, 10))
    assert not g.accepts(b"5.0")
    g = compile_grammar(to_kbnf({"type": "integer", "multipleOf": 4, "maximum": 20}))
    assert [v for v in range(-9, 30) if g.accepts(str(v).encode())] == list(range(-8, 21, 4))
    assert not g.accepts(b"8.0") and not g.accepts(b"8.00")
    g = compile_grammar(to_kbnf({"type": "integer", "multipleOf": 0.5}))
    assert g.accepts(b"3") and not g.accepts(b"3.0") and not g.accepts(b"3.5")


def test_shrink_to_is_a_length_bounded_subset() -> None:
    from structout.schema import _formats as fm

    rnd = random.Random(11)
    sources = [fm.format_formula("email"), sl.pattern_formula(r"^(?:\S+\s+){0,99}\S+$")]
    for source in (f[1] for f in sources if f is not None):
        for budget in (10, 40, 120):
            shrunk = sl.shrink_to(source, budget)
            _lo, hi = rx.length_range(shrunk)
            assert hi is not None and hi <= budget
            dfa = sl.to_dfa(sl.f_re(shrunk))
            # walk random accepted strings of the shrunk language and check the original
            original = sl.f_re(source)
            for _ in range(60):
                q, text = dfa.start, []
                _live, edges = dfa.live_edges()
                for _step in range(budget + 1):
                    if dfa.accept[q] and (not edges[q] or rnd.random() < 0.2):
                        break
                    r, chars = rnd.choice(list(edges[q].items()))
                    lo_c, hi_c = rnd.choice(chars)
                    text.append(chr(rnd.randint(lo_c, min(hi_c, lo_c + 200))))
                    q = r
                if dfa.accept[q]:
                    s = "".join(text)
                    assert len(s) <= budget and sl.matches(original, s), s


def _length_cases(rnd: random.Random) -> list[str]:
    """Strings near typical length bounds: emails, hostnames, words, with multi-byte characters,
    quotes and backslashes (escaped in JSON, one character each)."""
    out = []
    for _ in range(300):
        k, m = (
            (rnd.randint(0, 12), rnd.randint(0, 12))
            if rnd.random() < 0.5
            else (
                rnd.randint(0, 70),
                rnd.randint(0, 70),
            )
        )
        odd = rnd.random() < 0.2  # quotes, backslashes, dots, spaces and 'é' in the local part
        local = "".join(rnd.choice('ab.é"\\- ' if odd else "ab-+1") for _ in range(k))
        label = "".join(rnd.choice("ab-1") for _ in range(m))
        out += [f"{local}@{label}.io", f"{label}.{label[: m // 2]}", local, "a" * k]
    out += ["", "a@b.co", "x" * 63 + ".com", "john.doe@example.com", "example.com"]
    return out


@pytest.mark.parametrize(
    ("base", "lo", "hi"),
    [
        ({"format": "email"}, 8, 20),
        ({"format": "email"}, 0, 255),
        ({"format": "hostname"}, 3, 30),
        ({"format": "hostname"}, 0, 128),
        ({"pattern": "^[^@]+@[a-z0-9.-]+$"}, 5, 9),
        ({"pattern": '^(?:[a-zé"\\\\]+ ?)+$'}, 2, 40),
    ],
)
def test_length_bounds_on_formats_and_patterns_are_exact(
    base: dict[str, object], lo: int, hi: int
) -> None:
    """``maxLength``/``minLength`` combined with a format or pattern: the grammar accepts exactly
    the strings the unbounded grammar accepts whose length is in range (no subset, however large
    the product of the automaton and the bound)."""
    from structout._engine import compile_grammar

    bounded = translate({"type": "string", **base, "minLength": lo, "maxLength": hi})
    free = translate({"type": "string", **base})
    g_bounded, g_free = compile_grammar(bounded.kbnf), compile_grammar(free.kbnf)
    accepted = 0
    for s in _length_cases(random.Random(lo * 1000 + hi)):
        doc = bounded.dumps(s).encode()
        want = g_free.accepts(doc) and lo <= len(s) <= hi
        assert g_bounded.accepts(doc) == want, (base, lo, hi, s)
        accepted += want
    assert accepted > 10


@pytest.mark.parametrize(
    ("schema", "make", "lo", "hi"),
    [
        ({"type": "string", "maxLength": 32767}, lambda n: ('é\n"a' * n)[:n], 0, 32767),
        ({"type": "string", "minLength": 2, "maxLength": 5000}, lambda n: "😀" * n, 2, 5000),
        (
            {"type": "string", "pattern": "^ab[a-z]{0,5000}c$"},
            lambda n: "ab" + "x" * (n - 3) + "c",
            3,
            5003,
        ),
    ],
)
def test_long_counted_strings_are_one_json_len_terminal(
    schema: dict[str, object], make: Callable[[int], str], lo: int, hi: int
) -> None:
    """Strings of one character class with a large count: one ``json_len!`` terminal (not an
    Earley set per character), exact at the bounds; escapes and astral characters count one."""
    from structout._engine import compile_grammar

    t = translate(schema)
    assert "json_len!(" in t.kbnf, t.kbnf
    g = compile_grammar(t.kbnf)
    for n in {lo, lo + 1, hi - 1, hi}:
        assert g.accepts(t.dumps(make(n)).encode()), n
    for n in (lo - 1, hi + 1):
        if n >= 0 and len(make(n)) == n:
            assert not g.accepts(t.dumps(make(n)).encode()), n


def test_anchor_free_alternations_are_not_distributed() -> None:
    """``^(A|B)X$`` stays one variant (splitting copied ``X`` into every branch: the RFC 3339
    ``date-time`` format was 4x larger); alternatives holding anchors are still split."""
    assert len(rx.search_variants(rx.parse_ecma("^(?:a|b|cd)x+$"))) == 1
    assert len(rx.search_variants(rx.parse_ecma("(?:^a|b)x"))) == 2
    pat = re.compile(tr.to_rust(rx.compile_pattern("(?:^a|b)x")))
    for s, ok in [("ax", True), ("zbx", True), ("zax", False), ("bxz", True), ("x", False)]:
        assert (pat.fullmatch(s) is not None) == ok, s
    assert len(to_kbnf({"type": "string", "format": "date-time"})) < 6000


def test_terminal_text_cache_is_bounded() -> None:
    from structout.lru import LRU
    from structout.schema._emit.text_cache import TERMINAL_TEXTS

    assert isinstance(TERMINAL_TEXTS, LRU) and TERMINAL_TEXTS.max_weight is not None
    cache: LRU[tuple[rx.Node, bool], str] = LRU(3, weigh=len, max_weight=80)
    for i in range(10):
        cache.put((rx.lit(f"k{i}"), False), "x" * 9)
        assert len(cache) <= 3 and cache.weight <= 80
    assert cache.get((rx.lit("k9"), False)) == "x" * 9
    assert cache.get((rx.lit("k0"), False)) is None
    for i in range(3):
        cache.put((rx.lit(f"w{i}"), False), "y" * 30)  # 90 > 80: the oldest leaves
        assert cache.weight <= 80
    assert cache.get((rx.lit("w0"), False)) is None and len(cache) == 2
    cache.put((rx.lit("big"), False), "z" * 81)  # heavier than the whole budget: not kept
    assert cache.get((rx.lit("big"), False)) is None


@pytest.mark.parametrize(
    ("written", "meant"),
    [("strin", "string"), ("integr", "integer"), ("float", "number"), ("Bool", "boolean")],
)
def test_unknown_type_suggests_the_name_meant(written: str, meant: str) -> None:
    with pytest.raises(SchemaError) as info:
        to_kbnf({"properties": {"a": {"type": written}}})
    message = str(info.value)
    assert f"unknown type {written!r}; did you mean {meant!r}?" in message
    assert "valid names: array, boolean, integer, null, number, object, string" in message
    assert info.value.pointer == "/properties/a/type"


def test_unknown_type_without_a_close_name_lists_the_valid_ones() -> None:
    with pytest.raises(SchemaError) as info:
        to_kbnf({"type": ["string", "xyz"]})
    assert "did you mean" not in str(info.value)
    assert "valid names: array, boolean" in str(info.value)


def test_plain_string_literals_is_the_general_path_in_one_walk() -> None:
    """The one-walk printing of strings JSON spells one way gives exactly the general path's
    text and size (encode, measure, print), and declines every other language."""
    from structout.schema._emit.regex_rules import metrics

    rng = random.Random(11)
    alphabet = "abcxy _-.+[]{}()|?*^$#&~09AZ" + '/"\\é\n\u20ac'
    declined = 0
    for _ in range(600):
        words = list(
            dict.fromkeys(
                "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
                for _ in range(rng.randint(1, 7))
            )
        )
        real = sl.realize(sl.f_lit(*words), key_mode=False, engine_length=True)
        encoded = tr.json_string_regex(real)
        expected = (tr.to_rust(encoded), *metrics(encoded))
        got = tr.plain_string_literals(real)
        plain = all(" " <= c <= "~" and c not in '"\\/' for w in words for c in w) and any(words)
        if got is None:
            declined += 1
            assert not plain or "" in words, words
        else:
            assert plain, words
            assert got == expected, words
            # The text is a regex for exactly the quoted words.
            pattern = re.compile(got[0].replace("\\x22", '"'))
            assert all(pattern.fullmatch(json.dumps(w)) for w in words), words
    assert 0 < declined < 600


def test_recent_prints_are_reused_only_for_the_same_ast_object() -> None:
    """``to_rust`` reuses the text of an AST printed recently only for that very object: an
    entry under the same id but for another object (an id reused after the first was freed) is
    printed afresh."""
    a = rx.parse_ecma("[a-c]+x(?:yz){2,3}")
    b = rx.parse_ecma("q|[0-9]{4}")
    first = tr.to_rust(a)
    assert tr.to_rust(a) == first
    assert tr._RECENT_PRINTS.get(id(a)) == (a, first)
    tr._RECENT_PRINTS.put(id(b), (a, first))  # as if `b` took the id of a freed `a`
    assert tr.to_rust(b) == tr._print(b) != first
    assert re.fullmatch(tr.to_rust(b), "2024") and not re.fullmatch(tr.to_rust(b), "qq")


def test_factor_groups_equal_heads_interned_or_not() -> None:
    """Equal first parts share a branch whether they are the interned one-character nodes of
    ``rx.lit`` or equal nodes built apart; branches keep the order of their first word; the
    last alternation factored is remembered only for that very object."""
    built_apart = ("cat", (("set", ((ord("a"), ord("a")),)), ("set", ((ord("z"), ord("z")),))))
    digits = rx.rep(rx.cset(cs.make([(ord("0"), ord("9"))])), 1, None)
    words = (rx.lit("ab"), rx.lit("qr"), built_apart, rx.lit("a"), rx.cat(rx.lit("a"), digits))
    node = ("alt", words)
    got = tr.factor(node)
    branch = rx.cat(rx.lit("a"), rx.alt(rx.lit("b"), rx.lit("z"), digits, rx.EPS))
    assert got == rx.alt(branch, rx.lit("qr"))
    assert tr.factor(node) is got
    equal = ("alt", words)
    assert equal == node and equal is not node
    again = tr.factor(equal)
    assert again == got and again is not got
    assert re.fullmatch(tr.to_rust(got), "a7") and not re.fullmatch(tr.to_rust(got), "ba")


def test_matches_refuses_words_without_the_literal_prefix_without_compiling() -> None:
    pattern = sl.pattern_formula("^(name_[a-z]{2}(-[A-Z]{2})?)$")
    sl._py_regex.cache_clear()
    assert not sl.matches(pattern, "title") and not sl.matches(pattern, "name")
    assert sl._py_regex.cache_info().currsize == 0  # refused by the prefix `name_` alone
    assert sl.matches(pattern, "name_en-GB") and not sl.matches(pattern, "name_e")
    assert sl._py_regex.cache_info().currsize == 1
    for f, word in [
        (sl.f_lit("a", "ab"), "a"),
        (sl.f_lit("a", "ab"), "b"),
        (sl.pattern_formula("x"), "yyx"),
        (sl.f_re(rx.lit("abc")), "abc"),
        (sl.f_re(rx.lit("abc")), "ab"),
    ]:
        assert sl.matches(f, word) == bool(re.fullmatch(rx.to_python(f[1]), word, re.DOTALL))


def test_dfa_rules_render_as_add_rule_does_and_share_terminals() -> None:
    """The rules of a DFA are what ``add_rule`` renders for their alternatives; another DFA of
    the translation uses the terminals made for the same characters, in the same spelling
    (JSON string bodies or plain characters)."""
    from structout.schema._emit.regex_rules import RegexRules
    from structout.schema._emit.rules import render_rule

    rules = RegexRules()
    first = sl.to_dfa(sl.pattern_formula("^(ab|b)+[^b]?$"))
    assert rules.dfa_rules(first, True, "key") is not None
    for name, texts in rules.rules.items():
        if name.startswith("key_s"):
            alts = [text.split(" ") for text in texts]
            assert render_rule(alts) == (texts, rules.refs[name]), name

    def terminals(prefix: str) -> set[str]:
        return {
            rules.rules[r][0]
            for name in rules.rules
            if name.startswith(prefix)
            for refs in rules.refs[name]
            for r in refs
            if rules.rules[r][0].startswith('#"')
        }

    count = len(rules.rules)
    assert rules.dfa_rules(first.minus_words(["b"]), True, "other") is not None
    made = {n for n in rules.rules if n.startswith("other")}
    assert len(rules.rules) - count == len(made)  # (no terminal of its own)
    assert terminals("other_s") <= terminals("key_s")
    assert rules.dfa_rules(first, False, "raw") is not None
    edges = first.live_edges()[1]
    plain = {f'#"{tr.to_rust(rx.cset(c))}"' for row in edges for c in row.values()}
    assert terminals("raw_s") == plain != terminals("key_s")


_CYCLE_FREE_SCHEMAS = [
    {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "next": {"$ref": "#"}},
        "patternProperties": {"^name_[a-z]{2}(-[A-Z]{2})?$": {"type": "string"}},
        "additionalProperties": {"type": "string", "format": "date-time"},
    },
    {"type": "array", "items": {"enum": [f"w{i}" for i in range(300)]}, "uniqueItems": True},
    {"anyOf": [{"type": "string", "pattern": "^(ab|b)+c?$"}, {"type": "number", "minimum": 3}]},
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "propertyNames": {"pattern": "^[a-c]+$"},
        "minProperties": 1,
    },
]


@pytest.mark.parametrize("schema", _CYCLE_FREE_SCHEMAS)
def test_translation_leaves_no_reference_cycles(schema: dict[str, object]) -> None:
    """Everything a translation allocates is freed by reference counting (no recursive
    closures, no object graph pointing back at itself), so the garbage collector, paused during
    the translation, has nothing of it to walk afterwards; and the pause ends with the call."""
    import gc

    to_kbnf(json.loads(json.dumps(schema)))  # (process-wide memo tables filled first)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        text = translate(json.loads(json.dumps(schema))).kbnf
        assert not gc.isenabled()  # (a pause inside a pause leaves the collector off)
        assert text and gc.collect() == 0
    finally:
        if was:
            gc.enable()
    assert gc.isenabled() == was
    to_kbnf(json.loads(json.dumps(schema)), whitespace="flexible")
    assert gc.isenabled() == was


def test_translation_resumes_the_collector_after_an_error() -> None:
    import gc

    assert gc.isenabled()
    with pytest.raises(UnsupportedSchemaError):
        to_kbnf({"type": "string", "pattern": "(a)\\1"})
    assert gc.isenabled()


def test_prune_drops_unproductive_alternatives_and_unreachable_rules() -> None:
    from structout.schema._emit.rules import RuleSet

    rules = RuleSet()
    rules.add_rule("start", [["a"], ["b"], ["dead", "b"]])
    rules.add_rule("a", [["'x'"], ["dead"], ["a", "'w'"]])
    rules.add_rule("b", [["'y'"], ["a", "b"]])
    rules.add_rule("dead", [["dead", "'z'"]])  # (derives no text: only through itself)
    rules.add_rule("unused", [["'q'"]])
    b_texts = rules.rules["b"]
    assert rules.render_rules(None) == "start ::= a | b;\na ::= 'x' | a 'w';\nb ::= 'y' | a b;\n"
    assert rules.rules["b"] == b_texts and rules.refs["a"] == [[], ["a"]]
