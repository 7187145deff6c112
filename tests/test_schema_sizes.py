"""Compiled grammars stay proportional to the schema (issue 13), and bounded strings stay exact.

A string with ``maxLength``/``minLength`` is one ``json_len!`` terminal that the engine tabulates
only while small and otherwise counts, so neither the bound nor the number of fields that share it
multiplies the grammar's size. Exactness is checked against ``json.loads`` + ``jsonschema`` on every
string over a small alphabet, each in several JSON spellings.
"""

from __future__ import annotations

import itertools
import json
import warnings
from typing import Any

import jsonschema
import pytest

from structout._engine import compile_grammar
from structout.schema import to_kbnf


def _fields(n_fields: int, max_length: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            f"field_{i}": {"type": ["string", "null"], "maxLength": max_length}
            for i in range(n_fields)
        },
        "additionalProperties": False,
    }


def test_bounded_strings_do_not_multiply_the_grammar() -> None:
    # Before: 30 fields with maxLength 200 compiled to ~100 MB of tables (the bounded string
    # tabulated, then copied into each "key": value terminal and into their union).
    bounds = (3, 8, 9, 10, 16, 50, 200, 5000)
    sizes = {n: compile_grammar(to_kbnf(_fields(30, n))).memory_usage for n in bounds}
    assert max(sizes.values()) < 256 << 10, sizes
    # Twice the fields: about twice the grammar, not more.
    assert compile_grammar(to_kbnf(_fields(60, 200))).memory_usage <= 3 * sizes[200]


_ALPHABET = ["a", "é", "\n", '"', "😊"]


def _spellings(value: str) -> list[bytes]:
    """json.dumps' two spellings (raw UTF-8 and ASCII escapes) of a string."""
    return [json.dumps(value, ensure_ascii=a).encode("utf-8") for a in (False, True)]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "maxLength": 3},
        {"type": "string", "minLength": 2, "maxLength": 4},
        {"type": "string", "minLength": 3},
        {"type": "string", "maxLength": 0},
        {"type": "string", "pattern": "^a", "maxLength": 3},
    ],
)
def test_short_length_bounded_strings_are_exact(schema: dict[str, Any]) -> None:
    g = compile_grammar(to_kbnf(schema))
    validator = jsonschema.Draft202012Validator(schema)
    checked = 0
    for n in range(6):
        for chars in itertools.product(_ALPHABET, repeat=n):
            value = "".join(chars)
            want = validator.is_valid(value)
            for doc in _spellings(value):
                assert json.loads(doc) == value
                assert g.accepts(doc) == want, (schema, doc, want)
                checked += 1
    assert checked == 2 * sum(len(_ALPHABET) ** n for n in range(6))


