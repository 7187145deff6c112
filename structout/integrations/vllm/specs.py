"""vLLM's structured-output requests as KBNF grammars (no vLLM import: testable on its own).

vLLM hands a backend each request as ``(kind, spec)``: the name of a ``StructuredOutputOptions``
member and its text. :func:`request_kbnf` translates every kind into KBNF with start rule
``start``; :func:`check_request` also compiles that grammar at byte level, so a request
structout cannot enforce is refused before it reaches the engine.

Invariants:

* The grammar's language is exactly the request's: a JSON Schema's documents (structout's
  compact layout), any JSON object, the full matches of a regex, the listed choices verbatim, the
  grammar's sentences, the structural tag's texts. Nothing is widened to "any JSON".
* Errors are structout's (``SchemaError``, ``UnsupportedSchemaError``, ``GrammarError``,
  ``LimitExceededError``), with what, where (JSON pointer or ``line:col``) and a hint.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from structout.compiling import schema_kbnf
from structout.errors import SchemaError
from structout.kbnf_text import literal, regex_terminal
from structout.limits import Limits

__all__ = ["KINDS", "LIMITS", "check_request", "request_kbnf"]

#: The request kinds (``StructuredOutputOptions`` member names) structout enforces.
KINDS = ("JSON", "JSON_OBJECT", "REGEX", "CHOICE", "GRAMMAR", "STRUCTURAL_TAG")

#: Limits applied to every request, when it is validated and when it is compiled.
LIMITS = Limits()

_ANY_OBJECT: dict[str, Any] = {"type": "object"}


def request_kbnf(kind: str, spec: str, limits: Limits) -> str:
    """The KBNF text (start rule ``start``) of one request: ``kind`` a ``StructuredOutputOptions``
    member name, ``spec`` its text as vLLM passes it to backends (a JSON Schema as JSON, a regex,
    a JSON list of choices, a grammar, a structural tag as JSON; ignored for ``JSON_OBJECT``)."""
    if kind == "JSON":
        return schema_kbnf(_json_schema(spec), limits.translator_options())
    if kind == "JSON_OBJECT":
        return schema_kbnf(_ANY_OBJECT, limits.translator_options())
    if kind == "REGEX":
        return f"start ::= {regex_terminal(spec)};"
    if kind == "CHOICE":
        return "start ::= " + " | ".join(literal(c) for c in _choices(spec)) + ";"
    if kind == "GRAMMAR":
        return _grammar_kbnf(spec)
    if kind == "STRUCTURAL_TAG":
        from structout.structural_tag import from_xgrammar, structural_tag_kbnf

        return structural_tag_kbnf(from_xgrammar(spec))
    raise SchemaError(f"structout does not handle structured-output requests of kind {kind!r}")


def check_request(kind: str, spec: str, limits: Limits) -> str:
    """:func:`request_kbnf`, then compiled at byte level (no vocabulary) under ``limits``:
    returns the KBNF text, or raises structout's error for a request it cannot enforce."""
    kbnf = request_kbnf(kind, spec, limits)
    _check_grammar(kbnf, tuple(sorted(limits.engine_options().items())))
    return kbnf


@functools.lru_cache(maxsize=256)
def _check_grammar(kbnf: str, engine_options: tuple[tuple[str, int], ...]) -> None:
    """Compiles ``kbnf`` at byte level; remembered when it succeeds (errors are not cached)."""
    import structout

    structout.compile_grammar(kbnf, "start", **dict(engine_options))


def _json_schema(spec: str) -> Any:
    try:
        schema = json.loads(spec)
    except ValueError as exc:
        raise SchemaError(f"the JSON Schema is not valid JSON: {exc}") from None
    if isinstance(schema, bool):  # true / false: the same languages as {} / {"not": {}}
        return {} if schema else {"not": {}}
    if not isinstance(schema, dict):
        raise SchemaError(f"a JSON Schema is an object or a boolean, not {type(schema).__name__}")
    return schema


def _choices(spec: str) -> list[str]:
    try:
        choices = json.loads(spec)
    except ValueError:
        choices = None
    if not isinstance(choices, list) or not choices:
        raise SchemaError("'choice' must be a non-empty list of strings")
    for i, choice in enumerate(choices):
        if not isinstance(choice, str):
            raise SchemaError(f"choice {i} is a {type(choice).__name__}, not a string", f"/{i}")
    return choices


def _grammar_kbnf(text: str) -> str:
    """KBNF of a grammar in any dialect vLLM users send (KBNF, GBNF, Lark)."""
    try:
        from structout.grammar_dialects import grammar_to_kbnf
    except ImportError:  # the dialect translators are optional: the text is KBNF then
        return text
    return grammar_to_kbnf(text)
