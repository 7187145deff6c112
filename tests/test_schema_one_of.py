"""``oneOf`` over object variants is exact when the variants are told apart (issue 16).

Discriminated unions are written the way real schemas write them: the discriminator's value set
in each branch, its ``required`` next to the ``oneOf`` or inherited through ``allOf``/``$ref``;
branches without a ``type`` that all accept every non-object. Each schema must translate with no
``SchemaSubsetWarning``, and on a grid of candidate documents (every combination of the
discriminator, payload and extra-key values below, in the schema's property order, as
``json.dumps`` writes them) the grammar accepts exactly the ones ``jsonschema`` says are valid.
"""

from __future__ import annotations

import itertools
import json
import warnings
from typing import Any

import jsonschema
import pytest

from structout._engine import compile_grammar
from structout.schema import SchemaSubsetWarning, to_kbnf

_MISSING = object()


def _documents(
    keys: list[str], values: dict[str, list[Any]], extra: list[dict[str, Any]]
) -> list[Any]:
    """Objects over ``keys`` (each value or absent), plus extra members, plus non-objects."""
    out: list[Any] = [None, 1, "a", [], True]
    choices = [[*values[k], _MISSING] for k in keys]
    for combo in itertools.product(*choices):
        base = {k: v for k, v in zip(keys, combo, strict=True) if v is not _MISSING}
        for more in [{}, *extra]:
            out.append({**base, **more})
    return out


def _check_exact(schema: dict[str, Any], docs: list[Any]) -> tuple[int, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SchemaSubsetWarning)
        g = compile_grammar(to_kbnf(schema))
    validator = jsonschema.validators.validator_for(schema)(schema)
    valid = 0
    for doc in docs:
        expected = validator.is_valid(doc)
        text = json.dumps(doc).encode()
        assert g.accepts(text) == expected, (doc, expected)
        valid += expected
    return valid, len(docs) - valid


PAYLOADS = [1, "s", {"x": 1}, {"y": "t"}, None]


def _record(prefix: str, n: int = 8) -> dict[str, Any]:
    """A closed object of ``n`` optional fields: its complement has many variants, so
    subtracting whole branches from each other is too large and the branches must be told
    apart by their discriminator."""
    return {
        "type": "object",
        "properties": {
            f"{prefix}{i}": {"type": ["integer", "string"] if i % 2 else "boolean"}
            for i in range(n)
        },
        "required": [f"{prefix}0"],
        "additionalProperties": False,
    }


RECORDS = [{"a0": True}, {"b0": False, "b1": 2}, {"a0": True, "b1": 1}, {"c0": 1}, {}]


def test_discriminator_required_beside_one_of() -> None:
    schema = {
        "type": "object",
        "required": ["kind", "data"],
        "oneOf": [
            {"properties": {"kind": {"enum": ["int"]}, "data": {"type": "integer"}}},
            {"properties": {"kind": {"enum": ["str"]}, "data": {"type": "string"}}},
            {"properties": {"kind": {"const": "a"}, "data": _record("a")}},
            {"properties": {"kind": {"const": "b"}, "data": _record("b")}},
            {"properties": {"kind": {"const": "c"}, "data": _record("c")}},
            {"properties": {"kind": {"enum": ["any", "int"]}, "data": {"type": "null"}}},
        ],
    }
    docs = _documents(
        ["kind", "data"],
        {"kind": ["int", "str", "a", "b", "c", "any", "other"], "data": PAYLOADS + RECORDS},
        [{"note": 1}],
    )
    valid, invalid = _check_exact(schema, docs)
    assert valid >= 6 and invalid >= 6


def test_discriminator_inherited_through_all_of_ref() -> None:
    schema = {
        "$defs": {
            "base": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string"}, "id": {"type": "integer"}},
            },
            "circle": {
                "allOf": [
                    {"$ref": "#/$defs/base"},
                    {"properties": {"type": {"const": "circle"}, "shape": _record("a")}},
                ]
            },
            "square": {
                "allOf": [
                    {"$ref": "#/$defs/base"},
                    {"properties": {"type": {"const": "square"}, "shape": _record("b")}},
                ]
            },
        },
        "oneOf": [{"$ref": "#/$defs/circle"}, {"$ref": "#/$defs/square"}],
    }
    docs = _documents(
        ["type", "id", "shape"],
        {"type": ["circle", "square", "tri"], "id": [7, "x"], "shape": RECORDS},
        [],
    )
    valid, invalid = _check_exact(schema, docs)
    assert valid >= 4 and invalid >= 4


def test_branches_that_all_accept_non_objects() -> None:
    # Neither branch says "type": "object", so every non-object matches both and is invalid;
    # objects are told apart by the keys each branch allows.
    schema = {
        "oneOf": [
            {
                "required": ["$ref"],
                "properties": {"$ref": {"type": "string"}},
                "additionalProperties": False,
            },
            {
                "required": ["type"],
                "properties": {
                    "type": {"enum": ["integer", "string"]},
                    "format": _record("a"),
                    "items": _record("b"),
                    "default": _record("c"),
                },
                "additionalProperties": False,
                "dependencies": {
                    "format": {
                        "oneOf": [
                            {"properties": {"type": {"const": "integer"}, "format": _record("a")}},
                            {"properties": {"type": {"const": "string"}, "format": _record("b")}},
                        ]
                    }
                },
            },
        ]
    }
    docs = _documents(
        ["$ref", "type", "format"],
        {"$ref": ["#/a", 3], "type": ["integer", "array"], "format": RECORDS[:2]},
        [{"other": 1}],
    )
    valid, invalid = _check_exact(schema, docs)
    assert valid >= 3 and invalid >= 10


@pytest.mark.parametrize("required_here", [True, False])
def test_without_the_discriminator_required_branches_overlap(required_here: bool) -> None:
    # Without `required`, {"data": null} matches both branches below (valid for neither), and
    # {} too; with it, the branches are disjoint. Either way the grammar is exact.
    schema: dict[str, Any] = {
        "type": "object",
        "oneOf": [
            {"properties": {"kind": {"const": "a"}, "data": {"type": ["integer", "null"]}}},
            {"properties": {"kind": {"const": "b"}, "data": {"type": ["string", "null"]}}},
            {"properties": {"kind": {"const": "c"}, "data": _record("c")}},
        ],
    }
    if required_here:
        schema["required"] = ["kind"]
    docs = _documents(["kind", "data"], {"kind": ["a", "b", "c"], "data": PAYLOADS}, [])
    valid, invalid = _check_exact(schema, docs)
    assert valid >= 4 and invalid >= 4
