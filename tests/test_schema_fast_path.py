"""The engine's translation of common schemas (``engine_rs/src/schema``) against the Python
translator, its reference: for every schema it takes, the text must be the Python translator's,
byte for byte, with no warning that the Python path would have given.

Checked on every schema of the MaskBench development share and the JSON Schema Test Suite
(``tests/data``), and on random schemas of the shapes it covers.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import warnings
from pathlib import Path
from typing import Any

import pytest

import structout.schema as schema_mod
from structout import _engine
from structout.schema import _compile, _documents, _formats, to_kbnf, translate

DATA = Path(__file__).resolve().parent / "data"

#: Schemas of the data the engine translates (measured: 5,867 of 8,990); a floor a little
#: under it, so that a change that silently declines most of them fails.
COVERED_FLOOR = 5_550


def _data_schemas() -> list[tuple[str, Any]]:
    out = []
    for path in sorted((DATA / "maskbench").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                out.append((row["name"], row["schema"]))
    suite = DATA / "json-schema-test-suite" / "draft2020-12"
    for path in sorted(suite.rglob("*.json")):
        for i, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            out.append((f"{path.relative_to(suite)}#{i}", group["schema"]))
    return out


def _python_kbnf(schema: Any, max_number_length: int | None) -> tuple[str, list[str]]:
    """The Python translator's text (not through ``to_kbnf``, which takes the fast path) and
    its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            text = translate(copy.deepcopy(schema), max_number_length=max_number_length).kbnf
        except Exception as e:  # noqa: BLE001 -- any refusal is a difference
            text = f"{type(e).__name__}: {e}"
    return text, [str(w.message) for w in caught]


def _differences(
    schemas: list[tuple[str, Any]], max_number_length: int | None
) -> tuple[int, list[str]]:
    covered, problems = 0, []
    for name, schema in schemas:
        fast = _engine.translate_common_schema(copy.deepcopy(schema), max_number_length)
        if fast is None:
            continue
        covered += 1
        text, caught = _python_kbnf(schema, max_number_length)
        if text != fast or caught:
            problems.append(
                f"{name} (max_number_length={max_number_length}): {caught}\n{text}\n---\n{fast}"
            )
    return covered, problems


@pytest.mark.skipif(not (DATA / "maskbench").is_dir(), reason="needs tests/data/maskbench")
def test_same_text_as_the_python_translator_on_all_data() -> None:
    schemas = _data_schemas()
    covered, problems = _differences(schemas, None)
    assert not problems, f"{len(problems)} differences, first:\n{problems[0]}"
    assert covered >= COVERED_FLOOR, f"only {covered} of {len(schemas)} schemas on the fast path"
    # With the SDK's default number bound (structout.Limits), on every fourth schema.
    covered, problems = _differences(schemas[::4], 24)
    assert not problems, f"{len(problems)} differences, first:\n{problems[0]}"
    assert covered >= COVERED_FLOOR // 4


def _word(r: random.Random) -> str:
    pool = r.choice(["ab", "abc", "xyz01", "".join(map(chr, range(0x20, 0x7F))) + "é☃", "a-._ "])
    return "".join(r.choice(pool) for _ in range(r.choice([1, 1, 2, 3, 5, 8])))


def _random_schema(r: random.Random, depth: int = 0, defs: int = 0) -> Any:
    """A random schema of the covered shapes (``defs``: how many ``#/definitions/dN`` exist)."""
    x = r.random()
    if x < 0.05 and depth < 3:
        branches = [_random_schema(r, depth + 1, defs) for _ in range(r.randint(1, 3))]
        return {"anyOf": branches + ([{"type": "null"}] if r.random() < 0.5 else [])}
    if defs and x < 0.12:
        return (
            {"$ref": f"#/definitions/d{r.randrange(defs)}"} if r.random() < 0.9 else {"$ref": "#"}
        )
    if depth > 3 or x < 0.35:
        kind = r.choice(["string", "integer", "number", "boolean", "null", "enum", "any", "list"])
        if kind == "enum":
            s: dict[str, Any] = {"enum": [_word(r) for _ in range(r.randint(1, 6))]}
            if r.random() < 0.5:
                s["type"] = "string"
            return s
        if kind == "any":
            return r.choice([True, {}, {"description": "anything"}])
        if kind == "list":
            kinds = ["string", "integer", "number", "boolean", "null", "array", "object"]
            return {"type": r.sample(kinds, r.randint(1, 4))}
        if kind in ("integer", "number") and r.random() < 0.5:
            return {"type": kind, **_random_bounds(r)}
        if kind == "string" and r.random() < 0.3:
            return {"type": "string", **_random_lengths(r)}
        return {"type": kind}
    if x < 0.55:
        s = {"type": "array" if r.random() < 0.8 else ["array", "null"]}
        if r.random() < 0.8:
            s["items"] = _random_schema(r, depth + 1, defs)
        if r.random() < 0.4:
            s.update(_random_counts(r))
        return s
    if r.random() < 0.08:  # (more than 24 members: the segment-tree layout)
        names = [f"p{i}" for i in range(r.randint(25, 40))]
    else:
        pool = ["a", "b", "id", "name", "x_y", "A", "key 1", "a-b"]
        names = list(dict.fromkeys(r.choice(pool) for _ in range(r.randint(0, 6))))
    s = {
        "type": "object" if r.random() < 0.85 else ["object", "null"],
        "properties": {k: _random_schema(r, depth + 1, defs) for k in names},
    }
    if names and r.random() < 0.6:
        s["required"] = r.sample(names, r.randint(0, len(names)))
    if r.random() < 0.4:
        y = r.random()
        s["additionalProperties"] = y < 0.4 or (
            _random_schema(r, depth + 1, defs) if y < 0.6 else False
        )
    if r.random() < 0.1:
        s["title"] = "an annotation"
    return s


