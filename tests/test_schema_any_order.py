"""``property_order="any"``: objects take their properties in any order, exactly.

Every permutation of every subset of a small key pool (named required and optional keys, other
keys, values right and wrong) is checked against ``jsonschema`` in three layouts: the grammar
accepts a document exactly when it is valid (documents with a repeated key are never accepted,
their parsed value aside). Token masks of an any-order grammar are brute-forced at every
position of documents in several orders (``test_masks_exact``'s helpers), through one compiled
grammar whose mask cache is shared by all of them.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from test_masks_exact import feed_and_check, fewest_tokens, loaded_from_disk, small_vocab

import structout as so
from structout.__main__ import main
from structout.schema import canonical_schema_key, to_kbnf, translate

LAYOUTS = [{}, {"whitespace": "flexible"}, {"indent": 2}]

BASE: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
    "required": ["a", "b"],
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "closed": {**BASE, "additionalProperties": False},
    "typed_others": {**BASE, "additionalProperties": {"type": "integer"}},
    "open": BASE,
    "patterns": {
        **BASE,
        "required": ["a"],
        "patternProperties": {"^x": {"type": "string"}},
        "additionalProperties": False,
    },
    "all_optional": {**BASE, "required": [], "additionalProperties": False},
    "counted": {
        **BASE,
        "additionalProperties": {"type": "integer"},
        "minProperties": 3,
        "maxProperties": 4,
    },
    "at_most_two": {
        **BASE,
        "required": [],
        "additionalProperties": {"type": "integer"},
        "minProperties": 1,
        "maxProperties": 2,
    },
    "at_least_three": {**BASE, "required": ["a"], "minProperties": 3},
    "one_named_and_others": {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": {"type": "string"},
    },
}

#: Keys tried and two values each (right for some keys, wrong for others).
KEYS = ["a", "b", "c", "d", "x1"]
VALUES: list[Any] = [1, "s", True]


def documents(max_keys: int) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for k in range(max_keys + 1):
        for keys in itertools.permutations(KEYS, k):
            for values in itertools.product(VALUES[:2] if k > 3 else VALUES, repeat=k):
                docs.append(dict(zip(keys, values)))
    return docs


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("layout", LAYOUTS, ids=["compact", "flexible", "indent"])
def test_every_key_order_against_jsonschema(name: str, layout: dict[str, Any]) -> None:
    schema = SCHEMAS[name]
    tr = translate(schema, property_order="any", **layout)
    assert "any_order!" in tr.kbnf
    g = so.compile_grammar(tr.kbnf)
    validator = jsonschema.Draft202012Validator(schema)
    reordered = 0
    for doc in documents(4):
        text = tr.layout.dumps(doc).encode()
        valid = validator.is_valid(doc)
        assert g.accepts(text) == valid, (name, text, valid)
        reordered += valid and list(doc) != sorted(doc, key=KEYS.index)
    assert reordered >= 3, f"{name}: too few valid documents out of the schema's order"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_repeated_keys_are_refused(name: str) -> None:
    tr = translate(SCHEMAS[name], property_order="any")
    g = so.compile_grammar(tr.kbnf)
    for text in [
        '{"a": 1, "b": "s", "a": 1}',
        '{"a": 1, "a": 2}',
        '{"b": "s", "c": true, "a": 1, "c": false}',
        '{"a": 1, "b": "s", "\\u0061": 1}',  # the same key in another spelling
    ]:
        assert not g.accepts(text.encode()), (name, text)


def test_other_keys_may_repeat_only_with_valid_values() -> None:
    """(Repeated other keys, as in the schema's order: each pair's value is checked, so the one
    a parser keeps is valid too.)"""
    g = so.compile_grammar(to_kbnf(SCHEMAS["typed_others"], property_order="any"))
    assert g.accepts(b'{"d": 1, "a": 1, "d": 2, "b": "s"}')
    assert not g.accepts(b'{"d": 1, "a": 1, "d": "x", "b": "s"}')


def test_nested_objects_keep_their_own_keys() -> None:
    inner = {**BASE, "additionalProperties": False}
    schema = {
        "type": "object",
        "properties": {"p": inner, "q": {"type": "array", "items": inner}},
        "required": ["p", "q"],
        "additionalProperties": False,
    }
    g = so.compile_grammar(to_kbnf(schema, property_order="any"))
    ok = (
        '{"q": [{"b": "s", "a": 1}, {"a": 2, "c": true, "b": ""}], '
        '"p": {"c": false, "b": "", "a": 0}}'
    )
    assert g.accepts(ok.encode())
    for bad in [
        '{"q": [{"b": "s", "a": 1, "b": "t"}], "p": {"b": "", "a": 0}}',
        '{"q": [{"b": "s"}], "p": {"b": "", "a": 0}}',
        '{"q": [], "p": {"b": "", "a": 0}, "q": []}',
        '{"p": {"b": "", "a": 0, "p": 1}, "q": []}',
    ]:
        assert not g.accepts(bad.encode()), bad


def test_default_order_is_unchanged_and_options_are_checked() -> None:
    schema = SCHEMAS["typed_others"]
    default = to_kbnf(schema)
    assert default == to_kbnf(schema, property_order="schema")
    assert "any_order!" not in default
    assert canonical_schema_key(schema) != canonical_schema_key(schema, property_order="any")
    with pytest.raises(ValueError, match="property_order"):
        to_kbnf(schema, property_order="sorted")


@pytest.mark.parametrize("counts", [{}, {"minProperties": 30, "maxProperties": 36}])
def test_more_than_32_named_properties_against_jsonschema(counts: dict[str, int]) -> None:
    """Objects with many named properties (and counts) take them in any order too: random
    subsets in random orders, other keys among them, checked against ``jsonschema``."""
    schema = {
        "type": "object",
        "properties": {f"k{i}": {"type": "integer"} for i in range(40)},
        "required": ["k0", "k17", "k39"],
        "patternProperties": {"^x": {"type": "string"}},
        "additionalProperties": False,
        **counts,
    }
    tr = translate(schema, property_order="any")
    assert "any_order!" in tr.kbnf
    g = so.compile_grammar(tr.kbnf)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(35)
    pool = [*schema["properties"], "x1", "x2", "y"]
    valid = 0
    for _ in range(300):
        size = rng.choice([rng.randint(1, len(pool)), rng.randint(26, 36)])
        keys = rng.sample(pool, size)
        if rng.random() < 0.7:  # (mostly with the required ones)
            keys += [k for k in ("k0", "k17", "k39") if k not in keys]
            rng.shuffle(keys)
        doc: dict[str, Any] = {k: ("s" if k[0] == "x" else 1) for k in keys}
        if rng.random() < 0.1:
            doc[keys[0]] = "wrong" if keys[0][0] == "k" else 1
        ok = validator.is_valid(doc)
        valid += ok
        assert g.accepts(tr.layout.dumps(doc).encode()) == ok, (doc, ok)
    assert valid >= 30, valid


@pytest.mark.parametrize("counts", [{}, {"minProperties": 2, "maxProperties": 2}])
def test_masks_are_exact_in_every_order(counts: dict[str, int]) -> None:
    """One compiled grammar (one mask cache) for documents whose states differ only in the keys
    read so far: a mask cached for one set of keys must never answer for another. With counts,
    no mask leads to a dead end (after ``{"a": 1, "b": 9``, only ``}``)."""
    vocab = small_vocab()
    tokenize = fewest_tokens(vocab)
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "d": {"type": "null"}},
        "required": ["a"],
        "additionalProperties": False,
        **counts,
    }
    g = so.compile_json_schema(schema, vocab, property_order="any")
    rng = random.Random(5)
    docs = [{"a": 1, "b": 9}, {"b": 9, "a": 1}, {"d": None, "a": 10}, {"b": 0, "d": None, "a": 1}]
    docs = [d for d in docs if len(d) <= counts.get("maxProperties", 3)]
    for doc in docs * 2:  # the second round meets cached masks
        text = json.dumps(doc).encode()
        tokens = tokenize(text)
        feed_and_check(g, vocab, tokens, text.decode(), range(len(tokens) + 1), rng)


def test_cli_check_takes_any_order_by_default(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps(SCHEMAS["closed"]))
    (tmp_path / "doc.json").write_text('{\n  "b": "s",\n  "a": 1\n}\n')
    args = ["check", str(tmp_path / "s.json"), str(tmp_path / "doc.json")]
    assert main(args) == 0
    assert main([*args, "--property-order", "schema"]) == 1


def test_recursive_optional_members() -> None:
    """A node whose optional member is another node: productive through the other members
    (neither the translator's pruning nor the engine may drop the object)."""
    schema = {
        "$ref": "#/$defs/node",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
                "required": ["v"],
                "additionalProperties": False,
            }
        },
    }
    g = so.compile_grammar(to_kbnf(schema, property_order="any"))
    validator = jsonschema.Draft202012Validator(schema)
    docs: list[Any] = [{"v": 1}, {"next": {"v": 2}, "v": 1}, {"v": 0, "next": {"next": {"v": 1}}}]
    docs += [{"next": {"v": 2}}, {"v": 1, "next": {"v": 2, "next": {"next": {"v": 3}, "v": 4}}}]
    for doc in docs:
        assert g.accepts(json.dumps(doc).encode()) == validator.is_valid(doc), doc


