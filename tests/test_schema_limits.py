"""Translator limits and scaling (issue #6): deep schemas, long patterns, large enums, many
properties, plain integers.

Every limit raises :class:`structout.errors.LimitExceededError` naming the limit (the error's
``limit`` attribute and its message) and the JSON pointer where it was hit (``pointer``), with a
hint; nothing raises ``RecursionError``. Sizes below the limits translate exactly, in time and
grammar size about linear in the input.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import structout.schema._emit.objects as emit_objects
from structout.errors import LimitExceededError
from structout.schema import (
    _canonical_json_iterative,
    canonical_json,
    canonical_schema_key,
    to_kbnf,
    translate,
)


def _grammar(kbnf: str) -> Any:
    from structout._engine import compile_grammar

    return compile_grammar(kbnf)


def _nested(kind: str, n: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(n):
        if kind == "array":
            schema = {"type": "array", "items": schema}
        else:
            schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


# ============================================================================ depth
@pytest.mark.parametrize("kind", ["array", "object"])
def test_depth_limit_names_the_option_and_the_pointer(kind: str) -> None:
    step = "/items" if kind == "array" else "/properties/a"
    with pytest.raises(LimitExceededError) as e:
        to_kbnf(_nested(kind, 300))
    err = e.value
    assert getattr(err, "limit", None) == "max_schema_depth"
    assert getattr(err, "pointer", None) == step * 256
    assert "max_schema_depth = 256" in str(err) and "hint: raise it" in str(err)
    # one level less than the limit translates; the option moves the limit
    _grammar(to_kbnf(_nested(kind, 255)))
    with pytest.raises(LimitExceededError):
        to_kbnf(_nested(kind, 40), max_schema_depth=30)
    g = _grammar(to_kbnf(_nested(kind, 300), max_schema_depth=301))
    inner = "1"
    for _ in range(300):
        inner = f"[{inner}]" if kind == "array" else f'{{"a": {inner}}}'
    assert g.accepts(inner.encode()) and not g.accepts(inner.replace("1", '"x"').encode())


def test_deep_documents_are_indexed_without_recursion() -> None:
    # 20,000 levels below $defs: indexed (iteratively) but never compiled
    deep: dict[str, Any] = {"type": "integer"}
    for _ in range(20_000):
        deep = {"type": "array", "items": deep}
    g = _grammar(to_kbnf({"type": "integer", "$defs": {"deep": deep}}))
    assert g.accepts(b"7") and not g.accepts(b"[7]")


def test_reference_chains_count_as_depth() -> None:
    def chain(n: int) -> dict[str, Any]:
        defs: dict[str, Any] = {
            f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(n)
        }
        defs[f"d{n}"] = {"type": "integer"}
        return {"$defs": defs, "$ref": "#/$defs/d0"}

    g = _grammar(to_kbnf(chain(200)))
    assert g.accepts(b"[" * 200 + b"1" + b"]" * 200)
    assert not g.accepts(b"[" * 199 + b"1" + b"]" * 199)
    with pytest.raises(LimitExceededError) as e:
        to_kbnf(chain(3000))
    assert getattr(e.value, "limit", None) == "max_schema_depth"
    assert getattr(e.value, "pointer", "").startswith("/$defs/d")


@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: {"anyOf": [s, {"type": "null"}]},
        lambda s: {"allOf": [s, {"minimum": 0}]},
        lambda s: {"not": s},
        lambda s: {"oneOf": [s, {"type": "string"}]},
    ],
    ids=["anyOf", "allOf", "not", "oneOf"],
)
def test_deep_combinators_hit_the_depth_limit(wrap: Any) -> None:
    schema: Any = {"type": "integer"}
    for _ in range(3000):
        schema = wrap(schema)
    with pytest.raises(LimitExceededError, match="max_schema_depth"):
        to_kbnf(schema)


def test_deep_schema_text_and_cache_keys() -> None:
    text = '{"items":' * 5000 + "{}" + "}" * 5000
    with pytest.raises(LimitExceededError, match="nested too deeply"):
        to_kbnf(text)
    deep = _nested("array", 5000)
    key = canonical_schema_key(deep)
    assert len(key) == 64 and key != canonical_schema_key(_nested("array", 4999))


def test_canonical_json_is_json_dumps() -> None:
    values: list[Any] = [
        {"b": [1, 2.5, None, True, "é\u2028\x00"], "a": {"z": {}, "y": []}},
        {1: "x", 2: [(1, 2)]},
        {True: 1, False: 2},
        {1.5: "f", 2.0: "g"},
        [[[]], {}],
        {"x": [{"y": None}] * 3},
        {"obj": object},
        10**40,
        -0.0,
    ]
    for v in values:
        expected = json.dumps(v, separators=(",", ":"), ensure_ascii=True, default=repr)
        assert canonical_json(v) == expected
        assert _canonical_json_iterative(v) == expected
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    for dump in (canonical_json, _canonical_json_iterative):
        with pytest.raises(ValueError, match="Circular"):
            dump(cyclic)


def test_deep_python_types() -> None:
    from typing import Optional

    import pydantic

    tp: Any = int
    for _ in range(200):
        tp = list[tp]
    g = _grammar(to_kbnf(tp))
    assert g.accepts(b"[" * 200 + b"3" + b"]" * 200)
    for _ in range(100):
        tp = list[tp]
    with pytest.raises(LimitExceededError, match="max_schema_depth"):
        to_kbnf(tp)
    model: Any = int
    for i in range(120):
        model = pydantic.create_model(f"Deep{i}", x=(Optional[model], None))
    g = _grammar(to_kbnf(model))
    assert g.accepts(b'{"x": {"x": null}}') and g.accepts(b"{}")


# ============================================================================ patterns
def test_pattern_length_limit() -> None:
    with pytest.raises(LimitExceededError) as e:
        to_kbnf({"type": "string", "pattern": "a" * (1 << 20)})
    assert getattr(e.value, "limit", None) == "max_pattern_length"
    assert getattr(e.value, "pointer", None) == "/pattern"
    assert "max_pattern_length = 16384" in str(e.value) and "hint" in str(e.value)
    key = "k" * 20_000
    with pytest.raises(LimitExceededError) as e:
        to_kbnf({"type": "object", "patternProperties": {key: {}}})
    assert getattr(e.value, "pointer", None) == f"/patternProperties/{key}"
    # at the limit it translates (in linear time: bench/limits_bench.py)
    k = to_kbnf({"type": "string", "pattern": "^" + "ab" * 8191 + "$"})
    g = _grammar(k)
    assert g.accepts(b'"' + b"ab" * 8191 + b'"') and not g.accepts(b'"' + b"ab" * 8190 + b'"')
    with pytest.raises(ValueError, match="max_pattern_length"):
        to_kbnf({"type": "string"}, max_pattern_length=0)


def test_pattern_nesting_limit() -> None:
    g = _grammar(to_kbnf({"type": "string", "pattern": "^" + "(" * 900 + "a" + ")" * 900 + "$"}))
    assert g.accepts(b'"a"') and not g.accepts(b'"b"')
    with pytest.raises(LimitExceededError) as e:
        to_kbnf({"type": "string", "pattern": "(" * 5000 + "a" + ")" * 5000})
    assert getattr(e.value, "limit", None) == "MAX_PATTERN_NESTING"
    assert "at /pattern" in str(e.value)


# ============================================================================ enums
def test_ten_thousand_string_enum_is_exact() -> None:
    values = [f"value_{i}" for i in range(10_000)]
    k = to_kbnf({"enum": values})
    g = _grammar(k)
    rng = random.Random(5)
    for v in rng.sample(values, 200):
        assert g.accepts(json.dumps(v).encode())
    for v in ["value_10000", "value_", "value_01", "Value_1", "value_1 ", "", "value_99999"]:
        assert not g.accepts(json.dumps(v).encode()), v


def test_large_number_enum_is_exact() -> None:
    values = list(range(-3000, 9000, 3))
    k = to_kbnf({"enum": values})
    g = _grammar(k)
    for v in range(-3100, 9100, 7):
        assert g.accepts(str(v).encode()) == (v in set(values) and -3000 <= v < 9000), v
    assert g.accepts(b"3.0") and g.accepts(b"3e0") and not g.accepts(b"4.0")


# ============================================================================ objects
def test_five_thousand_optional_properties() -> None:
    n = 5000
    schema = {"type": "object", "properties": {f"prop_{i}": {"type": "integer"} for i in range(n)}}
    k = to_kbnf(schema)
    g = _grammar(k)
    assert g.accepts(b"{}") and g.accepts(b'{"prop_0": 1}') and g.accepts(b'{"prop_4999": 1}')
    doc = {f"prop_{i}": i for i in range(0, n, 7)}
    assert g.accepts(json.dumps(doc).encode())
    assert g.accepts(json.dumps({**doc, "other": [1]}).encode())  # additional properties
    swapped = {"prop_7": 1, "prop_0": 2}
    assert not g.accepts(json.dumps(swapped).encode())  # schema order
    assert not g.accepts(b'{"prop_3": 1, "prop_3": 1}')
    assert not g.accepts(b'{"prop_3": "x"}')
    # grammar size about linear in the number of properties (n log n rules for the choices)
    k2 = to_kbnf({"type": "object", "properties": dict(list(schema["properties"].items())[:2500])})
    assert len(k) < 2.5 * len(k2)


@pytest.mark.parametrize("layout", [{}, {"whitespace": "flexible"}, {"indent": 2}])
def test_many_properties_tree_rules_are_exact(layout: dict[str, Any]) -> None:
    """The segment-tree rules for many members accept exactly what the chain rules accept."""
    rng = random.Random(7)
    for trial in range(12):
        n = rng.randint(1, 40)
        req = sorted(rng.sample(range(n), rng.randint(0, min(n, 4))))
        schema = {
            "type": "object",
            "properties": {f"k{i}": {"type": "integer"} for i in range(n)},
            "required": [f"k{i}" for i in req],
            "additionalProperties": rng.choice([False, True, {"type": "string"}]),
        }
        shapes = {}
        for threshold in (0, 10_000):  # always the tree, never the tree
            old = emit_objects.TREE_MIN_MEMBERS
            emit_objects.TREE_MIN_MEMBERS = threshold
            try:
                tr = translate(schema, **layout)
            finally:
                emit_objects.TREE_MIN_MEMBERS = old
            shapes[threshold] = (tr, _grammar(tr.kbnf))
        assert shapes[0][0].kbnf != shapes[10_000][0].kbnf
        for _ in range(30):
            keys = [i for i in range(n) if i in req or rng.random() < 0.3]
            if keys and rng.random() < 0.2:
                keys.remove(rng.choice(keys))
            obj: dict[str, Any] = {f"k{i}": rng.randint(-3, 3) for i in keys}
            if rng.random() < 0.3:
                obj["extra"] = rng.choice([1, "s"])
            if rng.random() < 0.2:
                obj = dict(reversed(list(obj.items())))
            tr = shapes[0][0]
            in_order = tr.layout.dumps(obj) == tr.dumps(obj)
            expected = tr.is_valid(obj) and in_order
            for tr_, g in shapes.values():
                assert g.accepts(tr_.layout.dumps(obj).encode()) == expected, (trial, obj)


# ============================================================================ combining work


def _any_of_objects(prefix: str, n: int) -> dict[str, Any]:
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {f"{prefix}{i}": {"type": "integer"}},
                "required": [f"{prefix}{i}"],
            }
            for i in range(n)
        ]
    }


def test_combining_work_is_bounded_by_max_schema_work() -> None:
    """Intersections of unions can take long without creating many nodes: a step budget bounds
    the time (a MaskBench schema needing 5.9 M steps took 73 s before failing on max_nodes)."""
    schema = {"allOf": [_any_of_objects("a", 20), _any_of_objects("b", 20)]}
    g = _grammar(to_kbnf(schema))
    assert g.accepts(b'{"a3": 1, "b7": 2}') and not g.accepts(b'{"a3": 1}')
    with pytest.raises(LimitExceededError, match="max_schema_work") as e:
        to_kbnf(schema, max_schema_work=200)
    assert getattr(e.value, "limit", None) == "max_schema_work"
    with pytest.raises(ValueError, match="max_schema_work"):
        to_kbnf(schema, max_schema_work=0)


def _number_texts() -> list[str]:
    """Number-like texts: every one of up to 3 characters over a small alphabet, and longer
    integers and decimals around the bound used below."""
    alphabet = "0159.-e+E"
    texts, frontier = [], [""]
    for _ in range(3):
        frontier = [t + c for t in frontier for c in alphabet]
        texts += frontier
    for n in range(1, 9):
        texts += ["9" * n, "-" + "9" * n, "1." + "5" * n, "1e" + "7" * n, "0." + "0" * n + "1"]
    return texts


@pytest.mark.parametrize("schema", [{"type": "integer"}, {"type": "number"}, {}])
def test_max_number_length_keeps_exactly_the_short_numbers(schema: dict) -> None:
    """A bounded grammar accepts exactly the numbers of the unbounded one that are short enough."""
    from structout._engine import compile_grammar

    bound = 5
    unbounded = compile_grammar(to_kbnf(schema))
    bounded = compile_grammar(to_kbnf(schema, max_number_length=bound))
    checked = 0
    for text in _number_texts():
        doc = text.encode()
        expected = unbounded.accepts(doc) and len(text) <= bound
        assert bounded.accepts(doc) == expected, (schema, text)
        checked += expected
    assert checked > 20
    # Numbers nested in arrays and objects are bounded too.
    nested = compile_grammar(to_kbnf({"type": "array"}, max_number_length=bound))
    assert nested.accepts(b"[12345, [1.5e3]]")
    assert not nested.accepts(b"[1, [123456]]")


def test_limits_bound_numbers_by_default_and_0_lifts_the_bound() -> None:
    from structout.limits import DEFAULT_MAX_NUMBER_LENGTH, Limits

    assert Limits().translator_options() == {"max_number_length": DEFAULT_MAX_NUMBER_LENGTH}
    assert Limits(max_number_length=0).translator_options() == {"max_number_length": 0}
    long_int = b"1" * (DEFAULT_MAX_NUMBER_LENGTH + 1)
    from structout._engine import compile_grammar

    default = compile_grammar(to_kbnf({"type": "integer"}, **Limits().translator_options()))
    lifted = compile_grammar(
        to_kbnf({"type": "integer"}, **Limits(max_number_length=0).translator_options())
    )
    assert not default.accepts(long_int)
    assert default.accepts(long_int[:-1])
    assert lifted.accepts(long_int)
    with pytest.raises(ValueError):
        Limits(max_number_length=-1)