def _random_bound(r: random.Random) -> Any:
    x = r.random()
    if x < 0.3:
        return r.randint(-12, 12)
    if x < 0.6:
        return r.randint(-(10 ** r.randint(1, 6)), 10 ** r.randint(1, 6))
    if x < 0.7:
        return float(r.randint(-100, 100))  # (an integer all the same)
    if x < 0.8:
        return r.choice([0, -1, 1, 9, 10, 99, 100, 999, -10, -100, 2**53, -(2**53), 10**19])
    if x < 0.9:
        return r.choice([0.5, -2.5, 1e300, 3.25])  # (declined: not integers the path reads)
    return r.randint(-(10**17), 10**17)


def _random_bounds(r: random.Random) -> dict[str, Any]:
    """Random integer bounds: inclusive, exclusive (numbers, or draft 4's booleans), equal."""
    out: dict[str, Any] = {}
    for kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if r.random() < 0.45:
            out[kw] = _random_bound(r)
    if r.random() < 0.1:
        out[r.choice(["exclusiveMinimum", "exclusiveMaximum"])] = r.random() < 0.5
    if r.random() < 0.15:
        v = _random_bound(r)
        out.update(r.choice([{"minimum": v, "maximum": v}, {"minimum": v, "exclusiveMaximum": v}]))
    if r.random() < 0.1 and out:  # (floats beside integers)
        k = r.choice(list(out))
        if isinstance(out[k], int) and not isinstance(out[k], bool) and abs(out[k]) < 2**52:
            out[k] = float(out[k])
    return out or {"minimum": 0}


