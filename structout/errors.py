"""Typed errors raised by structout.

Every error the native engine reports arrives as one of these classes; no panic crosses the FFI
boundary. Messages say what went wrong, where (``line:col`` for grammars, a JSON pointer for
schemas) and give a hint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "GrammarError",
    "LimitExceededError",
    "RollbackError",
    "SchemaError",
    "SchemaValidationError",
    "StructoutError",
    "TruncatedOutputError",
    "UnsupportedSchemaError",
    "VocabularyError",
]


class StructoutError(Exception):
    """Base class of every structout error."""


class GrammarError(StructoutError, ValueError):
    """A KBNF grammar failed to parse or validate (message has line:col, an excerpt and a hint)."""


class SchemaError(StructoutError, ValueError):
    """A JSON Schema is invalid (unresolvable ``$ref``, wrong keyword types, ...)."""

    def __init__(self, message: str, pointer: str = "") -> None:
        super().__init__(f"{message} (at {pointer or '/'})" if pointer is not None else message)
        self.detail = message
        self.pointer = pointer

    def under(self, prefix: str, note: str = "") -> SchemaError:
        """The same error for the schema embedded at JSON pointer ``prefix`` of a larger
        document (a tool's parameters, a structural tag's content); ``note`` starts the
        message."""
        return SchemaError(note + self.detail, prefix + (self.pointer or ""))


class UnsupportedSchemaError(StructoutError, ValueError):
    """A schema keyword cannot be enforced exactly by a grammar."""

    def __init__(self, message: str, keyword: str = "", pointer: str = "") -> None:
        super().__init__(f"{message} (keyword {keyword!r} at {pointer or '/'})")
        self.detail = message
        self.keyword = keyword
        self.pointer = pointer

    def under(self, prefix: str, note: str = "") -> UnsupportedSchemaError:
        """As :meth:`SchemaError.under`."""
        return UnsupportedSchemaError(note + self.detail, self.keyword, prefix + self.pointer)


class LimitExceededError(StructoutError, RuntimeError):
    """A user-settable resource limit was hit (the message names the limit and the construct)."""


class RollbackError(StructoutError, ValueError):
    """A rollback reached beyond the tokens a matcher keeps (its ``max_rollback_tokens``)."""


class VocabularyError(StructoutError, ValueError):
    """A tokenizer or vocabulary could not be read."""


class TruncatedOutputError(StructoutError):
    """The token budget ran out before the grammar could finish; ``partial`` holds the text.

    ``phase`` is ``"thinking"`` or ``"answering"`` with ``reasoning=True`` (where the budget
    ran out), else None."""

    def __init__(self, message: str, partial: str = "", phase: str | None = None) -> None:
        super().__init__(message)
        self.partial = partial
        self.phase = phase


class SchemaValidationError(StructoutError):
    """The grammar was satisfied but validation (e.g. a Pydantic validator) failed."""

    def __init__(self, message: str, text: str = "", errors: Sequence[Any] | None = None) -> None:
        super().__init__(message)
        self.text = text
        self.errors = list(errors or [])
