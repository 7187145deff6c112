"""Partial types: ``Partial[T]`` is ``T`` with every field optional, for objects under construction.

``Partial[T]`` (a runtime type, built once per ``T``) is what :meth:`structout.Model.stream` with
``partial=True`` validates each snapshot against:

* a Pydantic model or a dataclass becomes a Pydantic model of the same field names and aliases,
  every field ``Optional[Partial[field type]] = None``, without the field constraints or
  validators (a prefix of a valid object need not satisfy them: ``min_length``, a pattern, a
  ``model_validator``);
* ``list[X]``/``set[X]``/``tuple[X, ...]`` become ``list[Partial[X]]`` (the last item may be
  partial), fixed tuples ``list[Any]``, ``dict[K, V]`` becomes ``dict[K, Partial[V]]``, a
  TypedDict a ``total=False`` TypedDict of partial fields;
* unions map member by member, ``Annotated[X, ...]`` drops its metadata, and everything else
  (``str``, numbers, ``Literal``, enums, ``datetime``, ...) stays itself.

To a type checker ``Partial[T]`` is an opaque generic whose attributes and items are ``Any``
(Python's types cannot say "T with optional fields").
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import typing
from typing import TYPE_CHECKING, Any, Generic, Optional, TypeVar, Union

__all__ = ["Partial", "partial_adapter", "partial_type"]

T = TypeVar("T")

if TYPE_CHECKING:  # pragma: no cover

    class Partial(Generic[T]):
        """``T`` under construction: every field optional (see the module docs)."""

        def __getattr__(self, name: str) -> Any: ...
        def __getitem__(self, key: Any) -> Any: ...

else:

    class Partial:
        """``Partial[T]``: the partial type of ``T`` (see the module docs)."""

        def __class_getitem__(cls, tp: Any) -> Any:
            return partial_type(tp)


_lock = threading.RLock()
_cache: dict[Any, Any] = {}
_adapters: dict[Any, Any] = {}
#: Partial models by class name (the namespace their recursive references resolve in).
_by_name: dict[str, Any] = {}


def partial_type(tp: Any) -> Any:
    """The partial type of ``tp`` (cached per type; see the module docs)."""
    with _lock:
        try:
            hit = _cache.get(tp)
        except TypeError:  # unhashable metadata
            return _partial(tp, {})
        if hit is None:
            hit = _partial(tp, {})
            _cache[tp] = hit
        return hit


def partial_adapter(tp: Any) -> Any:
    """A ``pydantic.TypeAdapter`` of ``Optional[Partial[tp]]`` (cached per type)."""
    from pydantic import TypeAdapter

    with _lock:
        try:
            hit = _adapters.get(tp)
        except TypeError:
            return TypeAdapter(Optional[partial_type(tp)])
        if hit is None:
            hit = TypeAdapter(Optional[partial_type(tp)])
            _adapters[tp] = hit
        return hit


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")


def _partial(tp: Any, building: dict[Any, str]) -> Any:
    """``tp``'s partial type; ``building``: the classes being converted (recursive references)."""
    from pydantic import BaseModel

    if tp in building:
        return building[tp]  # a forward reference, resolved by model_rebuild
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _partial(args[0], building)
    if origin is Union or (sys.version_info >= (3, 10) and _is_union_type(tp)):
        return Union[tuple(_partial(a, building) for a in args)]
    if origin in (list, set, frozenset) or _is_abc(origin, ("Sequence", "MutableSequence", "Set")):
        item = _partial(args[0], building) if args else Any
        return list[item]  # type: ignore[valid-type]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return list[_partial(args[0], building)]  # type: ignore[misc]
        return list[Any]
    if origin is dict or _is_abc(origin, ("Mapping", "MutableMapping")):
        key = args[0] if args else str
        value = _partial(args[1], building) if len(args) > 1 else Any
        return dict[key, value]  # type: ignore[valid-type]
    if isinstance(tp, type) and tp in _cache:
        return _cache[tp]
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        fields = {
            name: (f.annotation, f.alias, f.serialization_alias)
            for name, f in tp.model_fields.items()
        }
        return _partial_model(tp, fields, building)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp, include_extras=True)
        fields = {f.name: (hints.get(f.name, Any), None, None) for f in dataclasses.fields(tp)}
        return _partial_model(tp, fields, building)
    if _is_typeddict(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        from typing_extensions import TypedDict

        # Partial field types may refer to models being built: no forward references here.
        members = {k: _strip_required(v, building) for k, v in hints.items()}
        return TypedDict(f"Partial{tp.__name__}", members, total=False)  # type: ignore[operator]
    return tp


def _strip_required(tp: Any, building: dict[Any, str]) -> Any:
    origin = typing.get_origin(tp)
    name = getattr(origin, "__name__", getattr(origin, "_name", ""))
    if name in ("Required", "NotRequired", "ReadOnly"):
        tp = typing.get_args(tp)[0]
    return Optional[_partial(tp, building)]


def _is_union_type(tp: Any) -> bool:
    import types

    return isinstance(tp, types.UnionType)


def _is_abc(origin: Any, names: tuple[str, ...]) -> bool:
    import collections.abc

    return any(origin is getattr(collections.abc, n) for n in names)


def _partial_model(
    tp: type, fields: dict[str, tuple[Any, str | None, str | None]], building: dict[Any, str]
) -> Any:
    from pydantic import BaseModel, ConfigDict, Field, create_model

    name = f"Partial{tp.__name__}"
    building[tp] = name
    try:
        spec: dict[str, Any] = {
            field: (
                Optional[_partial(annotation, building)],
                Field(default=None, alias=alias, serialization_alias=ser_alias),
            )
            for field, (annotation, alias, ser_alias) in fields.items()
        }
    finally:
        del building[tp]

    class _Base(BaseModel):
        model_config = ConfigDict(extra="ignore", populate_by_name=True)

    model: Any = create_model(name, __base__=_Base, __module__=__name__, **spec)
    model.__doc__ = f"{tp.__name__} under construction: every field optional."
    _by_name[name] = model
    if not building:  # the outermost model: resolve the recursive references
        for m in list(_by_name.values()):
            if not m.__pydantic_complete__:
                m.model_rebuild(_types_namespace=dict(_by_name))
    _cache[tp] = model
    return model
