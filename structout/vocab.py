"""Token vocabularies: which bytes each token id of a model produces.

A :class:`Vocabulary` covers the model's whole output layer (``size`` ids; ids beyond the
tokenizer are padding and never allowed). Special tokens (``<|eot_id|>``, ``<s>``, ...) are never
produced by grammar text; EOS ids are allowed by a matcher exactly where the grammar can end.

Build one from a Hugging Face tokenizer (:meth:`Vocabulary.from_hf`), a tiktoken rank file
(:meth:`Vocabulary.from_tiktoken`), a SentencePiece model (:meth:`Vocabulary.from_sentencepiece`)
or explicit byte strings (:meth:`Vocabulary.from_bytes`). Token strings are decoded to bytes in
the native engine (byte-level BPE ``Ġ`` alphabet, SentencePiece ``▁`` and ``<0xNN>`` byte
fallback, base64 for tiktoken).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from structout import _engine
from structout.errors import VocabularyError

__all__ = ["KNOWN_EOS_TOKENS", "TOKENIZER_KINDS", "Vocabulary"]

#: Special tokens that end generation in common model families; used to guess EOS ids when the
#: tokenizer does not say (pass ``eos_token_ids=`` to override).
KNOWN_EOS_TOKENS = frozenset(
    {
        "</s>",
        "<eos>",
        "<|endoftext|>",
        "<|end_of_text|>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<|im_end|>",
        "<end_of_turn>",
        "<|end|>",
        "<|eos|>",
    }
)

#: Spellings of token strings that :meth:`Vocabulary.from_hf` understands.
TOKENIZER_KINDS = ("byte_level", "sentencepiece", "raw")

#: ``(id, content, special)`` of a token the tokenizer added to its model's vocabulary.
AddedToken = tuple[int, str, bool]

_SP_SPACE = "\u2581"
_BYTE_LEVEL_SPACE = "\u0120"


class Vocabulary:
    """A model vocabulary: token id → exact bytes, special flags, EOS ids and a fingerprint.

    Immutable and thread-safe. Construct it with one of the ``from_*`` class methods.
    """

    __slots__ = ("_native",)

    def __init__(self, native: Any) -> None:
        if not isinstance(native, _engine.Vocabulary):
            raise TypeError(
                "Vocabulary(...) wraps a native vocabulary; use Vocabulary.from_hf(tokenizer), "
                "from_tiktoken(...), from_sentencepiece(...) or from_bytes(...)"
            )
        self._native = native

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_bytes(
        cls,
        tokens: Sequence[bytes | bytearray | str | None],
        eos_token_ids: Iterable[int] = (),
        vocab_size: int | None = None,
    ) -> Vocabulary:
        """Build from the bytes of each id (``str`` means its UTF-8; ``None`` = special/unused).

        ``vocab_size`` is the model's vocabulary size (logits width); it defaults to
        ``len(tokens)`` and extra ids are padding. EOS ids are always special.
        """
        return cls(
            _engine.Vocabulary.from_bytes(
                list(tokens), _ids(eos_token_ids, "eos_token_ids"), _size(vocab_size)
            )
        )

    @classmethod
    def from_tiktoken(
        cls,
        path_or_bytes: str | os.PathLike[str] | bytes,
        special_tokens: Mapping[str, int] | Iterable[tuple[int, str]] | None = None,
        vocab_size: int | None = None,
        *,
        eos_token_ids: Iterable[int] | None = None,
    ) -> Vocabulary:
        """Build from a tiktoken rank file (``<base64 token> <rank>`` per line).

        ``path_or_bytes`` is a file path or the file's contents. ``special_tokens`` maps each
        special token's text to its id (a ``{text: id}`` mapping, or ``(id, text)`` pairs as
        Qwen's tokenizer lists them). ``eos_token_ids`` defaults to the special tokens named in
        :data:`KNOWN_EOS_TOKENS`.
        """
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
        else:
            try:
                with open(os.fspath(path_or_bytes), "rb") as f:
                    data = f.read()
            except OSError as e:
                raise VocabularyError(f"cannot read tiktoken file {path_or_bytes!r}: {e}") from e
        specials = _special_pairs(special_tokens)
        if eos_token_ids is None:
            eos = sorted({i for text, i in specials if text in KNOWN_EOS_TOKENS})
        else:
            eos = _ids(eos_token_ids, "eos_token_ids")
        return cls(_engine.Vocabulary.from_tiktoken(data, specials, eos, _size(vocab_size)))

    @classmethod
    def from_sentencepiece(
        cls,
        model: Any,
        vocab_size: int | None = None,
        *,
        eos_token_ids: Iterable[int] | None = None,
    ) -> Vocabulary:
        """Build from a SentencePiece model: a ``sentencepiece.SentencePieceProcessor``, a path
        to a ``.model`` file, or its serialized bytes.

        Control and unknown pieces are special; byte pieces (``<0xNN>``) are byte fallback;
        unused pieces are never allowed. ``eos_token_ids`` defaults to the model's ``eos_id``.
        """
        sp = _load_sentencepiece(model)
        pieces, added, has_bytes = _read_sentencepiece(sp)
        if eos_token_ids is None:
            eos = [sp.eos_id()] if sp.eos_id() >= 0 else []
        else:
            eos = _ids(eos_token_ids, "eos_token_ids")
        return cls(
            _engine.Vocabulary.from_hf_tokens(
                pieces, "sentencepiece", added, eos, _size(vocab_size), has_bytes
            )
        )

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        vocab_size: int | None = None,
        *,
        kind: str | None = None,
        byte_fallback: bool | None = None,
        eos_token_ids: Iterable[int] | None = None,
    ) -> Vocabulary:
        """Build from a Hugging Face tokenizer (``transformers`` tokenizer or
        ``tokenizers.Tokenizer``).

        ``vocab_size`` is the model's vocabulary size (``model.config.vocab_size``, the logits
        width); it defaults to the tokenizer's size. ``kind`` overrides the detected spelling of
        token strings: ``"byte_level"`` (GPT-2 ``Ġ`` alphabet), ``"sentencepiece"`` (``▁`` for
        space, ``<0xNN>`` byte fallback unless ``byte_fallback=False``) or ``"raw"``.
        ``eos_token_ids`` defaults to the tokenizer's ``eos_token_id`` plus special tokens named
        in :data:`KNOWN_EOS_TOKENS`.
        """
        if kind is not None and kind not in TOKENIZER_KINDS:
            raise VocabularyError(
                f"unknown tokenizer kind {kind!r}; expected one of {TOKENIZER_KINDS}"
            )
        backend = _backend_tokenizer(tokenizer)
        if backend is not None:
            tokens, added, detected, fallback = _read_backend(backend)
        elif hasattr(getattr(tokenizer, "sp_model", None), "id_to_piece"):
            # A slow (sentencepiece-backed) transformers tokenizer.
            tokens, added, fallback = _read_sentencepiece(tokenizer.sp_model)
            detected = "sentencepiece"
            added = _merge_added(added, _added_from_transformers(tokenizer))
        elif hasattr(tokenizer, "convert_ids_to_tokens"):
            tokens, added, detected, fallback = _read_slow(tokenizer)
        else:
            raise VocabularyError(
                f"unsupported tokenizer type {type(tokenizer).__name__}; expected a transformers "
                "tokenizer or a tokenizers.Tokenizer (hint: use Vocabulary.from_tiktoken, "
                "from_sentencepiece or from_bytes for other tokenizers)"
            )
        # transformers may mark more tokens special than its backend does.
        extra_special = set(_int_list(getattr(tokenizer, "all_special_ids", None) or []))
        if extra_special:
            added = _mark_special(added, extra_special, tokens)
        if kind is None:
            if detected is None:
                raise VocabularyError(
                    "cannot tell how this tokenizer spells bytes (its decoder is "
                    "neither byte-level BPE nor SentencePiece); hint: pass kind='byte_level', "
                    "'sentencepiece' or 'raw'"
                )
            kind = detected
        if byte_fallback is None:
            byte_fallback = fallback
        if eos_token_ids is None:
            eos = _guess_eos(tokenizer, added)
        else:
            eos = _ids(eos_token_ids, "eos_token_ids")
        return cls(
            _engine.Vocabulary.from_hf_tokens(
                tokens, kind, added, eos, _size(vocab_size), bool(byte_fallback)
            )
        )

    # ----------------------------------------------------------------- accessors
    @property
    def size(self) -> int:
        """Number of token ids (the model's vocabulary size; bitmask width)."""
        return int(self._native.size)

    @property
    def eos_token_ids(self) -> list[int]:
        """EOS token ids, sorted."""
        return list(self._native.eos_token_ids)

    @property
    def fingerprint(self) -> int:
        """Stable 64-bit hash of all token bytes, flags, EOS ids and the size (a cache key)."""
        return int(self._native.fingerprint)

    @property
    def num_text_tokens(self) -> int:
        """Number of tokens grammar text may produce (non-special, non-empty)."""
        return int(self._native.num_text_tokens)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` produces (a special token's text; ``b""`` for padding)."""
        return bytes(self._native.token_bytes(token_id))

    def all_token_bytes(self) -> list[bytes]:
        """``token_bytes(i)`` for every id, as a list."""
        return list(self._native.all_token_bytes())

    def decode(self, token_ids: Iterable[int]) -> bytes:
        """Concatenated bytes of a token sequence."""
        return bytes(self._native.decode(list(token_ids)))

    def is_special(self, token_id: int) -> bool:
        """Whether the id is never produced by grammar text (special, EOS or padding)."""
        return bool(self._native.is_special(token_id))

    def is_padding(self, token_id: int) -> bool:
        """Whether the id lies beyond the tokenizer or is undefined."""
        return bool(self._native.is_padding(token_id))

    def special_token_ids(self) -> list[int]:
        """Ids of all special, EOS and padding tokens."""
        return list(self._native.special_token_ids())

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return repr(self._native)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)


# --------------------------------------------------------------------- helpers
def _size(vocab_size: int | None) -> int | None:
    if vocab_size is None:
        return None
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= 0:
        raise VocabularyError(f"vocab_size must be a positive int, got {vocab_size!r}")
    return vocab_size


def _ids(ids: Iterable[int], what: str) -> list[int]:
    if isinstance(ids, int):
        ids = [ids]
    out = []
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0 or i >= 2**32 - 1:
            raise VocabularyError(f"{what} must hold non-negative token ids, got {i!r}")
        out.append(int(i))
    return out


def _int_list(ids: Iterable[Any]) -> list[int]:
    return [i for i in ids if isinstance(i, int) and not isinstance(i, bool) and i >= 0]


def _special_pairs(
    special_tokens: Mapping[str, int] | Iterable[tuple[int, str]] | None,
) -> list[tuple[str, int]]:
    if special_tokens is None:
        return []
    if isinstance(special_tokens, Mapping):
        pairs = [(str(text), i) for text, i in special_tokens.items()]
    else:
        pairs = []
        for item in special_tokens:
            a, b = item
            pairs.append((str(b), a) if isinstance(a, int) else (str(a), b))
    for text, i in pairs:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise VocabularyError(f"special token {text!r} has invalid id {i!r}")
    return pairs


def _backend_tokenizer(tokenizer: Any) -> Any:
    """The ``tokenizers.Tokenizer`` behind ``tokenizer`` (itself if it is one), or None."""
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - tokenizers is a dependency of transformers
        return None
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if isinstance(backend, Tokenizer):
        return backend
    return None


def _component_json(component: Any) -> Any:
    """The JSON config of a tokenizers component (decoder, model, ...), or None."""
    if component is None:
        return None
    try:
        state = component.__getstate__()
        return json.loads(state)
    except Exception:  # noqa: BLE001 - any failure means "unknown"
        return None


def _decoder_types(cfg: Any) -> list[str]:
    """Decoder type names in a (possibly nested Sequence) decoder config, with Replace patterns."""
    out: list[str] = []
    if isinstance(cfg, dict):
        t = cfg.get("type")
        if t == "Sequence":
            for d in cfg.get("decoders", []) or []:
                out.extend(_decoder_types(d))
        elif t == "Replace":
            pattern = cfg.get("pattern", {})
            pat = pattern.get("String") if isinstance(pattern, dict) else pattern
            out.append("Replace:" + str(pat))
        elif t is not None:
            out.append(str(t))
    return out


def _kind_from_decoder(types: list[str]) -> str | None:
    if "ByteLevel" in types:
        return "byte_level"
    if "Metaspace" in types or f"Replace:{_SP_SPACE}" in types or "ByteFallback" in types:
        return "sentencepiece"
    # WordPiece, BPEDecoder (suffix-based), CTC, ...: not a byte-exact spelling we know.
    return None


def _kind_from_tokens(tokens: Sequence[str | None]) -> str | None:
    """Guess the spelling from the tokens themselves (for tokenizers without a decoder)."""
    sample = [t for t in tokens[: min(len(tokens), 50000)] if t]
    if not sample:
        return None
    bl = sum(1 for t in sample if _BYTE_LEVEL_SPACE in t)
    sp = sum(1 for t in sample if _SP_SPACE in t)
    if bl == 0 and sp == 0:
        return None
    return "byte_level" if bl > sp else "sentencepiece"


def _read_backend(tok: Any) -> tuple[list[str | None], list[AddedToken], str | None, bool]:
    """Token strings by id, added tokens, detected kind and byte fallback of a Tokenizer."""
    added_dec = tok.get_added_tokens_decoder()
    added = [(int(i), str(t.content), bool(t.special)) for i, t in added_dec.items()]
    n = tok.get_vocab_size(with_added_tokens=True)
    if added:
        n = max(n, max(i for i, _, _ in added) + 1)
    # Added tokens take precedence in the engine, so their entries here are never decoded.
    tokens = list(map(tok.id_to_token, range(n)))
    types = _decoder_types(_component_json(tok.decoder))
    kind = _kind_from_decoder(types)
    if kind is None and not types:
        kind = _kind_from_tokens(tokens)
    fallback = "ByteFallback" in types or bool(getattr(tok.model, "byte_fallback", False))
    return tokens, added, kind, fallback


def _added_from_transformers(tokenizer: Any) -> list[AddedToken]:
    dec = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return [
        (int(i), str(getattr(t, "content", t)), bool(getattr(t, "special", False)))
        for i, t in dec.items()
    ]


def _read_slow(
    tokenizer: Any,
) -> tuple[list[str | None], list[AddedToken], str | None, bool]:
    """Token strings of a transformers tokenizer without a tokenizers backend."""
    n = len(tokenizer)
    added = _added_from_transformers(tokenizer)
    added_ids = {i for i, _, _ in added}
    raw = tokenizer.convert_ids_to_tokens(list(range(n)))
    tokens = [None if i in added_ids or not isinstance(t, str) else t for i, t in enumerate(raw)]
    kind = _kind_from_tokens(tokens)
    fallback = any(t is not None and len(t) == 6 and t.startswith("<0x") for t in tokens[:1000])
    return tokens, added, kind, fallback


def _mark_special(
    added: list[AddedToken], special_ids: set[int], tokens: list[str | None]
) -> list[AddedToken]:
    """Mark ``special_ids`` special, adding entries for ids only the model vocabulary has."""
    out = []
    seen = set()
    for i, content, special in added:
        out.append((i, content, special or i in special_ids))
        seen.add(i)
    for i in sorted(special_ids - seen):
        text = tokens[i] if 0 <= i < len(tokens) else None
        if text is not None:
            out.append((i, text, True))
    return out


def _guess_eos(tokenizer: Any, added: list[AddedToken]) -> list[int]:
    eos = set()
    tid = getattr(tokenizer, "eos_token_id", None)
    if isinstance(tid, int) and not isinstance(tid, bool) and tid >= 0:
        eos.add(tid)
    elif isinstance(tid, (list, tuple)):
        eos.update(_int_list(tid))
    for i, content, special in added:
        if special and content in KNOWN_EOS_TOKENS:
            eos.add(i)
    return sorted(eos)


def _read_sentencepiece(sp: Any) -> tuple[list[str | None], list[AddedToken], bool]:
    """Pieces by id (None for control/unknown/unused), those as special added tokens, and
    whether the model has byte pieces (byte fallback)."""
    pieces: list[str | None] = []
    added: list[AddedToken] = []
    has_bytes = False
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i):
            added.append((i, piece, True))
            pieces.append(None)
        else:
            has_bytes = has_bytes or bool(sp.is_byte(i))
            pieces.append(piece)
    return pieces, added, has_bytes


def _merge_added(base: list[AddedToken], override: list[AddedToken]) -> list[AddedToken]:
    """Added tokens of ``base`` with those of ``override`` replacing entries with the same id."""
    merged = {i: (i, c, s) for i, c, s in base}
    merged.update({i: (i, c, s) for i, c, s in override})
    return [merged[i] for i in sorted(merged)]


def _load_sentencepiece(model: Any) -> Any:
    if hasattr(model, "id_to_piece") and hasattr(model, "get_piece_size"):
        return model
    try:
        import sentencepiece as spm
    except ImportError as e:
        raise VocabularyError(
            "loading a SentencePiece model needs the 'sentencepiece' package "
            "(pip install sentencepiece)"
        ) from e
    sp = spm.SentencePieceProcessor()
    try:
        if isinstance(model, (bytes, bytearray)):
            sp.LoadFromSerializedProto(bytes(model))
        else:
            sp.Load(os.fspath(model))
    except (OSError, RuntimeError, TypeError) as e:
        raise VocabularyError(f"cannot load SentencePiece model {model!r:.80}: {e}") from e
    return sp
