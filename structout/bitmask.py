"""Token bitmasks: allocating them and applying them to logits (numpy only; torch optional).

Layout (the one XGrammar and llguidance use): ``int32[batch, ceil(vocab_size / 32)]``; bit
``i % 32`` of word ``i // 32`` is set when token ``i`` is allowed. Invariant of applying: a logit
stays unchanged exactly when its token's bit is set; every other logit, including columns beyond
the bitmask (padding ids), becomes ``-inf``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from structout import _engine

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["Bitmask", "allocate_token_bitmask", "apply_token_bitmask_", "as_numpy_bitmask"]

#: A token bitmask: C-contiguous ``int32[batch, words]``.
Bitmask = npt.NDArray[np.int32]

Logits = TypeVar("Logits", "npt.NDArray[Any]", "torch.Tensor")


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> Bitmask:
    """A zeroed ``int32[batch_size, ceil(vocab_size / 32)]`` bitmask."""
    if batch_size < 1 or vocab_size < 1:
        raise ValueError("batch_size and vocab_size must be positive")
    return np.zeros((batch_size, (vocab_size + 31) // 32), dtype=np.int32)


def as_numpy_bitmask(bitmask: Any) -> Bitmask:
    """``bitmask`` (a numpy array or a CPU torch tensor, sharing memory) checked for the layout
    the native fill writes."""
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


def _mask_numpy(logits: npt.NDArray[Any], words: npt.NDArray[np.int32]) -> None:
    """The one implementation on the host: ``logits`` float ``[B, V]``, ``words`` int32
    ``[1 or >= B, W]`` (one row applies to every row of ``logits``).

    C-contiguous float32/float64 logits are masked by the engine (one pass over the words, the GIL
    released); other dtypes and layouts by numpy: ``np.unpackbits`` on little-endian int32 words
    puts bit ``i`` of word ``j`` at ``32 j + i`` (big-endian hosts byte-swap the words first).
    """
    words = np.ascontiguousarray(words[: logits.shape[0]])
    if logits.flags.writeable and _engine.apply_token_bitmask_inplace(logits, words):
        return
    if sys.byteorder != "little":
        words = words.byteswap()
    bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
    vocab = logits.shape[-1]
    if bits.shape[-1] < vocab:
        bits = np.pad(bits, ((0, 0), (0, vocab - bits.shape[-1])))
    np.copyto(logits, -np.inf, where=bits[:, :vocab] == 0)


def apply_token_bitmask_(logits: Logits, bitmask: Any) -> Logits:
    """Set disallowed logits to ``-inf`` in place; ``logits`` is ``[vocab]`` or ``[batch, vocab]``.

    Works on numpy arrays and torch tensors (on any device: the mask is moved to the logits'
    device). Columns beyond the bitmask (padding) are disallowed.
    """
    if isinstance(logits, np.ndarray):
        bm = np.asarray(bitmask, dtype=np.int32)
        rows = logits.shape[0] if logits.ndim == 2 else 1
        if bm.ndim == 2 and bm.shape[0] not in (1, rows) and bm.shape[0] < rows:
            raise ValueError(f"bitmask has {bm.shape[0]} rows but logits have {rows}")
        _mask_numpy(
            logits if logits.ndim == 2 else logits[None, :], bm if bm.ndim == 2 else bm[None, :]
        )
        return logits
    if not (hasattr(logits, "device") and hasattr(logits, "masked_fill_")):
        raise TypeError(
            f"logits must be a numpy array or a torch tensor, not {type(logits).__name__}"
        )
    import torch  # optional dependency, imported lazily

    if (
        logits.device.type == "cpu"
        and logits.dtype == torch.float32
        and not logits.requires_grad
        and logits.is_contiguous()
    ):
        # A shared numpy view: single-threaded, no torch intra-op pool (see structout.sampling).
        apply_token_bitmask_(logits.numpy(), bitmask)
        return logits
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
