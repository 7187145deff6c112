"""Every JSON spelling of a valid string is accepted, and no spelling of an invalid one (issue 16).

Ground truth is ``json.loads`` (what a spelling decodes to) and ``jsonschema`` (whether that value
is valid). Spellings are generated independently of the translator: each code point raw, and
non-ASCII ones also as ``\\uXXXX`` in lower and upper case, astral ones as surrogate pairs; lone
and mismatched surrogates decode to no valid value of these schemas. (Printable ASCII written as
``\\u00XX``, which no JSON encoder produces, is outside what the grammar accepts; see
docs/json_schema.md, Layout.)
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from typing import Any

import jsonschema
import pytest

from structout._engine import compile_grammar
from structout.schema import to_kbnf


def _unit_spellings(ch: str) -> list[str]:
    """The JSON spellings of one code point (without quotes)."""
    cp = ord(ch)
    out = {json.dumps(ch, ensure_ascii=False)[1:-1]}
    if cp < 0x80:
        return sorted(out)
    if cp <= 0xFFFF:
        out |= {f"\\u{cp:04x}", f"\\u{cp:04X}"}
    else:
        v = cp - 0x10000
        hi, lo = 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)
        out |= {f"\\u{hi:04x}\\u{lo:04x}", f"\\u{hi:04X}\\u{lo:04X}", f"\\u{hi:04x}\\u{lo:04X}"}
    return sorted(out)


def _spellings(value: str, limit: int = 64) -> list[bytes]:
    """Up to ``limit`` JSON string literals that decode to ``value``."""
    per_char = [_unit_spellings(c) for c in value]
    out = []
    for combo in itertools.islice(itertools.product(*per_char), limit):
        text = '"' + "".join(combo) + '"'
        assert json.loads(text) == value
        out.append(text.encode("utf-8"))
    return out


def _check(schema: dict[str, Any], values: list[str], others: list[str]) -> None:
    g = compile_grammar(to_kbnf(schema))
    for v in values:
        assert jsonschema.Draft202012Validator(schema).is_valid(v), v
        for doc in _spellings(v):
            assert g.accepts(doc), (schema, doc)
    for v in others:
        assert not jsonschema.Draft202012Validator(schema).is_valid(v), v
        for doc in _spellings(v):
            assert not g.accepts(doc), (schema, doc)


@pytest.mark.parametrize(
    ("schema", "values", "others"),
    [
        # The issue's case: what json.dumps writes by default for an emoji.
        ({"enum": ["é", "😊"]}, ["é", "😊"], ["e", "😋", "😉", "\U0001f60a\U0001f60a"]),
        ({"const": "a😊b"}, ["a😊b"], ["a😋b", "ab"]),
        # Astral characters in a pattern's class: ranges inside one high surrogate, across two,
        # and across many (the first, middle and last blocks of pairs).
        (
            {"type": "string", "pattern": "^[😀-😏]+$"},
            ["😀", "😏😀", "😅"],
            ["😐", "🙏", "a"],
        ),
        (
            {"type": "string", "pattern": "^[\U0001f3f0-\U0001f410]$"},
            ["\U0001f3f0", "\U0001f3ff", "\U0001f400", "\U0001f410"],
            ["\U0001f3ef", "\U0001f411"],
        ),
        (
            {"type": "string", "pattern": "^[\U00010400-\U00011bff]$"},
            ["\U00010400", "\U000107ff", "\U00010800", "\U00011800", "\U00011bff"],
            ["\U000103ff", "\U00011c00", "\U0001f600"],
        ),
        # The issue's whitespace case: `\s` has 8 non-ASCII ranges.
        (
            {"type": "string", "pattern": "^\\s$"},
            [" ", "\t", "\u00a0", "\u2000", "\u200a", "\u3000"],
            ["a", "\u00a1", "\u200b", "  "],
        ),
        (
            {"type": "string", "maxLength": 2, "enum": ["𝄞", "x𝄞"]},
            ["𝄞", "x𝄞"],
            ["x", "𝄞𝄞"],
        ),
    ],
)
def test_every_spelling_of_valid_strings_and_none_of_invalid(
    schema: dict[str, Any], values: list[str], others: list[str]
) -> None:
    _check(schema, values, others)


def test_lone_and_mismatched_surrogates_are_refused() -> None:
    g = compile_grammar(to_kbnf({"enum": ["😊"]}))
    assert g.accepts(b'"\\ud83d\\ude0a"')
    for doc in [
        b'"\\ud83d"',  # lone high surrogate
        b'"\\ude0a"',  # lone low surrogate
        b'"\\ude0a\\ud83d"',  # reversed
        b'"\\ud83d\\ud83d"',  # two high surrogates
        b'"\\ud83c\\ude0a"',  # another code point (U+1F20A)
        b'"\\ud83d\\ude0b"',  # a neighbour (U+1F60B)
        b'"\\ud83d\\ude0a\\ude0a"',  # a pair and a lone low surrogate
    ]:
        assert not g.accepts(doc), doc


@pytest.mark.parametrize(
    ("schema", "keys", "other_keys"),
    [
        # ASCII names: every other key, in every spelling, is an additional property.
        (
            {
                "type": "object",
                "properties": {"known": {"type": "integer"}},
                "additionalProperties": {"type": "integer"},
            },
            ["é", "😀", "aé", "known2", "kno", "\u4e2d"],
            ["known"],
        ),
        # A non-ASCII name never comes back spelled with escapes as an additional key.
        (
            {
                "type": "object",
                "properties": {"é": {"type": "string"}, "😀": {"type": "string"}},
                "additionalProperties": {"type": "integer"},
            },
            ["a", "ab"],
            ["é", "😀"],
        ),
    ],
)
def test_additional_keys_in_every_spelling(
    schema: dict[str, Any], keys: list[str], other_keys: list[str]
) -> None:
    # The issue's case: `{"known": 0, "\u00e9": 1}` and `{"\uD83D\uDE00": 1}`. Values are
    # integers: valid for additional keys, invalid for the named ones (strings or "known" is
    # checked separately: its value 1 is valid, but as a second "known" it is a duplicate).
    g = compile_grammar(to_kbnf(schema))
    validator = jsonschema.Draft202012Validator(schema)
    for key in keys:
        assert validator.is_valid({key: 1})
        for spelled in _spellings(key):
            assert g.accepts(b"{" + spelled + b": 1}"), spelled
    for key in other_keys:
        for spelled in _spellings(key):
            doc = b"{" + spelled + b": 1}"
            if not validator.is_valid({key: 1}):
                assert not g.accepts(doc), doc
            elif spelled != json.dumps(key, ensure_ascii=False).encode():
                # A named key is written raw (Layout); its escaped spellings are not accepted,
                # in particular never as an additional key.
                assert not g.accepts(doc), doc
    for doc in [b'{"\\ud83d": 1}', b'{"\\ude00": 1}', b'{"\\ude00\\ud83d": 1}']:
        assert not g.accepts(doc), doc


ADDRESS = {
    "type": "object",
    "properties": {
        "street_address": {"type": "string"},
        "city": {"type": "string"},
        "state": {"type": "string"},
    },
    "required": ["street_address", "city", "state"],
}


@pytest.mark.parametrize(
    ("schema", "document"),
    [
        # The issue's case: the $ref's properties first, then the allOf sibling's.
        (
            {
                "definitions": {"address": ADDRESS},
                "allOf": [
                    {"$ref": "#/definitions/address"},
                    {
                        "properties": {"type": {"enum": ["residential", "business"]}},
                        "required": ["type"],
                    },
                ],
            },
            {"street_address": "1 Main St", "city": "X", "state": "Y", "type": "business"},
        ),
        # The same parts in the other order.
        (
            {
                "definitions": {"address": ADDRESS},
                "allOf": [
                    {"properties": {"type": {"const": "business"}}, "required": ["type"]},
                    {"$ref": "#/definitions/address"},
                ],
            },
            {"type": "business", "street_address": "1 Main St", "city": "X", "state": "Y"},
        ),
        # Sibling keywords of a 2020-12 $ref, in either order.
        (
            {
                "$defs": {"b": {"properties": {"b": {"type": "integer"}}}},
                "$ref": "#/$defs/b",
                "properties": {"a": {"type": "integer"}},
                "required": ["a", "b"],
            },
            {"b": 2, "a": 1},
        ),
        (
            {
                "$defs": {"b": {"properties": {"b": {"type": "integer"}}}},
                "properties": {"a": {"type": "integer"}},
                "$ref": "#/$defs/b",
                "required": ["a", "b"],
            },
            {"a": 1, "b": 2},
        ),
        # allOf before or after the sibling properties.
        (
            {
                "allOf": [{"properties": {"b": {"type": "integer"}}}],
                "properties": {"a": {"type": "integer"}},
                "required": ["a", "b"],
            },
            {"b": 2, "a": 1},
        ),
        (
            {
                "properties": {"a": {"type": "integer"}},
                "allOf": [{"properties": {"b": {"type": "integer"}}}],
                "required": ["a", "b"],
            },
            {"a": 1, "b": 2},
        ),
    ],
)
def test_merged_schemas_list_properties_in_schema_order(
    schema: dict[str, Any], document: dict[str, Any]
) -> None:
    assert jsonschema.Draft202012Validator(schema).is_valid(document)
    g = compile_grammar(to_kbnf(schema))
    assert g.accepts(json.dumps(document).encode()), document


@pytest.mark.parametrize("factor", [10, 4000, 4096, 10000, 7 * 10**6, 10**30, 120000, 250])
@pytest.mark.parametrize("kind", ["integer", "number"])
def test_multiple_of_large_factors_with_trailing_zeros_is_exact(factor: int, kind: str) -> None:
    """``c * 10**t`` factors (c * (t + 1) up to 8192) compile; on plain integers (positive,
    negative, at, around and far from the multiples) the grammar agrees with jsonschema exactly, and
    it never accepts a spelling with a fraction whose decimal value is not a multiple."""
    schema = {"type": kind, "multipleOf": factor}
    g = compile_grammar(to_kbnf(schema))
    validator = jsonschema.Draft202012Validator(schema)
    candidates = {0, 1, factor // 10, factor // 2}
    for j in range(1, 12):
        candidates |= {j * factor, j * factor + 1, j * factor - 1, j * factor + factor // 10}
    candidates |= {10**n for n in range(40)} | {7 * 10**n for n in range(40)}
    for v in sorted(candidates):
        for text in (str(v), f"-{v}"):
            assert g.accepts(text.encode()) == validator.is_valid(json.loads(text)), text
        for text in (f"{v}.0", f"{v}.000", f"{v}.5"):
            if g.accepts(text.encode()):
                # exact decimal arithmetic: json.loads would round 7e22 to a float
                assert Fraction(text) % factor == 0, text


def test_additional_key_spellings_on_and_off_the_named_keys_trie() -> None:
    # docs/json_schema.md, "Keys of additional properties": escapes are accepted everywhere
    # except for a printable ASCII character of the names while the key is still a prefix of one.
    schema = {"type": "object", "properties": {"known": {"type": "string"}}}
    g = compile_grammar(to_kbnf(schema))
    accepted = [b'{"kn\\u00f6wn": 1}', b'{"knowns\\u0061": 1}', b'{"\\u00e9": 1}', b'{"kno": 1}']
    for doc in accepted:
        assert json.loads(doc) and jsonschema.Draft202012Validator(schema).is_valid(json.loads(doc))
        assert g.accepts(doc), doc
    # "known" in any spelling with an integer value is invalid; "\u006bx" is a valid subset miss.
    for doc in [b'{"known": 1}', b'{"\\u006bnown": 1}', b'{"kno\\u0077n": 1}', b'{"\\u006bx": 1}']:
        assert not g.accepts(doc), doc


def test_literal_strings_keep_every_escape_spelling() -> None:
    # Enum and const strings are mostly characters JSON spells only as themselves, which the
    # translator copies as they are; '/', '"', '\\' and controls have other spellings ('\\/'
    # is what some encoders write for '/'), each of which decodes to the same valid value
    # (printable ASCII as \\u00XX is outside the grammar by design, see the module docstring).
    values = ["a/b", 'say "hi"', "back\\slash", "tab\there", "plain"]
    schema = {"enum": values}
    g = compile_grammar(to_kbnf(schema))
    spelled = {
        "a/b": [b'"a/b"', b'"a\\/b"'],
        'say "hi"': [b'"say \\"hi\\""'],
        "back\\slash": [b'"back\\\\slash"'],
        "tab\there": [b'"tab\\there"', b'"tab\\u0009here"'],
        "plain": [b'"plain"'],
    }
    for value, docs in spelled.items():
        for doc in docs:
            assert json.loads(doc) == value
            assert g.accepts(doc), doc
    for doc in [b'"a\\/c"', b'"plain/"', b'"a//b"', b'"say hi"']:
        assert not g.accepts(doc), doc
