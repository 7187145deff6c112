"""``@structured`` and ``use_model`` (tiny Llama + reference engine; enum schemas only)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_sdk_support import (
    RefEngine,
    choice_kbnf,
    llama3_tokenizer,
    tiny_llama,
)

import structout.model as model_mod
from structout.cache import CompileCache
from structout.model import Model
from structout.structured import current_model, structured, use_model
from structout.targets import KBNF


def _enum_only_translator(schema: dict[str, Any], **options: Any) -> str:
    """Test-only translator: a JSON Schema with ``enum`` → a choice grammar of its JSON values
    (translator options such as the default ``max_number_length`` change nothing here)."""
    if set(schema) - {"enum", "type", "title", "description"} or "enum" not in schema:
        raise NotImplementedError(f"test translator handles enum schemas only: {schema}")
    return choice_kbnf(*(json.dumps(v) for v in schema["enum"]))


@pytest.fixture(scope="module")
def model() -> Model:
    return Model(
        tiny_llama(),
        llama3_tokenizer(),
        cache=CompileCache(disk=False),
        engine=RefEngine(translate=_enum_only_translator),
    )


Kind = Literal["bug", "feature", "question"]


def test_literal_return_type_end_to_end(model: Model) -> None:
    @structured(model=model, max_new_tokens=20)
    def classify(ticket: str) -> Kind:
        """Classify this support ticket: {ticket}"""

    assert classify("The app crashes when I click save") in ("bug", "feature", "question")
    assert classify.__name__ == "classify"


def test_prompt_is_the_formatted_docstring(model: Model) -> None:
    @structured(model=model)
    def summarize(text: str, words: int = 10, *, tone: str = "neutral") -> Kind:
        """
        Summarize in {words} words, {tone} tone.

        Text: {text} (literal braces: {{ok}})
        """

    assert summarize.user_message("hello") == (
        "Summarize in 10 words, neutral tone.\n\nText: hello (literal braces: {ok})"
    )
    assert summarize.user_message("x", 3, tone="dry").startswith("Summarize in 3 words, dry tone.")
    with pytest.raises(TypeError):
        summarize.user_message()  # missing argument, like a normal call


def test_prompt_is_exactly_what_the_model_receives(model: Model) -> None:
    @structured(model=model, system="Be brief.")
    def classify(ticket: str) -> Literal["question", "bug", "feature"]:
        """Classify this support ticket: {ticket}"""

    shown = classify.prompt("It crashes")
    assert shown == model.render_prompt(classify.messages("It crashes"), classify.schema)
    assert "Be brief." in shown and "Classify this support ticket: It crashes" in shown
    # The schema's instruction, its options in an order that does not depend on the schema's.
    assert '"bug", "feature", "question"' in shown
    ids = model.tokenizer(shown, add_special_tokens=False)["input_ids"]
    messages = classify.messages("It crashes")
    assert ids == model._prompt_ids(messages, model_mod.resolve_schema(classify.schema), True, True)


def test_future_annotations_and_forward_references(model: Model) -> None:
    @structured(model=model)
    def pick(x: str) -> Later:  # noqa: F821 - defined below, resolved at call time
        """Pick for {x}"""

    globals()["Later"] = Literal["one", "two"]
    try:
        assert pick.schema == Literal["one", "two"]
        assert pick("a") in ("one", "two")
    finally:
        del globals()["Later"]


def test_decorator_errors_are_clear() -> None:
    with pytest.raises(TypeError, match="needs a docstring"):

        @structured
        def no_doc(x: str) -> Kind: ...

    with pytest.raises(ValueError, match=r"\{nope\}.*not a parameter"):

        @structured
        def bad_placeholder(x: str) -> Kind:
            """Use {nope}"""

    @structured
    def no_return(x: str):  # type: ignore[no-untyped-def]
        """Do {x}"""

    with pytest.raises(TypeError, match="needs a return annotation"):
        _ = no_return.schema

    with pytest.raises(TypeError, match="unknown @structured option"):
        structured(max_tokens=3)(lambda: None)


def test_model_resolution_order(model: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = object()
    monkeypatch.setattr(Model, "default", classmethod(lambda cls: sentinel))

    @structured
    def f(x: str) -> Kind:
        """{x}"""

    assert f.model is sentinel
    assert current_model() is sentinel
    other = Model(tiny_llama(), llama3_tokenizer(), cache=CompileCache(disk=False))
    with use_model(model):
        assert f.model is model
        with use_model(other):
            assert f.model is other
        assert f.model is model

        @structured(model=other)
        def g(x: str) -> Kind:
            """{x}"""

        assert g.model is other  # the decorator's model wins over use_model
    assert f.model is sentinel


def test_use_model_inside_call(model: Model) -> None:
    @structured(max_new_tokens=10)
    def yes_no(q: str) -> Literal["yes", "no"]:
        """Answer: {q}"""

    with use_model(model):
        assert yes_no("Is water wet?") in ("yes", "no")


def test_async_function(model: Model) -> None:
    @structured(return_result=True)
    async def answer(q: str) -> Literal["yes", "no"]:
        """Answer: {q}"""

    async def main() -> list[Any]:
        with use_model(model):  # resolved in the caller's context, before the worker thread
            return await asyncio.gather(answer("a?"), answer("b?"))

    results = asyncio.run(main())
    assert [r.value in ("yes", "no") for r in results] == [True, True]
    assert all(r.timings.total_ms > 0 for r in results)


def test_methods_and_grammar_override(model: Model) -> None:
    class Bot:
        name = "Ada"

        @structured(model=model, schema=KBNF(choice_kbnf("hi Ada", "bye Ada")))
        def greet(self, mood: str) -> str:
            """You are {self.name}. Mood: {mood}"""

    bot = Bot()
    assert bot.greet.user_message("happy") == "You are Ada. Mood: happy"
    assert bot.greet("happy") in ("hi Ada", "bye Ada")


def test_system_message(model: Model) -> None:
    @structured(model=model, system="You are terse.")
    def f(x: str) -> Kind:
        """{x}"""

    msgs = f.messages("hi")
    assert msgs[0] == {"role": "system", "content": "You are terse."}
    rendered = model.render_prompt(msgs, Kind)
    assert "You are terse." in rendered and 'one of "bug", "feature", "question"' in rendered


def test_bad_schema_fails_before_the_default_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a model, a call would load Model.default() (seconds): the schema is checked first."""
    from structout.errors import SchemaError

    def no_loading(*args: Any, **kwargs: Any) -> Model:
        raise AssertionError("the default model was loaded before the schema was checked")

    monkeypatch.setattr(Model, "default", classmethod(no_loading))

    @structured(schema={"type": "object", "properties": {"n": {"type": "strin"}}})
    def ask(text: str) -> Any:
        """Read {text}"""

    with pytest.raises(SchemaError, match="did you mean 'string'"):
        ask("x")


def test_property_order_reaches_the_translator() -> None:
    seen: list[dict[str, Any]] = []

    def recording(schema: dict[str, Any], **options: Any) -> str:
        seen.append(options)
        return _enum_only_translator(schema, **options)

    model = Model(
        tiny_llama(),
        llama3_tokenizer(),
        cache=CompileCache(disk=False),
        engine=RefEngine(translate=recording),
    )

    @structured(model=model, max_new_tokens=20, property_order="any")
    def classify(ticket: str) -> Kind:
        """Classify this support ticket: {ticket}"""

    assert classify("The app crashes") in ("bug", "feature", "question")
    assert seen and seen[-1].get("property_order") == "any"
    with pytest.raises(TypeError, match="property_orderr"):
        structured(model=model, property_orderr="any")
