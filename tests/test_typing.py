"""The public API's types: what mypy infers for generate/stream/@structured, and the engine's
limit table against ``structout.Limits``."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from pathlib import Path

import pytest

import structout
from structout.limits import ENGINE_LIMITS, Limits

ROOT = Path(__file__).resolve().parents[1]


def test_engine_limits_are_the_limits_fields() -> None:
    assert set(structout._engine.ENGINE_LIMITS) == ENGINE_LIMITS
    assert all(isinstance(v, int) and v > 0 for v in structout._engine.ENGINE_LIMITS.values())
    # Every engine limit set on a Limits value reaches the engine (an unknown one would raise).
    g = structout.compile_grammar("start ::= 'a';", **Limits(max_repetition=3).engine_options())
    assert g.accepts(b"a")
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_repetitions'"):
        structout.compile_grammar("start ::= 'a';", max_repetitions=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'mask_cache_bytes'"):
        structout.compile_grammar("start ::= 'a';", mask_cache_bytes=0)  # vocabulary-only


SNIPPET = """
from typing import Literal
from pydantic import BaseModel
import structout

class City(BaseModel):
    name: str

def get_weather(city: str, unit: Literal["c", "f"]) -> str:
    return city

def check(model: structout.Model, vocab: structout.Vocabulary) -> None:
    reveal_type(model.generate("Name a city.", schema=City))
    reveal_type(model.generate("Name a city.", City, return_result=True))
    reveal_type(model.generate("yes or no?", structout.KBNF("start ::= 'yes' | 'no';")))
    reveal_type(model.generate("Say hi."))
    reveal_type(model.generate_batch(["a", "b"], City))
    reveal_type(model.stream("Name a city.", schema=City))
    reveal_type(model.stream("Name a city.", schema=City, partial=True))
    for snap in model.stream("Name a city.", City, partial=True, max_new_tokens=9):
        reveal_type(snap)
        reveal_type(snap.partial)
        reveal_type(snap.value)
    reveal_type(model.stream("Name a city.", {"type": "object"}, partial=True))
    reveal_type(structout.compile_type(City, vocab))
    reveal_type(model.generate("Weather?", tools=[get_weather, City], tool_choice="required"))
    reveal_type(model.generate("Weather?", tools=[get_weather], return_result=True))
    reveal_type(model.generate("Name a city.", City, reasoning=True, reasoning_budget=64))
    reveal_type(model.generate("Say hi.", reasoning=True))
    reveal_type(model.generate("Weather?", tools=[get_weather]).tool_calls[0].arguments)

async def acheck(model: structout.Model) -> None:
    async for snap in model.stream("Name a city.", City, partial=True):
        reveal_type(snap)

@structout.structured
def city(country: str) -> City:
    '''Name a city in {country}.'''

@structout.structured(max_new_tokens=20)
async def acity(country: str) -> City:
    '''Name a city in {country}.'''

reveal_type(city("France"))
reveal_type(acity("France"))
reveal_type(city.stream("France"))
reveal_type(acity.stream("France"))
"""


def test_mypy_sees_the_schema_type(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    path = tmp_path / "snippet.py"
    path.write_text(textwrap.dedent(SNIPPET))
    env_before = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(ROOT)  # this checkout's structout, not an installed one
    # mypy raises the recursion limit for good; restored, so the tests after this one (e.g.
    # test_schema_limits' deep schemas, which must hit LimitExceededError, not the Python
    # limit) see the same limit in any order.
    recursion_limit = sys.getrecursionlimit()
    try:
        out, err, _ = api.run(
            [
                str(path),
                "--follow-imports=silent",
                "--python-version=3.10",
                f"--cache-dir={ROOT / '.mypy_cache'}",
                "--disable-error-code=empty-body",  # the docstring is the body
                "--disable-error-code=unused-coroutine",
            ]
        )
    finally:
        sys.setrecursionlimit(recursion_limit)
        if env_before is None:
            del os.environ["MYPYPATH"]
        else:
            os.environ["MYPYPATH"] = env_before
    revealed = re.findall(r'Revealed type is "([^"]+)"', out)
    assert revealed == [
        "snippet.City",
        "structout.results.GenerationResult[snippet.City]",
        "str",
        "str",
        "list[snippet.City]",
        "structout.model.Stream[snippet.City]",
        "structout.partial_stream.PartialStream[snippet.City]",
        "structout.partial_stream.Snapshot[snippet.City]",
        "structout.partial.Partial[snippet.City]",
        "snippet.City | None",
        "structout.partial_stream.PartialStream[Any]",
        "structout._engine.CompiledGrammar",
        "structout.tools.AssistantTurn",
        "structout.results.GenerationResult[structout.tools.AssistantTurn]",
        "structout.reasoning.Reasoned[snippet.City]",
        "structout.reasoning.Reasoned[str]",
        "Any",
        "structout.partial_stream.Snapshot[snippet.City]",
        "snippet.City",
        "typing.Coroutine[Any, Any, snippet.City]",
        "structout.partial_stream.PartialStream[snippet.City]",
        "structout.partial_stream.PartialStream[snippet.City]",
    ], out + err
    assert "error:" not in out, out
