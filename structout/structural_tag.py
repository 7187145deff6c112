"""Structural tags: free text with structured islands, as one KBNF grammar.

A structural tag describes output such as "any text; whenever the model writes ``<tool_call>``,
a JSON object of one tool's arguments follows, then ``</tool_call>``, then text again". It is
the grammar behind tool calls (the SDK's ``tools=``), reasoning sections ("think freely, then
answer strictly") and vLLM's ``structural_tag`` requests, which use XGrammar's JSON format:
:func:`from_xgrammar` reads it (the current ``{"type": "structural_tag", "format": ...}`` form
and the legacy ``{"structures": [...], "triggers": [...]}`` form).

Build a tree of formats and translate it with :func:`structural_tag_kbnf` (KBNF text, start
rule ``start``) or :func:`structural_tag` (a :class:`structout.KBNF` target for ``generate``)::

    tag = TriggeredTags(
        triggers=["<tool_call>"],
        tags=[
            Tag(
                '<tool_call>{"name": "get_weather", "arguments": ',
                JsonSchema(params),
                "}</tool_call>",
            )
        ],
    )
    kbnf = structural_tag_kbnf(tag)

Invariants of the translation:

* Free text (:class:`AnyText`, and the text between :class:`TriggeredTags` / :class:`Dispatch`
  islands) never contains a trigger, an exclusion, or a string that must follow it (the end of
  the enclosing :class:`Tag`, the literal start of the next element of a :class:`Sequence`): a
  parser that reads the output left to right and stops at the first such string (as every
  tool-call parser does) sees exactly the structure the grammar enforced.
* A trigger that overlaps itself or another trigger (``"aa"``; ``"<a"`` with ``"a>"``) could
  start inside the free text and end in the island, which that parser would read differently:
  it is refused rather than enforced loosely.
* Each JSON Schema and embedded grammar is translated once per tree (the same schema under
  several tags shares its rules) under rule names of its own (``g<N>_``), so no two parts of
  the tree share a rule by accident; a rule equal to one written before for another part (up
  to renaming, e.g. the generic JSON rules every schema's grammar holds) is written once and
  shared (:class:`structout.kbnf_text.SharedRules`: same language, smaller grammar).
* Formats that need token ids rather than text (XGrammar's ``token``, ``exclude_token``,
  ``any_tokens``, ``token_triggered_tags``, ``token_dispatch``), token budgets
  (``max_tokens``) and non-JSON argument styles (``qwen_xml`` …) are refused with
  :class:`structout.errors.SchemaError` naming the format and its JSON pointer.
"""

from __future__ import annotations

import functools
import json
import marshal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from structout.errors import GrammarError, SchemaError, UnsupportedSchemaError
from structout.kbnf_text import SharedRules, literal, regex_terminal
from structout.targets import KBNF

__all__ = [
    "AnyText",
    "ConstString",
    "Dispatch",
    "Format",
    "GrammarText",
    "JsonSchema",
    "Optional",
    "Or",
    "Plus",
    "Regex",
    "Repeat",
    "Sequence_",
    "Star",
    "Tag",
    "TagsWithSeparator",
    "TriggeredTags",
    "from_xgrammar",
    "structural_tag",
    "structural_tag_kbnf",
]


# ------------------------------------------------------------------------------------- formats
@dataclass(frozen=True)
class ConstString:
    """Exactly ``value``."""

    value: str


@dataclass(frozen=True)
class JsonSchema:
    """One JSON value valid against ``schema`` (a JSON Schema dict or bool, or a Python type
    Pydantic can describe), in structout's compact layout."""

    schema: Any


@dataclass(frozen=True)
class AnyText:
    """Any text containing none of ``excludes`` (nor what must follow it), at most
    ``max_chars`` characters when set."""

    excludes: tuple[str, ...] = ()
    max_chars: int | None = None


