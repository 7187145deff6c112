"""Tool calls: tool specs, the models' wire formats, their grammars and their parsers.

``Model.generate(prompt, tools=[...], tool_choice=...)`` uses this module; it is usable on its
own too (:func:`tool_call_format` gives the structural tag, :func:`parse_tool_calls` reads the
text back).

* A tool is a typed Python function (parameters → a Pydantic model, docstring → description),
  a Pydantic model class (its fields are the arguments; name: the ``model_config`` title, else
  the class name as is), a JSON Schema tool dict (OpenAI's ``{"type": "function", "function":
  {...}}`` or a bare ``{"name", "description", "parameters"}``) or a :class:`Tool`.
* A wire format (:class:`ToolFormat`) is how a model family writes calls: :data:`HERMES`
  (Hermes/Qwen ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``, the default),
  :data:`LLAMA3_JSON` (Llama 3.1 ``{"name": ..., "parameters": ...}``) and :data:`MISTRAL`
  (``[TOOL_CALLS][{"name": ..., "arguments": ...}]``); :func:`detect_tool_format` reads it from
  a chat template.

Invariants:

* :func:`parse_tool_calls` accepts exactly the layout the grammar of :func:`tool_call_format`
  produces (the call wrapper byte for byte; the arguments are read with a JSON decoder and
  validated with the tool's own validator), so for any text the grammar accepts it returns the
  calls written there.
* Free text never contains the format's trigger: the first trigger starts the calls, which run
  to the end of the output.
* Markers are grammar *text*: a marker the vocabulary holds as a special token (Mistral's
  ``[TOOL_CALLS]`` in most Mistral tokenizers) is written with ordinary tokens, which the model
  has rarely seen; prefer ``tool_choice="required"`` or a tool name there (see docs).
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Union

from structout.errors import SchemaError, SchemaValidationError, UnsupportedSchemaError
from structout.instructions import without_titles
from structout.structural_tag import (
    AnyText,
    ConstString,
    Format,
    JsonSchema,
    Optional,
    Or,
    Repeat,
    Sequence_,
    Tag,
    TagsWithSeparator,
)
from structout.targets import resolve_schema

if TYPE_CHECKING:  # pragma: no cover
    from structout.targets import Target

__all__ = [
    "HERMES",
    "LLAMA3_JSON",
    "MISTRAL",
    "TOOL_FORMATS",
    "AssistantTurn",
    "Tool",
    "ToolCall",
    "ToolFormat",
    "ToolSpec",
    "detect_tool_format",
    "parse_tool_calls",
    "resolve_tool_choice",
    "resolve_tools",
    "tool",
    "tool_call_format",
    "tools_instruction",
]

#: What ``tools=`` takes: a function, a Pydantic model class, a JSON Schema tool dict, a Tool.
ToolSpec = Union[Callable[..., Any], type, Mapping[str, Any], "Tool"]

#: OpenAI's rule for function names (they are written into JSON and the prompt verbatim).
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


# ------------------------------------------------------------------------------------ tools
@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its name, description, the JSON Schema of its arguments
    object, and (optionally) the Python callable :meth:`ToolCall.invoke` runs."""

    name: str
    description: str | None
    #: JSON Schema of the arguments object (what the grammar enforces).
    parameters: dict[str, Any]
    fn: Callable[..., Any] | None = field(default=None, compare=False)
    #: Turns the arguments' JSON text into the validated value (a Pydantic instance or a dict).
    _target: Target[Any] | None = field(default=None, repr=False, compare=False)
    #: ``"function"``: ``fn(**fields)``; ``"model"``: ``fn(instance)``; ``"schema"``:
    #: ``fn(**dict)``.
    kind: str = "schema"

    def parse_arguments(self, text: str) -> Any:
        """The validated arguments of a call written as JSON ``text`` (raises
        ``SchemaValidationError``)."""
        target = self._target if self._target is not None else resolve_schema(self.parameters)
        return target.parse(text)

    def openai(self) -> dict[str, Any]:
        """The tool in OpenAI's form (what chat templates take as ``tools=``)."""
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = without_titles(self.parameters)
        return {"type": "function", "function": function}