def _random_counts(r: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kw in ("minItems", "maxItems"):
        if r.random() < 0.6:
            out[kw] = r.choice([0, 1, 2, 3, 5, r.randint(0, 40), 2.0, -1, 1.5, True])
    return out


def _random_lengths(r: random.Random) -> dict[str, Any]:
    """Random string lengths: around the translator's thresholds (a repetition up to 8, a
    `json_len!` above; the engine's length limit), unsatisfiable, or not counts."""
    out: dict[str, Any] = {}
    for kw in ("minLength", "maxLength"):
        if r.random() < 0.6:
            out[kw] = r.choice(
                [0, 1, 2, 3, 8, 9, 10, 64, 65, 92, 93, r.randint(0, 300), 2**20, 2**20 + 1]
                + [4.0, 1.5, -1, True]
            )
    return out or {"maxLength": r.randint(0, 40)}


def _random_document(r: random.Random) -> Any:
    """A random schema, a third of them with definitions that refer to each other."""
    if r.random() < 0.66:
        return _random_schema(r)
    n = r.randint(1, 4)
    root = _random_schema(r, 0, n)
    if not isinstance(root, dict) or ("$ref" in root and r.random() < 0.5):
        root = {"$ref": "#/definitions/d0"}
    root["definitions"] = {f"d{i}": _random_schema(r, 1, n) for i in range(n)}
    return root


def test_same_text_as_the_python_translator_on_random_schemas() -> None:
    r = random.Random(20261127)
    schemas = [(f"random #{i}", _random_document(r)) for i in range(1500)]
    covered, problems = _differences(schemas, None)
    assert not problems, f"{len(problems)} differences, first:\n{problems[0]}"
    assert covered >= 700  # (measured: 755; the others use a shape or bounds it declines)


def test_same_text_as_the_python_translator_on_random_bounds() -> None:
    # Number bounds, array and string lengths, alone and inside objects, lists of types and
    # anyOf.
    r = random.Random(32)
    schemas: list[tuple[str, Any]] = []
    for i in range(3000):
        integer = {"type": r.choice(["integer", "integer", "number"]), **_random_bounds(r)}
        array = {"type": "array", "items": {"type": "string"}, **_random_counts(r)}
        string = {"type": "string", **_random_lengths(r)}
        shape = r.choice(
            ["int", "int", "draft4", "list", "any_of", "object", "array", "array2", "str", "strs"]
        )
        if shape == "int":
            s: Any = integer
        elif shape == "draft4":
            s = {"$schema": DRAFT4, **integer}
        elif shape == "list":
            s = {**integer, "type": r.choice([["integer", "null"], ["integer", "number"]])}
            s["type"] = r.choice([s["type"], ["number", "null"]])
        elif shape == "any_of":
            s = {"anyOf": [integer, {"type": "null"}]}
        elif shape == "object":
            s = {"type": "object", "properties": {"a": integer, "b": array}, "required": ["a"]}
        elif shape == "array":
            s = array
        elif shape == "array2":
            s = {**array, "items": integer}
        elif shape == "str":
            s = {**string, "type": r.choice(["string", ["string", "null"], ["string", "integer"]])}
        else:  # (several differently bounded strings: shared and numbered rules)
            other = {"type": "string", **_random_lengths(r)}
            s = {"type": "object", "properties": {"a": string, "b": other, "c": string}}
        schemas.append((f"bounds #{i}", s))
    for n in (None, 24):
        covered, problems = _differences(schemas, n)
        assert not problems, f"{len(problems)} differences, first:\n{problems[0]}"
        assert covered >= 1000, covered  # (measured: 1,167; the others decline)


DRAFT4 = "http://json-schema.org/draft-04/schema#"

#: The keywords the fast path translates (references: local ones, to definitions kept at the
#: document's root).
TRANSLATED = {"type", "enum", "properties", "required", "additionalProperties", "items", "$ref"}
#: (number bounds, array and string lengths: for those types only, declined beside other types)
TRANSLATED |= {
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
}
TRANSLATED_AT_ROOT = {"definitions", "$defs", "$schema"}
#: (a base URI for references only: a string is read, and declined below the root when the schema
#: has references; any other value is declined)
TRANSLATED |= {"$id"}
#: (a string `const`, as a one-word enum; a string `format` and an anchored `pattern`, for
#: strings only: see test_formats_print_the_python_translators_rules and
#: test_anchored_patterns_print_the_python_translators_regex)
TRANSLATED |= {"const", "format", "pattern"}
#: (beside one `items` schema or none, where the Python translator ignores it: a boolean, or a
#: subschema of the subset, dropped)
TRANSLATED |= {"additionalItems"}


def test_every_keyword_the_translator_reads_is_translated_or_declined() -> None:
    # A keyword the Python translator enforces but the fast path ignored would make its
    # grammar accept invalid documents: the translator's own keyword lists must all be among
    # the engine's (which lists every asserting keyword of drafts 3 to 2020-12).
    asserting = set(_engine.ASSERTING_SCHEMA_KEYWORDS)
    read = (
        _compile._COMBINING
        | _compile._STRING_KWS
        | set(_documents._MIN_DRAFT)
        | set(_documents._SCHEMA_MAP_KWS)
        | set(_documents._SCHEMA_KWS)
        | set(_documents._SCHEMA_LIST_KWS)
    )
    assert read <= asserting, sorted(read - asserting)
    assert asserting >= TRANSLATED | TRANSLATED_AT_ROOT
    for keyword in sorted(asserting - TRANSLATED):
        for value in (1, "x", True, {}, []):
            below = {"type": "array", "items": {"type": "string", keyword: value}}
            assert _engine.translate_common_schema(below) is None, below
            if keyword not in TRANSLATED_AT_ROOT:
                schema = {"type": "string", keyword: value}
                assert _engine.translate_common_schema(schema) is None, schema
    for value in (1, True, {}, []):
        assert _engine.translate_common_schema({"type": "string", "$id": value}) is None
    with_ids = {
        "$id": "http://x.example/",
        "type": "array",
        "items": {"type": "string", "$id": "x"},
    }
    assert _engine.translate_common_schema(with_ids) == translate(with_ids).kbnf
    # Annotations and unknown keywords are ignored, as by the translator.
    annotated = {"type": "string", "title": "t", "x-unknown": {"minLength": 3}, "$comment": "c"}
    assert _engine.translate_common_schema(annotated) == translate(annotated).kbnf
    assert _engine.translate_common_schema({"type": "string", "$unknown": 1}) is None


@pytest.mark.parametrize(
    "schema",
    [
        {"type": ("string",)},  # a tuple is not JSON data
        {"type": "object", "properties": {1: {"type": "string"}}},  # nor is a non-string key
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/a/items"}}, "$defs": {"a": {}}},
        {"type": "object", "properties": {"a": {"$ref": "other.json#/a"}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/a", "type": "object"}}},
        {"$ref": "#/definitions/a", "definitions": {"a": {"$ref": "#/definitions/a"}}},
        # (found by review: Python writes `root ::= json_value` for all six kinds)
        {
            "anyOf": [
                {"type": t} for t in ("object", "array", "string", "number", "boolean", "null")
            ]
        },
        # (a base URI or a dialect on the way to a reference's target changes what it means)
        {
            "$ref": "#/definitions/a/properties/b",
            "definitions": {
                "a": {
                    "$id": "http://a.example/",
                    "properties": {"b": {"$ref": "#/definitions/c"}},
                    "definitions": {"c": {"type": "integer"}},
                },
                "c": {"type": "string"},
            },
        },
        {"$ref": "#/definitions/x", "definitions": {"$schema": DRAFT4, "x": {"type": "integer"}}},
        # (Python counts every subschema against max_subschemas, unreferenced ones too)
        {"type": "string", "definitions": {f"d{i}": {} for i in range(100_001)}},
        {"type": "string", "enum": ["a\\b"]},
        False,
        # (bounds the fast path does not read: draft 4's booleans, fractions, huge values, those of
        # `integer` and `number` in one type list; and bounds that leave no value, which the
        # Python translator reports)
        {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
        {"type": "integer", "minimum": 0.5},
        {"type": "integer", "maximum": 10**30},
        {"type": "integer", "maximum": 1e300},
        {"type": "number", "minimum": 0.5},
        {"type": "number", "exclusiveMaximum": 1e300},
        {"type": ["integer", "number"], "minimum": 0},
        {"type": "number", "minimum": 1, "exclusiveMaximum": 1},
        {"type": "integer", "minimum": 3, "maximum": 2},
        {"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 4},
        {"type": "array", "minItems": 3, "maxItems": 2},
        {"type": "array", "minItems": -1},
        {"type": "array", "maxItems": 1.5},
        {"type": "array", "maxItems": True},
        # (string lengths that leave no value, are not counts, or that the translator does not
        # print as one terminal or `json_len!`; and lengths beside an enum, which it intersects)
        {"type": "string", "minLength": 3, "maxLength": 2},
        {"type": "string", "minLength": 1.5},
        {"type": "string", "maxLength": -1},
        {"type": "string", "maxLength": True},
        {"type": "string", "minLength": 100},
        {"type": "string", "maxLength": 2**20 + 1},
        {"type": "string", "enum": ["a", "bb"], "maxLength": 1},
        {"enum": ["a", "bb"], "minLength": 2},
        # (keywords of other types, which the Python translator ignores, with values the fast
        # path does not read; and an enum without the string type)
        {"type": ["integer", "number"], "minLength": 1.5},
        {"type": "object", "items": {"type": "string", "pattern": "a"}},
        {"type": "integer", "enum": ["a"]},
        {"type": "object", "const": "a"},
    ],
)
def test_other_schemas_are_left_to_python(schema: Any) -> None:
    assert _engine.translate_common_schema(schema) is None


def test_to_kbnf_takes_the_fast_path_with_default_options_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[Any] = []
    real = schema_mod.translate_common_schema

    def spy(schema: Any, max_number_length: int | None = None) -> str | None:
        calls.append(max_number_length)
        return real(schema, max_number_length)

    monkeypatch.setattr(schema_mod, "translate_common_schema", spy)
    simple = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert to_kbnf(simple) == translate(simple).kbnf
    assert to_kbnf(simple, max_number_length=0) == translate(simple).kbnf
    assert to_kbnf(simple, max_number_length=20) == translate(simple, max_number_length=20).kbnf
    assert calls == [None, None, 20]
    for options in (
        {"whitespace": "flexible"},
        {"indent": 2},
        {"lenient": True},
        {"registry": {}},
        {"max_schema_depth": 3},
        {"max_subschemas": 10},
        {"max_whitespace": 4},
    ):
        assert to_kbnf(simple, **options) == translate(simple, **options).kbnf, options
    assert calls == [None, None, 20]
    # A schema the fast path declines is translated in Python.
    pattern = {"type": "string", "pattern": "^a+$"}
    assert to_kbnf(pattern) == translate(pattern).kbnf
    assert len(calls) == 4


def test_pydantic_models_take_the_fast_path() -> None:
    # The shapes Pydantic gives most models: $defs and $ref, Optional (anyOf with null),
    # Literal and Enum (enums), lists, dicts, nested and recursive models.
    import enum
    from typing import Literal, Optional, Union

    from pydantic import BaseModel

    from structout.schema import json_schema_of

    class Color(str, enum.Enum):
        red = "red"
        green = "green"

    class Address(BaseModel):
        street: str
        zip: Optional[str] = None  # noqa: UP045 - evaluated at runtime on py3.9

    class Person(BaseModel):
        name: str
        age: int
        email: Optional[str] = None  # noqa: UP045 - evaluated at runtime on py3.9
        tags: list[str] = []
        address: Address
        previous: Optional[Address] = None  # noqa: UP045 - evaluated at runtime on py3.9
        color: Color
        kind: Literal["a", "b"]
        score: float
        ok: bool

    class Tree(BaseModel):
        value: int
        kids: list[Tree] = []

    for t in (Person, Tree, list[Address], dict[str, int], Optional[Address], Union[int, str]):
        schema, _ = json_schema_of(t)
        fast = _engine.translate_common_schema(schema)
        assert fast is not None, t
        assert fast == _python_kbnf(schema, None)[0], t


@pytest.mark.parametrize(
    "name", ["boolean", "json_value", "json_object", "json_array", "json_member", "start", "ws"]
)
@pytest.mark.parametrize(
    "options",
    [{}, {"whitespace": "flexible"}, {"indent": 2}],
    ids=["compact", "flexible", "indent"],
)
def test_definitions_named_like_fixed_rules_keep_their_meaning(
    name: str, options: dict[str, Any]
) -> None:
    # A definition whose name is one the emitter writes without choosing it (the boolean rule,
    # the generic value's rules, the start rule, whitespace) used to take over that rule or
    # borrow it: `{"type": "boolean"}` then accepted 2.
    from structout._engine import compile_grammar

    schema = {
        "type": "object",
        "properties": {  # (the reference first: it names its rule before the fixed ones)
            "n": {"$ref": f"#/definitions/{name}"},
            "flag": {"type": "boolean"},
            "any": {},
        },
        "required": ["n", "flag", "any"],
        "additionalProperties": False,
        "definitions": {name: {"type": "integer"}},
    }
    text = to_kbnf(schema, **options)
    assert text == translate(schema, **options).kbnf
    grammar = compile_grammar(text)

    def accepts(doc: Any) -> bool:
        out = json.dumps(doc, indent=options.get("indent"))
        return bool(grammar.accepts(out.encode()))

    assert accepts({"n": 3, "flag": True, "any": {"k": [1, "x"]}})
    assert not accepts({"n": 3, "flag": 2, "any": 1})
    assert not accepts({"n": "x", "flag": True, "any": 1})
    assert not accepts({"n": {"n": 1, "flag": True, "any": 1}, "flag": True, "any": 1})


def test_shared_and_cyclic_python_data_is_declined_quickly() -> None:
    # Converting shared sub-dicts once per use doubled the work per level (found by review).
    shared: dict[str, Any] = {}
    for _ in range(60):
        shared = {"a": shared, "b": shared}
    assert _engine.translate_common_schema({"type": "string", "x-note": shared}) is None
    cyclic: dict[str, Any] = {"type": "string"}
    cyclic["x-self"] = cyclic
    assert _engine.translate_common_schema(cyclic) is None


def test_fixed_rule_names_are_the_translators() -> None:
    from structout.schema._emit.emitter import fixed_names
    from structout.schema._emit.layout import Layout

    compact = fixed_names(Layout("compact", None, 32), 32)
    assert set(_engine.COMMON_SCHEMA_FIXED_NAMES) == compact


def _same(schema: Any) -> None:
    """The engine translates ``schema``, to the Python translator's text."""
    fast = _engine.translate_common_schema(copy.deepcopy(schema))
    assert fast is not None, schema
    text, caught = _python_kbnf(schema, None)
    assert fast == text and not caught, (schema, caught, text, fast)


def _declined(schema: Any) -> None:
    assert _engine.translate_common_schema(copy.deepcopy(schema)) is None, schema


def test_formats_print_the_python_translators_rules() -> None:
    names = [*_formats._format_sources(), "regex"]
    for name in names:
        one = {"type": "string", "format": name}
        if name in DECLINED_FORMATS:
            _declined(one)
            _declined({"type": "array", "items": one})
            continue
        _same(one)
        _same({"type": ["string", "null"], "format": name})
        _same({"anyOf": [one, {"type": "integer"}]})
        # (equal formats share one rule; other strings are numbered after it, in order)
        _same(
            {
                "type": "object",
                "properties": {
                    "e": {"enum": ["a", "b"]},
                    "f": one,
                    "g": {"type": "array", "items": one},
                    "h": {"type": "string", "format": "date"},
                    "i": {"type": "string", "maxLength": 3},
                },
                "required": ["f"],
            }
        )
    # Unknown formats are annotations; formats of other types are ignored.
    for name in ("int32", "uri-ish", ""):
        _same({"type": "string", "format": name})
        _same({"type": "string", "format": name, "maxLength": 20})
        _same({"type": "string", "format": name, "enum": ["a", "b"]})
    _same({"type": "integer", "format": "int64"})
    _same({"type": ["number", "null"], "format": "date-time"})
    _same({"format": "date"})  # (any value: strings of the format)
    # A format with lengths or an enum (intersected), or not a string: left to Python; without a
    # type and unknown, any value (which the Python translator may print as such).
    _declined({"type": "string", "format": "date", "maxLength": 20})
    _declined({"type": "string", "format": "uuid", "minLength": 1})
    _declined({"type": "string", "format": "email", "enum": ["a@b.c"]})
    _declined({"format": "int32"})
    _declined({"type": "string", "format": 3})
    _declined({"type": "integer", "format": None})


def test_const_is_a_one_word_enum() -> None:
    for schema in (
        {"const": "x"},
        {"type": "string", "const": "x-y"},
        {"type": ["string", "null"], "const": "a"},
        {"type": "object", "properties": {"v": {"const": "2.0", "type": "string"}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "const": "x"},
        # (a slash: JSON spells it `/` or `\/`)
        {"type": ["string", "null"], "const": "autoscaling/v1"},
        {"enum": ["a/", "ab", "/", "x/y/z", "x/q"]},
        {"type": "array", "items": {"enum": ["/"]}},
    ):
        _same(schema)
    _declined({"$schema": DRAFT4, "const": "x"})  # (not a keyword there)
    _declined({"const": "x", "enum": ["x", "y"]})
    _declined({"const": 1})
    _declined({"const": None})
    _declined({"type": "string", "const": "a\\b"})
    _declined({"type": "string", "const": "abc", "maxLength": 2})


def _tool(name: str, required: bool = True, extra: bool = False) -> dict[str, Any]:
    """A BFCL-like branch: an object with one property, the tool's arguments."""
    args = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    out: dict[str, Any] = {"type": "object", "properties": {name: args}}
    if required:
        out["required"] = [name]
    if not extra:
        out["additionalProperties"] = False
    return out


def test_any_of_keeps_arrays_and_objects_apart() -> None:
    for schema in (
        {"anyOf": [_tool("a"), _tool("b"), _tool("c"), _tool("d")]},
        {"anyOf": [_tool("a", extra=True), _tool("b"), {"type": "null"}]},
        {"anyOf": [_tool("a", required=False), _tool("b", required=False)]},  # (two: kept)
        {"anyOf": [_tool(f"t{i}") for i in range(40)]},
        {"anyOf": [{"type": "array", "items": {"type": "null"}}, {"type": "array", "maxItems": 2}]},
        {"anyOf": [{"type": "string"}, {"type": "array", "items": _tool("a")}, _tool("b")]},
    ):
        _same(schema)
    # Objects one of which may subsume another, unconstrained arrays or objects beside others,
    # equal branches, scalars of one kind (merged by the Python translator): left to Python.
    _declined({"anyOf": [_tool("a", required=False), _tool("b"), _tool("c")]})
    _declined({"anyOf": [_tool("a"), {"type": "object"}]})
    _declined({"anyOf": [{"type": "array"}, {"type": "array", "items": {"type": "string"}}]})
    _declined({"anyOf": [_tool("a"), _tool("a")]})
    _declined({"anyOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]})
    _declined({"anyOf": [_tool(f"t{i}") for i in range(65)]})


def test_one_of_branches_of_different_kinds_is_their_any_of() -> None:
    # (no value satisfies two of them: the Python translator unites them as they are)
    for schema in (
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        {"oneOf": [{"type": "null"}, _tool("a"), {"type": "array", "items": {"type": "number"}}]},
        {"oneOf": [{"enum": ["a", "b"]}]},
        {"oneOf": [{"$ref": "#/definitions/d"}], "definitions": {"d": {"type": "integer"}}},
        {
            "type": "object",
            "properties": {"q": {"oneOf": [{"type": "string"}, {"type": "number"}]}},
        },
    ):
        _same(schema)
    # Branches that may overlap (one kind twice, references of kinds known once resolved), or
    # oneOf beside anyOf or other assertions: left to Python.
    _declined({"oneOf": [_tool("a"), _tool("b")]})
    _declined({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}]})
    _declined({"oneOf": [{"type": "integer"}, {"type": "number"}]})
    _declined({"oneOf": [{"$ref": "#/definitions/d"}, {"type": "null"}], "definitions": {"d": {}}})
    _declined({"oneOf": [{"type": "string"}], "anyOf": [{"type": "string"}]})
    _declined({"oneOf": [{"type": "string"}, {"type": "null"}], "type": "string"})


def test_required_names_not_listed_are_named_members() -> None:
    a = {"a": {"type": "string"}}
    unlisted = {"type": "object", "properties": a, "required": ["z", "a", "b"]}
    listed = {**unlisted, "properties": {**a, "b": {}, "z": {}}}
    for schema in (
        unlisted,
        {"type": "object", "required": ["b"]},
        {**unlisted, "additionalProperties": {"type": "integer"}},
        {"type": "object", "properties": {"x": unlisted, "y": listed, "w": unlisted}},
        {"anyOf": [unlisted, {"type": "object", "required": ["q"]}, {"type": "null"}]},
    ):
        _same(schema)
    # (no other keys: no object; names a KBNF literal does not hold as they are)
    _declined({**unlisted, "additionalProperties": False})
    _declined({"type": "object", "required": ["it's"]})
    _declined({"type": "object", "required": ["a", "a"]})


def test_keywords_of_other_types_are_ignored() -> None:
    for schema in (
        {"type": "object", "items": {"type": "string"}, "minItems": 1},
        {"type": "string", "minItems": 1, "properties": {"a": {}}, "required": ["a"]},
        {"type": "array", "items": {"type": "string", "minItems": 1}, "minLength": 3},
        {"type": "integer", "maxLength": 3, "additionalProperties": False},
        {"type": ["string", "null"], "minimum": 3, "maxItems": 2},
        {"type": "boolean", "exclusiveMaximum": 2, "format": "date"},
        {"enum": ["a", "b"], "items": {"type": "integer"}},
        {"type": "array", "required": ["standalone"], "properties": {"a": {}}},
        {"type": "array", "items": {"type": "string"}, "additionalItems": False},
        {"type": "array", "additionalItems": {"type": "integer"}},
        {"type": "string", "additionalItems": True},
    ):
        _same(schema)
    # Without a type: values of every type, each under the keywords of its type.
    for schema in (
        {"properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"items": {"type": "string"}},
        {"minimum": 0, "maxLength": 3},
        {"additionalProperties": False, "minItems": 1},
        {"type": "array", "items": {"properties": {"a": {}}, "additionalProperties": False}},
        {"type": ["null", "boolean", "integer", "string", "array", "object"], "maxItems": 2},
    ):
        _same(schema)
    # (every type unconstrained: any value, which the Python translator may write as such)
    _declined({"items": {}})
    _declined({"additionalProperties": True})
    _declined({"type": ["null", "boolean", "number", "string", "array", "object"], "minItems": 0})
    # (their values are read all the same: what the fast path does not read declines)
    _declined({"type": "string", "items": {"type": "string", "pattern": "a"}})
    _declined({"type": "string", "minItems": -1})
    _declined({"type": "object", "minLength": "x"})
    _declined({"type": "array", "minimum": 0.5})
    _declined({"type": "array", "required": [1]})
    _declined({"type": "array", "items": [{"type": "string"}], "additionalItems": False})
    _declined({"type": "array", "additionalItems": {"type": "string", "pattern": "a"}})
    _declined({"type": "array", "additionalItems": 1})


def _random_pattern(r: random.Random) -> str:
    """An ECMA-262 pattern, mostly anchored terms of the subset the engine reads (characters,
    classes, groups, quantifiers), some with what it declines (alternation, `.`, `\\s`, `/`,
    negated classes, malformed quantifiers)."""
    chars = [*"abcAZ09_- .:,'#&~{}]", "\\.", "\\-", "\\d", "\\w", "\\$", "\\(", "\\{"]
    chars += ["\\/", "/", "\\s", '"', "."]
    counts = ["*", "+", "?", "{2}", "{1,3}", "{0,}", "{3,}", "{9}", "{12}", "{1,255}", "{0,8}"]
    counts += ["{10,20}", "*?", "{2,1}", "{,3}", "{1", "++"]

    def quantifier() -> str:
        return "" if r.random() < 0.4 else r.choice(counts)

    def klass() -> str:
        items = []
        for _ in range(r.randint(0, 4)):
            if r.random() < 0.3:
                items.append(r.choice(["a-z", "A-Z", "0-9", "a-f", "1-5", "!-~", "\\d-x"]))
            else:
                items.append(r.choice([*chars, "["]).replace("]", "\\]"))
        return "[" + ("^" if r.random() < 0.05 else "") + "".join(items) + "]"

    def term(depth: int) -> str:
        x = r.random()
        if x < 0.15 and depth < 3:
            inner = "".join(term(depth + 1) for _ in range(r.randint(0, 3)))
            return "(" + r.choice(["", "?:"]) + inner + ")" + quantifier()
        return (klass() if x < 0.55 else r.choice(chars)) + quantifier()

    body = "".join(term(0) for _ in range(r.randint(1, 5))) + ("|x" if r.random() < 0.03 else "")
    return ("^" if r.random() < 0.95 else "") + body + ("$" if r.random() < 0.95 else "")


def test_anchored_patterns_print_the_python_translators_regex() -> None:
    # Characters, classes and groups under quantifiers (nested ones merged, long counted ones
    # as `json_len!`), as a terminal or a counted string, shared by equal patterns.
    for p in (
        "^[a-zA-Z0-9_]+$",
        "^([a-z])([a-z0-9-])*$",
        "^[A-Fa-f\\d]{24}$",
        "^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
        "^[0-9a-zA-Z_-]{1,255}$",
        "^(a{2}){3}$",
        "^(a?){2,5}$",
        "^((ab){2})+$",
        "^(?:[a-z]{2}){10}$",
        "^x{9}y{9}$",
        "^\\w+\\.\\w+?$",
    ):
        one = {"type": "string", "pattern": p}
        _same(one)
        _same({"type": "object", "properties": {"a": one, "b": {"enum": ["x"]}, "c": one}})
    r = random.Random(36)
    covered = 0
    for _ in range(1500):
        schema = {"type": "string", "pattern": _random_pattern(r)}
        if _engine.translate_common_schema(schema) is not None:
            covered += 1
            _same(schema)
    assert covered >= 250, covered  # (measured: 298)
    # Outside the subset (unanchored, alternation, `.`, escapes of characters JSON spells two
    # ways, negated classes, counts past the engine's limit), invalid, or beside lengths, an
    # enum or a format (intersected): left to Python.
    for p in ("a+", "^a+", "^(a|b)$", "^a.b$", "^\\/x$", "^[^/]+$", "^\\s$", "^a{2000000}$"):
        _declined({"type": "string", "pattern": p})
    for p in ("^{1}$", "^a**$", "^a{3,2}$", "^(a$", "^[]$", "^()$"):
        _declined({"type": "string", "pattern": p})
    _declined({"type": "string", "pattern": "^a+$", "maxLength": 3})
    _declined({"type": "string", "pattern": "^a+$", "enum": ["a"]})
    _declined({"type": "string", "pattern": "^a+$", "format": "date"})
    _declined({"type": "string", "pattern": 3})


#: Where the engine keeps the formats' texts (generated by :func:`format_table_source`).
FORMATS_RS = Path(__file__).resolve().parents[1] / "engine_rs" / "src" / "schema" / "formats.rs"
#: Formats the fast path declines: ``regex`` (grammar rules of its own) and the IRIs (terminals
#: too large for one rule: the Python translator splits them).
DECLINED_FORMATS = ("iri", "iri-reference", "regex")


def format_table_source() -> str:
    """``formats.rs``: each regular format's string rule, as the Python translator prints it
    (its one alternative, hint ``str``). Regenerate with ``python tests/test_schema_fast_path.py``
    after a change of ``structout/schema/_formats.py``."""
    rows = []
    for name in _formats._format_sources():
        if name in DECLINED_FORMATS:
            continue
        lines = translate({"type": "string", "format": name}).kbnf.splitlines()
        assert lines[0] == "start ::= root;" and lines[2:] == ["root ::= str;"], name
        alt = lines[1].removeprefix("str ::= ").removesuffix(";")
        assert alt.isascii() and '"#' not in alt, name
        rows.append(f'    (\n        "{name}",\n        r#"{alt}"#,\n    ),\n')
    return (
        "//! The string rule of each `format` the fast path translates: its one alternative, as\n"
        "//! the Python translator prints it (`structout/schema/_formats.py`).\n"
        "//!\n"
        "//! Generated by `tests/test_schema_fast_path.py` (`format_table_source`), which also\n"
        "//! checks that this file is what it generates: edit the Python formats, regenerate.\n"
        "\n"
        "/// (format name, rule alternative), in `_formats._format_sources` order.\n"
        "pub(super) const FORMATS: &[(&str, &str)] = &[\n" + "".join(rows) + "];\n"
    )


def test_format_table_is_the_python_translators() -> None:
    assert not _formats.UNSUPPORTED_FORMATS
    assert FORMATS_RS.read_text(encoding="utf-8") == format_table_source(), (
        "engine_rs/src/schema/formats.rs is stale: run python tests/test_schema_fast_path.py"
    )


if __name__ == "__main__":
    FORMATS_RS.write_text(format_table_source(), encoding="utf-8")