@dataclass(frozen=True)
class Regex:
    """A string matching ``pattern`` in full (Rust ``regex`` syntax, as KBNF's ``#"..."``)."""

    pattern: str


@dataclass(frozen=True)
class GrammarText:
    """A string of a KBNF grammar (start rule ``start``)."""

    kbnf: str


@dataclass(frozen=True)
class Sequence_:
    """Each element in turn."""

    elements: tuple[Format, ...]


@dataclass(frozen=True)
class Or:
    """One of the elements."""

    elements: tuple[Format, ...]


@dataclass(frozen=True)
class Tag:
    """``begin``, then ``content``, then one of the ``end`` strings."""

    begin: str
    content: Format
    end: str | tuple[str, ...]


@dataclass(frozen=True)
class TriggeredTags:
    """Free text; wherever a trigger starts, one of the tags whose ``begin`` starts with that
    trigger follows, then free text again. ``at_least_one``: a tag must occur;
    ``stop_after_first``: the format ends right after the first tag."""

    triggers: tuple[str, ...]
    tags: tuple[Tag, ...]
    at_least_one: bool = False
    stop_after_first: bool = False
    excludes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TagsWithSeparator:
    """Tags separated by ``separator`` and nothing else (none at all unless ``at_least_one``;
    only one when ``stop_after_first``)."""

    tags: tuple[Tag, ...]
    separator: str
    at_least_one: bool = False
    stop_after_first: bool = False


@dataclass(frozen=True)
class Optional:
    """``content`` or nothing."""

    content: Format


@dataclass(frozen=True)
class Plus:
    """``content`` one or more times."""

    content: Format


@dataclass(frozen=True)
class Star:
    """``content`` zero or more times."""

    content: Format


@dataclass(frozen=True)
class Repeat:
    """``content`` between ``min`` and ``max`` times (``max=None``: unbounded)."""

    content: Format
    min: int
    max: int | None


@dataclass(frozen=True)
class Dispatch:
    """Free text; wherever a pattern (a literal) occurs, its format follows. ``loop``: free text
    and further patterns may follow; otherwise the format ends after the first one."""

    rules: tuple[tuple[str, Format], ...]
    loop: bool = True
    excludes: tuple[str, ...] = field(default=())


Format = Union[
    ConstString,
    JsonSchema,
    AnyText,
    Regex,
    GrammarText,
    Sequence_,
    Or,
    Tag,
    TriggeredTags,
    TagsWithSeparator,
    Optional,
    Plus,
    Star,
    Repeat,
    Dispatch,
]


# ----------------------------------------------------------------------------------- translation
def structural_tag_kbnf(
    fmt: Format,
    *,
    translate_schema: Callable[[Any], str] | None = None,
) -> str:
    """KBNF text (start rule ``start``) of the structural tag ``fmt``.

    ``translate_schema`` turns a JSON Schema (or type) into KBNF; default:
    :func:`structout.compiling.schema_kbnf` with the default :class:`structout.Limits`'
    translator options, through the compile-once cache.

    Raises ``SchemaError`` for a malformed tree or one that cannot be enforced exactly (with a
    JSON pointer into it), ``UnsupportedSchemaError`` / ``GrammarError`` from an embedded schema
    or grammar, with the pointer of the format that holds it."""
    return _Emitter(translate_schema).run(fmt)


def structural_tag(fmt: Format | Mapping[str, Any] | str, **options: Any) -> KBNF:
    """A :class:`structout.KBNF` target for ``fmt`` (a format tree, or XGrammar's structural-tag
    JSON as text or dict); ``options`` go to :func:`structural_tag_kbnf`."""
    if not isinstance(fmt, _FORMAT_TYPES):
        fmt = from_xgrammar(fmt)
    return KBNF(structural_tag_kbnf(fmt, **options))


def _default_schema_translator(options: dict[str, Any] | None = None) -> Callable[[Any], str]:
    from structout.compiling import schema_translator

    return schema_translator(dict(_default_option_items()) if options is None else options)


