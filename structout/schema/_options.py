"""The translator's options, in one place: layout, strictness and work limits.

Every caller (``to_kbnf``, ``translate``, the schema cache's keys, the engine's common-shape
fast path) reads them from :class:`TranslatorOptions`; :class:`structout.Limits` sets the limit
fields by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

from ._ir import MAX_WORK

__all__ = [
    "DEFAULT_MAX_NESTING",
    "DEFAULT_MAX_PATTERN_LENGTH",
    "DEFAULT_MAX_SCHEMA_DEPTH",
    "DEFAULT_MAX_SCHEMA_WORK",
    "DEFAULT_MAX_SUBSCHEMAS",
    "DEFAULT_MAX_WHITESPACE",
    "PROPERTY_ORDERS",
    "TranslatorOptions",
]

DEFAULT_MAX_WHITESPACE = 32
DEFAULT_MAX_NESTING = 32
DEFAULT_MAX_SCHEMA_DEPTH = 256
DEFAULT_MAX_SUBSCHEMAS = 100_000
DEFAULT_MAX_PATTERN_LENGTH = 16_384
DEFAULT_MAX_SCHEMA_WORK = MAX_WORK
#: Values of ``property_order``: the schema's order, or any order.
PROPERTY_ORDERS = ("schema", "any")

#: Limits that must be positive integers.
_POSITIVE = ("max_whitespace", "max_schema_depth", "max_subschemas", "max_pattern_length",
             "max_schema_work")  # fmt: skip


@dataclass(frozen=True)
class TranslatorOptions:
    """How a JSON Schema becomes KBNF. Invalid values raise ``ValueError`` when constructed.

    Attributes:
        whitespace: ``"compact"`` (``{"a": 1, "b": [1, 2]}``) or ``"flexible"`` (any JSON
            whitespace, runs of at most ``max_whitespace`` characters).
        indent: pretty-printed like ``json.dumps(value, indent=indent)`` (overrides
            ``whitespace``); nesting is limited to ``max_nesting`` levels.
        lenient: approximate unsupported keywords with a warning instead of raising.
        by_alias: for Python types, use field aliases as property names.
        registry: extra schema documents by URI, for ``$ref`` to other documents.
        max_schema_depth, max_subschemas: bounds on the work (``LimitExceededError`` beyond).
        max_pattern_length: longest ``pattern`` / ``patternProperties`` regex, in characters.
        max_schema_work: steps of combining subschemas (``allOf``/``anyOf``/``oneOf``
            intersections and unions) before the schema counts as too complex.
        max_number_length: accept only numbers of at most this many characters (``None`` or 0:
            any length). A sound subset meant for generation, where a small model may write
            digits until its token budget runs out; :class:`structout.Limits` sets it by default.
        property_order: ``"schema"`` (objects write their properties in the schema's order) or
            ``"any"`` (in any order, each at most once; the engine tracks the keys read, with
            any number of named properties, and counts them for ``minProperties``/
            ``maxProperties``; see docs/json_schema.md). Objects with constraints on the other
            keys' existence (``not`` over ``required``) keep the schema's order.
    """

    whitespace: str = "compact"
    indent: int | None = None
    lenient: bool = False
    by_alias: bool = True
    registry: Mapping[str, Any] | None = None
    max_whitespace: int = DEFAULT_MAX_WHITESPACE
    max_nesting: int = DEFAULT_MAX_NESTING
    max_schema_depth: int = DEFAULT_MAX_SCHEMA_DEPTH
    max_subschemas: int = DEFAULT_MAX_SUBSCHEMAS
    max_pattern_length: int = DEFAULT_MAX_PATTERN_LENGTH
    max_schema_work: int = DEFAULT_MAX_SCHEMA_WORK
    max_number_length: int | None = None
    property_order: str = "schema"

    def __post_init__(self) -> None:
        if self.whitespace not in ("compact", "flexible"):
            raise ValueError(f"whitespace must be 'compact' or 'flexible', got {self.whitespace!r}")
        if self.indent is not None and (not _is_int(self.indent) or self.indent < 0):
            raise ValueError("indent must be a non-negative integer or None")
        for name in _POSITIVE:
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        n = self.max_number_length
        if n is not None and (not _is_int(n) or n < 0):
            raise ValueError(f"max_number_length must be a non-negative integer or None, got {n!r}")
        if self.property_order not in PROPERTY_ORDERS:
            raise ValueError(
                f"property_order must be 'schema' or 'any', got {self.property_order!r}"
            )

    def common_shape_applies(self) -> bool:
        """The engine's common-shape translator covers these options: the default layout and
        limits, any number bound (it prints the same text as the Python translator)."""
        n = self.max_number_length
        return (n is None or n < 2**32) and _layout_and_limits(self) == _DEFAULT_LAYOUT_AND_LIMITS

    def key_fields(self) -> dict[str, Any]:
        """The fields as a dict for cache keys (``registry`` only when set)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.registry is None:
            del out["registry"]
        return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Every field but the two the common-shape translator takes any value of (``by_alias`` does not
#: apply to a dict schema; it handles ``max_number_length`` itself).
_layout_and_limits = attrgetter(
    *(f.name for f in fields(TranslatorOptions) if f.name not in ("by_alias", "max_number_length"))
)
_DEFAULT_LAYOUT_AND_LIMITS = _layout_and_limits(TranslatorOptions())
