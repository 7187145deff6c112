"""Structural tags: the KBNF of a format tree accepts exactly what the format describes.

Two references:

* an interpreter of the format semantics (positions a format can end at), compared with the
  compiled grammar on every string up to a length over a small alphabet, for random trees;
* a Hermes-style tool-call parser (what vLLM's and the SDK's parsers do: split at the trigger,
  read the JSON between begin and end, validate it with ``jsonschema``), compared on valid calls
  and their mutations.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from functools import cache
from typing import Any

import jsonschema
import pytest

import structout
from structout.compiling import schema_translator
from structout.errors import GrammarError, SchemaError, UnsupportedSchemaError
from structout.kbnf_text import SharedRules, literal, prefixed, regex_terminal
from structout.limits import Limits
from structout.structural_tag import (
    AnyText,
    ConstString,
    Dispatch,
    Format,
    GrammarText,
    JsonSchema,
    Optional,
    Or,
    Plus,
    Regex,
    Repeat,
    Sequence_,
    Star,
    Tag,
    TagsWithSeparator,
    TriggeredTags,
    from_xgrammar,
    structural_tag,
    structural_tag_kbnf,
)


# ------------------------------------------------------------------------------ kbnf_text helpers
@pytest.mark.parametrize(
    "text", ["", "a'b", 'q"', "back\\slash", "tab\tnl\nret\r", "\x00\x1f\x7f", "é✓"]
)
def test_literal_is_exact(text: str) -> None:
    g = structout.compile_grammar(f"start ::= {literal(text)};")
    assert g.accepts(text.encode())
    assert not g.accepts(text.encode() + b"x")


def test_literal_shortcut_writes_what_the_table_writes() -> None:
    # Texts without a rare control character take a chain of replacements: byte for byte the
    # literal the translation table writes.
    from structout.kbnf_text import _LITERAL_TABLE

    rng = random.Random(5)
    alphabet = [chr(c) for c in range(0x90)] + ["é", "€", "😀"]
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        assert literal(text) == "'" + text.translate(_LITERAL_TABLE) + "'", repr(text)


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ('a"b', 'a"b', "ab"),
        (r"\"x", '"x', "x"),
        (r"[0-9]+\\", "12\\", "12"),
        ("(?i)ab", "AB", "ac"),
    ],
)
def test_regex_terminal_quotes(pattern: str, yes: str, no: str) -> None:
    g = structout.compile_grammar(f"start ::= {regex_terminal(pattern)};")
    assert g.accepts(yes.encode())
    assert not g.accepts(no.encode())


def test_prefixed_renames_rules_only() -> None:
    text = (
        "(* start is a comment *) start ::= a 'start' #\"start\\\"\" except!('a', 3) b;\n"
        'a ::= "a\\"b" | len!(#"[a-z]+", 1, 2);\nb ::= json_string_except!(\'x\');\n'
    )
    renamed = prefixed(text, "p_")
    assert "p_start ::= p_a 'start'" in renamed
    assert "except!('a', 3) p_b" in renamed
    assert "p_a ::=" in renamed and "p_b ::= json_string_except!" in renamed
    original = structout.compile_grammar(text)
    moved = structout.compile_grammar(renamed, start="p_start")
    for s in [
        b'startstart"a\\"bz"aa"x"',
        b'a\\"bstart"',
        b'a"bstartstart"aa"q"',
        b'a"bstartstart"ab"q"',
    ]:
        assert original.accepts(s) == moved.accepts(s)


def test_prefixed_refuses_unterminated() -> None:
    with pytest.raises(GrammarError, match="1:15"):
        prefixed("start ::= 'a' 'b;", "p_")


# --------------------------------------------------------------------- reference: an interpreter
def _first(fmt: Format) -> tuple[str, ...] | None:
    """The strings one of which the format must start with (None: no such fixed set)."""
    if isinstance(fmt, ConstString):
        return (fmt.value,) if fmt.value else None
    if isinstance(fmt, Tag):
        return (fmt.begin,) if fmt.begin else None
    if isinstance(fmt, Sequence_):
        return _first(fmt.elements[0]) if fmt.elements else None
    if isinstance(fmt, Or):
        out: list[str] = []
        for e in fmt.elements:
            f = _first(e)
            if f is None:
                return None
            out += f
        return tuple(out) or None
    if isinstance(fmt, TagsWithSeparator) and fmt.at_least_one:
        return _first(Or(fmt.tags))
    if isinstance(fmt, Plus) or (isinstance(fmt, Repeat) and fmt.min > 0):
        return _first(fmt.content)
    return None


def _free(s: str, i: int, stops: tuple[str, ...], max_chars: int | None = None) -> set[int]:
    out = set()
    for j in range(i, len(s) + 1):
        if any(x and x in s[i:j] for x in stops):
            break
        if max_chars is not None and j - i > max_chars:
            break
        out.add(j)
    return out


def _ends(fmt: Format, s: str, i: int, follow: tuple[str, ...]) -> set[int]:
    """Positions where ``fmt`` can end when it starts at ``i`` of ``s``."""
    if isinstance(fmt, ConstString):
        return {i + len(fmt.value)} if s.startswith(fmt.value, i) else set()
    if isinstance(fmt, AnyText):
        return _free(s, i, fmt.excludes + follow, fmt.max_chars)
    if isinstance(fmt, Regex):
        return {j for j in range(i, len(s) + 1) if re.fullmatch(fmt.pattern, s[i:j])}
    if isinstance(fmt, Sequence_):
        pos = {i}
        for k, e in enumerate(fmt.elements):
            after = follow if k + 1 == len(fmt.elements) else (_first(fmt.elements[k + 1]) or ())
            pos = {j for p in pos for j in _ends(e, s, p, after)}
        return pos
    if isinstance(fmt, Or):
        return {j for e in fmt.elements for j in _ends(e, s, i, follow)}
    if isinstance(fmt, Tag):
        ends = (fmt.end,) if isinstance(fmt.end, str) else tuple(fmt.end)
        if not s.startswith(fmt.begin, i):
            return set()
        mid = _ends(fmt.content, s, i + len(fmt.begin), ends)
        return {m + len(e) for m in mid for e in ends if s.startswith(e, m)}
    if isinstance(fmt, TriggeredTags):

        def text(p):
            return _free(s, p, fmt.triggers + fmt.excludes + follow)

        def tags(p):
            return {j for t in fmt.tags for j in _ends(t, s, p, ())}

        after_text = set(text(i))
        if fmt.stop_after_first:
            with_tag = {j for p in after_text for j in tags(p)}
            return with_tag if fmt.at_least_one else with_tag | after_text
        done: set[int] = set() if fmt.at_least_one else set(after_text)
        frontier = after_text
        seen: set[int] = set()
        while frontier:
            nxt = {j for p in frontier for j in tags(p)} - seen
            seen |= nxt
            done |= {j for p in nxt for j in text(p)}
            frontier = {j for p in nxt for j in text(p)}
        return done
    if isinstance(fmt, TagsWithSeparator):

        def tags(p):
            return {j for t in fmt.tags for j in _ends(t, s, p, ())}

        first = tags(i)
        if fmt.stop_after_first:
            return first if fmt.at_least_one else first | {i}
        done = set(first)
        frontier = first
        while frontier:
            nxt = {
                j
                for p in frontier
                if s.startswith(fmt.separator, p)
                for j in tags(p + len(fmt.separator))
            }
            frontier = nxt - done
            done |= nxt
        return done if fmt.at_least_one else done | {i}
    if isinstance(fmt, (Optional, Plus, Star, Repeat)):
        again = () if isinstance(fmt, Optional) else (_first(fmt.content) or ())
        inner = tuple(dict.fromkeys(follow + again))
        lo, hi = {Optional: (0, 1), Plus: (1, None), Star: (0, None)}.get(type(fmt), (0, 0))
        if isinstance(fmt, Repeat):
            lo, hi = fmt.min, fmt.max
        level, out, count = {i}, set(), 0
        seen_levels: set[frozenset[int]] = set()
        while level and (hi is None or count <= hi):
            if count >= lo:
                out |= level
            key = frozenset(level)
            if hi is None and key in seen_levels and count >= lo:
                break
            seen_levels.add(key)
            level = {j for p in level for j in _ends(fmt.content, s, p, inner)}
            count += 1
        return out
    if isinstance(fmt, Dispatch):
        patterns = tuple(p for p, _ in fmt.rules)

        def text(p):
            return _free(s, p, patterns + fmt.excludes + follow)

        def islands(p: int) -> set[int]:
            return {
                j
                for pat, f in fmt.rules
                if s.startswith(pat, p)
                for j in _ends(f, s, p + len(pat), ())
            }

        after_text = text(i)
        if not fmt.loop:
            return after_text | {j for p in after_text for j in islands(p)}
        done, frontier = set(after_text), set(after_text)
        while frontier:
            nxt = {j for p in frontier for j in islands(p)}
            grown = {j for p in nxt for j in text(p)} - done
            done |= grown
            frontier = grown
        return done
    raise AssertionError(fmt)


def _accepts(fmt: Format, s: str) -> bool:
    return len(s) in _ends(fmt, s, 0, ())


# ------------------------------------------------------------------ random trees, all short strings
ALPHABET = "ab<>"
PIECES = ["a", "b", "<a", "b>", "ab", "<", ">>"]
TRIGGERS = [("<a",), ("b>",), ("<a", "b>"), ("<",)]


def _random_tag(rng: random.Random, depth: int, begin_prefix: str = "") -> Tag:
    begin = begin_prefix + rng.choice(["", "a", "b"])
    end = rng.choice([">", "b", ("b", ">"), ">>"])
    return Tag(begin, _random_format(rng, depth - 1), end)


def _random_format(rng: random.Random, depth: int) -> Format:
    leaves: list[Format] = [
        ConstString(rng.choice(PIECES)),
        AnyText(excludes=tuple(rng.sample(["a", "<a", "bb", ">"], rng.randint(0, 2)))),
        AnyText(max_chars=rng.randint(0, 3)),
        Regex(rng.choice(["a*b", "[ab]{1,2}", "<?a"])),
    ]
    if depth <= 0:
        return rng.choice(leaves)
    kind = rng.randrange(10)
    if kind == 0:
        return Sequence_(tuple(_random_format(rng, depth - 1) for _ in range(rng.randint(1, 3))))
    if kind == 1:
        return Or(tuple(_random_format(rng, depth - 1) for _ in range(rng.randint(1, 3))))
    if kind == 2:
        return _random_tag(rng, depth, rng.choice(["<", "a"]))
    if kind == 3:
        triggers = rng.choice(TRIGGERS)
        tags = tuple(
            _random_tag(rng, depth, rng.choice(triggers)) for _ in range(rng.randint(1, 2))
        )
        return TriggeredTags(triggers, tags, rng.random() < 0.5, rng.random() < 0.5)
    if kind == 4:
        tags = tuple(_random_tag(rng, depth, "<") for _ in range(rng.randint(1, 2)))
        return TagsWithSeparator(
            tags, rng.choice(["", "b"]), rng.random() < 0.5, rng.random() < 0.3
        )
    if kind == 5:
        return Optional(_random_format(rng, depth - 1))
    if kind == 6:
        return rng.choice([Plus, Star])(_random_format(rng, depth - 1))
    if kind == 7:
        lo = rng.randint(0, 2)
        return Repeat(_random_format(rng, depth - 1), lo, rng.choice([None, lo, lo + 1]))
    if kind == 8:
        pats = rng.choice([("<a",), ("<a", "b>")])
        return Dispatch(
            tuple((p, _random_format(rng, depth - 1)) for p in pats), rng.random() < 0.5
        )
    return rng.choice(leaves)


@cache
def _strings(max_len: int) -> tuple[str, ...]:
    return tuple(
        "".join(t) for n in range(max_len + 1) for t in itertools.product(ALPHABET, repeat=n)
    )


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.slow
def test_random_trees_match_the_interpreter(seed: int) -> None:
    rng = random.Random(seed)
    checked = 0
    for _ in range(10):
        fmt = _random_format(rng, 3)
        try:
            kbnf = structural_tag_kbnf(fmt)
        except SchemaError:
            continue  # e.g. a tag's begin matching no trigger: refused, checked elsewhere
        try:
            grammar = structout.compile_grammar(kbnf)
        except GrammarError as exc:
            assert "empty" in str(exc), exc  # an empty language is refused by the engine
            assert not any(_accepts(fmt, s) for s in _strings(5))
            continue
        for s in _strings(6):
            assert grammar.accepts(s.encode()) == _accepts(fmt, s), (fmt, s, kbnf)
        checked += 1
    assert checked >= 3


# -------------------------------------------------------------------------------- refusals
def test_overlapping_triggers_are_refused() -> None:
    tag = Tag("aab", AnyText(), ">")
    with pytest.raises(SchemaError, match="overlap"):
        structural_tag_kbnf(TriggeredTags(("aa",), (tag,)))
    with pytest.raises(SchemaError, match="overlap"):
        structural_tag_kbnf(TriggeredTags(("<a", "a>"), (Tag("<a", AnyText(), "."),)))


def test_tag_begin_must_start_with_one_trigger() -> None:
    with pytest.raises(SchemaError, match="exactly one trigger") as info:
        structural_tag_kbnf(TriggeredTags(("<x",), (Tag("<y", AnyText(), ">"),)))
    assert info.value.pointer == "/tags/0/begin"


def test_schema_errors_point_into_the_tag() -> None:
    spec = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<f"],
            "tags": [
                {
                    "begin": "<f=a>",
                    "content": {"type": "json_schema", "json_schema": {}},
                    "end": "</f>",
                },
                {
                    "begin": "<f=b>",
                    "content": {
                        "type": "json_schema",
                        "json_schema": {
                            "type": "object",
                            "properties": {"x": {"type": "string", "format": "no-such-format-x"}},
                            "dependentSchemas": {"x": {"not": {"required": ["x"]}}},
                        },
                    },
                    "end": "</f>",
                },
            ],
        },
    }
    fmt = from_xgrammar(spec)
    try:
        structural_tag_kbnf(fmt)
    except (UnsupportedSchemaError, SchemaError) as exc:
        assert exc.pointer.startswith("/tags/1/content/json_schema"), exc
    else:  # the translator enforces both keywords: nothing to point at
        pass


@pytest.mark.parametrize(
    ("fmt", "where"),
    [
        ({"type": "token", "token": 5}, "/format"),
        ({"type": "any_text", "max_tokens": 10}, "/format/max_tokens"),
        ({"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}, "/format/style"),
        ({"type": "sequence", "elements": [{"type": "nope"}]}, "/format/elements/0/type"),
        (
            {
                "type": "tag",
                "begin": {"type": "token", "token": 1},
                "content": {"type": "any_text"},
                "end": "x",
            },
            "/format/begin",
        ),
    ],
)
def test_xgrammar_refusals_name_the_place(fmt: dict[str, Any], where: str) -> None:
    with pytest.raises(SchemaError) as info:
        structural_tag_kbnf(from_xgrammar({"type": "structural_tag", "format": fmt}))
    assert info.value.pointer == where


# ------------------------------------------------------------- Hermes tool calls vs a parser
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "maxLength": 20},
        "limit": {"type": "integer", "minimum": 1},
    },
    "required": ["query"],
    "additionalProperties": False,
}
TOOLS = {"get_weather": WEATHER, "search": SEARCH}
CALL = re.compile(
    r'<tool_call>\n\{"name": "([^"]*)", "arguments": (.*?)\}\n</tool_call>', re.DOTALL
)


def _hermes_tags() -> tuple[Tag, ...]:
    return tuple(
        Tag(
            f'<tool_call>\n{{"name": "{name}", "arguments": ', JsonSchema(schema), "}\n</tool_call>"
        )
        for name, schema in TOOLS.items()
    )


def _parse_calls(text: str) -> tuple[str, list[tuple[str, Any]]] | None:
    """(text outside calls, calls) as a Hermes parser reads them; None when a call is broken."""
    calls, outside, pos = [], [], 0
    while True:
        start = text.find("<tool_call>", pos)
        if start < 0:
            outside.append(text[pos:])
            break
        outside.append(text[pos:start])
        m = CALL.match(text, start)
        if m is None or m.group(1) not in TOOLS:
            return None
        try:
            args = json.loads(m.group(2))
        except ValueError:
            return None
        if json.dumps(args, ensure_ascii=False) != m.group(2):
            return None  # not the compact layout the grammar writes
        if not jsonschema.Draft202012Validator(TOOLS[m.group(1)]).is_valid(args):
            return None
        calls.append((m.group(1), args))
        pos = m.end()
    return "".join(outside), calls


def _call(name: str, args: Any) -> str:
    arguments = json.dumps(args, ensure_ascii=False)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def _candidates(rng: random.Random) -> list[str]:
    good = [
        ("get_weather", {"city": "Paris", "unit": "c"}),
        ("get_weather", {"city": "Zürich", "unit": "f"}),
        ("search", {"query": "vllm"}),
        ("search", {"query": "q", "limit": 3}),
    ]
    bad = [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Paris", "unit": "k"}),
        ("search", {"query": "x" * 21}),
        ("search", {"query": "q", "limit": 0}),
        ("search", {"query": "q", "extra": 1}),
        ("get_wether", {"city": "Paris", "unit": "c"}),
    ]
    pieces = [_call(n, a) for n, a in good + bad]
    pieces += [
        _call("search", {"query": "q"})[:-3],  # end marker cut
        "<tool_call>",
        "Sure.",
        " ",
        "\n",
        "I will look it up.",
    ]
    out = []
    for _ in range(300):
        out.append("".join(rng.choice(pieces) for _ in range(rng.randint(0, 3))))
    return out


@pytest.mark.parametrize("mode", ["auto", "required", "forced", "none"])
def test_hermes_tool_grammar_matches_the_parser(mode: str) -> None:
    tags = _hermes_tags()
    if mode == "auto":
        fmt: Format = TriggeredTags(("<tool_call>",), tags)
    elif mode == "required":
        fmt = TagsWithSeparator(tags, "\n", at_least_one=True)
    elif mode == "forced":
        fmt = TagsWithSeparator(tags[1:], "", at_least_one=True, stop_after_first=True)
    else:
        fmt = AnyText(excludes=("<tool_call>",))
    grammar = structout.compile_grammar(structural_tag_kbnf(fmt))
    rng = random.Random(mode)
    accepted = 0
    for text in _candidates(rng):
        parsed = _parse_calls(text)
        if parsed is None:
            expected = False
        else:
            _outside, calls = parsed
            if mode == "auto":
                expected = True
            elif mode == "none":
                expected = not calls
            elif mode == "required":
                expected = bool(calls) and text == "\n".join(_call(n, a) for n, a in calls)
            else:
                expected = len(calls) == 1 and calls[0][0] == "search" and text == _call(*calls[0])
        assert grammar.accepts(text.encode()) == expected, (mode, text)
        accepted += expected
    assert accepted > 5


def test_legacy_and_current_xgrammar_forms_agree() -> None:
    legacy = {
        "structures": [
            {"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"},
            {"begin": "<function=search>", "schema": json.dumps(SEARCH), "end": "</function>"},
        ],
        "triggers": ["<function="],
    }
    current = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": [
                {
                    "type": "tag",
                    "begin": f"<function={n}>",
                    "content": {"type": "json_schema", "json_schema": s},
                    "end": "</function>",
                }
                for n, s in TOOLS.items()
            ],
        },
    }
    a = structout.compile_grammar(structural_tag(legacy).text)
    b = structout.compile_grammar(structural_tag(json.dumps(current)).text)
    for text in [
        'hi <function=get_weather>{"city": "P", "unit": "c"}</function> ok',
        '<function=search>{"query": "q"}</function>',
        '<function=search>{"query": 1}</function>',
        "<function=nope>{}</function>",
        "plain",
    ]:
        assert a.accepts(text.encode()) == b.accepts(text.encode())


def test_reasoning_then_answer() -> None:
    """Free thinking between markers, then a constrained answer (the SDK's reasoning shape)."""
    fmt = Sequence_((Tag("<think>", AnyText(), "</think>"), ConstString("\n"), JsonSchema(WEATHER)))
    g = structout.compile_grammar(structural_tag_kbnf(fmt))
    assert g.accepts(b'<think>any {text} <b>here</b>\n</think>\n{"city": "P", "unit": "f"}')
    assert not g.accepts(b'<think>a</think> b</think>\n{"city": "P", "unit": "f"}')
    assert not g.accepts(b'<think>a</think>\n{"city": "P"}')


def test_same_schema_is_translated_once() -> None:
    seen: list[Any] = []

    def translate(schema: Any) -> str:
        seen.append(schema)
        return structout.to_kbnf(schema)

    tags = tuple(Tag(f"<{i}>", JsonSchema(WEATHER), "</>") for i in range(1, 4))
    structural_tag_kbnf(TagsWithSeparator(tags, ""), translate_schema=translate)
    assert len(seen) == 1


# ---------------------------------------------------------------------------- shared rules
def _unshared(self: SharedRules, kbnf: str, prefix: str) -> tuple[list[str], str]:
    return [prefixed(kbnf, prefix).strip()], prefix + "start"


_NODE = {
    "type": "object",
    "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 9},
        "next": {"anyOf": [{"$ref": "#/definitions/node"}, {"type": "null"}]},
    },
    "required": ["v", "next"],
    "additionalProperties": False,
}


