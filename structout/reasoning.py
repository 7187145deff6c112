"""Reasoning sections: free thinking between a model's markers, then a constrained answer.

``Model.generate(..., reasoning=True, reasoning_budget=N)`` lets the model write its thinking
between the markers (``<think>`` … ``</think>``, read from the tokenizer), unconstrained but for
the end marker, then constrains the answer (a schema, tools or free text) after it.

Invariants:

* The thinking text never contains the end marker: its first occurrence closes the section, so
  :func:`split_reasoning` splits exactly where the grammar did.
* The budget is in tokens, enforced by the decode loop (:class:`structout.generation.
  SectionBudget`): once ``N`` tokens are generated with the section still open, the loop
  appends the end marker itself (a token later when the last token ended inside a UTF-8
  character). It counts every generated token before the end marker, the begin marker included
  when the model writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from structout.errors import TruncatedOutputError
from structout.structural_tag import AnyText, ConstString, Format, Sequence_, Tag

__all__ = [
    "KNOWN_MARKERS",
    "SEPARATOR",
    "Reasoned",
    "ReasoningMarkers",
    "detect_markers",
    "reasoning_format",
    "split_reasoning",
    "truncated_in_phase",
]

T = TypeVar("T")

#: Written between the end marker and the answer (as Qwen 3 and DeepSeek-R1 do).
SEPARATOR = "\n\n"


@dataclass(frozen=True)
class ReasoningMarkers:
    """The strings around a reasoning section."""

    begin: str
    end: str


#: Marker pairs looked for in the tokenizer's vocabulary and chat template, in this order; the
#: first is also the default when none is found (then spelled with ordinary tokens).
KNOWN_MARKERS = (
    ReasoningMarkers("<think>", "</think>"),
    ReasoningMarkers("<thinking>", "</thinking>"),
    ReasoningMarkers("<|START_THINKING|>", "<|END_THINKING|>"),
    ReasoningMarkers("◁think▷", "◁/think▷"),
)


@dataclass
class Reasoned(Generic[T]):
    """The reply of ``generate(..., reasoning=True)``: the answer and the thinking before it."""

    value: T
    reasoning: str


def detect_markers(tokenizer: Any) -> ReasoningMarkers:
    """The first pair of :data:`KNOWN_MARKERS` whose two markers are tokens of ``tokenizer``
    or both appear in its chat template; ``<think>``/``</think>`` when none does."""
    vocab: Mapping[str, int] = {}
    get_vocab = getattr(tokenizer, "get_vocab", None)
    if callable(get_vocab):
        try:
            vocab = get_vocab()
        except Exception:  # noqa: BLE001 - a tokenizer without a vocabulary view: template only
            vocab = {}
    template = getattr(tokenizer, "chat_template", None)
    text = template if isinstance(template, str) else str(template or "")
    for m in KNOWN_MARKERS:
        if (m.begin in vocab and m.end in vocab) or (m.begin in text and m.end in text):
            return m
    return KNOWN_MARKERS[0]


def prompt_opens_section(prompt_text: str, markers: ReasoningMarkers) -> bool:
    """Whether the rendered prompt already ends with the begin marker (templates of thinking
    models that open the section themselves): then the output starts inside it."""
    return prompt_text.rstrip().endswith(markers.begin)


def reasoning_format(markers: ReasoningMarkers, answer: Format, opened: bool) -> Format:
    """Thinking (free text without the end marker), the end marker, :data:`SEPARATOR`, then
    ``answer``; the begin marker first unless the prompt ``opened`` the section."""
    if opened:
        thinking: Format = Sequence_((AnyText(excludes=(markers.end,)), ConstString(markers.end)))
    else:
        thinking = Tag(markers.begin, AnyText(), markers.end)
    return Sequence_((thinking, ConstString(SEPARATOR), answer))


def split_reasoning(text: str, markers: ReasoningMarkers, opened: bool) -> tuple[str, str]:
    """``(reasoning, answer)`` of an output of :func:`reasoning_format` (the reasoning
    stripped of its markers and surrounding whitespace)."""
    cut = text.find(markers.end)
    if cut < 0:
        raise ValueError(f"no {markers.end!r} in the output")
    thinking = text[:cut]
    if not opened and thinking.startswith(markers.begin):
        thinking = thinking[len(markers.begin) :]
    answer = text[cut + len(markers.end) :]
    answer = answer.removeprefix(SEPARATOR)
    return thinking.strip(), answer


def truncated_in_phase(
    exc: TruncatedOutputError, markers: ReasoningMarkers
) -> TruncatedOutputError:
    """``exc`` restated with the phase the budget ran out in: ``"thinking"`` (the section was
    still open) or ``"answering"``."""
    phase = "answering" if markers.end in exc.partial else "thinking"
    hint = (
        "lower reasoning_budget or raise max_new_tokens"
        if phase == "thinking"
        else "raise max_new_tokens or simplify the schema"
    )
    return TruncatedOutputError(
        f"max_new_tokens ran out while {phase} ({hint}): {exc}", partial=exc.partial, phase=phase
    )