def tool(
    spec: ToolSpec,
    *,
    name: str | None = None,
    description: str | None = None,
    fn: Callable[..., Any] | None = None,
) -> Tool:
    """Make a :class:`Tool` of a function, a Pydantic model class or a JSON Schema tool dict;
    ``name``/``description`` override what is read from it, ``fn`` sets the callable run by
    :meth:`ToolCall.invoke` (for model classes and dicts, which have none). Raises
    ``ValueError`` for a spec without a usable name or schema."""
    if isinstance(spec, Tool):
        made = spec
    elif isinstance(spec, Mapping):
        made = _dict_tool(spec)
    elif isinstance(spec, type) and _is_pydantic_model(spec):
        made = _model_tool(spec)
    elif callable(spec):
        made = _function_tool(spec)
    else:
        raise ValueError(
            f"a tool must be a function, a Pydantic model class, a JSON Schema tool dict or a "
            f"structout.Tool, got {spec!r}"
        )
    if name is not None or description is not None or fn is not None:
        made = Tool(
            name if name is not None else made.name,
            description if description is not None else made.description,
            made.parameters,
            fn if fn is not None else made.fn,
            made._target,
            made.kind,
        )
    _check_name(made.name)
    return made


def resolve_tools(specs: Sequence[ToolSpec]) -> list[Tool]:
    """The tools of ``tools=``; ``ValueError`` for an empty list, a duplicate name or a spec
    without a usable schema (the message names the tool's index)."""
    if isinstance(specs, (str, bytes, Mapping)) or not isinstance(specs, Sequence):
        raise TypeError("tools= takes a list of tools")
    if not specs:
        raise ValueError("tools= is empty; pass at least one tool (or leave tools out)")
    out: list[Tool] = []
    seen: dict[str, int] = {}
    for i, spec in enumerate(specs):
        try:
            made = tool(spec)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"tools[{i}]: {exc}") from exc
        if made.name in seen:
            raise ValueError(
                f"tools[{i}] and tools[{seen[made.name]}] are both named {made.name!r}; tool "
                "names must be unique"
            )
        seen[made.name] = i
        out.append(made)
    return out


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"tool name {name!r} must be 1-64 letters, digits, '_', '.' or '-' (OpenAI's rule)"
        )


def _is_pydantic_model(tp: type) -> bool:
    try:
        from pydantic import BaseModel
    except ImportError:  # pragma: no cover - pydantic comes with typed schemas
        return False
    return issubclass(tp, BaseModel)


def _dict_tool(spec: Mapping[str, Any]) -> Tool:
    body: Any = spec
    if spec.get("type") == "function" and isinstance(spec.get("function"), Mapping):
        body = spec["function"]
    name = body.get("name")
    if not isinstance(name, str):
        raise TypeError(f"a JSON Schema tool needs a string 'name', got {dict(spec)!r}")
    params = body.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(params, Mapping):
        raise TypeError(f"tool {name!r}: 'parameters' must be a JSON Schema object")
    params = dict(params)
    if params.get("type", "object") != "object":
        raise ValueError(f"tool {name!r}: 'parameters' must describe an object (type 'object')")
    description = body.get("description")
    return Tool(
        name,
        description if isinstance(description, str) else None,
        params,
        None,
        resolve_schema(params),
        "schema",
    )


def _model_tool(cls: type) -> Tool:
    target: Target[Any] = resolve_schema(cls)
    schema = target.json_schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError(f"{cls.__name__}: its JSON Schema is not an object schema")
    config = getattr(cls, "model_config", {}) or {}
    title = config.get("title")
    name = title if isinstance(title, str) else cls.__name__
    description = cls.__dict__.get("__doc__")
    return Tool(
        name,
        inspect.cleandoc(description) if isinstance(description, str) else None,
        schema,
        None,
        target,
        "model",
    )