def _random_param(rng: random.Random, depth: int) -> dict[str, Any]:
    kind = rng.randrange(10 if depth < 2 else 7)
    if kind == 0:
        return {"type": "string"}
    if kind == 1:
        return {"enum": rng.sample(["a", "b", "ab", "c"], rng.randint(1, 3))}
    if kind == 2:
        return {"type": "integer", "minimum": rng.choice([0, -3]), "maximum": rng.choice([5, 12])}
    if kind == 3:
        return {"type": rng.choice(["number", "boolean", "null", "integer"])}
    if kind == 4:
        return {"type": "array", "items": {"type": "string"}, "maxItems": rng.choice([2, 3])}
    if kind == 5:
        return {"anyOf": [{"type": "string"}, {"type": "null"}]}
    if kind == 6:
        return rng.choice([{}, {"type": "array"}, {"type": "object"}])  # (generic JSON rules)
    if kind == 7:
        return {"$ref": "#/definitions/node"}
    return _random_object(rng, depth + 1)


def _random_object(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    names = rng.sample(["a", "b", "c", "d"], rng.randint(1, 3))
    s: dict[str, Any] = {
        "type": "object",
        "properties": {n: _random_param(rng, depth) for n in names},
        "required": [n for n in names if rng.random() < 0.6],
    }
    if rng.random() < 0.5:
        s["additionalProperties"] = False
    if depth == 0:
        s["definitions"] = {"node": _NODE}
    return s


def _random_value(rng: random.Random, schema: Any, depth: int = 0) -> Any:
    """A value of about the schema's shape: often valid, sometimes not."""
    if rng.random() < 0.06 or depth > 4:
        return rng.choice([None, 0, -4, 13, 1.5, "a", "zz", True, [], {}, [1], {"e": 1}])
    if not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        schema = _NODE
    if "anyOf" in schema:
        return _random_value(rng, rng.choice(schema["anyOf"]), depth)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    t = schema.get("type")
    if t == "object":
        props = schema.get("properties", {})
        out = {k: _random_value(rng, v, depth + 1) for k, v in props.items() if rng.random() < 0.8}
        if rng.random() < 0.15:
            out["extra"] = 1
        return out
    if t == "array":
        item = schema.get("items", {"type": "integer"})
        return [_random_value(rng, item, depth + 1) for _ in range(rng.randint(0, 4))]
    if t == "integer":
        return rng.randint(-5, 14)
    if t == "number":
        return rng.choice([0.5, -2, 1e3])
    if t == "string":
        return rng.choice(["x", "Paris", ""])
    if t == "boolean":
        return rng.random() < 0.5
    return rng.choice([None, 3, "s", [True], {"k": None}])


@pytest.mark.parametrize("seed", range(4))
def test_shared_rules_keep_the_language(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    tools = {f"f{i}": _random_object(rng) for i in range(8)}
    tools["dup"] = json.loads(json.dumps(tools["f0"]))  # (equal schemas: one translation)
    tools["dup"]["description"] = "same language, other JSON"
    tags = tuple(
        Tag(f'<tool_call>{{"name": "{n}", "arguments": ', JsonSchema(s), "}</tool_call>")
        for n, s in tools.items()
    )
    fmt = TriggeredTags(("<tool_call>",), tags)
    shared_text = structural_tag_kbnf(fmt)
    with monkeypatch.context() as m:
        m.setattr(SharedRules, "add", _unshared)
        m.setattr(SharedRules, "add_common_schema", lambda *_: None)  # (the engine's shortcut)
        plain_text = structural_tag_kbnf(fmt)
    assert shared_text.count("::=") < plain_text.count("::=")
    shared = structout.compile_grammar(shared_text)
    plain = structout.compile_grammar(plain_text)
    verdicts = []
    for _ in range(400):
        name = rng.choice(list(tools))
        args = json.dumps(_random_value(rng, tools[name]), ensure_ascii=False)
        text = f'hi <tool_call>{{"name": "{name}", "arguments": {args}}}</tool_call>'
        verdict = plain.accepts(text.encode())
        assert shared.accepts(text.encode()) == verdict, text
        verdicts.append(verdict)
    assert 20 < sum(verdicts) < len(verdicts) - 20


@pytest.mark.parametrize("seed", range(6))
def test_engine_shortcut_writes_the_translators_text(seed: int) -> None:
    """The default translator's schemas go through the engine in one call each
    (``add_common_schema``): the text is the one the translator and ``add`` give, rule for rule,
    whatever the mix of common-shape schemas, others, repeats and embedded grammars."""
    rng = random.Random(seed)
    others: list[Any] = [
        {"type": "string", "pattern": "^(a|b)+$"},
        {
            "type": "object",
            "properties": {
                "a": {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}
            },
        },
        True,
        {"type": "integer", "minimum": 3},
    ]
    parts: list[Tag] = []
    for i in range(12):
        kind = rng.randrange(4)
        if kind == 0:
            content: Format = JsonSchema(rng.choice(others))
        elif kind == 1:
            content = rng.choice([GrammarText("start ::= 'x' | 'y';"), Regex("[0-9]+")])
        else:
            content = JsonSchema(_random_object(rng))
        parts.append(Tag(f"<t{i}>", content, "</t>"))
    parts.append(Tag("<again>", parts[rng.randrange(12)].content, "</t>"))
    fmt = TagsWithSeparator(tuple(parts), "\n")
    shortcut = structural_tag_kbnf(fmt)
    translator = schema_translator(Limits().translator_options())
    assert shortcut == structural_tag_kbnf(fmt, translate_schema=translator)


def test_add_common_schema_is_add_of_the_common_text() -> None:
    from structout._engine import SharedRules as EngineRules
    from structout._engine import translate_common_schema

    one, two = EngineRules(), EngineRules()
    rng = random.Random(7)
    for i in range(10):
        schema = _random_object(rng)
        expected = two.add(translate_common_schema(schema, 12) or "", f"g{i}_")
        assert one.add_common_schema(schema, f"g{i}_", 12) == expected
    assert one.add_common_schema({"type": "string", "pattern": "^(a|b)+$"}, "g99_") is None
    assert one.add_common_schema([1, 2], "g99_") is None


def test_shared_rules_only_join_equal_rules() -> None:
    rules = SharedRules()
    a, start_a = rules.add("start ::= a;\na ::= '(' a ')' | 'x';\nw ::= 'w';\n", "g1_")
    b, start_b = rules.add("start ::= b;\nb ::= '(' b ')' | 'y';\nw ::= 'w';\n", "g2_")
    c, start_c = rules.add("start ::= c;\nc ::= '(' c ')' | 'x';\nq ::= 'w' c;\n", "g3_")
    assert (start_a, start_b, start_c) == ("g1_start", "g2_start", "g1_start")
    assert "g2_b ::= '(' g2_b ')' | 'y';" in b and "w ::=" not in "".join(b)
    assert c == ["g3_q ::= 'w' g1_a;"]
    # (not one rule per line: renamed only)
    d, start_d = rules.add("start ::= 'x'\n  | 'y';\n", "g4_")
    assert d == ["g4_start ::= 'x'\n  | 'y';"] and start_d == "g4_start"
    # (a name no rule defines is the engine's error to report)
    e, _ = rules.add("start ::= missing;\n", "g5_")
    assert e == ["g5_start ::= g5_missing;"]
    top = f"start ::= {start_a} | {start_b} | 'w' {start_c} | g3_q | {start_d};"
    text = "\n".join([top, *a, *b, *c, *d])
    g = structout.compile_grammar(text)
    for s, ok in [("((x))", True), ("(y)", True), ("w(x)", True), ("y", True), ("(x", False)]:
        # (g3_q: 'w' then g3's c, written as g1_a)
        assert g.accepts(s.encode()) == ok, s


def test_schemas_differing_in_member_order_keep_their_order() -> None:
    ab = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    ba = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}}
    tags = (Tag("<1>", JsonSchema(ab), "</>"), Tag("<2>", JsonSchema(ba), "</>"))
    g = structout.compile_grammar(structural_tag_kbnf(TagsWithSeparator(tags, "")))
    assert g.accepts(b'<1>{"a": 1, "b": 2}</>') and g.accepts(b'<2>{"b": 2, "a": 1}</>')
    assert not g.accepts(b'<1>{"b": 2, "a": 1}</>') and not g.accepts(b'<2>{"a": 1, "b": 2}</>')
