"""Content aids of the decode loop with scripted logits (no model): the loop guard and choice
scoring, on the native engine and the Llama 3 tokenizer.

A scripted LM ranks tokens by a fixed preference (or by a bigram table), so the grammar alone
decides what it writes: left alone it loops forever inside a value. The tests check that the
guard ends each kind of loop, that every output is in the grammar's language (it validates),
and that choice scoring picks the option whose whole spelling is most probable.
"""

from __future__ import annotations

import json
from functools import lru_cache
from types import SimpleNamespace
from typing import Any, Literal

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch
from test_sdk_support import llama3_tokenizer

import structout
from structout.cache import CompileCache
from structout.choices import choice_sets
from structout.errors import TruncatedOutputError
from structout.json_track import ARRAY, KEY, NUMBER, OBJECT, STRING, JsonTrack
from structout.loop_guard import LoopGuard, counter_suffix, periodic_suffix

VOCAB = 128256


class ScriptedLM(torch.nn.Module):
    """Logits from a script: ``bigram[last token]`` ranks the next tokens (best first) where
    given, else ``prefer`` does; every other token gets 0."""

    def __init__(self, prefer: list[int], bigram: dict[int, list[int]] | None = None) -> None:
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.config = SimpleNamespace(vocab_size=VOCAB, eos_token_id=None)
        self.prefer = prefer
        self.bigram = bigram or {}

    def get_output_embeddings(self) -> None:
        return None

    def _row(self, last: int) -> torch.Tensor:
        row = torch.zeros(VOCAB)
        ranked = self.bigram.get(last, self.prefer)
        for rank, t in enumerate(ranked):
            row[t] = 100.0 - rank
        return row

    def forward(self, input_ids: torch.Tensor, **kwargs: Any) -> Any:
        keep = kwargs.get("logits_to_keep") or input_ids.shape[1]
        ids = input_ids[:, -keep:]
        logits = torch.stack([torch.stack([self._row(t) for t in row]) for row in ids.tolist()])
        return SimpleNamespace(logits=logits, past_key_values=None)


def _tok(text: str) -> int:
    ids = llama3_tokenizer().encode(text, add_special_tokens=False)
    assert len(ids) == 1, (text, ids)
    return int(ids[0])


@lru_cache(maxsize=1)
def _shared() -> tuple[ScriptedLM, structout.Model]:
    """One scripted LM and one Model over it (the vocabulary and its token facts are built once);
    each test sets the script through :func:`_model`."""
    lm = ScriptedLM([])
    return lm, structout.Model(lm, llama3_tokenizer(), cache=CompileCache(disk=False))


def _model(lm: ScriptedLM) -> structout.Model:
    """The shared Model, scripted like ``lm``."""
    shared, model = _shared()
    shared.prefer, shared.bigram = lm.prefer, lm.bigram
    return model


def _run(lm: ScriptedLM, schema: Any, **options: Any) -> Any:
    return _model(lm).generate(
        "x", schema, return_result=True, max_new_tokens=200, chat_template=False, **options
    )


def _valid(schema: dict[str, Any], text: str) -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    value = json.loads(text)
    jsonschema.validate(value, schema)
    return value


# ------------------------------------------------------------------- loops the guard ends
STRING_SCHEMA = {
    "type": "object",
    "properties": {"note": {"type": "string"}},
    "required": ["note"],
    "additionalProperties": False,
}


def test_guard_ends_a_looping_string() -> None:
    lm = ScriptedLM([_tok("ha"), _tok('"}')])
    with pytest.raises(TruncatedOutputError) as info:
        _run(lm, STRING_SCHEMA, loop_guard=False)  # unguarded: "hahaha..." until the budget
    # The error shows where the output started and where it was cut, and keeps all of it.
    message, partial = str(info.value), info.value.partial
    assert partial.startswith('{"note": "') and len(partial) > 300
    assert repr(partial[:40])[:-1] in message and repr(partial[-40:])[1:] in message
    res = _run(lm, STRING_SCHEMA)
    value = _valid(STRING_SCHEMA, res.text)
    assert "hahaha" in value["note"] and len(value["note"]) <= 12, res.text


def test_guard_ends_a_looping_number() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    res = _run(ScriptedLM([_tok("1"), _tok("}")]), schema, loop_guard=LoopGuard(max_run=5))
    assert _valid(schema, res.text) == {"n": 11111}, res.text
    # Unbounded numbers end at max_number_chars even when their digits do not repeat.
    lm = ScriptedLM([_tok("12"), _tok("34"), _tok("5"), _tok("}")])
    res = _run(lm, schema, loop_guard=LoopGuard(max_number_chars=6))
    assert len(str(_valid(schema, res.text)["n"])) <= 7, res.text