def _function_tool(fn: Callable[..., Any]) -> Tool:
    """A tool of a typed function: each parameter a field of a Pydantic model (its annotation
    and default), the docstring its description."""
    from pydantic import ConfigDict, create_model

    inner = inspect.unwrap(fn)  # @structured functions and functools.wraps decorators
    name = getattr(inner, "__name__", None)
    if not isinstance(name, str) or name == "<lambda>":
        raise ValueError(f"{fn!r} has no usable name; pass structout.tool(fn, name=...)")
    try:
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(inner, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ValueError(f"cannot read the parameters of {name}: {exc}") from exc
    fields: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"{name}: *args/**kwargs parameters cannot be tool arguments")
        annotation = hints.get(p.name, Any)
        fields[p.name] = (annotation, ... if p.default is p.empty else p.default)
    try:
        model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        target = resolve_schema(model)
    except Exception as exc:
        raise ValueError(f"cannot build a JSON Schema for the parameters of {name}: {exc}") from exc
    schema = dict(target.json_schema or {})
    schema.pop("title", None)
    doc = inspect.getdoc(inner)
    return Tool(name, doc or None, schema, fn, target, "function")


# ------------------------------------------------------------------------------- the reply
@dataclass(frozen=True)
class ToolCall:
    """One call the model made: the tool's name and its validated arguments."""

    name: str
    #: A Pydantic instance (function and model tools) or a dict (JSON Schema tools), validated.
    arguments: Any
    #: The arguments exactly as the model wrote them (JSON text).
    arguments_json: str
    tool: Tool = field(repr=False)

    def invoke(self) -> Any:
        """Run the tool's Python function with these arguments (``TypeError`` when it has
        none: pass ``structout.tool(spec, fn=...)``)."""
        fn = self.tool.fn
        if fn is None:
            raise TypeError(
                f"tool {self.name!r} has no Python function to run; make it with "
                "structout.tool(spec, fn=...)"
            )
        if self.tool.kind == "function":
            return _call_with_fields(fn, self.arguments)
        if self.tool.kind == "model":
            return fn(self.arguments)
        return fn(**self.arguments)


def _call_with_fields(fn: Callable[..., Any], arguments: Any) -> Any:
    """``fn`` called with the fields of its arguments model (positional-only ones by
    position); fields keep their validated (converted) values."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in inspect.signature(fn).parameters.values():
        value = getattr(arguments, p.name)
        if p.kind is p.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[p.name] = value
    return fn(*args, **kwargs)


@dataclass
class AssistantTurn:
    """The reply of ``generate(..., tools=...)``: text (``""`` when the model only made calls)
    and the calls it made, in order (empty when it answered in prose)."""

    text: str
    tool_calls: list[ToolCall]
    #: The reasoning section's text with ``reasoning=True``, else None.
    reasoning: str | None = None

    def run_tools(self) -> list[Any]:
        """Each call's :meth:`ToolCall.invoke` result, in order."""
        return [call.invoke() for call in self.tool_calls]


# --------------------------------------------------------------------------- wire formats
@dataclass(frozen=True)
class ToolFormat:
    """How a model family writes tool calls: a block ``open`` + calls joined by ``separator``
    + ``close`` (+ ``trail``, optional); each call ``call_prefix`` + ``{"name": NAME,
    "<args_key>": ARGS}`` + ``call_suffix`` (in JSON's compact layout). ``trigger`` starts
    every block."""

    name: str
    trigger: str
    open: str
    close: str
    separator: str
    call_prefix: str
    call_suffix: str
    args_key: str
    #: Allowed (not required) after the block: models that end each line with a newline can
    #: then stop there instead of being pushed into another call by the separator.
    trail: str = ""

    def call_begin(self, tool_name: str) -> str:
        return f'{self.call_prefix}{{"name": {json.dumps(tool_name)}, "{self.args_key}": '

    @property
    def call_end(self) -> str:
        return "}" + self.call_suffix

    def example(self) -> str:
        """The call layout, for the prompt."""
        call = f'{self.call_prefix}{{"name": <tool name>, "{self.args_key}": <arguments object>}}'
        return self.open + call + self.call_suffix + self.close


