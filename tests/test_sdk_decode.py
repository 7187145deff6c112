"""The decode loop on a tiny random Llama with the reference (pure-Python) engine.

These tests do not need the native engine: they exercise KV-cache reuse, batching with ragged
jump-forward chunks, re-tokenization at the jump-forward boundary, EOS handling, budgets, sampling
and streaming against a brute-force matcher over a finite language.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch
from test_sdk_support import (
    RefEngine,
    choice_kbnf,
    llama3_tokenizer,
    tiny_llama,
)

import structout.generation as gen
from structout.cache import CompileCache
from structout.errors import TruncatedOutputError
from structout.kv_session import KVSession
from structout.model import Model
from structout.sampling import SamplingParams
from structout.targets import KBNF

PERSON_CHOICES = [
    '{"name": "Alice Smith", "age": 31, "city": "Paris"}',
    '{"name": "Bob", "age": 4, "city": "Rome"}',
    '{"name": "Bob", "age": 47, "city": "Oslo"}',
    '{"name": "Carla", "age": 29, "city": "Lima"}',
]


@pytest.fixture(scope="module")
def model() -> Model:
    return Model(
        tiny_llama(), llama3_tokenizer(), cache=CompileCache(disk=False), engine=RefEngine()
    )


def _grammar(*choices: str) -> KBNF:
    return KBNF(choice_kbnf(*choices))


def test_output_is_always_one_of_the_choices(model: Model) -> None:
    g = _grammar(*PERSON_CHOICES)
    for jf in (True, False):
        for seed in range(3):
            res = model.generate(
                f"person {seed}",
                g,
                temperature=1.0,
                seed=seed,
                jump_forward=jf,
                return_result=True,
                max_new_tokens=64,
            )
            assert res.value in PERSON_CHOICES
            assert res.finish_reason == "stop"
            assert model.tokenizer.decode(res.token_ids) == res.text


def test_fully_forced_output_needs_no_forward_pass(model: Model) -> None:
    text = '{"name": "Alice Smith", "tags": ["a", "b"]}'
    res = model.generate("x", _grammar(text), return_result=True)
    assert res.value == text
    assert res.forward_passes == 0
    # Re-tokenized as the tokenizer would: natural tokens, not one token per byte.
    assert res.token_ids == model.tokenizer.encode(text, add_special_tokens=False)
    assert res.forced_tokens == len(res.token_ids)

    slow = model.generate("x", _grammar(text), return_result=True, jump_forward=False)
    assert slow.value == text
    assert slow.forced_tokens == 0
    assert slow.forward_passes == len(slow.token_ids)


def test_jump_forward_saves_forward_passes_and_keeps_output(model: Model) -> None:
    g = _grammar(*PERSON_CHOICES)
    fast = model.generate("p", g, return_result=True, jump_forward=True)
    slow = model.generate("p", g, return_result=True, jump_forward=False)
    assert fast.value in PERSON_CHOICES and slow.value in PERSON_CHOICES
    assert fast.forced_tokens > 0
    assert fast.forward_passes < slow.forward_passes


def _jump_once(m: Model, choices: list[str], prefix: bytes = b"", pending: str = "") -> list[int]:
    """Run one jump-forward step after ``prefix`` (accepted) and ``pending`` (just sampled)."""
    compiled = m.compile(_grammar(*choices))
    tokens = m._token_space()
    req = gen.RowRequest([1], compiled.grammar, 10)
    dec = gen._Decoder(m.hf_model, tokens, [req], SamplingParams(), 0, m.engine)
    row = dec.rows[0]
    assert row.matcher.accept_bytes(prefix) if prefix else True
    pending_ids = m.tokenizer.encode(pending, add_special_tokens=False) if pending else []
    for t in pending_ids:
        assert row.matcher.accept_token(t)
    chunk = dec._jump(row, pending_ids)
    assert chunk is not None
    # The matcher advanced by exactly the returned tokens.
    assert row.matcher.data == prefix + tokens.bytes_of(chunk)
    return chunk


def _text(ids: list[int]) -> bytes:
    return llama3_tokenizer().decode(ids).encode()


def test_jump_forward_holds_back_a_token_that_could_grow(model: Model) -> None:
    # Llama 3 tokenizes `"x": "` as `"x` `":` ` "`. When the value may start with `/` or `#`,
    # the single tokens ` "/` and ` "#` are allowed, so ` "` is left for the model to choose.
    assert _text(_jump_once(model, ['"x": "/a"', '"x": "#b"', '"x": "q"'])) == b'"x":'
    # No allowed token extends ` "` when the value starts with `a` or `q`: all of it is forced.
    assert _text(_jump_once(model, ['"x": "a"', '"x": "ab"', '"x": "q"'])) == b'"x": "'


def test_retokenization_merges_sampled_token_with_forced_bytes(model: Model) -> None:
    # The model just sampled a lone closing quote; the forced `, "b": 1}` follows. Re-tokenized
    # together they become the natural tokens, starting with the single token `",`.
    tok = llama3_tokenizer()
    chunk = _jump_once(
        model, ['{"a": "x", "b": 1}', '{"a": "xy", "b": 2}'], prefix=b'{"a": "x', pending='"'
    )
    assert chunk == tok.encode('", "b": 1}', add_special_tokens=False)
    assert tok.convert_ids_to_tokens(chunk[:1]) == ['",']


def test_generated_tokens_follow_natural_tokenization_when_forced(model: Model) -> None:
    text = '{"name": "Bob", "age": 4}'
    res = model.generate("x", _grammar(text, '{"name": "Bo"}'), return_result=True)
    assert res.value in (text, '{"name": "Bo"}')
    assert model.tokenizer.decode(res.token_ids) == res.value


def test_truncation_raises_with_partial_text(model: Model) -> None:
    long = '{"items": [' + ", ".join(f'"item number {i}"' for i in range(40)) + "]}"
    with pytest.raises(TruncatedOutputError) as info:
        model.generate("x", _grammar(long), max_new_tokens=5)
    assert info.value.partial
    assert long.startswith(info.value.partial)
    with pytest.raises(TruncatedOutputError):
        model.generate("x", _grammar(long), max_new_tokens=5, jump_forward=False)


@pytest.mark.slow
def test_eos_allowed_only_when_finished(model: Model) -> None:
    # '1' is complete but may continue to '12'/'123': EOS competes with the longer strings.
    g = _grammar("1", "12", "123")
    seen = set()
    for seed in range(12):
        seen.add(model.generate("n", g, temperature=5.0, seed=seed, max_new_tokens=8))
    assert seen <= {"1", "12", "123"}
    assert len(seen) >= 2


def test_seeded_sampling_is_reproducible(model: Model) -> None:
    g = _grammar(*PERSON_CHOICES)
    a = model.generate("p", g, temperature=1.5, top_p=0.9, seed=123, return_result=True)
    b = model.generate("p", g, temperature=1.5, top_p=0.9, seed=123, return_result=True)
    assert a.token_ids == b.token_ids


def test_batch_matches_single_rows(model: Model) -> None:
    prompts = ["short", "a much longer prompt than the first one, with more tokens", "mid size"]
    schemas: list[Any] = [
        _grammar(*PERSON_CHOICES),
        _grammar("yes", "no", "maybe later"),
        None,
    ]
    kw: dict[str, Any] = {"max_new_tokens": 40, "return_result": True}
    batch = model.generate_batch(prompts, schemas, **kw)
    single = [model.generate(p, s, **kw) for p, s in zip(prompts, schemas)]
    for b, s in zip(batch, single):
        assert b.token_ids == s.token_ids
        assert b.value == s.value
    assert batch[0].value in PERSON_CHOICES
    assert batch[1].value in ("yes", "no", "maybe later")


def test_batch_with_one_schema_for_all_rows(model: Model) -> None:
    g = _grammar("red", "green", "blue")
    out = model.generate_batch(["a", "bb", "ccc", "dddd"], g, temperature=1.0, seed=7)
    assert all(v in ("red", "green", "blue") for v in out)


def test_batch_return_exceptions(model: Model) -> None:
    long = "x" * 30 + "y" * 30
    out = model.generate_batch(
        ["a", "b"],
        [_grammar("ok"), _grammar(long)],
        max_new_tokens=3,
        jump_forward=False,
        return_exceptions=True,
    )
    assert out[0] == "ok"
    assert isinstance(out[1], TruncatedOutputError)


def test_stream_yields_chunks_then_value(model: Model) -> None:
    g = _grammar(*PERSON_CHOICES)
    stream = model.stream("p", g, temperature=1.0, seed=3)
    items = list(stream)
    *chunks, value = items
    assert all(isinstance(c, str) for c in chunks) and len(chunks) >= 2
    assert "".join(chunks) == value
    assert value in PERSON_CHOICES
    assert stream.result is not None and stream.result.value == value


def test_unconstrained_ignore_eos_runs_the_whole_budget(model: Model) -> None:
    res = model.generate("hello", None, max_new_tokens=17, ignore_eos=True, return_result=True)
    assert len(res.token_ids) == 17
    assert res.finish_reason == "length"
    assert res.forward_passes == 17
    assert res.timings.tokens_per_s > 0
    assert res.timings.mask_us_per_token == 0


def test_constrained_result_timings(model: Model) -> None:
    res = model.generate("p", _grammar(*PERSON_CHOICES), return_result=True, jump_forward=False)
    t = res.timings
    assert t.mask_us_per_token > 0
    assert t.total_ms >= t.prefill_ms > 0
    assert t.tokens_per_s > 0
    assert res.prompt_tokens > 5


def test_kv_session_batched_logits_match_full_forward() -> None:
    """Ragged, left-padded chunks with explicit positions give the logits of a plain forward."""
    model = tiny_llama()
    tok = llama3_tokenizer()
    rows = [[1, 2, 3, 4, 5], [9, 8], [100, 200, 300]]
    steps = [[[6], [7, 7, 7], []], [[11, 12, 13], [5], [400]]]
    session = KVSession(model, tok.eos_token_id, len(rows))
    seqs = [list(r) for r in rows]
    with torch.inference_mode():
        logits = torch.from_numpy(session.feed(rows))
        for step in steps + [None]:
            for i, seq in enumerate(seqs):
                full = model(input_ids=torch.tensor([seq])).logits[0, -1].float()
                torch.testing.assert_close(logits[i], full, rtol=1e-4, atol=1e-4)
            if step is None:
                break
            # Rows with an empty chunk keep their last real position (it is masked padding).
            for i, chunk in enumerate(step):
                seqs[i].extend(chunk)
            logits_new = torch.from_numpy(session.feed(step))
            for i, chunk in enumerate(step):
                if not chunk:
                    logits_new[i] = logits[i]
            logits = logits_new


def test_prompt_shows_schema_and_uses_chat_template(model: Model) -> None:
    from pydantic import BaseModel, Field

    class Ticket(BaseModel):
        severity: int = Field(description="1 (low) to 5 (critical)")

    text = model.render_prompt("Rate this.", Ticket)
    assert text.startswith("<|begin_of_text|><|start_header_id|>user")
    assert "severity" in text and "1 (low) to 5 (critical)" in text
    assert text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    raw = model.render_prompt("Rate this.", Ticket, chat_template=False, schema_in_prompt=False)
    assert raw == "Rate this.\n"
    msgs = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}]
    assert "Be terse." in model.render_prompt(msgs)


def test_schema_instruction_lists_fields_in_plain_words() -> None:
    from typing import Literal, Optional

    from pydantic import BaseModel, Field

    from structout.targets import resolve_schema

    class Inner(BaseModel):
        code: str = Field(pattern=r"^[A-Z]{2}$")

    class Outer(BaseModel):
        """A thing."""

        name: str = Field(max_length=5, description="short name")
        kind: Literal["a", "b"]
        size: int = Field(ge=1, le=9)
        inner: Inner
        items: list[int] = Field(max_length=2)
        note: Optional[str] = None  # noqa: UP045 - evaluated at runtime on py3.9

    text = resolve_schema(Outer).instruction
    assert text is not None
    assert text.splitlines() == [
        "A thing.",
        "Respond only with a JSON object with these fields:",
        '- "name": a string (at most 5 characters) — short name',
        '- "kind": one of "a", "b"',
        '- "size": an integer from 1 to 9',
        '- "inner": an object with these fields:',
        '  - "code": a string (matching ^[A-Z]{2}$)',
        '- "items": a list (at most 2 items), each an integer',
        '- "note" (optional): a string or null',
    ]
    assert (
        resolve_schema(Literal["x", "y"]).instruction == 'Respond only with JSON: one of "x", "y".'
    )
    # Schemas that cannot be put in words are shown as JSON Schema.
    weird = resolve_schema({"not": {"type": "string"}}).instruction
    assert weird is not None and weird.endswith('{"not": {"type": "string"}}')


@pytest.mark.slow
def test_masks_filled_during_the_forward_pass_give_identical_output(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts = ["one", "two two", "three three three"]
    schemas: list[Any] = [_grammar(*PERSON_CHOICES), _grammar("yes", "no"), None]
    kw: dict[str, Any] = {"max_new_tokens": 30, "temperature": 1.0, "seed": 11}
    monkeypatch.setattr(gen, "_overlap_helps", lambda hf_model: False)
    serial = model.generate_batch(prompts, schemas, **kw)
    serial_one = model.generate("p", _grammar(*PERSON_CHOICES), **kw)
    calls: list[int] = []
    real_fill = gen._Decoder._fill_masks

    def fill_in_worker(self: Any, active: list[int]) -> Any:
        import threading

        calls.append(threading.current_thread() is threading.main_thread())
        return real_fill(self, active)

    monkeypatch.setattr(gen, "_overlap_helps", lambda hf_model: True)
    monkeypatch.setattr(gen._Decoder, "_fill_masks", fill_in_worker)
    assert model.generate_batch(prompts, schemas, **kw) == serial
    assert model.generate("p", _grammar(*PERSON_CHOICES), **kw) == serial_one
    assert False in calls  # most fills ran in the worker thread


def test_a_repeated_tool_call_ends_the_turn_before_the_repeat(model: Model) -> None:
    """``end_early`` of a Hermes tool turn: the model (EOS banned) can only repeat the call;
    the loop ends at the first repeat and keeps the output up to the first copy."""
    from structout.tools import HERMES, repeated_call_end

    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    grammar = model.compile(_grammar(*("\n".join([call] * k) for k in range(1, 7)))).grammar
    end_early = repeated_call_end(HERMES)
    assert end_early is not None
    req = gen.RowRequest(model.tokenizer.encode("x", add_special_tokens=False), grammar, 200)
    req_guarded = gen.RowRequest(req.prompt_ids, grammar, 200, None, end_early)
    params = SamplingParams(ignore_eos=True)
    tokens = model._token_space()
    for request, guarded in ((req, False), (req_guarded, True)):
        decoder = gen._Decoder(model.hf_model, tokens, [request], params, 0, model.engine)
        gen_ = decoder.run()
        try:
            while True:
                next(gen_)
        except StopIteration as stop:
            (outcome,) = stop.value
        if guarded:
            assert outcome.data == call.encode()
            assert outcome.finish_reason == "stop"
            assert outcome.data.count(b"<tool_call>") == 1
        else:  # the grammar's longest output: six calls
            assert outcome.data.count(b"<tool_call>") == 6


def test_repeated_call_end_finds_only_exact_repeats() -> None:
    from structout.tools import HERMES, LLAMA3_JSON, MISTRAL, repeated_call_end

    hermes = repeated_call_end(HERMES)
    assert hermes is not None
    a = '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'
    b = '<tool_call>\n{"name": "f", "arguments": {"x": 2}}\n</tool_call>'
    assert hermes(bytearray(a.encode())) is None
    assert hermes(bytearray(f"{a}\n{b}".encode())) is None
    assert hermes(bytearray(f"{a}\n{a}".encode())) == len(a)
    assert hermes(bytearray(f"{a}\n{a}\n".encode())) == len(a)
    assert hermes(bytearray(f"{b}\n{a}\n{a}".encode())) == len(f"{b}\n{a}")
    assert hermes(bytearray(f"Sure.{a}\n{a}".encode())) == len(f"Sure.{a}")
    llama = repeated_call_end(LLAMA3_JSON)
    assert llama is not None
    c = '{"name": "g", "parameters": {}}'
    assert llama(bytearray(f"{c}; {c}".encode())) == len(c)
    assert llama(bytearray(f'{c}; {{"name": "h", "parameters": {{}}}}'.encode())) is None
    assert repeated_call_end(MISTRAL) is None  # its block closes with "]": no cut point
