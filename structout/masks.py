"""Token masks: compile a KBNF grammar for a vocabulary, allocate, fill and apply bitmasks.

Bitmask layout (the one XGrammar and llguidance use): ``int32[batch, ceil(vocab_size / 32)]``;
bit ``i % 32`` of word ``i // 32`` is set when token ``i`` is allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from structout import _engine

__all__ = [
    "CompiledGrammar",
    "Matcher",
    "allocate_token_bitmask",
    "apply_token_bitmask_",
    "cache_stats",
    "compile_json_schema",
    "compile_kbnf",
    "compile_type",
    "configure_cache",
    "fill_next_token_bitmasks",
]

CompiledGrammar = _engine.CompiledGrammar
Matcher = _engine.Matcher
cache_stats = _engine.cache_stats
configure_cache = _engine.configure_cache


def compile_kbnf(text: str, vocab: Any, *, start: str = "start", **limits: Any) -> Any:
    """Compile KBNF ``text`` for ``vocab`` (cached by text, options and vocabulary fingerprint).

    ``limits`` are the engine limits: ``dfa_size_limit``, ``max_repetition``,
    ``max_grammar_symbols``, ``max_items_per_set``, ``max_total_items``, ``max_work_per_byte``,
    ``mask_cache_bytes``. Raises :class:`structout.errors.GrammarError` (with line:col) or ``LimitExceededError``.
    """
    if not isinstance(text, str):
        raise TypeError(f"grammar text must be str, not {type(text).__name__}")
    return _engine.compile_kbnf(text, vocab, start, **limits)


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> np.ndarray:
    """A zeroed ``int32[batch_size, ceil(vocab_size / 32)]`` bitmask."""
    if batch_size < 1 or vocab_size < 1:
        raise ValueError("batch_size and vocab_size must be positive")
    return np.zeros((batch_size, (vocab_size + 31) // 32), dtype=np.int32)


def _as_numpy_bitmask(bitmask: Any) -> np.ndarray:
    if isinstance(bitmask, np.ndarray):
        arr = bitmask
    elif hasattr(bitmask, "numpy") and getattr(bitmask, "device", None) is not None:
        if str(bitmask.device) != "cpu":
            raise ValueError("fill bitmasks on a CPU tensor, then copy it to the device")
        arr = bitmask.numpy()  # shares memory with the tensor
    else:
        raise TypeError(f"bitmask must be a numpy array or CPU torch tensor, not {type(bitmask)}")
    if arr.dtype != np.int32 or arr.ndim != 2 or not arr.flags.c_contiguous:
        raise ValueError(
            f"bitmask must be a C-contiguous int32 array of shape [batch, words], got "
            f"dtype={arr.dtype} shape={arr.shape}; use structout.allocate_token_bitmask"
        )
    return arr


def fill_next_token_bitmasks(
    matchers: Sequence[Any],
    bitmask: Any,
    rows: Sequence[int] | None = None,
    num_threads: int | None = None,
) -> None:
    """Fill one row per matcher, in parallel in native threads with the GIL released."""
    arr = _as_numpy_bitmask(bitmask)
    _engine.fill_next_token_bitmasks(
        list(matchers), arr, None if rows is None else list(rows), num_threads
    )


def _unpack_bits(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    bits = np.unpackbits(bitmask.view(np.uint8), axis=-1, bitorder="little")
    return bits[..., :vocab_size].astype(bool)


def apply_token_bitmask_(logits: Any, bitmask: Any) -> Any:
    """Set disallowed logits to ``-inf`` in place; ``logits`` is ``[vocab]`` or ``[batch, vocab]``.

    Works on numpy arrays and torch tensors (on any device: the mask is moved to the logits'
    device). Columns beyond the bitmask (padding) are disallowed.
    """
    if isinstance(logits, np.ndarray):
        bm = np.asarray(bitmask, dtype=np.int32)
        rows = logits.shape[0] if logits.ndim == 2 else 1
        if bm.ndim == 2 and bm.shape[0] not in (1, rows) and bm.shape[0] < rows:
            raise ValueError(f"bitmask has {bm.shape[0]} rows but logits have {rows}")
        two_d = logits.ndim == 2
        lg = logits if two_d else logits[None, :]
        bm2 = bm if bm.ndim == 2 else bm[None, :]
        allowed = np.zeros(lg.shape, dtype=bool)
        width = min(lg.shape[-1], bm2.shape[-1] * 32)
        allowed[..., :width] = _unpack_bits(np.ascontiguousarray(bm2), width)[: lg.shape[0]]
        lg[~allowed] = -np.inf
        return logits
    if not (hasattr(logits, "device") and hasattr(logits, "masked_fill_")):
        raise TypeError(
            f"logits must be a numpy array or a torch tensor, not {type(logits).__name__}"
        )
    import torch  # optional dependency, imported lazily

    bm_t = bitmask if isinstance(bitmask, torch.Tensor) else torch.from_numpy(np.asarray(bitmask))
    bm_t = bm_t.to(device=logits.device)
    if bm_t.dim() == 1:
        bm_t = bm_t.unsqueeze(0)
    vocab = logits.shape[-1]
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    bits = ((bm_t.unsqueeze(-1) >> shifts) & 1).bool().reshape(bm_t.shape[0], -1)
    allowed = torch.zeros((bm_t.shape[0], vocab), dtype=torch.bool, device=logits.device)
    width = min(vocab, bits.shape[-1])
    allowed[:, :width] = bits[:, :width]
    if logits.dim() == 1:
        logits.masked_fill_(~allowed[0], float("-inf"))
    else:
        logits.masked_fill_(~allowed[: logits.shape[0]], float("-inf"))
    return logits


def compile_json_schema(schema: Any, vocab: Any, **options: Any) -> Any:
    """Translate a JSON Schema (dict or JSON text) to KBNF and compile it for ``vocab``.

    ``options`` are the translator's (``whitespace``, ``indent``, ``lenient``, ``max_schema_depth``,
    ...) and the engine limits (``dfa_size_limit``, ``max_items_per_set``, ...). Translation is
    cached by the canonical schema and options (memory and disk, see ``structout.cache``), the
    compiled grammar by the engine. Raises ``UnsupportedSchemaError`` / ``SchemaError``.
    """
    from structout.cache import get_default_cache
    from structout.limits import split_options
    from structout.schema import json_schema_of, to_kbnf

    if isinstance(schema, bytes):
        schema = schema.decode("utf-8")
    if not isinstance(schema, (dict, bool, str)):
        raise TypeError(f"schema must be a dict, bool or JSON text, not {type(schema).__name__}")
    schema, _ = json_schema_of(schema)  # parses JSON text; too deep → LimitExceededError
    topts, limits = split_options(options)
    text, _ = get_default_cache().kbnf_for_schema(schema, lambda s: to_kbnf(s, **topts), topts)
    return compile_kbnf(text, vocab, **limits)


def compile_type(tp: Any, vocab: Any, **options: Any) -> Any:
    """Compile any Python type a ``pydantic.TypeAdapter`` accepts (models, dataclasses, ...).

    Extra keys are generated only where the type allows them. ``options`` as for
    :func:`compile_json_schema`.
    """
    from structout.cache import get_default_cache
    from structout.limits import split_options
    from structout.schema import json_schema_of, to_kbnf

    topts, limits = split_options(options)
    schema, _ = json_schema_of(tp, by_alias=topts.get("by_alias", True))
    text, _ = get_default_cache().kbnf_for_schema(
        schema, lambda _s: to_kbnf(tp, **topts), {**topts, "python_type": True}
    )
    return compile_kbnf(text, vocab, **limits)
