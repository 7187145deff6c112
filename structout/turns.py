"""One assistant turn as one structural tag: an optional reasoning section, then the answer (a
schema's value, free text, or tool calls), with the parser that reads it back.

:class:`Turn` is what ``Model.generate(..., tools=..., reasoning=...)`` builds from its
arguments (checking them before anything is generated); :meth:`Turn.prompt` adds what the
prompt needs (the tools), :meth:`Turn.plan` gives the KBNF, the parser and the reasoning
budget for the rendered prompt.

Invariant: ``plan.parse`` accepts every complete output of ``plan.kbnf`` and returns the typed
reply: :class:`~structout.tools.AssistantTurn` with tools, :class:`~structout.reasoning.
Reasoned` with reasoning only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable

from structout.errors import TruncatedOutputError
from structout.generation import SectionBudget
from structout.reasoning import (
    Reasoned,
    ReasoningMarkers,
    detect_markers,
    prompt_opens_section,
    reasoning_format,
    split_reasoning,
    truncated_in_phase,
)
from structout.structural_tag import AnyText, Format, GrammarText, JsonSchema, structural_tag_kbnf
from structout.targets import Target, resolve_schema
from structout.tools import (
    AssistantTurn,
    Tool,
    ToolFormat,
    max_calls,
    parse_tool_calls,
    repeated_call_end,
    resolve_tool_choice,
    resolve_tool_format,
    resolve_tools,
    template_takes_tools,
    tool_call_format,
    tools_instruction,
)

__all__ = ["Turn", "TurnPlan"]

#: A JSON Schema (or type) → KBNF translator (the model's cache and limits).
Translate = Callable[[Any], str]


@dataclass(frozen=True)
class TurnPlan:
    """What the decode loop needs for one turn."""

    kbnf: str
    parse: Callable[[str], Any]
    section: SectionBudget | None
    #: The decode loop's ``end_early`` (tool turns: a repeated call ends the turn).
    end_early: Callable[[bytearray], int | None] | None = None


@dataclass(frozen=True)
class Turn:
    """The reply a ``generate`` call asks for beyond a plain schema."""

    answer: Target[Any]
    tools: list[Tool] | None
    wire: ToolFormat | None
    choice: str
    parallel: bool | int
    markers: ReasoningMarkers | None
    budget: int | None

    @classmethod
    def make(
        cls,
        tokenizer: Any,
        schema: Any,
        *,
        tools: Sequence[Any] | None,
        tool_choice: Any,
        parallel_tool_calls: bool | int,
        tool_format: str | ToolFormat | None,
        reasoning: bool,
        reasoning_budget: int | None,
    ) -> Turn:
        """Check and resolve ``generate``'s arguments (``ValueError`` for bad ones)."""
        if reasoning_budget is not None:
            if not reasoning:
                raise ValueError("reasoning_budget needs reasoning=True")
            if isinstance(reasoning_budget, bool) or reasoning_budget < 0:
                raise ValueError(f"reasoning_budget must be >= 0, got {reasoning_budget!r}")
        resolved: list[Tool] | None = None
        wire: ToolFormat | None = None
        choice = "auto"
        if tools is not None:
            if schema is not None:
                raise ValueError(
                    "schema= and tools= cannot be combined: with tools the reply is tool calls "
                    "or text (structout.AssistantTurn)"
                )
            resolved = resolve_tools(tools)
            choice = resolve_tool_choice(tool_choice, resolved)
            max_calls(parallel_tool_calls)  # checked now
            wire = resolve_tool_format(tool_format, getattr(tokenizer, "chat_template", None))
        return cls(
            answer=resolve_schema(schema),
            tools=resolved,
            wire=wire,
            choice=choice,
            parallel=parallel_tool_calls,
            markers=detect_markers(tokenizer) if reasoning else None,
            budget=reasoning_budget,
        )

    def prompt(
        self, messages: list[dict[str, str]], template: Any
    ) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The messages and chat-template keywords for this turn: ``tools=`` for templates that
        take tools, else a system message listing them and the call layout (none for
        ``tool_choice="none"``)."""
        if self.tools is None or self.wire is None:
            return messages, {}
        if template and template_takes_tools(template):
            return messages, {"tools": [t.openai() for t in self.tools]}
        if self.choice == "none":
            return messages, {}
        text = tools_instruction(self.tools, self.wire, self.choice)
        out = [dict(m) for m in messages]
        if out and out[0].get("role") == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{text}"
        else:
            out.insert(0, {"role": "system", "content": text})
        return out, {}

    def plan(self, prompt_text: str, translate: Translate) -> TurnPlan:
        """KBNF, parser and reasoning budget for a turn prompted with ``prompt_text``. Raises
        ``UnsupportedSchemaError``/``SchemaError`` for a schema structout refuses (pointing
        into the tool: ``/tools/<i>/parameters/...``)."""
        answer = self._answer_format(translate)
        parse_answer = self._answer_parser()
        end_early = repeated_call_end(self.wire) if self.tools is not None and self.wire else None
        markers = self.markers
        if markers is None:
            return TurnPlan(
                structural_tag_kbnf(answer, translate_schema=translate),
                parse_answer,
                None,
                end_early,
            )
        opened = prompt_opens_section(prompt_text, markers)
        fmt = reasoning_format(markers, answer, opened)

        def parse(text: str) -> Any:
            thinking, rest = split_reasoning(text, markers, opened)
            value = parse_answer(rest)
            if isinstance(value, AssistantTurn):
                value.reasoning = thinking
                return value
            return Reasoned(value, thinking)

        section = (
            SectionBudget(markers.end.encode("utf-8"), self.budget)
            if self.budget is not None
            else None
        )
        return TurnPlan(
            structural_tag_kbnf(fmt, translate_schema=translate), parse, section, end_early
        )

    def truncated(self, exc: TruncatedOutputError) -> TruncatedOutputError:
        """``exc`` saying whether the budget ran out while thinking or answering."""
        return truncated_in_phase(exc, self.markers) if self.markers is not None else exc

    # ---- pieces
    def _answer_format(self, translate: Translate) -> Format:
        if self.tools is not None and self.wire is not None:
            return tool_call_format(
                self.tools, self.wire, self.choice, self.parallel, translate_schema=translate
            )
        target = self.answer
        if target.kind == "text":
            return AnyText()
        if target.kbnf is not None:
            return GrammarText(target.kbnf)
        translate(target.json_schema)  # errors point into the user's schema, not the tag tree
        return JsonSchema(target.json_schema)

    def _answer_parser(self) -> Callable[[str], Any]:
        tools, wire, choice = self.tools, self.wire, self.choice
        if tools is not None and wire is not None:
            return lambda text: parse_tool_calls(text, tools, wire, choice)
        return self.answer.parse