#: Hermes / Qwen 2.5 / Qwen 3 (``<tool_call>`` blocks, one per call, newline-separated); the
#: default for chat templates that declare no format.
HERMES = ToolFormat(
    "hermes", "<tool_call>", "", "", "\n", "<tool_call>\n", "\n</tool_call>", "arguments", "\n"
)
#: Llama 3.1+ JSON tool calls (``{"name": ..., "parameters": ...}``; parallel calls joined by
#: ``"; "`` as vLLM's llama3_json parser reads them). ``<|python_tag|>`` (built-in tools) is
#: not used.
LLAMA3_JSON = ToolFormat("llama3", '{"name": ', "", "", "; ", "", "", "parameters")
#: Mistral (v3 tokenizers): one ``[TOOL_CALLS]`` then a JSON array of calls.
MISTRAL = ToolFormat("mistral", "[TOOL_CALLS]", "[TOOL_CALLS][", "]", ", ", "", "", "arguments")

TOOL_FORMATS: dict[str, ToolFormat] = {f.name: f for f in (HERMES, LLAMA3_JSON, MISTRAL)}


def detect_tool_format(chat_template: Any) -> ToolFormat:
    """The wire format a chat template declares: ``<tool_call>`` → :data:`HERMES`,
    ``[TOOL_CALLS]`` → :data:`MISTRAL`, ``<|python_tag|>`` or Llama 3.1's ``"parameters":
    dictionary`` instruction → :data:`LLAMA3_JSON`; :data:`HERMES` when it declares none."""
    text = _template_text(chat_template)
    if "<tool_call>" in text:
        return HERMES
    if "[TOOL_CALLS]" in text:
        return MISTRAL
    if "<|python_tag|>" in text or '"parameters": dictionary' in text:
        return LLAMA3_JSON
    return HERMES


def _template_text(chat_template: Any) -> str:
    if isinstance(chat_template, str):
        return chat_template
    if isinstance(chat_template, Mapping):  # named templates ({"default": ..., "tool_use": ...})
        return "\n".join(str(v) for v in chat_template.values())
    if isinstance(chat_template, Sequence):
        return "\n".join(
            str(t.get("template", "")) for t in chat_template if isinstance(t, Mapping)
        )
    return ""


def template_takes_tools(chat_template: Any) -> bool:
    """Whether a chat template renders a ``tools`` variable (so tools go to it, not to a
    system message structout writes)."""
    return re.search(r"\btools\b", _template_text(chat_template)) is not None


def resolve_tool_format(spec: str | ToolFormat | None, chat_template: Any) -> ToolFormat:
    """``tool_format=``: a name in :data:`TOOL_FORMATS`, a :class:`ToolFormat`, or None (read
    from the chat template)."""
    if spec is None:
        return detect_tool_format(chat_template)
    if isinstance(spec, ToolFormat):
        return spec
    found = TOOL_FORMATS.get(spec)
    if found is None:
        raise ValueError(f"unknown tool_format {spec!r}; known: {', '.join(TOOL_FORMATS)}")
    return found


# ----------------------------------------------------------------------------- the grammar
#: ``tool_choice=``: "auto" (text, then optionally calls), "required" (only calls, at least
#: one), "none" (text only) or a tool's name (only calls of that tool).
ToolChoice = str


def resolve_tool_choice(choice: Any, tools: Sequence[Tool]) -> str:
    """``"auto"``, ``"required"``, ``"none"`` or the name of one of ``tools`` (OpenAI's
    ``{"type": "function", "function": {"name": ...}}`` form too); ``ValueError`` otherwise."""
    if isinstance(choice, Mapping):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str):
            raise TypeError(f"tool_choice {dict(choice)!r} names no function")
        choice = name
    if not isinstance(choice, str):
        raise TypeError(
            f"tool_choice must be 'auto', 'required', 'none' or a tool name: {choice!r}"
        )
    if choice in ("auto", "required", "none"):
        return choice
    if not any(t.name == choice for t in tools):
        raise ValueError(
            f"tool_choice {choice!r} is not one of the tools ({', '.join(t.name for t in tools)})"
        )
    return choice