def test_guard_ends_a_looping_key() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    lm = ScriptedLM([_tok("ab"), _tok('":'), _tok("1"), _tok("}")])
    res = _run(lm, schema)
    value = _valid(schema, res.text)
    (key,) = value
    assert "ababab" in key and len(key) <= 10, res.text


@pytest.mark.slow
def test_guard_ends_repeating_array_items() -> None:
    schema = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
            "required": ["id", "name"],
            "additionalProperties": False,
        },
    }
    # Items repeat exactly: {"id": 7, "name": "x"}, {"id": 7, "name": "x"}, ...
    lm = ScriptedLM([_tok("x"), _tok("{"), _tok("7"), _tok("]")])
    lm.bigram = {_tok("7"): [_tok(",")], _tok("x"): [_tok('"},'), _tok("]")]}
    with pytest.raises(TruncatedOutputError):
        _run(lm, schema, loop_guard=False)
    res = _run(lm, schema)
    value = _valid(schema, res.text)
    assert 2 <= len(value) <= 4, res.text


def test_guard_ends_items_repeating_with_a_counter() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    counter = [_tok(str(d)) for d in range(10)]
    # "item 1", "item 2", ... : the strings differ, only in their numbers.
    lm = ScriptedLM([_tok("item"), _tok(" "), *counter, _tok('"')])
    lm.bigram = {_tok(" "): counter}
    for d in range(10):
        lm.bigram[_tok(str(d))] = [_tok('",'), _tok("]")]
    res = _run(lm, schema, loop_guard=LoopGuard(min_repeats=50))
    value = _valid(schema, res.text)
    assert 2 <= len(value) <= 6, res.text


def test_guard_steps_aside_where_closing_is_impossible() -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "minLength": 20}},
        "required": ["s"],
        "additionalProperties": False,
    }
    res = _run(ScriptedLM([_tok("a"), _tok('"}')]), schema)
    value = _valid(schema, res.text)
    assert len(value["s"]) == 20, res.text  # closed as soon as the grammar allowed it


def test_guard_closes_everything_when_the_budget_runs_low() -> None:
    schema = {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
    # Items never repeat (counting 10, 11, 12, ...), so only the budget ends them.
    lm = ScriptedLM([_tok("["), _tok("1"), _tok("],"), _tok(",")])
    res = _model(lm).generate(
        "x",
        schema,
        return_result=True,
        max_new_tokens=64,
        chat_template=False,
        loop_guard=LoopGuard(max_run=99, min_repeats=99, counter_repeats=0, max_number_chars=40),
    )
    _valid(schema, res.text)
    assert len(res.token_ids) <= 64


@pytest.mark.slow
def test_guarded_outputs_stay_in_the_grammar() -> None:
    """Random token preferences on a schema with every kind of value: whatever the guard does,
    the output validates."""
    import random

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 30},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "score": {"type": "number"},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "tags", "score", "meta", "ok"],
        "additionalProperties": False,
    }
    pieces = ["a", "ab", "1", "0", ".", '"', '",', "]", "}", ",", " ", "x", "true", '":', "-", "e"]
    ids = [_tok(p) for p in pieces]
    for seed in range(6):
        rng = random.Random(seed)
        lm = ScriptedLM(rng.sample(ids, len(ids)))
        guard = LoopGuard(max_run=3 + seed % 3, min_repeats=2 + seed % 2)
        res = _run(lm, schema, loop_guard=guard)
        _valid(schema, res.text)


# ------------------------------------------------------------------------ choices as wholes
def test_choices_are_scored_by_their_whole_spelling() -> None:
    tok = llama3_tokenizer()
    schema = Literal["apple pie", "banana"]
    pie = tok.encode('"apple pie"', add_special_tokens=False)
    banana = tok.encode('"banana"', add_special_tokens=False)
    assert len(pie) >= 2
    # The first token of "apple pie" is the most likely, everything after it very unlikely;
    # "banana" is a little less likely at first and certain after.
    lm = ScriptedLM([pie[0], banana[0]])
    lm.bigram = {t: [] for t in pie}  # after the first token of "apple pie": nothing stands out
    res = _model(lm).generate(
        "x", schema, return_result=True, chat_template=False, score_choices=False
    )
    assert res.value == "apple pie"  # greedy, token by token
    res = _model(lm).generate("x", schema, return_result=True, chat_template=False)
    assert res.value == "banana"


def test_choice_scoring_is_independent_of_option_order() -> None:
    lm = ScriptedLM([_tok("neg"), _tok("pos"), _tok("ne")])
    answers = {
        _model(lm).generate("x", Literal[labels], chat_template=False)  # type: ignore[valid-type]
        for labels in (("positive", "negative", "neutral"), ("neutral", "negative", "positive"))
    }
    assert len(answers) == 1


