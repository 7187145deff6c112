"""The translator spells its JSON lexemes as the engine's prebuilt patterns.

The engine builds the automata of ``PREBUILT_PATTERNS`` once per process and reuses them for every
grammar that spells a terminal exactly so (engine_rs/src/dfa/prebuilt.rs). Recognition is by
text, so a change to how the translator writes a number, an integer or a string body would
silently bring back a per-grammar build: these tests fail instead.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from structout._engine import PREBUILT_PATTERNS, compile_grammar
from structout.schema import to_kbnf

_REGEX_TERMINAL = re.compile(r'#"((?:[^"\\]|\\.)*)"')


def _patterns(schema: dict[str, Any]) -> list[str]:
    return _REGEX_TERMINAL.findall(to_kbnf(schema))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number"},
        {"type": "integer"},
        {"type": "string", "maxLength": 200},  # json_len! over the string body
        {"type": "string", "minLength": 1},
        {"type": "array", "items": {"type": "number"}},
    ],
    ids=["number", "integer", "string-length", "string-nonempty", "array-of-numbers"],
)
def test_generic_lexemes_are_spelled_as_prebuilt(schema: dict[str, Any]) -> None:
    found = _patterns(schema)
    assert found, to_kbnf(schema)
    assert all(p in PREBUILT_PATTERNS for p in found), found


def test_every_prebuilt_pattern_is_written_by_the_translator() -> None:
    """Each constant earns its place: some ordinary schema produces it."""
    written = {
        p
        for s in (
            {"type": "number"},
            {"type": "integer"},
            {"type": "string", "maxLength": 200},
            {"type": "string", "minLength": 1},
        )
        for p in _patterns(s)
    }
    assert set(PREBUILT_PATTERNS) == written


def test_bounded_numbers_are_not_mistaken_for_the_generic_lexeme() -> None:
    """A constrained number gets its own pattern (and its own automaton)."""
    found = _patterns({"type": "integer", "minimum": 0, "maximum": 99})
    assert found and not set(found) & set(PREBUILT_PATTERNS)
    g = compile_grammar(to_kbnf({"type": "integer", "minimum": 0, "maximum": 99}))
    for text, ok in (("7", True), ("99", True), ("100", False), ("-1", False), ("7.5", False)):
        assert g.accepts(text.encode()) == ok, text
