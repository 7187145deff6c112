"""Generation targets: what users pass as ``schema=`` resolved to how to constrain, describe and
parse the output.

Invariant: a :class:`Target`'s ``parse`` accepts exactly the texts its grammar can complete and
returns the value ``generate`` hands back (``T`` for a ``type[T]``); its grammar is either the
given KBNF text or the translation of ``json_schema`` (made later, through the compile cache).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar, overload

from structout.errors import SchemaValidationError, UnsupportedSchemaError
from structout.instructions import schema_instruction
from structout.lru import LRU

__all__ = ["KBNF", "JsonSchema", "Target", "resolve_schema"]

T = TypeVar("T")

#: A JSON Schema document, as ``json.loads`` returns it.
JsonSchema = dict[str, Any]


@dataclass(frozen=True)
class KBNF:
    """KBNF grammar text used as a generation target; ``generate`` returns the matched text.

    >>> KBNF("start ::= 'yes' | 'no' ;")
    """

    text: str
    #: Shown to the model as an instruction (the grammar itself is not); ``None`` shows nothing.
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"KBNF text must be str, got {type(self.text).__name__}")


@dataclass
class Target(Generic[T]):
    """A resolved generation target: how to constrain, how to describe, how to parse."""

    kind: str  # "type" | "json_schema" | "grammar" | "text"
    #: JSON Schema (``type``/``json_schema``), else None.
    json_schema: JsonSchema | None
    #: KBNF text for ``grammar``; for schemas it comes from the translator via the cache.
    kbnf: str | None
    parse: Callable[[str], T]
    #: Instruction appended to the prompt so the model sees fields and descriptions.
    instruction: str | None


#: Targets of Python types, by type (deriving a type's JSON Schema takes milliseconds).
_type_targets: LRU[Any, Target[Any]] = LRU(512)


def _text(text: str) -> str:
    return text


@overload
def resolve_schema(schema: None) -> Target[str]: ...
@overload
def resolve_schema(schema: KBNF) -> Target[str]: ...
@overload
def resolve_schema(schema: type[T]) -> Target[T]: ...
@overload
def resolve_schema(schema: JsonSchema) -> Target[Any]: ...
@overload
def resolve_schema(schema: Any) -> Target[Any]: ...
def resolve_schema(schema: Any) -> Target[Any]:
    """Turn what users pass as ``schema=`` into a :class:`Target`.

    * ``None`` → unconstrained text.
    * :class:`KBNF` → KBNF text, returns the text.
    * ``dict`` → a JSON Schema; returns the parsed JSON value (checked with ``jsonschema`` when
      it is installed).
    * anything ``pydantic.TypeAdapter`` accepts (BaseModel subclasses, dataclasses, TypedDicts,
      ``Literal[...]``, ``list[...]``, ...) → its JSON Schema; returns a validated instance.
    """
    if schema is None:
        return Target("text", None, None, _text, None)
    if isinstance(schema, KBNF):
        return Target("grammar", None, schema.text, _text, schema.description or None)
    if isinstance(schema, str):
        raise TypeError(
            "schema= got a str; wrap KBNF grammar text in structout.KBNF(...), or pass a JSON "
            "Schema as a dict (json.loads(...)), or a Python type"
        )
    if isinstance(schema, dict):
        return _json_schema_target(schema)
    try:
        cached = _type_targets.get(schema)
    except TypeError:  # unhashable annotation (e.g. Annotated with unhashable metadata)
        cached = None
    if cached is not None:
        return cached
    target = _type_target(schema)
    with contextlib.suppress(TypeError):
        _type_targets.put(schema, target)
    return target


def _json_schema_target(schema: JsonSchema) -> Target[Any]:
    validator: Any | None = None
    try:
        import jsonschema
    except ImportError:  # optional: the grammar already enforces what it can express
        jsonschema = None
    if jsonschema is not None:
        validator = jsonschema.validators.validator_for(schema)(schema)

    def parse(text: str) -> Any:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise SchemaValidationError(
                f"generated text is not valid JSON: {exc}", text=text, errors=[str(exc)]
            ) from exc
        if validator is not None:
            errors = [e.message for e in validator.iter_errors(value)]
            if errors:
                raise SchemaValidationError(
                    "generated JSON does not validate against the schema: " + "; ".join(errors),
                    text=text,
                    errors=errors,
                )
        return value

    return Target("json_schema", schema, None, parse, schema_instruction(schema))


def _type_target(tp: Any) -> Target[Any]:
    try:
        from pydantic import TypeAdapter, ValidationError
    except ImportError as exc:  # pragma: no cover - pydantic is a dependency of typed schemas
        raise ImportError("typed schemas need pydantic >= 2: pip install pydantic") from exc
    from structout.schema import json_schema_of

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(tp)
        # The translator's JSON Schema: objects of models, dataclasses and TypedDicts closed with
        # ``additionalProperties: false``.
        schema = json_schema_of(tp)[0]
    except Exception as exc:
        raise UnsupportedSchemaError(
            f"cannot derive a JSON Schema from {tp!r}: {exc}", keyword="type", pointer=""
        ) from exc

    def parse(text: str) -> Any:
        try:
            return adapter.validate_json(text)
        except ValidationError as exc:
            raise SchemaValidationError(
                f"generated output failed validation for {getattr(tp, '__name__', tp)}: "
                f"{exc.error_count()} error(s): {exc}",
                text=text,
                errors=exc.errors(),
            ) from exc

    return Target("type", schema, None, parse, schema_instruction(schema))