def tool_call_format(
    tools: Sequence[Tool],
    wire: ToolFormat = HERMES,
    choice: str = "auto",
    parallel: bool | int = True,
    *,
    translate_schema: Callable[[Any], str] | None = None,
) -> Format:
    """The structural tag of a reply with ``tools`` in ``wire`` format under ``choice``:

    * ``"auto"``: free text (never containing the trigger), then optionally the calls;
    * ``"required"``: only calls, at least one; a tool name: the same, only that tool;
    * ``"none"``: free text without the trigger.

    ``parallel``: ``True`` allows any number of calls, ``False`` one, an int ``n`` at most
    ``n``. With ``translate_schema`` each tool's arguments schema
    is translated first, so a schema structout refuses raises ``UnsupportedSchemaError`` /
    ``SchemaError`` pointing into that tool (``/tools/<i>/parameters/...``)."""
    if translate_schema is not None:
        check_tool_schemas(tools, translate_schema)
    text = AnyText(excludes=(wire.trigger,))
    if choice == "none":
        return text
    chosen = [t for t in tools if choice in ("auto", "required") or t.name == choice]
    tags = tuple(
        Tag(wire.call_begin(t.name), JsonSchema(t.parameters), wire.call_end) for t in chosen
    )
    limit = max_calls(parallel)
    calls: Format = TagsWithSeparator(
        tags, wire.separator, at_least_one=True, stop_after_first=limit == 1
    )
    if limit is not None and limit > 1:
        more = Sequence_((ConstString(wire.separator), Or(tags)))
        calls = Sequence_((Or(tags), Repeat(more, 0, limit - 1)))
    parts: list[Format] = [ConstString(s) for s in (wire.open,) if s]
    parts.append(calls)
    parts += [ConstString(s) for s in (wire.close,) if s]
    if wire.trail:
        parts.append(Optional(ConstString(wire.trail)))
    block: Format = parts[0] if len(parts) == 1 else Sequence_(tuple(parts))
    if choice == "auto":
        return Sequence_((text, Optional(block)))
    return block


def max_calls(parallel: bool | int) -> int | None:
    """The most calls ``parallel_tool_calls`` allows (None: no limit); ``ValueError`` below 1."""
    if isinstance(parallel, bool):
        return None if parallel else 1
    if not isinstance(parallel, int) or parallel < 1:
        raise ValueError(f"parallel_tool_calls must be a bool or an int >= 1, got {parallel!r}")
    return parallel


def check_tool_schemas(tools: Sequence[Tool], translate_schema: Callable[[Any], str]) -> None:
    """Translate each tool's arguments schema; errors point into the tool
    (``/tools/<i>/parameters/...``)."""
    for i, t in enumerate(tools):
        where = f"/tools/{i}/parameters"
        try:
            translate_schema(t.parameters)
        except (UnsupportedSchemaError, SchemaError) as exc:
            raise exc.under(where, f"tool {t.name!r}: ") from None


def tools_instruction(tools: Sequence[Tool], wire: ToolFormat, choice: str) -> str:
    """The system-prompt text listing the tools and the exact call layout, for chat templates
    that take no ``tools``."""
    listed = "\n".join(json.dumps(t.openai(), ensure_ascii=False) for t in tools)
    lines = [
        "You can call tools. Each tool's arguments are a JSON object matching its JSON Schema:",
        f"<tools>\n{listed}\n</tools>",
        "",
        "To call a tool, write exactly:",
        wire.example(),
    ]
    if choice == "required":
        lines.append("Call one or more tools now; write nothing else.")
    elif choice not in ("auto", "none"):
        lines.append(f"Call the tool {choice!r} now; write nothing else.")
    else:
        lines.append("If no tool is needed, answer the user directly.")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- parsing
