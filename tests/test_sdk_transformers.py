"""``StructuredLogitsProcessor`` inside transformers' own ``generate`` (tiny random Llama)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")

from pydantic import BaseModel, Field
from test_sdk_support import (
    llama3_tokenizer,
    tiny_llama,
)


class Pair(BaseModel):
    a: Annotated[int, Field(ge=0, le=50)]
    b: Literal["x", "yy", "zzz"]


def _inputs(prompts: list[str]) -> Any:
    tok = llama3_tokenizer()
    tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True)
    # Only what a causal LM takes (some tokenizer versions add token_type_ids, which
    # transformers 4.x's generate refuses).
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def _outputs(out: Any, inputs: Any) -> list[str]:
    tok = llama3_tokenizer()
    return tok.batch_decode(out[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_batched_generate_outputs_validate(seed: int) -> None:
    from structout.integrations.transformers import StructuredLogitsProcessor

    model, tok = tiny_llama(), llama3_tokenizer()
    inputs = _inputs(["first prompt", "a second, longer prompt here", "3"])
    proc = StructuredLogitsProcessor(tok, Pair)
    torch.manual_seed(seed)
    out = model.generate(
        **inputs,
        logits_processor=[proc],
        max_new_tokens=40,
        do_sample=True,
        pad_token_id=tok.eos_token_id,
    )
    texts = _outputs(out, inputs)
    values = proc.parse(texts)
    assert all(isinstance(v, Pair) for v in values)
    for t in texts:
        jsonschema.validate(json.loads(t), Pair.model_json_schema())


@pytest.mark.slow
def test_beam_search_and_reuse_after_reset() -> None:
    from structout.integrations.transformers import StructuredLogitsProcessor
    from structout.targets import KBNF

    model, tok = tiny_llama(), llama3_tokenizer()
    proc = StructuredLogitsProcessor(tok, KBNF("start ::= 'ab' | 'abc' | 'b' #\"[0-9]{2}\" ;"))
    for prompts in (["beam me"], ["again", "and again"]):
        inputs = _inputs(prompts)
        out = model.generate(
            **inputs,
            logits_processor=[proc],
            max_new_tokens=8,
            num_beams=3,
            do_sample=False,
            pad_token_id=tok.eos_token_id,
        )
        for text in _outputs(out, inputs):
            assert text in ("ab", "abc") or (len(text) == 3 and text[0] == "b"), text
        proc.reset()


def test_vocabulary_size_mismatch_is_reported() -> None:
    import structout
    from structout.errors import StructoutError
    from structout.integrations.transformers import StructuredLogitsProcessor

    tok = llama3_tokenizer()
    vocab = structout.Vocabulary.from_hf(tok, vocab_size=128256)
    proc = StructuredLogitsProcessor(vocab, Literal["x"])
    scores = torch.zeros((1, 128300))
    with pytest.raises(StructoutError, match="128300"):
        proc(torch.tensor([[1, 2]]), scores)


def test_mask_is_applied_in_place() -> None:
    import structout
    from structout.integrations.transformers import StructuredLogitsProcessor

    tok = llama3_tokenizer()
    vocab = structout.Vocabulary.from_hf(tok, vocab_size=128256)
    proc = StructuredLogitsProcessor(vocab, Literal["yes", "no"])
    scores = torch.zeros((2, 128256))
    result = proc(torch.tensor([[5, 6], [7, 8]]), scores)
    assert result is scores
    allowed = torch.isfinite(scores)
    assert allowed[0].equal(allowed[1])
    ids = allowed[0].nonzero().flatten().tolist()
    # Only tokens that start the JSON strings "yes" / "no" are allowed.
    texts = [vocab.token_bytes(i) for i in ids]
    assert texts and all(b'"yes"'.startswith(t) or b'"no"'.startswith(t) for t in texts)
