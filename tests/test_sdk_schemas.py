"""Every schema path end to end on a tiny random Llama with the native engine.

The model is random, so what it writes is arbitrary; the point is that whatever it writes is a
valid document: each output is checked with ``jsonschema`` against the schema the translator
used, and typed outputs come back as instances. Strings, numbers and arrays are bounded so a
random model finishes within the budget.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Optional, Union

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")

from pydantic import BaseModel, Field, StringConstraints, field_validator
from test_sdk_support import (
    llama3_tokenizer,
    tiny_llama,
)
from typing_extensions import TypedDict

from structout.cache import CompileCache
from structout.errors import (
    GrammarError,
    SchemaValidationError,
    TruncatedOutputError,
    UnsupportedSchemaError,
)
from structout.model import Model
from structout.targets import KBNF

Short = Annotated[str, StringConstraints(max_length=6)]


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    city: Short
    zip_code: Annotated[str, StringConstraints(pattern=r"^[0-9]{5}$")]


class Person(BaseModel):
    name: Short = Field(description="given name")
    age: int = Field(ge=0, le=120)
    # 0.25: exact in binary (jsonschema checks multipleOf with float division)
    height_m: float = Field(ge=0.5, le=2.5, multiple_of=0.25)
    role: Literal["dev", "ops", "pm"]
    color: Color
    nickname: Optional[Short] = None  # noqa: UP045 - evaluated at runtime on py3.9
    address: Address
    tags: list[Short] = Field(max_length=2)
    active: bool


@dataclasses.dataclass
class Point:
    x: Annotated[int, Field(ge=-9, le=9)]
    y: Annotated[int, Field(ge=-9, le=9)]


class Movie(TypedDict):
    title: Short
    year: Annotated[int, Field(ge=1900, le=2030)]


@pytest.fixture(scope="module")
def model() -> Iterator[Model]:
    yield Model(tiny_llama(), llama3_tokenizer(), cache=CompileCache(disk=False))


def _check(model: Model, schema: Any, res: Any) -> None:
    from structout.schema import json_schema_of

    js, _ = json_schema_of(schema) if not isinstance(schema, dict) else (schema, False)
    jsonschema.validate(json.loads(res.text), js)
    assert res.finish_reason in ("stop", "length")
    assert model.tokenizer.decode(res.token_ids) == res.text


TYPED_CASES: list[tuple[str, Any, type | tuple[type, ...]]] = [
    ("pydantic", Person, Person),
    ("dataclass", Point, Point),
    ("typeddict", Movie, dict),
    ("literal", Literal["bug", "feature", "question"], str),
    ("enum", Color, Color),
    ("list", Annotated[list[Annotated[int, Field(ge=0, le=99)]], Field(max_length=4)], list),
    ("dict", Annotated[dict[Short, bool], Field(max_length=2)], dict),
    ("union", Union[Point, Literal["none"]], (Point, str)),
    ("bool", bool, bool),
    ("bounded int", Annotated[int, Field(ge=-5, le=5)], int),
    ("short str", Short, str),
]


@pytest.mark.parametrize("jump_forward", [True, False], ids=["jf", "nojf"])
@pytest.mark.parametrize("name,schema,expected", TYPED_CASES, ids=[c[0] for c in TYPED_CASES])
def test_typed_schemas(
    model: Model, name: str, schema: Any, expected: Any, jump_forward: bool
) -> None:
    for seed in (0, 1):
        res = model.generate(
            f"Give me a {name}.",
            schema,
            max_new_tokens=200,
            temperature=1.0,
            seed=seed,
            jump_forward=jump_forward,
            return_result=True,
        )
        assert isinstance(res.value, expected)
        _check(model, schema, res)


JSON_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "maximum": 999},
            "kind": {"enum": ["a", "b", None]},
            "codes": {
                "type": "array",
                "items": {"type": "string", "pattern": "^[A-Z]{2}[0-9]$"},
                "minItems": 1,
                "maxItems": 3,
                "uniqueItems": False,
            },
        },
        "required": ["id", "codes"],
        "additionalProperties": False,
    },
    {"anyOf": [{"type": "boolean"}, {"const": "n/a"}]},
    {
        "type": "array",
        "prefixItems": [{"const": 1}, {"type": "string", "maxLength": 3}],
        "items": False,
    },
]


@pytest.mark.parametrize("schema", JSON_SCHEMAS, ids=["object", "anyOf", "tuple"])
def test_json_schema_dicts(model: Model, schema: dict[str, Any]) -> None:
    for seed in (0, 1, 2):
        res = model.generate(
            "JSON please",
            schema,
            max_new_tokens=120,
            temperature=1.0,
            seed=seed,
            return_result=True,
        )
        assert res.value == json.loads(res.text)
        _check(model, schema, res)


def test_kbnf_grammar_returns_text(model: Model) -> None:
    from structout._engine import compile_grammar

    text = "start ::= 'id-' #\"[0-9]{3}\" ( '!' | '?' ) ;"
    for seed in range(3):
        out = model.generate("code", KBNF(text), temperature=1.0, seed=seed)
        assert isinstance(out, str)
        assert compile_grammar(text).accepts(out.encode())


def test_schema_validation_error_from_a_validator(model: Model) -> None:
    class Never(BaseModel):
        n: Annotated[int, Field(ge=0, le=9)]

        @field_validator("n")
        @classmethod
        def reject(cls, v: int) -> int:
            raise ValueError("validators run after the grammar")

    with pytest.raises(SchemaValidationError) as info:
        model.generate("n", Never, temperature=1.0, seed=0)
    assert '"n"' in info.value.text and info.value.errors


def test_truncated_output(model: Model) -> None:
    with pytest.raises(TruncatedOutputError) as info:
        model.generate("long", Person, max_new_tokens=6, jump_forward=False)
    assert info.value.partial.startswith("{")


def test_unsupported_schema_and_bad_grammar(model: Model) -> None:
    with pytest.raises(GrammarError):
        model.generate("x", KBNF("start ::= 'a' | ;;"))
    with pytest.raises(UnsupportedSchemaError):
        # A regex with a look-ahead cannot be enforced exactly by a grammar.
        model.generate("x", {"type": "string", "pattern": "^(?=a)b$"})


def test_batch_one_native_call_per_step(model: Model) -> None:
    from structout.engine import NativeEngine

    calls: list[int] = []

    class Counting(NativeEngine):
        def fill_next_token_bitmasks(self, matchers: Any, bm: Any, rows: Any = None) -> None:
            calls.append(len(matchers))
            super().fill_next_token_bitmasks(matchers, bm, rows)

    model = Model(model.hf_model, model.tokenizer, cache=model.cache, engine=Counting())
    schemas: list[Any] = [Point, Literal["x", "y"], Movie]
    res = model.generate_batch(
        ["a", "b", "c"], schemas, temperature=1.0, seed=5, return_result=True, max_new_tokens=80
    )
    for schema, r in zip(schemas, res):
        _check(model, schema, r)
    assert calls and max(calls) >= 2  # several rows' masks filled in one call


def test_compile_is_cached_per_model(model: Model) -> None:
    first = model.compile(Person)
    again = model.compile(Person)
    assert again.grammar == first.grammar  # the same native grammar, from the cache
    stats = model.cache.stats()
    assert stats.grammar_hits >= 1 and stats.schema_memory_hits >= 1