def parse_tool_calls(
    text: str, tools: Sequence[Tool], wire: ToolFormat = HERMES, choice: str = "auto"
) -> AssistantTurn:
    """The reply in ``text`` (written under :func:`tool_call_format`'s grammar): the text
    before the first trigger and the calls after it, each validated by its tool. Raises
    ``SchemaValidationError`` for text that is not in the format or arguments that fail
    validation."""
    by_name = {t.name: t for t in tools}
    start = text.find(wire.trigger)
    if choice == "none" and start >= 0:
        raise _malformed(text, start, "no calls are allowed (tool_choice='none')")
    if choice in ("auto", "none") and start < 0:
        return AssistantTurn(text.strip(), [])
    if choice not in ("auto", "none") and start != 0:
        raise _malformed(text, 0, f"the calls must start with {wire.trigger!r}")
    prose = text[:start]
    calls = _Reader(text, start, wire, by_name).block()
    if choice not in ("auto", "required", "none"):
        stray = [c.name for c in calls if c.name != choice]
        if stray:
            raise _malformed(text, start, f"only {choice!r} may be called, not {stray[0]!r}")
    return AssistantTurn(prose.strip(), calls)


def repeated_call_end(wire: ToolFormat) -> Callable[[bytearray], int | None] | None:
    """The decode loop's ``end_early`` for tool turns: a call written again, byte for byte,
    right after itself ends the turn before the repeat (small models repeat a call until the
    token budget runs out). Returns the length of the output to keep — the calls up to the
    first copy, a complete block — or None. None for formats that close their block (the
    repeat cannot be cut off where the grammar may end)."""
    if wire.close:
        return None
    marker = (wire.separator + wire.call_prefix + '{"name": ').encode("utf-8")
    sep = len(wire.separator.encode("utf-8"))
    call_end = wire.call_end.encode("utf-8")
    trail = wire.trail.encode("utf-8")

    def end(data: bytearray) -> int | None:
        size = len(data) - len(trail) if trail and data.endswith(trail) else len(data)
        # Called wherever the grammar could end (in free text: every token); only the end of a
        # call can be a repeat, so the search runs there alone.
        if not data.endswith(call_end, 0, size):
            return None
        at = data.rfind(marker, 0, size)
        if at < 0:
            return None
        last = data[at + sep : size]
        return at if data.endswith(last, 0, at) else None

    return end


class _Reader:
    """Reads one block of calls at ``pos``, strictly in the wire format's layout."""

    def __init__(self, text: str, pos: int, wire: ToolFormat, tools: Mapping[str, Tool]) -> None:
        self.text, self.pos, self.wire, self.tools = text, pos, wire, tools
        self.decoder = json.JSONDecoder()

    def expect(self, s: str) -> None:
        if not self.text.startswith(s, self.pos):
            raise _malformed(self.text, self.pos, f"expected {s!r}")
        self.pos += len(s)

    def value(self) -> tuple[Any, str]:
        try:
            value, end = self.decoder.raw_decode(self.text, self.pos)
        except ValueError as exc:
            raise _malformed(self.text, self.pos, f"invalid JSON ({exc})") from None
        raw = self.text[self.pos : end]
        self.pos = end
        return value, raw

    def call(self) -> ToolCall:
        w = self.wire
        self.expect(w.call_prefix + '{"name": ')
        name, _ = self.value()
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise _malformed(self.text, self.pos, f"{name!r} is not one of the tools")
        self.expect(f', "{w.args_key}": ')
        args, raw = self.value()
        if not isinstance(args, dict):
            raise _malformed(self.text, self.pos, "the arguments must be a JSON object")
        self.expect(w.call_end)
        return ToolCall(name, tool.parse_arguments(raw), raw, tool)

    def block(self) -> list[ToolCall]:
        self.expect(self.wire.open)
        calls = [self.call()]
        next_call = self.wire.separator + self.wire.call_prefix + '{"name": '
        while self.text.startswith(next_call, self.pos):
            self.pos += len(self.wire.separator)
            calls.append(self.call())
        self.expect(self.wire.close)
        if self.wire.trail and self.text.startswith(self.wire.trail, self.pos):
            self.pos += len(self.wire.trail)
        if self.pos != len(self.text):
            raise _malformed(self.text, self.pos, "nothing may follow the calls")
        return calls


def _malformed(text: str, pos: int, why: str) -> SchemaValidationError:
    return SchemaValidationError(
        f"not a tool call at offset {pos}: {why}; text: {text[max(0, pos - 40) : pos + 40]!r}",
        text=text,
        errors=[why],
    )
