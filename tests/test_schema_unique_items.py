"""``uniqueItems`` over any items: the engine's ``unique!`` compares items as JSON values.

Documents are written with chosen spellings (``1``, ``1.0``, ``1e0``, ``10e-1``, ``-0``, big
exponents, string escapes, key orders) and checked against ``jsonschema`` (numbers parsed as
``Decimal``, so equal decimals are equal and big exponents stay exact): the grammar accepts a
document exactly when it is valid. Random arrays from a small generator do the same; masks are
brute-forced at every position of documents with repeated values, and rollback, fork and the
disk cache keep the sets of items read.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from test_masks_exact import feed_and_check, fewest_tokens, fill, loaded_from_disk, small_vocab

import structout as so
from structout.schema import to_kbnf, translate

ANY_ITEMS: dict[str, Any] = {"type": "array", "uniqueItems": True}


def valid(schema: dict[str, Any], text: str) -> bool:
    doc = json.loads(text, parse_float=Decimal)
    return bool(jsonschema.Draft202012Validator(schema).is_valid(doc))


SPELLINGS = [
    # (document, has a duplicate)
    ("[1, 1]", True),
    ("[1, 1.0]", True),
    ("[1, 1e0]", True),
    ("[1, 10e-1]", True),
    ("[1.0, 100E-2]", True),
    ("[0.1e1, 1]", True),
    ("[0, -0]", True),
    ("[-0.0, 0e7]", True),
    ("[1e400, 10e399]", True),
    ("[1e400, 1e401]", False),
    ("[123456789012345678901234567890, 1.23456789012345678901234567890e29]", True),
    ("[1e-400, 0.1e-399]", True),
    ("[1.0000000000000000000000001, 1]", False),
    ("[1, 2, 3, 2.0]", True),
    ("[1, -1]", False),
    ("[true, 1]", False),
    ("[false, 0]", False),
    ('[null, 0, false, ""]', False),
    ('["a", "\\u0061"]', True),
    ('["a\\/b", "a/b"]', True),
    ('["\\ud83d\\ude00", "\U0001f600"]', True),
    ('["a", "A"]', False),
    ('["a", "a "]', False),
    ('[{"a": 1, "b": 2}, {"b": 2, "a": 1}]', True),
    ('[{"a": 1, "b": 2}, {"b": 2.0, "a": 1e0}]', True),
    ('[{"a": 1}, {"a": 1, "b": 2}]', False),
    ('[{"a": 1}, {"b": 1}]', False),
    ("[[1, 2], [1.0, 2e0]]", True),
    ("[[1, 2], [2, 1]]", False),
    ("[[1, [2]], [1, [2.0]]]", True),
    ("[[], {}]", False),
    ("[[], []]", True),
    ("[{}, {}]", True),
    ("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]", False),
    ("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1.1e1]", True),
]


@pytest.mark.parametrize("text,duplicate", SPELLINGS)
def test_spellings_of_equal_values_against_jsonschema(text: str, duplicate: bool) -> None:
    g = so.compile_grammar(to_kbnf(ANY_ITEMS))
    assert valid(ANY_ITEMS, text) == (not duplicate)
    assert g.accepts(text.encode()) == (not duplicate), text


def test_typed_items_prefix_items_and_counts() -> None:
    cases: list[tuple[dict[str, Any], list[str]]] = [
        (
            {"type": "array", "items": {"type": "number"}, "uniqueItems": True},
            ["[]", "[1]", "[1, 2]", "[1, 1.0]", "[2.5, 25e-1]", '["a"]'],
        ),
        (
            {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 2},
            ["[]", '["a"]', '["a", "b"]', '["a", "\\u0061"]', '["a", "b", "c"]'],
        ),
        (
            {
                "type": "array",
                "prefixItems": [{"type": "number"}, {"type": "string"}],
                "items": {"type": "number"},
                "uniqueItems": True,
                "maxItems": 4,
            },
            [
                "[]",
                "[1]",
                '[1, "1"]',
                '[1, "a", 2]',
                '[1, "a", 1.0]',
                '[1, "a", 2, 3]',
                '[1, "a", 2, 3, 4]',
                '[1, "a", 2, 2]',
                "[1, 2]",
            ],
        ),
        (
            {
                "type": "array",
                "prefixItems": [{"type": "string"}, {"type": "string"}],
                "items": False,
                "uniqueItems": True,
            },
            ["[]", '["a"]', '["a", "b"]', '["a", "a"]', '["a", "b", "c"]'],
        ),
        (
            {
                "type": "array",
                "items": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
                "uniqueItems": True,
            },
            ["[[1], [2]]", "[[1], [1]]", "[[1, 2], [2, 1]]", "[[1, 1]]", "[[], []]"],
        ),
    ]
    for schema, docs in cases:
        for layout in ({}, {"whitespace": "flexible"}):
            tr = translate(schema, **layout)
            assert "unique!" in tr.kbnf, tr.kbnf
            g = so.compile_grammar(tr.kbnf)
            for text in docs:
                assert g.accepts(text.encode()) == valid(schema, text), (schema, layout, text)


def test_small_finite_domains_keep_the_subset_rules() -> None:
    schema = {"type": "array", "items": {"enum": ["x", "y", 3]}, "uniqueItems": True}
    kbnf = to_kbnf(schema)
    assert "unique!" not in kbnf
    g = so.compile_grammar(kbnf)
    assert g.accepts(b'[3, "x"]') and not g.accepts(b'["x", "x"]')


def test_indented_layout() -> None:
    schema = {"type": "array", "items": {"type": "object"}, "uniqueItems": True}
    tr = translate(schema, indent=2)
    g = so.compile_grammar(tr.kbnf)
    for doc in ([{"a": 1}, {"a": 2}], [{"a": 1, "b": [1]}, {"b": [1.0], "a": 1}]):
        text = tr.layout.dumps(doc)
        if doc[1] == {"b": [1.0], "a": 1}:
            text = text.replace("1.0", "1e0")
        assert g.accepts(text.encode()) == valid(schema, text), text


# ------------------------------------------------------------------ random arrays


def spell_number(rng: random.Random, n: int) -> str:
    """One of several spellings of the integer ``n``."""
    forms = [
        str(n),
        f"{n}.0",
        f"{n}e0",
        f"{n * 10}e-1",
        f"{n}.00E+0",
        f"0.{n}e1" if 0 < n < 10 else str(n),
    ]
    text = rng.choice(forms)
    if n == 0 and rng.random() < 0.5:
        text = "-" + text
    return text


def spell_string(rng: random.Random, s: str) -> str:
    out = []
    for c in s:
        r = rng.random()
        out.append(f"\\u{ord(c):04x}" if r < 0.3 else ("\\/" if c == "/" else c))
    return '"' + "".join(out) + '"'


def spell(rng: random.Random, v: Any, flexible: bool) -> str:
    sep = ", " if not flexible else rng.choice([",", ", ", " ,\n "])
    colon = ": " if not flexible else rng.choice([":", " : "])
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return spell_number(rng, v)
    if isinstance(v, str):
        return spell_string(rng, v)
    if isinstance(v, list):
        return "[" + sep.join(spell(rng, x, flexible) for x in v) + "]" if v else "[]"
    items = list(v.items())
    rng.shuffle(items)
    if not items:
        return "{}"
    return (
        "{"
        + sep.join(spell_string(rng, k) + colon + spell(rng, x, flexible) for k, x in items)
        + "}"
    )


POOL: list[Any] = [
    0,
    1,
    2,
    10,
    True,
    False,
    None,
    "a",
    "b/",
    "",
    [],
    [1],
    [1, 2],
    [2, 1],
    {},
    {"a": 1},
    {"a": 1, "b": [2]},
    {"b": 1},
]


@pytest.mark.parametrize("flexible", [False, True], ids=["compact", "flexible"])
def test_random_arrays_against_jsonschema(flexible: bool) -> None:
    rng = random.Random(35)
    schemas: list[dict[str, Any]] = [
        ANY_ITEMS,
        {**ANY_ITEMS, "minItems": 2, "maxItems": 4},
        {**ANY_ITEMS, "prefixItems": [{"type": "integer"}, {"type": "string"}]},
    ]
    for schema in schemas:
        layout = {"whitespace": "flexible"} if flexible else {}
        g = so.compile_grammar(to_kbnf(schema, **layout))
        accepted = 0
        for _ in range(400):
            doc = [rng.choice(POOL) for _ in range(rng.randint(0, 5))]
            text = spell(rng, doc, flexible)
            want = valid(schema, text)
            assert g.accepts(text.encode()) == want, (schema, text, want)
            accepted += want
        assert 40 < accepted < 360, accepted  # both outcomes are exercised


# ------------------------------------------------------------------ masks, rollback, fork


def test_masks_are_exact_around_duplicates() -> None:
    """Brute-forced masks at every position of documents that meet equal values under other
    spellings (numbers, escapes, key orders), through one compiled grammar and its mask cache."""
    vocab = small_vocab()
    tokenize = fewest_tokens(vocab)
    g = so.compile_json_schema(ANY_ITEMS, vocab)
    rng = random.Random(3)
    docs = [
        b"[1, 10, 1.9, 0, 19e-9, 9]",
        b'["a", "b", "ab", "ba"]',
        b'[{"a": 1}, {"b": 1}, {"a": 1, "b": 0}]',
        b"[[1, 0], [0, 1], [1]]",
        b'[1, "1", true, null, {}]',
    ]
    for text in docs * 2:  # the second round meets cached masks
        toks = tokenize(text)
        feed_and_check(g, vocab, toks, text.decode(), range(len(toks) + 1), rng)


def test_masks_are_exact_beside_unique_arrays() -> None:
    """Strings outside the items keep the free-text shortcuts; masks stay exact around them."""
    vocab = small_vocab()
    tokenize = fewest_tokens(vocab)
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "string"},
            "x": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "e": {"type": "string"},
        },
        "required": ["n", "x", "e"],
    }
    g = so.compile_json_schema(schema, vocab)
    rng = random.Random(4)
    for doc in ({"n": "ab", "x": ["ab", "a", "ba"], "e": "a b"},) * 2:
        text = json.dumps(doc).encode()
        toks = tokenize(text)
        feed_and_check(g, vocab, toks, text.decode(), range(len(toks) + 1), rng)


def token_ids(vocab: Any) -> dict[bytes, int]:
    return {b: i for i, b in enumerate(vocab.all_token_bytes()) if b and not vocab.is_special(i)}


def test_mask_bits_after_repeats() -> None:
    """After ``["a", "a`` the mask drops ``"`` (it would end a second ``"a"``) and keeps ``b"``;
    after ``[1, `` it keeps every start of a value (``1`` too: ``10`` may follow) but drops
    ``1]`` and ``1,``; after ``[1, 1`` it drops ``]`` and ``,`` but keeps ``0`` and ``.``."""
    vocab = small_vocab()
    tokenize = fewest_tokens(vocab)
    ids = token_ids(vocab)
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    g = so.compile_json_schema(schema, vocab)
    m = g.matcher()
    assert all(m.accept_token(t) for t in tokenize(b'["a", "a'))
    bits = fill(m, vocab.size)
    assert not bits[ids[b'"']] and not bits[ids[b'",']]
    assert bits[ids[b'b"']] and bits[ids[b"a"]] and bits[ids[b'a"']]
    n = so.compile_json_schema(ANY_ITEMS, vocab).matcher()
    assert all(n.accept_token(t) for t in tokenize(b"[1, "))
    bits = fill(n, vocab.size)
    for tok in (b"1", b"0", b"-", b"9", b'"', b"[", b"{", b"0]", b"10", b"1."):
        assert bits[ids[tok]], tok
    assert not bits[ids[b"1]"]] and not bits[ids[b"1,"]]
    assert all(n.accept_token(t) for t in tokenize(b"1"))
    bits = fill(n, vocab.size)
    assert not bits[ids[b"]"]] and not bits[ids[b","]] and not bits[ids[b", "]]
    assert bits[ids[b"0"]] and bits[ids[b"."]] and bits[ids[b"0]"]]


def test_rollback_and_fork_keep_the_items_read() -> None:
    vocab = small_vocab()
    tokenize = fewest_tokens(vocab)
    g = so.compile_json_schema(ANY_ITEMS, vocab)
    m = g.matcher()
    assert all(m.accept_token(t) for t in tokenize(b'[1, "a", '))
    f = m.fork()
    assert all(f.accept_token(t) for t in tokenize(b'"b"]'))
    assert f.can_finish()
    before = m.num_tokens
    assert not all(m.accept_token(t) for t in tokenize(b'"a"'))
    m.rollback(m.num_tokens - before)
    assert all(m.accept_token(t) for t in tokenize(b"9, 0"))
    m.rollback(m.num_tokens - before)
    assert not all(m.accept_token(t) for t in tokenize(b"1]"))
    m.rollback(m.num_tokens - before)
    assert all(m.accept_token(t) for t in tokenize(b"1.9]")) and m.can_finish()


def test_compiled_grammar_from_disk_keeps_the_item_checks(tmp_path: Path) -> None:
    vocab = small_vocab()
    tokenize = fewest_tokens(vocab)
    kbnf = to_kbnf({"type": "array", "items": {"type": "number"}, "uniqueItems": True})
    loaded = loaded_from_disk(tmp_path, kbnf, vocab)
    text = b"[1, 10, 0]"
    toks = tokenize(text)
    feed_and_check(loaded, vocab, toks, text.decode(), range(len(toks) + 1), random.Random(2))
    m = loaded.matcher()
    assert all(m.accept_token(t) for t in tokenize(b"[1, 9, "))
    assert not all(m.accept_token(t) for t in tokenize(b"1.0]"))


def test_finite_domain_beyond_the_subset_rules_dead_ends_without_accepting() -> None:
    """Integers 0..20 (21 values) with minItems 30: no valid document exists; the grammar
    reaches a dead end after 21 distinct items and never accepts."""
    schema = {
        "type": "array",
        "items": {"type": "integer", "minimum": 0, "maximum": 20},
        "uniqueItems": True,
        "minItems": 30,
    }
    g = so.compile_grammar(to_kbnf(schema))
    r = g.recognizer()
    assert r.feed(b"[" + b", ".join(str(i).encode() for i in range(21)))
    assert not r.feed(b", 5") and not r.feed(b"]") and not r.feed(b", 1,")
    # (`1` could still grow into 10..19, all read: the dead end)
    assert r.feed(b", 1") and not r.is_complete() and r.allowed_bytes() == b"0123456789"
    assert not any(r.feed(bytes([b])) for b in b"0123456789,]")


def test_contains_with_unique_items_is_refused() -> None:
    schema = {"type": "array", "contains": {"type": "integer"}, "uniqueItems": True}
    with pytest.raises(so.UnsupportedSchemaError) as info:
        to_kbnf(schema)
    assert info.value.keyword == "uniqueItems"


def test_kbnf_construct_errors() -> None:
    ok = "start ::= '[' unique!(', ', 'a' | 'b' | 'c', 2, 3) ']';"
    g = so.compile_grammar(ok)
    assert g.accepts(b"[a, b]") and g.accepts(b"[c, b, a]")
    assert not g.accepts(b"[a]") and not g.accepts(b"[a, a]") and not g.accepts(b"[a, b, c, a]")
    for bad in (
        "start ::= unique!(', ');",
        "start ::= unique!(', ', 'a', 0);",
        "start ::= unique!(', ', 'a', 3, 2);",
        "start ::= unique!(', ', 'a', 1, 2, 3);",
        "start ::= unique!(', ', 'a', 1, 'b');",
        "start ::= unique!(', ', ''|'a');",
    ):
        with pytest.raises(so.GrammarError):
            so.compile_grammar(bad)