@functools.lru_cache(maxsize=8)
def _common_shape_option(options: tuple[tuple[str, Any], ...]) -> tuple[int | None] | None:
    """``(max_number_length,)`` when the engine's common-shape translator covers the translator
    options ``options`` (which the translator then tries first on a schema dict), else None."""
    from structout.schema import TranslatorOptions

    checked = TranslatorOptions(**dict(options))
    return (checked.max_number_length or None,) if checked.common_shape_applies() else None


@functools.lru_cache(maxsize=1)
def _default_option_items() -> tuple[tuple[str, Any], ...]:
    """The default :class:`structout.Limits`' translator options (constants: read once)."""
    from structout.limits import Limits

    return tuple(Limits().translator_options().items())


class _Emitter:
    """Writes rules ``r<N>`` for the tree and ``g<N>_*`` for each embedded grammar."""

    def __init__(self, translate_schema: Callable[[Any], str] | None) -> None:
        """``translate_schema`` None: the default translator, built when a schema needs it (it
        costs more than a tool's schema); it gives a schema dict the engine's common-shape text
        when there is one, so those go to the engine directly (``_common``: the options it
        takes; the cache only keeps texts)."""
        self._translate_schema = translate_schema
        self._options: dict[str, Any] | None = None
        self._common = None
        if translate_schema is None:
            items = _default_option_items()
            self._options = dict(items)
            self._common = _common_shape_option(items)
        self._rules: list[str] = []
        self._embedded: dict[str | bytes, str] = {}  # key of a schema/grammar -> its start rule
        self._shared = SharedRules()  # the rules of embedded grammars, each written once
        self._stops: dict[tuple[str, ...], str] = {}  # exclusion set -> its rule
        self._ends_text: dict[tuple[str, ...], str] = {}  # a tag's ends -> their KBNF
        self._count = 0

    def run(self, fmt: Format) -> str:
        body = self._emit(fmt, (), "")
        return "\n".join([f"start ::= {body};", *self._rules]) + "\n"

    def _rule(self, body: str) -> str:
        self._count += 1
        name = f"r{self._count}"
        self._rules.append(f"{name} ::= {body};")
        return name

    # follow: strings one of which must come right after this format (free text at its end
    # must not contain them); path: the JSON pointer of fmt, for errors.
    def _emit(self, fmt: Format, follow: tuple[str, ...], path: str) -> str:
        if isinstance(fmt, ConstString):
            return literal(fmt.value)
        if isinstance(fmt, AnyText):
            return self._free_text(fmt.excludes + follow, fmt.max_chars, path)
        if isinstance(fmt, JsonSchema):
            return self._schema(fmt.schema, path)
        if isinstance(fmt, Regex):
            return self._grammar(f"start ::= {regex_terminal(fmt.pattern)};", path)
        if isinstance(fmt, GrammarText):
            return self._grammar(fmt.kbnf, path)
        if isinstance(fmt, Sequence_):
            return self._sequence(fmt.elements, follow, path + "/elements")
        if isinstance(fmt, Or):
            if not fmt.elements:
                raise SchemaError("an 'or' format needs at least one element", path)
            return "(" + " | ".join(self._alternatives(fmt.elements, follow, path)) + ")"
        if isinstance(fmt, Tag):
            return self._tag(fmt, path)
        if isinstance(fmt, TriggeredTags):
            return self._triggered(fmt, follow, path)
        if isinstance(fmt, TagsWithSeparator):
            return self._separated(fmt, path)
        if isinstance(fmt, (Optional, Plus, Star, Repeat)):
            return self._repeated(fmt, follow, path)
        if isinstance(fmt, Dispatch):
            return self._dispatch(fmt, follow, path)
        raise SchemaError(f"not a structural-tag format: {fmt!r}", path)

    def _alternatives(
        self, elements: Sequence[Format], follow: tuple[str, ...], path: str
    ) -> list[str]:
        return [self._emit(e, follow, f"{path}/elements/{i}") for i, e in enumerate(elements)]

    def _sequence(self, elements: Sequence[Format], follow: tuple[str, ...], path: str) -> str:
        if not elements:
            return "''"
        parts = []
        for i, element in enumerate(elements):
            after = follow if i + 1 == len(elements) else _first_strings(elements[i + 1])
            if after is None:
                after = ()
            parts.append(self._emit(element, after, f"{path}/{i}"))
        return "(" + " ".join(parts) + ")"

    def _tag(self, tag: Tag, path: str, skip: int = 0) -> str:
        """The tag's rule; ``skip``: bytes of its begin already written (a trigger)."""
        ends = _ends(tag, path)
        content = self._emit(tag.content, ends, path + "/content")
        end = self._ends_text.get(ends)
        if end is None:  # (tags of one kind share their ends)
            end = self._ends_text[ends] = "(" + " | ".join(literal(e) for e in ends) + ")"
        return self._rule(f"{literal(tag.begin[skip:])} {content} {end}")

    def _triggered(self, fmt: TriggeredTags, follow: tuple[str, ...], path: str) -> str:
        triggers = _nonempty(fmt.triggers, path + "/triggers", "trigger")
        if not fmt.tags:
            raise SchemaError("'triggered_tags' needs at least one tag", path + "/tags")
        _check_triggers(triggers, path + "/triggers")
        for i, tag in enumerate(fmt.tags):
            matching = [t for t in triggers if tag.begin.startswith(t)]
            if len(matching) != 1:
                raise SchemaError(
                    f"the tag's begin {tag.begin!r} must start with exactly one trigger of "
                    f"{list(triggers)} (it starts with {len(matching)})",
                    f"{path}/tags/{i}/begin",
                )
        text = self._free_text(triggers + fmt.excludes + follow, None, path)
        islands = []
        for trigger in triggers:
            rests = [
                self._tag(tag, f"{path}/tags/{i}", len(trigger))
                for i, tag in enumerate(fmt.tags)
                if tag.begin.startswith(trigger)
            ]
            if rests:
                islands.append((trigger, self._rule(" | ".join(rests))))
        return self._text_with_islands(text, islands, not fmt.stop_after_first, fmt.at_least_one)

    def _text_with_islands(
        self, text: str, islands: list[tuple[str, str]], loop: bool, at_least_one: bool
    ) -> str:
        """Free text with islands: each island is a trigger and the rule of what follows it.

        A run of text and the trigger after it form one alternative (``text 'T' rest``), so
        the text and the trigger merge into one terminal that can only end after the trigger:
        a mask inside the text then never has to start every island at every byte (which made
        masks grow with the number of tags). Only the last run of text ends anywhere."""
        run = self._rule(" | ".join(f"{text} {literal(t)} {rest}" for t, rest in islands))
        if not loop:
            return run if at_least_one else f"({run} | {text})"
        return f"({run}+ {text})" if at_least_one else f"({run}* {text})"

    def _separated(self, fmt: TagsWithSeparator, path: str) -> str:
        if not fmt.tags:
            raise SchemaError("'tags_with_separator' needs at least one tag", path + "/tags")
        tags = self._tag_choice(fmt.tags, path)
        if fmt.stop_after_first:
            return tags if fmt.at_least_one else f"{tags}?"
        run = f"({tags} ({literal(fmt.separator)} {tags})*)"
        return run if fmt.at_least_one else f"{run}?"

    def _tag_choice(self, tags: Sequence[Tag], path: str) -> str:
        return self._rule(" | ".join(self._tag(t, f"{path}/tags/{i}") for i, t in enumerate(tags)))

    def _repeated(
        self, fmt: Optional | Plus | Star | Repeat, follow: tuple[str, ...], path: str
    ) -> str:
        # a repeated content is followed by itself too (an option only by what follows it)
        again = () if isinstance(fmt, Optional) else (_first_strings(fmt.content) or ())
        content = self._emit(fmt.content, tuple(dict.fromkeys(follow + again)), path + "/content")
        if isinstance(fmt, Optional):
            return f"({content})?"
        if isinstance(fmt, Plus):
            return f"({content})+"
        if isinstance(fmt, Star):
            return f"({content})*"
        if fmt.min < 0 or (fmt.max is not None and fmt.max < fmt.min):
            raise SchemaError(
                f"'repeat' needs 0 <= min <= max (min {fmt.min}, max {fmt.max})", path
            )
        upper = "" if fmt.max is None else str(fmt.max)
        return f"({content}){{{fmt.min},{upper}}}"

    def _dispatch(self, fmt: Dispatch, follow: tuple[str, ...], path: str) -> str:
        patterns = _nonempty(tuple(p for p, _ in fmt.rules), path + "/rules", "pattern")
        _check_triggers(patterns, path + "/rules")
        text = self._free_text(patterns + fmt.excludes + follow, None, path)
        islands = [
            (p, self._emit(f, (), f"{path}/rules/{i}/1")) for i, (p, f) in enumerate(fmt.rules)
        ]
        return self._text_with_islands(text, islands, fmt.loop, False)

    def _free_text(self, excludes: tuple[str, ...], max_chars: int | None, path: str) -> str:
        stops = tuple(sorted({e for e in excludes if e}))
        if max_chars is not None:
            if max_chars < 0:
                raise SchemaError("'max_chars' must be at least 0", path + "/max_chars")
            if stops:
                raise SchemaError(
                    "'any_text' with both 'max_chars' and excluded strings (its own or the "
                    "strings that follow it) is not supported; drop 'max_chars'",
                    path + "/max_chars",
                )
            return f'len!(#"(?s:.)*", 0, {max_chars})'
        if not stops:
            return '#"(?s:.)*"'
        rule = self._stops.get(stops)
        if rule is None:
            rule = self._rule(" | ".join(literal(s) for s in stops))
            self._stops[stops] = rule
        return f"except!({rule})"

    def _schema(self, schema: Any, path: str) -> str:
        # Equal data, equal key (members in order: the grammar writes them in that order);
        # marshal is several times cheaper than JSON on a tool's parameters.
        key: str | bytes
        try:
            key = b"s" + marshal.dumps(schema, 2)
        except ValueError:
            key = f"t{id(schema)}"  # a Python type: one translation per object
        if key in self._embedded:
            return self._embedded[key]
        if self._common is not None and isinstance(schema, dict):
            # translated and shared in one engine call, as the default translator would
            got = self._shared.add_common_schema(schema, self._prefix(), self._common[0])
            if got is not None:
                return self._keep(key, got)
        try:
            text = self._translate(schema)
        except (UnsupportedSchemaError, SchemaError) as exc:
            raise exc.under(f"{path}/json_schema") from None
        return self._embed(key, text)

    def _translate(self, schema: Any) -> str:
        if self._translate_schema is None:
            self._translate_schema = _default_schema_translator(self._options)
        return self._translate_schema(schema)

    def _grammar(self, kbnf: str, path: str) -> str:
        key = "k" + kbnf
        if key in self._embedded:
            return self._embedded[key]
        try:
            import structout

            structout.compile_grammar(kbnf)  # errors located in the user's own text
        except GrammarError as exc:
            raise GrammarError(f"in the grammar at {path or '/'}: {exc}") from None
        return self._embed(key, kbnf)

    def _embed(self, key: str | bytes, kbnf: str) -> str:
        return self._keep(key, self._shared.add(kbnf, self._prefix()))

    def _prefix(self) -> str:
        """The rule-name prefix of the next embedded grammar."""
        return f"g{len(self._embedded) + 1}_"

    def _keep(self, key: str | bytes, added: tuple[list[str], str]) -> str:
        """Writes an embedded grammar's rule lines; its start rule."""
        lines, start = added
        self._rules.extend(lines)
        self._embedded[key] = start
        return start