# Strings around and above SHORT_BOUND (the json_len! route), with fixed prefixes and suffixes,
# and object keys with a length bound: chosen values at and around each bound.
_VALUES = [
    "a" * n + tail
    for n in range(6, 15)
    # (no value ends in a newline: Python's `$`, which jsonschema uses, matches before one)
    for tail in ("", "é", "😊", '"', "\nz", "z", "é😊")
] + ["", "z", "az", "a" * 40]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "maxLength": 10},
        {"type": "string", "minLength": 9, "maxLength": 12},
        {"type": "string", "pattern": "^a.{0,12}z$"},
        {"type": "string", "pattern": "^aa[a-zé]{6,11}$"},
    ],
)
def test_long_length_bounded_strings_are_exact(schema: dict[str, Any]) -> None:
    g = compile_grammar(to_kbnf(schema))
    assert "json_len!" in to_kbnf(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for value in _VALUES:
        want = validator.is_valid(value)
        for doc in _spellings(value):
            assert g.accepts(doc) == want, (schema, doc, want)


def test_bounded_keys_are_exact() -> None:
    schema = {"type": "object", "propertyNames": {"maxLength": 10}, "maxProperties": 1}
    g = compile_grammar(to_kbnf(schema))
    validator = jsonschema.Draft202012Validator(schema)
    for key in _VALUES:
        want = validator.is_valid({key: 1})
        for a in (False, True):
            doc = json.dumps({key: 1}, ensure_ascii=a, separators=(", ", ": ")).encode("utf-8")
            assert g.accepts(doc) == want, (doc, want)


@pytest.mark.parametrize("bound", [65_536, 1 << 20])
def test_format_with_a_bound_too_large_to_unroll_is_exact(bound: int) -> None:
    # Deciding emptiness of `uri ∧ length <= bound` by unrolling the bound exceeded the
    # translator's automaton budget; that sent the schema to the length-split subset (a
    # SchemaSubsetWarning, and KBNF repetitions whose masks took ~20 ms each). The engine's
    # `json_len!` counts instead.
    schema = {"type": "string", "format": "uri", "minLength": 1, "maxLength": bound}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kbnf = to_kbnf(schema)
    assert "json_len!" in kbnf
    g = compile_grammar(kbnf)
    long_path = "https://example.com/" + "a" * 70_000
    for value in ["http://proxy.example.com", "urn:x", long_path[: bound - 1], long_path]:
        valid = len(value) <= bound
        assert g.accepts(json.dumps(value).encode()) == valid, value[:40]
    assert not g.accepts(b'"no scheme"')


def test_shortest_string_length_against_enumeration() -> None:
    # `_length_bounded` skips its emptiness check when the shortest string fits the bound; a
    # length that is too small (an empty branch counted, a repetition misread) would let an empty
    # language through. Compared with the strings of finite nodes, and known infinite ones.
    from structout.schema import _regex as rx
    from structout.schema._string_formulas import _shortest

    a, b = rx.lit("a"), rx.lit("bc")
    finite = [
        rx.alt(rx.cat(a, a), rx.rep(a, 4, 4)),
        rx.rep(rx.alt(a, b), 2, 3),
        rx.cat(rx.rep(a, 0, 2), b),
        rx.alt(rx.cat(rx.lit("x"), rx.NONE), b),
        rx.cat(a, rx.rep(b, 1, 2), rx.alt(rx.EPS, a)),
    ]
    for node in finite:
        words = rx.finite_strings(node, 1000)
        assert words is not None
        assert _shortest(node) == (min(map(len, words)) if words else None), node
    assert _shortest(rx.NONE) is None
    assert _shortest(rx.cat(a, rx.NONE)) is None
    assert _shortest(rx.cat(rx.rep(a, 3, None), b)) == 5
    assert _shortest(rx.rep(rx.NONE, 0, None)) == 0


def test_length_bounds_that_no_string_of_the_pattern_meets_are_empty() -> None:
    # Shortest string "aa" (2) below the bound, and "aaaa" (4) above it: empty. The quick
    # "shortest string fits" test must not claim otherwise.
    from structout.errors import UnsupportedSchemaError

    empty = {"type": "string", "pattern": "^(aa|aaaa)$", "minLength": 3, "maxLength": 3}
    with pytest.raises(UnsupportedSchemaError):
        to_kbnf(empty)
    g = compile_grammar(to_kbnf({"anyOf": [empty, {"type": "integer"}]}))
    assert g.accepts(b"1")
    assert not any(g.accepts(json.dumps(s).encode()) for s in ["aa", "aaa", "aaaa"])
    fits = {"type": "string", "pattern": "^(aa|aaaa)$", "minLength": 2, "maxLength": 3}
    g = compile_grammar(to_kbnf(fits))
    assert [g.accepts(json.dumps(s).encode()) for s in ["aa", "aaaa"]] == [True, False]


def test_finite_strings_stops_before_building_past_its_limit() -> None:
    # `[0-9A-Za-z_-]{1,255}` (a key pattern) is finite but has far more strings than any limit:
    # the enumeration must give up when the next layer's length passes the limit, not after
    # building it (64^3 strings, ~17 MB, for 20,000 allowed). Memory is the observable.
    import tracemalloc

    from structout.schema import _charset as cs
    from structout.schema import _regex as rx

    key = rx.rep(
        rx.cset(cs.make([(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), (0x5F, 0x5F), (0x2D, 0x2D)])),
        1,
        255,
    )
    word = rx.cat(rx.lit("ab"), rx.rep(rx.cset(cs.make([(0x61, 0x7A)])), 2, 2))
    tracemalloc.start()
    try:
        assert rx.finite_strings(key, 20000) is None
        assert rx.finite_strings(
            rx.cat(rx.rep(rx.cset(cs.make([(0x61, 0x7A)])), 3, 3), rx.lit("x")), 20000
        ) == sorted(
            a + b + c + "x"
            for a in map(chr, range(97, 123))
            for b in map(chr, range(97, 123))
            for c in map(chr, range(97, 123))
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
    # At the limit exactly, the strings are all there; one more and there are none.
    assert (
        rx.finite_strings(word, 26 * 26) is not None
        and len(rx.finite_strings(word, 26 * 26) or []) == 676
    )
    assert rx.finite_strings(word, 26 * 26 - 1) is None