def test_generate_writes_the_models_order() -> None:
    """``generate(..., property_order="any")``: a model preferring ``b`` first writes it first;
    in the schema's order it cannot."""
    from test_sdk_content import ScriptedLM, _model, _tok

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    model = _model(ScriptedLM([_tok(t) for t in ['{"', "b", '":', " ", "1", ",", ' "', "a", "}"]]))
    texts = {}
    for order in ["schema", "any"]:
        r = model.generate(
            "x",
            schema,
            return_result=True,
            max_new_tokens=40,
            chat_template=False,
            property_order=order,
        )
        texts[order] = r.text
        assert r.value == json.loads(r.text)
    assert texts["schema"].startswith('{"a"') and texts["any"].startswith('{"b"'), texts
    with pytest.raises(ValueError, match="property_order"):
        model.generate("x", tools=[], property_order="any")


def test_compiled_grammar_from_disk_keeps_the_member_sets(tmp_path: Path) -> None:
    """The disk entry of an any-order grammar carries its parametric tables: the grammar loaded
    back has the same exact masks (brute-forced) and still refuses a repeated key."""
    vocab = small_vocab()
    tokenize = fewest_tokens(vocab)
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "d": {"type": "null"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    kbnf = to_kbnf(schema, property_order="any")
    loaded = loaded_from_disk(tmp_path, kbnf, vocab)
    rng = random.Random(7)
    text = b'{"d": null, "b": "ab", "a": 1}'
    tokens = tokenize(text)
    feed_and_check(loaded, vocab, tokens, text.decode(), range(len(tokens) + 1), rng)
    m = loaded.matcher()
    assert all(m.accept_token(t) for t in tokenize(b'{"b": "ab", "a": 1'))
    f = m.fork()
    assert all(f.accept_token(t) for t in tokenize(b', "d"'))
    assert not all(m.accept_token(t) for t in tokenize(b', "b"'))