def _ends(tag: Tag, path: str) -> tuple[str, ...]:
    ends = (tag.end,) if isinstance(tag.end, str) else tuple(tag.end)
    if not ends:
        raise SchemaError("a tag needs at least one end string", path + "/end")
    return ends


def _nonempty(strings: tuple[str, ...], path: str, what: str) -> tuple[str, ...]:
    for i, s in enumerate(strings):
        if not s:
            raise SchemaError(f"a {what} must not be empty", f"{path}/{i}")
    if not strings:
        raise SchemaError(f"at least one {what} is needed", path)
    return strings


def _check_triggers(triggers: tuple[str, ...], path: str) -> None:
    """Refuse triggers that can start inside free text and end in an island: a proper suffix
    of one trigger that is a prefix of another (or of itself)."""
    for a in triggers:
        for b in triggers:
            for k in range(1, len(a)):
                rest = a[k:]
                if b.startswith(rest) or rest.startswith(b):
                    raise SchemaError(
                        f"triggers {a!r} and {b!r} overlap ({a[:k]!r} + {b!r} contains "
                        f"{a!r} or {b!r} before the island starts); a tool-call parser would "
                        "read such output differently from the grammar: choose triggers that "
                        "do not overlap",
                        path,
                    )


def _first_strings(fmt: Format) -> tuple[str, ...] | None:
    """Strings one of which ``fmt`` must start with (None: not a fixed set, or may be empty)."""
    if isinstance(fmt, ConstString):
        return (fmt.value,) if fmt.value else None
    if isinstance(fmt, Tag):
        return (fmt.begin,) if fmt.begin else None
    if isinstance(fmt, (Sequence_,)):
        return _first_strings(fmt.elements[0]) if fmt.elements else None
    if isinstance(fmt, Or):
        found: list[str] = []
        for e in fmt.elements:
            first = _first_strings(e)
            if first is None:
                return None
            found.extend(first)
        return tuple(dict.fromkeys(found)) or None
    if isinstance(fmt, TagsWithSeparator) and fmt.at_least_one:
        return _first_strings(Or(tuple(fmt.tags)))
    if isinstance(fmt, (Plus,)):
        return _first_strings(fmt.content)
    if isinstance(fmt, Repeat) and fmt.min > 0:
        return _first_strings(fmt.content)
    return None


