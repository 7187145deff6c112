"""What a generation returns: per-row outcomes of the decode loop turned into typed values.

Invariant: :func:`finalize` returns a value only for an output the grammar accepted as complete;
a cut-off output raises :class:`~structout.errors.TruncatedOutputError`, a rejected one the
target's validation error.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar, overload

from structout.errors import TruncatedOutputError

if TYPE_CHECKING:  # pragma: no cover
    from structout.targets import Target

__all__ = [
    "GenerationResult",
    "IncrementalText",
    "RowOutcome",
    "RunStats",
    "Timings",
    "finalize",
]

T = TypeVar("T")


@dataclass
class Timings:
    """Where the time of one generation went."""

    #: Schema → KBNF → compiled grammar (near zero on a cache hit).
    compile_ms: float = 0.0
    #: The first forward pass over the prompt (and any bytes forced at the start).
    prefill_ms: float = 0.0
    #: Everything after compiling: prefill, decode steps, masks, sampling.
    total_ms: float = 0.0
    #: Mean time to fill and apply the token mask per sampled token (0 when unconstrained).
    mask_us_per_token: float = 0.0
    #: Generated tokens (sampled + jump-forward) per second of decoding after the prefill.
    tokens_per_s: float = 0.0
    #: Total time in the grammar engine and jump-forward outside the forward passes: masks,
    #: accepting tokens, forced bytes, re-tokenization (0 when unconstrained).
    grammar_ms: float = 0.0


@dataclass
class GenerationResult(Generic[T]):
    """What :meth:`structout.Model.generate` returns with ``return_result=True``."""

    value: T
    text: str
    token_ids: list[int]
    #: ``"stop"`` (grammar complete or EOS sampled) or ``"length"`` (budget used up; the output is
    #: still complete, otherwise TruncatedOutputError is raised).
    finish_reason: str
    timings: Timings
    prompt_tokens: int = 0
    #: Tokens appended by jump-forward without sampling (included in ``token_ids``).
    forced_tokens: int = 0
    #: Model forward passes (prefill included).
    forward_passes: int = 0


@dataclass
class RowOutcome:
    """What the decode loop produced for one row."""

    token_ids: list[int]
    data: bytes
    finish_reason: str  # "stop" | "length"
    complete: bool  # the grammar accepted the output as a whole sentence (True if unconstrained)
    forced_tokens: int
    sampled_tokens: int


@dataclass
class RunStats:
    """Time and work of one decode-loop run (all rows together)."""

    prefill_ns: int = 0
    total_ns: int = 0
    mask_ns: int = 0
    #: Accepting tokens, forced bytes, re-tokenization, finish checks (after sampling).
    grammar_ns: int = 0
    masked_steps: int = 0
    forward_passes: int = 0


def _ends(text: str, head: int = 120, tail: int = 200) -> str:
    """``text`` for an error message: all of it when short, else its start and its end."""
    if len(text) <= head + tail + 20:
        return repr(text)
    return f"{text[:head]!r} ... {text[-tail:]!r}"


@overload
def finalize(
    outcome: RowOutcome,
    target: Target[T],
    stats: RunStats,
    compile_ms: float,
    prompt_tokens: int,
    return_result: Literal[False],
) -> T: ...
@overload
def finalize(
    outcome: RowOutcome,
    target: Target[T],
    stats: RunStats,
    compile_ms: float,
    prompt_tokens: int,
    return_result: Literal[True],
) -> GenerationResult[T]: ...
@overload
def finalize(
    outcome: RowOutcome,
    target: Target[T],
    stats: RunStats,
    compile_ms: float,
    prompt_tokens: int,
    return_result: bool,
) -> T | GenerationResult[T]: ...
def finalize(
    outcome: RowOutcome,
    target: Target[T],
    stats: RunStats,
    compile_ms: float,
    prompt_tokens: int,
    return_result: bool,
) -> T | GenerationResult[T]:
    """Turn a row outcome into the user's value (or a GenerationResult), raising typed errors."""
    text = outcome.data.decode("utf-8", errors="replace")
    if not outcome.complete:
        raise TruncatedOutputError(
            f"the output was cut off after {len(outcome.token_ids)} tokens (max_new_tokens) "
            f"before the {target.kind.replace('_', ' ')} could be completed; raise "
            f"max_new_tokens or simplify the schema. Partial output ({len(text)} characters; "
            f"all of it in .partial): {_ends(text)}",
            partial=text,
        )
    value = target.parse(text)
    if not return_result:
        return value
    decode_s = max(stats.total_ns - stats.prefill_ns, 1) / 1e9
    timings = Timings(
        compile_ms=compile_ms,
        prefill_ms=stats.prefill_ns / 1e6,
        total_ms=stats.total_ns / 1e6,
        mask_us_per_token=(stats.mask_ns / 1e3 / stats.masked_steps) if stats.masked_steps else 0.0,
        tokens_per_s=len(outcome.token_ids) / decode_s if outcome.token_ids else 0.0,
        grammar_ms=(stats.mask_ns + stats.grammar_ns) / 1e6 if stats.masked_steps else 0.0,
    )
    return GenerationResult(
        value=value,
        text=text,
        token_ids=outcome.token_ids,
        finish_reason=outcome.finish_reason,
        timings=timings,
        prompt_tokens=prompt_tokens,
        forced_tokens=outcome.forced_tokens,
        forward_passes=stats.forward_passes,
    )


class IncrementalText:
    """Turns appended bytes into text chunks without splitting UTF-8 sequences."""

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, data: bytes) -> str:
        return self._dec.decode(data)

    def flush(self) -> str:
        return self._dec.decode(b"", final=True)
