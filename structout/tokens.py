"""Per-model token facts the decode loop needs: token bytes, EOS ids and a prefix-extension index.

Invariant: ``token_bytes`` has exactly ``vocab_size`` entries (ids the tokenizer lacks produce no
bytes), so every id the model can sample has bytes and ids beyond it cannot be sampled.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from typing import Any, Callable

__all__ = ["TokenSpace", "text_token_bytes"]

#: Prefix-extension lists kept per TokenSpace (one per token that ended a jump-forward chunk).
MAX_CACHED_EXTENSIONS = 65536


def text_token_bytes(vocab: Any, size: int) -> list[bytes]:
    """The text of token ids ``0..size`` from an engine vocabulary (``all_token_bytes``,
    ``special_token_ids``): ids beyond the vocabulary and special tokens produce none."""
    token_bytes = list(vocab.all_token_bytes())[:size]
    token_bytes += [b""] * (size - len(token_bytes))
    for i in vocab.special_token_ids():  # special tokens are never text
        if 0 <= i < size:
            token_bytes[i] = b""
    return token_bytes


class TokenSpace:
    """Per-model token facts the loop needs: token bytes, EOS ids, prefix-extension index."""

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        eos_token_ids: Sequence[int],
        vocab_size: int,
        encode: Callable[[str], list[int]],
    ) -> None:
        # Ids at or beyond the model's vocabulary size can never be sampled; ids the tokenizer
        # lacks (padding rows of the embedding matrix) produce no bytes.
        self.token_bytes = list(token_bytes)[:vocab_size]
        if len(self.token_bytes) < vocab_size:
            self.token_bytes.extend(b"" for _ in range(vocab_size - len(self.token_bytes)))
        self.eos_token_ids = frozenset(int(t) for t in eos_token_ids)
        self.vocab_size = vocab_size
        self.encode = encode
        self._sorted: tuple[list[bytes], Any] | None = None
        self._ext_cache: dict[int, Any] = {}
        self._lock = threading.Lock()

    def bytes_of(self, ids: Sequence[int]) -> bytes:
        tb = self.token_bytes
        return b"".join(tb[i] for i in ids)

    def spell(self, data: bytes) -> list[int] | None:
        """The tokenizer's own tokens for ``data``, when they reproduce it byte for byte (None
        for bytes that are not UTF-8 text or that the tokenizer spells differently)."""
        try:
            toks = [int(t) for t in self.encode(data.decode("utf-8"))]
        except Exception:  # noqa: BLE001 - any tokenizer failure means "cannot spell it"
            return None
        return toks if self.bytes_of(toks) == data else None

    def extensions(self, token: int) -> Any:
        """numpy int64 array of token ids whose bytes strictly extend ``token``'s bytes."""
        import numpy as np

        hit = self._ext_cache.get(token)
        if hit is not None:
            return hit
        with self._lock:
            if self._sorted is None:
                order = sorted(
                    (i for i, b in enumerate(self.token_bytes) if b),
                    key=self.token_bytes.__getitem__,
                )
                keys = [self.token_bytes[i] for i in order]
                self._sorted = (keys, np.asarray(order, dtype=np.int64))
        keys, ids = self._sorted
        prefix = self.token_bytes[token]
        lo = bisect.bisect_right(keys, prefix)  # skips tokens with exactly these bytes
        upper = _prefix_upper_bound(prefix)
        hi = bisect.bisect_left(keys, upper) if upper is not None else len(keys)
        ext = ids[lo:hi]
        if len(self._ext_cache) < MAX_CACHED_EXTENSIONS:
            self._ext_cache[token] = ext
        return ext


def _prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)
