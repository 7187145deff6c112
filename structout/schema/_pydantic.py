"""JSON Schemas of Python types that describe what the *installed* Pydantic validator accepts.

Pydantic's printed JSON Schema is documentation; its validator is the contract a typed result must
meet. Where the two differ between Pydantic releases, the translator would follow the printed
schema and could accept documents the validator refuses. For example ``Decimal``: pydantic 2.13
prints ``anyOf: [number, string with a pattern]`` (the pattern ignores ``ge``/``le``), 2.14 prints
``anyOf: [number, string]`` with no pattern at all, while both validators refuse ``"+."``,
``"2020-01-01"`` and, for ``Field(max_digits=8, decimal_places=2)``, ``1.234``.

:class:`SoundJsonSchema` is the schema generator the translator uses for Python types. It
overrides the printed form of such types with a sound subset that every supported Pydantic
version's validator accepts (checked by tests/test_schema_pydantic.py against the installed one).
"""

from __future__ import annotations

from typing import Any

__all__ = ["decimal_json_schema", "sound_schema_generator"]

#: A decimal string every Pydantic 2 validator accepts: optional sign, ASCII digits with at most
#: one point and at least one digit (no exponent, no spaces, no underscores: sound, not complete).
_DECIMAL_TEXT = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$"

_BOUNDS = ("multiple_of", "le", "ge", "lt", "gt")


def _digits_pattern(max_digits: int | None, decimal_places: int | None) -> str:
    """Decimal strings with at most ``max_digits`` digits and ``decimal_places`` places, counted
    as Pydantic does (a leading ``0.`` and trailing zeros of the fraction count as places only).

    Integer parts have no leading zeros, fractions no trailing zeros beyond the places, so the
    digits written are exactly the digits counted.
    """
    places = decimal_places
    if max_digits is not None:
        whole = max_digits - (places or 0) if places is not None else max_digits
        whole = max(whole, 0)
        places = min(places, max_digits) if places is not None else max_digits
    else:
        whole = None
    integer = (
        "0"
        if whole == 0
        else "(0|[1-9][0-9]*)"
        if whole is None
        else f"(0|[1-9][0-9]{{0,{whole - 1}}})"
    )
    if max_digits is not None and decimal_places is None:
        # Places share the digit budget with the integer part: keep fractions behind a zero.
        return rf"^[+-]?({integer}|0\.[0-9]{{1,{max_digits}}})$"
    if places == 0:
        return rf"^[+-]?{integer}$"
    if whole == 0:
        # No whole digits allowed: even "0" counts one (Pydantic refuses it); a fraction is needed.
        return rf"^[+-]?0?\.[0-9]{{1,{places}}}$"
    return rf"^[+-]?{integer}(\.[0-9]{{1,{places}}})?$"


def decimal_json_schema(core: dict[str, Any], number_schema: dict[str, Any]) -> dict[str, Any]:
    """The sound JSON Schema of a ``Decimal`` core schema; ``number_schema`` is Pydantic's own
    schema of the number form (with the bounds it prints).

    * Without constraints: a JSON number, or a string of :data:`_DECIMAL_TEXT`.
    * Bounds (``ge``/``le``/``gt``/``lt``/``multiple_of``): the number form only (a string's value
      cannot be compared by a grammar).
    * Digit limits (``max_digits``/``decimal_places``): the string form only, with the digits
      counted by its pattern (a JSON number's digits depend on its exponent).
    * Both: integers within the bounds and the digit budget (the number form cannot count
      digits, the string form cannot compare values).
    """
    max_digits = core.get("max_digits")
    decimal_places = core.get("decimal_places")
    bounded = any(core.get(k) is not None for k in _BOUNDS)
    digits = max_digits is not None or decimal_places is not None
    if not digits:
        text = {"type": "string", "pattern": _DECIMAL_TEXT}
        return number_schema if bounded else {"anyOf": [number_schema, text]}
    pattern = {"type": "string", "pattern": _digits_pattern(max_digits, decimal_places)}
    if not bounded:
        return pattern
    # Bounds and digit limits together: integers within both (a sound subset).
    whole = max_digits - (decimal_places or 0) if max_digits is not None else None
    integer = dict(number_schema, type="integer")
    if whole is not None:
        limit = 10 ** max(whole, 0) - 1
        integer["maximum"] = min(integer.get("maximum", limit), limit)
        integer["minimum"] = max(integer.get("minimum", -limit), -limit)
    return integer


def sound_schema_generator() -> type[Any]:
    """Pydantic's ``GenerateJsonSchema`` with :func:`decimal_json_schema` for ``Decimal``."""
    from pydantic.json_schema import GenerateJsonSchema

    class SoundJsonSchema(GenerateJsonSchema):
        def decimal_schema(self, schema: Any) -> Any:
            printed = super().decimal_schema(schema)
            if self.mode != "validation" or "anyOf" not in printed:
                return printed
            number = next(
                (s for s in printed["anyOf"] if isinstance(s, dict) and s.get("type") == "number"),
                {"type": "number"},
            )
            return decimal_json_schema(dict(schema), dict(number))

    return SoundJsonSchema