_FORMAT_TYPES = (
    ConstString,
    JsonSchema,
    AnyText,
    Regex,
    GrammarText,
    Sequence_,
    Or,
    Tag,
    TriggeredTags,
    TagsWithSeparator,
    Optional,
    Plus,
    Star,
    Repeat,
    Dispatch,
)


# --------------------------------------------------------------------------- XGrammar's JSON format
_TOKEN_FORMATS = ("token", "exclude_token", "any_tokens", "token_triggered_tags", "token_dispatch")


def from_xgrammar(spec: Mapping[str, Any] | str) -> Format:
    """The format tree of an XGrammar structural tag (JSON text or dict): the current form
    ``{"type": "structural_tag", "format": {...}}`` (a bare format is read too) or the legacy
    ``{"structures": [{"begin", "schema", "end"}, ...], "triggers": [...]}``.

    Raises ``SchemaError`` with a JSON pointer into ``spec`` for anything malformed or refused
    (token-level formats, token budgets, non-JSON argument styles)."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError as exc:
            raise SchemaError(f"structural tag is not valid JSON: {exc}", "") from None
    if not isinstance(spec, Mapping):
        raise SchemaError("a structural tag must be a JSON object", "")
    if "structures" in spec and "format" not in spec:
        return _legacy(spec)
    if spec.get("type", "structural_tag") == "structural_tag" and "format" in spec:
        return _format(spec["format"], "/format")
    return _format(spec, "")


def _legacy(spec: Mapping[str, Any]) -> Format:
    triggers = _strings(spec.get("triggers"), "/triggers")
    structures = spec.get("structures")
    if not isinstance(structures, list):
        raise SchemaError("'structures' must be a list", "/structures")
    tags = []
    for i, s in enumerate(structures):
        at = f"/structures/{i}"
        if not isinstance(s, Mapping):
            raise SchemaError("a structure must be an object", at)
        schema = s.get("schema", s.get("parameters"))
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as exc:
                raise SchemaError(f"schema is not valid JSON: {exc}", at + "/schema") from None
        tags.append(
            Tag(_string(s.get("begin"), at + "/begin"), JsonSchema(schema), _end(s.get("end"), at))
        )
    return TriggeredTags(triggers=triggers, tags=tuple(tags))


def _format(node: Any, at: str) -> Format:
    if type(node) is not dict and not isinstance(node, Mapping):  # (dict: no ABC check)
        raise SchemaError("a format must be a JSON object", at)
    kind = node.get("type")
    if kind in _TOKEN_FORMATS:
        raise SchemaError(
            f"the {kind!r} format constrains token ids, which structout's text grammars do not "
            "express; write the tag's text instead (special tokens are not supported in "
            "structural tags)",
            at,
        )
    if kind == "const_string":
        return ConstString(_string(node.get("value"), at + "/value"))
    if kind in ("json_schema", "qwen_xml_parameter"):
        style = node.get("style", "json") if kind == "json_schema" else "qwen_xml"
        if style != "json":
            raise SchemaError(
                f"argument style {style!r} is not supported (only 'json')", at + "/style"
            )
        for key in ("any_order", "excludes", "max_whitespace_cnt"):
            if node.get(key) not in (None, False, []):
                raise SchemaError(
                    f"'{key}' is not supported in a json_schema format", at + "/" + key
                )
        schema = node.get("json_schema")
        if type(schema) is not dict and not isinstance(schema, (Mapping, bool)):
            raise SchemaError("'json_schema' must be an object or a boolean", at + "/json_schema")
        return JsonSchema(schema if type(schema) is dict else _plain(schema))
    if kind == "any_text":
        if node.get("max_tokens") is not None:
            raise SchemaError(
                "'max_tokens' (a token budget) is not supported in structural tags; use "
                "'max_chars', or the SDK's reasoning budget",
                at + "/max_tokens",
            )
        max_chars = node.get("max_chars")
        if max_chars is not None and (
            not isinstance(max_chars, int) or isinstance(max_chars, bool)
        ):
            raise SchemaError("'max_chars' must be an integer", at + "/max_chars")
        return AnyText(_strings(node.get("excludes", []), at + "/excludes"), max_chars)
    if kind == "regex":
        return Regex(_string(node.get("pattern"), at + "/pattern"))
    if kind == "grammar":
        return GrammarText(_grammar_text(_string(node.get("grammar"), at + "/grammar"), at))
    if kind in ("sequence", "or"):
        elements = node.get("elements")
        if not isinstance(elements, list):
            raise SchemaError("'elements' must be a list", at + "/elements")
        parts = tuple(_format(e, f"{at}/elements/{i}") for i, e in enumerate(elements))
        return Sequence_(parts) if kind == "sequence" else Or(parts)
    if kind == "tag":
        return _tag(node, at)
    if kind == "triggered_tags":
        return TriggeredTags(
            triggers=_strings(node.get("triggers"), at + "/triggers"),
            tags=_tags(node.get("tags"), at + "/tags"),
            at_least_one=_flag(node, "at_least_one", at),
            stop_after_first=_flag(node, "stop_after_first", at),
            excludes=_strings(node.get("excludes", []), at + "/excludes"),
        )
    if kind == "tags_with_separator":
        return TagsWithSeparator(
            tags=_tags(node.get("tags"), at + "/tags"),
            separator=_string(node.get("separator"), at + "/separator"),
            at_least_one=_flag(node, "at_least_one", at),
            stop_after_first=_flag(node, "stop_after_first", at),
        )
    if kind in ("optional", "plus", "star"):
        content = _format(node.get("content"), at + "/content")
        if kind == "optional":
            return Optional(content)
        return Plus(content) if kind == "plus" else Star(content)
    if kind == "repeat":
        lo, hi = node.get("min"), node.get("max")
        if not isinstance(lo, int) or not isinstance(hi, int):
            raise SchemaError("'repeat' needs integer 'min' and 'max'", at)
        return Repeat(_format(node.get("content"), at + "/content"), lo, None if hi == -1 else hi)
    if kind == "dispatch":
        rules = node.get("rules")
        if not isinstance(rules, list):
            raise SchemaError("'rules' must be a list of [pattern, format] pairs", at + "/rules")
        pairs = []
        for i, r in enumerate(rules):
            if not isinstance(r, (list, tuple)) or len(r) != 2:
                raise SchemaError("a rule must be a [pattern, format] pair", f"{at}/rules/{i}")
            pairs.append((_string(r[0], f"{at}/rules/{i}/0"), _format(r[1], f"{at}/rules/{i}/1")))
        loop = node.get("loop", True)
        if not isinstance(loop, bool):
            raise SchemaError("'loop' must be a boolean", at + "/loop")
        return Dispatch(tuple(pairs), loop, _strings(node.get("excludes", []), at + "/excludes"))
    raise SchemaError(f"unknown structural-tag format type {kind!r}", at + "/type")


def _plain(schema: Any) -> Any:
    """A schema as the translator reads it: a mapping as a dict (a bool as it is)."""
    return dict(schema) if isinstance(schema, Mapping) else schema


def _grammar_text(text: str, at: str) -> str:
    """XGrammar's ``grammar`` format carries EBNF (GBNF-like, root rule ``root``): translated to
    KBNF where the dialect is recognized."""
    from structout.grammar_dialects import grammar_to_kbnf

    try:
        return grammar_to_kbnf(text)
    except GrammarError as exc:
        raise GrammarError(f"in the grammar at {at or '/'}: {exc}") from None


def _tag(node: Any, at: str) -> Tag:
    if (type(node) is not dict and not isinstance(node, Mapping)) or node.get(
        "type", "tag"
    ) != "tag":
        raise SchemaError("expected a 'tag' format", at)
    begin = node.get("begin")
    if type(begin) is not str and isinstance(begin, Mapping):
        raise SchemaError(
            "a tag's begin must be a string (token begins are not supported)", at + "/begin"
        )
    return Tag(
        _string(begin, at + "/begin"),
        _format(node.get("content"), at + "/content"),
        _end(node.get("end"), at),
    )


def _tags(nodes: Any, at: str) -> tuple[Tag, ...]:
    if not isinstance(nodes, list):
        raise SchemaError("'tags' must be a list", at)
    return tuple(_tag(n, f"{at}/{i}") for i, n in enumerate(nodes))


def _end(value: Any, at: str) -> str | tuple[str, ...]:
    if isinstance(value, list):
        return _strings(value, at + "/end")
    if type(value) is not str and isinstance(value, Mapping):
        raise SchemaError("a tag's end must be a string or a list of strings", at + "/end")
    return _string(value, at + "/end")


def _flag(node: Mapping[str, Any], key: str, at: str) -> bool:
    value = node.get(key, False)
    if not isinstance(value, bool):
        raise SchemaError(f"'{key}' must be a boolean", f"{at}/{key}")
    return value


def _string(value: Any, at: str) -> str:
    if not isinstance(value, str):
        raise SchemaError(f"expected a string, got {type(value).__name__}", at)
    return value


def _strings(value: Any, at: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise SchemaError("expected a list of strings", at)
    return tuple(_string(v, f"{at}/{i}") for i, v in enumerate(value))
