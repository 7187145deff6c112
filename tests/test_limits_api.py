"""``structout.Limits`` and the limit keywords reach the translator and the engine from every entry
point (``compile_json_schema``, ``compile_type``, ``Model``, the transformers processor), are part
of the cache keys, and deep inputs never escape as a bare ``RecursionError``."""

from __future__ import annotations

import json
from typing import Any

import pytest

import structout as so
from structout.errors import LimitExceededError
from structout.limits import (
    DEFAULT_MAX_NUMBER_LENGTH,
    ENGINE_LIMITS,
    TRANSLATOR_LIMITS,
    Limits,
    split_options,
)

DEEP = {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
PATTERN = {"type": "string", "pattern": "^[a-z]{20}[0-9]{20}$"}


def _vocab() -> Any:
    toks: list[bytes | None] = [None] + [bytes([b]) for b in range(32, 127)]
    return so.Vocabulary.from_bytes(toks, eos_token_ids=[0])


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_limits_reject_non_positive_integers(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_schema_depth"):
        Limits(max_schema_depth=bad)


def test_mask_cache_bytes_may_be_zero_but_not_negative() -> None:
    assert Limits(mask_cache_bytes=0).engine_options() == {"mask_cache_bytes": 0}
    with pytest.raises(ValueError, match="mask_cache_bytes"):
        Limits(mask_cache_bytes=-1)


def test_limits_split_into_translator_and_engine_options() -> None:
    lim = Limits(max_schema_depth=5, dfa_size_limit=1 << 20, max_items_per_set=100)
    # max_number_length is the one limit set by default (generation's bound on numbers).
    bound = {"max_number_length": DEFAULT_MAX_NUMBER_LENGTH}
    assert lim.translator_options() == {"max_schema_depth": 5, **bound}
    assert lim.engine_options() == {"dfa_size_limit": 1 << 20, "max_items_per_set": 100}
    assert Limits().translator_options() == bound and Limits().engine_options() == {}
    names = set(Limits.__dataclass_fields__)
    assert names == set(ENGINE_LIMITS) | set(TRANSLATOR_LIMITS)
    t, e = split_options({"indent": 2, "max_total_items": 9})
    assert t == {"indent": 2} and e == {"max_total_items": 9}


def test_compile_json_schema_applies_translator_limits() -> None:
    vocab = _vocab()
    assert so.compile_json_schema(DEEP, vocab) is not None
    with pytest.raises(LimitExceededError, match="max_schema_depth"):
        so.compile_json_schema(DEEP, vocab, max_schema_depth=1)


def test_compile_json_schema_applies_engine_limits() -> None:
    vocab = _vocab()
    assert so.compile_json_schema(PATTERN, vocab) is not None
    with pytest.raises(LimitExceededError, match="dfa_size_limit"):
        so.compile_json_schema(PATTERN, vocab, dfa_size_limit=64)


def _masks(compiled: Any, text: bytes) -> tuple[list[list[int]], list[dict[str, int]]]:
    """The mask before each byte of ``text`` (fed one byte per token) and the cache stats."""
    m = compiled.matcher()
    masks, stats = [], []
    for k in range(len(text) + 1):
        if k:
            assert m.accept_token(text[k - 1] - 31)  # token id of a printable byte
        bm = so.allocate_token_bitmask(1, compiled.vocab_size)
        m.fill_next_token_bitmask(bm)
        masks.append(bm[0].tolist())
        stats.append(compiled.mask_cache_stats())
    return masks, stats


@pytest.mark.parametrize("limit", [0, 40, 1000])
def test_mask_cache_bytes_bounds_the_mask_cache_and_keeps_masks_exact(limit: int) -> None:
    schema = {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
    doc = json.dumps([[1, 2], [3, 4], [5], [6, 7, 8], [9, 10]]).encode()
    reference, ref_stats = _masks(so.compile_json_schema(schema, _vocab()), doc)
    assert ref_stats[-1]["limit"] == 64 << 20 and ref_stats[-1]["hits"] > 0
    got, stats = _masks(
        so.compile_json_schema(schema, _vocab(), **Limits(mask_cache_bytes=limit).engine_options()),
        doc,
    )
    assert got == reference
    assert all(s["bytes"] <= limit == s["limit"] for s in stats), stats
    if limit == 0:
        assert all(s["entries"] == 0 for s in stats)


def test_memory_usage_counts_what_the_grammar_keeps() -> None:
    schema = {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
    doc = json.dumps([[1, 2], [3, 4], [5], [6, 7, 8], [9, 10]]).encode()
    limits = Limits(mask_cache_bytes=1 << 20).engine_options()
    so.configure_cache(clear=True)  # a compiled grammar of its own, not one an earlier test used
    compiled = so.compile_json_schema(schema, _vocab(), **limits)
    # Fresh: its rules and automata (what the grammar alone counts, plus a slot per automaton),
    # no mask cache and no slice tables yet.
    fresh = compiled.memory_usage
    alone = so.compile_grammar(so.schema.to_kbnf(schema)).memory_usage
    assert alone <= fresh <= alone + 1024
    _, stats = _masks(compiled, doc)
    # After masks: plus the mask cache's bytes (and the slice tables built on first use).
    grown = compiled.memory_usage
    assert grown >= fresh + stats[-1]["bytes"] > fresh
    assert grown <= fresh + stats[-1]["bytes"] + (64 << 10)


def test_compile_type_applies_limits() -> None:
    vocab = _vocab()
    assert so.compile_type(list[list[int]], vocab) is not None
    with pytest.raises(LimitExceededError):
        so.compile_type(list[list[int]], vocab, max_schema_depth=1)


@pytest.mark.parametrize("as_bytes", [False, True])
def test_deep_schema_text_is_a_limit_error_not_recursion(as_bytes: bool) -> None:
    text = '{"type": "array", "items": ' * 5_000 + "{}" + "}" * 5_000
    with pytest.raises(LimitExceededError):
        so.compile_json_schema(text.encode() if as_bytes else text, _vocab())


def test_schema_text_and_bytes_compile_like_dicts() -> None:
    vocab = _vocab()
    m = so.compile_json_schema(json.dumps(DEEP).encode(), vocab).matcher()
    assert m.accept_bytes(b"[[1], []]") and m.can_finish()
    with pytest.raises(TypeError):
        so.compile_json_schema(42, vocab)


def test_model_limits_reach_the_translator_and_engine() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from test_sdk_support import llama3_tokenizer, tiny_llama

    from structout.cache import CompileCache

    cache = CompileCache(disk=False)
    hf = tiny_llama()
    tok = llama3_tokenizer()
    model = so.Model(hf, tok, cache=cache)
    assert model.compile(DEEP).grammar is not None
    strict = so.Model(hf, tok, cache=cache, limits=Limits(max_schema_depth=1))
    with pytest.raises(LimitExceededError, match="max_schema_depth"):
        strict.compile(DEEP)
    # Engine limits are part of the compiled-grammar key: a cached grammar compiled without
    # the limit is not reused for a model that sets it.
    assert model.compile(PATTERN).grammar is not None
    tight = so.Model(hf, tok, cache=cache, limits=Limits(dfa_size_limit=64))
    with pytest.raises(LimitExceededError, match="dfa_size_limit"):
        tight.compile(PATTERN)


def test_transformers_processor_takes_limits() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from test_sdk_support import llama3_tokenizer

    from structout.integrations.transformers import StructuredLogitsProcessor

    with pytest.raises(LimitExceededError, match="max_schema_depth"):
        StructuredLogitsProcessor(llama3_tokenizer(), _nested(3), limits=Limits(max_schema_depth=2))
    assert StructuredLogitsProcessor(llama3_tokenizer(), _nested(3)).kbnf