def test_choice_sets_of_a_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"enum": ["b", "a"]},
            "flag": {"type": "boolean"},
            "maybe": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
            "one": {"const": 1},
            "text": {"type": "string"},
        },
        "$defs": {"Color": {"enum": ["red", "green"]}},
    }
    sets = set(choice_sets(schema))
    assert (b'"a"', b'"b"') in sets
    assert (b"false", b"true") in sets
    assert (b'"green"', b'"red"', b"null") in sets
    assert (b'"green"', b'"red"') in sets
    assert all(len(s) >= 2 for s in sets)


# --------------------------------------------------------------------------- the pieces
def test_json_track_frames() -> None:
    track = JsonTrack()
    track.feed(b'{"a": [1, "x\\"y", {"k": tr')
    assert [f.kind for f in track.frames] == [OBJECT, ARRAY, OBJECT, NUMBER]
    track.feed(b'ue}], "')
    assert [f.kind for f in track.frames] == [OBJECT, KEY]
    track.feed(b'b": "')
    assert [f.kind for f in track.frames] == [OBJECT, STRING]
    assert track.value_prefix(8) == b'"'
    assert track.value_prefix(0) is None  # longer than any option: not a choice point
    track.feed(b'v"}')
    assert track.frames == []


def test_periodic_and_counter_suffixes() -> None:
    guard = LoopGuard()
    assert periodic_suffix(b'"aaaaaa', guard) == (6, 1)
    assert periodic_suffix(b'"aaaaa', guard) is None
    assert periodic_suffix(b"x A.A.A.", guard) == (6, 2)
    assert periodic_suffix(b"x      ", guard) is None  # indentation is not a loop
    assert periodic_suffix(b"2148000", guard) is None
    assert periodic_suffix(b"1000000000", guard, in_number=True) is None  # a round number
    assert periodic_suffix(b'"12:00:00.000000', guard) == (6, 1)  # in a string: a loop
    text = b'[{"q": 5}, {"q": 6}, {"q": 7}, {"q": 8}, '
    assert counter_suffix(text, guard) == len(text) - 1
    assert counter_suffix(b"[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ", guard) is None  # just data


def test_guard_breaks_a_loop_it_cannot_close() -> None:
    """Digits of a date-time's fraction loop where no quote may follow yet (a time zone is
    required): the guard bans repeating the unit, so the loop breaks and the value ends."""
    schema = {
        "type": "object",
        "properties": {"at": {"type": "string", "format": "date-time"}},
        "required": ["at"],
        "additionalProperties": False,
    }
    digits = [_tok(str(d)) for d in range(10)]
    lm = ScriptedLM([_tok("0"), *digits[1:], _tok("T"), _tok(":"), _tok("."), _tok("Z")])
    lm.bigram = {_tok("Z"): [_tok('"}')]}
    with pytest.raises(TruncatedOutputError):
        _run(lm, schema, loop_guard=False)
    res = _run(lm, schema)
    value = _valid(schema, res.text)
    assert "000000" in value["at"] and "0000000" not in value["at"], res.text


def test_bitmask_narrowing_equals_logit_narrowing() -> None:
    """The vLLM backend narrows bitmask rows; the SDK narrows logits: the same tokens remain."""
    import numpy as np

    from structout.loop_guard import RowGuard, token_closers
    from structout.tokens import TokenSpace

    tok = llama3_tokenizer()
    data = [tok.decode([i]).encode("utf-8", "surrogatepass") for i in range(VOCAB)]
    space = TokenSpace(data, [], VOCAB, lambda s: tok.encode(s, add_special_tokens=False))
    closers = token_closers(space)
    rng = np.random.default_rng(0)
    for prefix in (b'{"a": "hahaha', b'{"a": 1111111', b"[1, 2, [3, 3, 3, 3], ", b'{"k": "x'):
        guard = RowGuard(LoopGuard(max_run=3, min_repeats=2), JsonTrack(), 1000)
        guard.track.feed(prefix)
        guard.observe(1000)
        guard.target = guard.target if guard.target is not None else 0
        allowed = rng.random(VOCAB) < 0.3
        logits = np.where(allowed, 0.0, -np.inf).astype(np.float32)
        words = np.packbits(np.append(allowed, np.zeros(-VOCAB % 32, bool)), bitorder="little")
        row = words.view(np.int32).copy()
        narrowed = guard.narrow(logits, closers)
        assert guard.narrow_bitmask(row, closers) == narrowed
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:VOCAB].astype(bool)
        assert (bits == np.isfinite(logits)).all(), prefix
        assert narrowed == (bits.sum() < allowed.sum())
