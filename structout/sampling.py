"""Sampling: parameters of a generation and picking each row's next token from masked logits.

Masking and sampling run in numpy on the host: single-threaded and cheap (tens of µs for a
50k-150k vocabulary). torch's intra-op thread pool is left to the forward pass; on a busy CPU,
a multi-threaded torch masked_fill over the vocabulary can stall for milliseconds.

Invariant: a sampled token always has a finite (allowed) logit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from structout.errors import StructoutError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["DEFAULT_MAX_NEW_TOKENS", "SamplingParams", "sample"]

#: Token budget of a generation unless the caller sets ``max_new_tokens``.
DEFAULT_MAX_NEW_TOKENS = 256


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    #: 0 → greedy (argmax); otherwise softmax sampling at this temperature.
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    jump_forward: bool = True
    #: Unconstrained generation only: never stop at EOS (used by benchmarks).
    ignore_eos: bool = False
    #: Fill the next step's token masks in a worker thread during the forward pass (used only
    #: where that runs in parallel: accelerators, or CPUs with a core torch does not use).
    overlap: bool = True

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


def sample(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> list[int]:
    """Greedy when temperature is 0, else temperature + nucleus (top-p) sampling, per row.

    ``logits`` is float32 ``[B, V]`` with disallowed tokens at ``-inf``.
    """
    import numpy as np

    if params.temperature == 0:
        return [int(t) for t in logits.argmax(axis=-1)]
    out = []
    for row in logits:
        ids = np.flatnonzero(row > -np.inf)
        if len(ids) == 0:
            raise StructoutError("every token is masked out; nothing can be sampled")
        x = row[ids].astype(np.float64) / params.temperature
        p = np.exp(x - x.max())
        p /= p.sum()
        if params.top_p < 1.0:
            order = np.argsort(-p, kind="stable")
            cumulative = np.cumsum(p[order])
            # The smallest prefix whose mass reaches top_p (always at least the top token).
            keep = order[: int(np.searchsorted(cumulative, params.top_p)) + 1]
            ids, p = ids[keep], p[keep] / p[keep].sum()
        out.append(int(ids[rng.choice(len(ids), p=p)]))
    return out
