"""JSON Schema and Python types → KBNF grammars whose language is exactly the valid documents.

``to_kbnf(schema_or_type, ...)`` returns KBNF text (start rule ``start``) accepting JSON texts in
the chosen layout. The grammar never accepts an invalid document; where a keyword cannot be
enforced exactly, :class:`structout.errors.UnsupportedSchemaError` is raised (or, with
``lenient=True``, a :class:`SchemaApproximationWarning` is issued and the keyword is
approximated). See ``docs/json_schema.md`` for the keyword coverage.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import sys
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from .._engine import translate_common_schema
from ..errors import LimitExceededError, SchemaError, UnsupportedSchemaError
from . import _compile as cp
from . import _documents as docs
from ._emit import Emitter, Layout
from ._ir import MAX_RECURSION_DEPTH, Node, Unsupported
from ._options import DEFAULT_MAX_SCHEMA_DEPTH, TranslatorOptions
from ._pydantic import sound_schema_generator

__all__ = [
    "SchemaApproximationWarning",
    "SchemaTranslation",
    "TranslatorOptions",
    "canonical_schema_key",
    "json_schema_of",
    "to_kbnf",
    "translate",
]

RECURSION_LIMIT = 12_000


class SchemaApproximationWarning(UserWarning):
    """``lenient=True``: a keyword could not be enforced exactly and was approximated."""


class SchemaSubsetWarning(UserWarning):
    """The grammar is exact (never accepts an invalid document) but refuses some valid ones."""


def json_schema_of(schema_or_type: Any, *, by_alias: bool = True) -> tuple[Any, bool]:
    """The JSON Schema for a schema dict/bool or a Python type; and whether it came from Python.

    Python types go through ``pydantic.TypeAdapter(T).json_schema(mode="validation")``; object
    schemas generated for models, dataclasses and TypedDicts get ``additionalProperties: false``
    unless the type allows extra keys (Pydantic then says ``additionalProperties: true``).
    """
    if isinstance(schema_or_type, (dict, bool)):
        return schema_or_type, False
    if isinstance(schema_or_type, str):
        try:
            return json.loads(schema_or_type), False
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema text is not valid JSON: {e}", "") from None
        except RecursionError:
            raise LimitExceededError(
                "schema text nested too deeply for the JSON parser (Python's recursion limit, "
                f"{sys.getrecursionlimit()}); hint: a schema that deep exceeds max_schema_depth "
                f"(default {DEFAULT_MAX_SCHEMA_DEPTH}) anyway: flatten it with $defs and $ref"
            ) from None
    try:
        from pydantic import TypeAdapter
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SchemaError(
            "translating Python types needs pydantic>=2 (pip install pydantic)", ""
        ) from e
    # Pydantic walks nested types recursively: allow it the translator's recursion budget
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))
    try:
        schema = TypeAdapter(schema_or_type).json_schema(
            by_alias=by_alias, mode="validation", schema_generator=sound_schema_generator()
        )
    except RecursionError:
        raise LimitExceededError(
            f"the type {_type_name(schema_or_type)} is nested too deeply for Pydantic to "
            f"describe (Python recursion limit {RECURSION_LIMIT}); hint: flatten the type or "
            "use recursive models (self-references stay finite)"
        ) from None
    except Exception as e:
        raise SchemaError(
            f"cannot build a JSON Schema for {_type_name(schema_or_type)}: {e}", ""
        ) from e
    finally:
        sys.setrecursionlimit(old_limit)
    _adapt_python_schema(schema)
    return schema, True


def _type_name(tp: Any) -> str:
    """A short description of a Python type for messages (deep generics have huge reprs)."""
    try:
        text = repr(tp)
    except RecursionError:
        text = getattr(tp, "__qualname__", None) or type(tp).__name__
    return text if len(text) <= 200 else text[:100] + "…" + text[-60:]


def _adapt_python_schema(node: Any) -> None:
    """Make a Pydantic-generated schema describe what the Python type accepts and produces.

    * Object schemas of models/dataclasses/TypedDicts without an ``additionalProperties``
      (extra keys ignored on validation) get ``additionalProperties: false`` so the grammar
      never generates keys the type would drop.
    * ``uniqueItems`` (``set``/``frozenset``) is dropped: Pydantic accepts duplicates on input
      and removes them, so every list of valid items validates; a grammar cannot enforce
      uniqueness of arbitrary items.
    """
    stack = [node]  # iterative: generated schemas may be deep
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        node.pop("uniqueItems", None)
        if (
            isinstance(node.get("properties"), dict)
            and "additionalProperties" not in node
            and node.get("type", "object") == "object"
        ):
            node["additionalProperties"] = False
        for kw in docs._SCHEMA_MAP_KWS:
            sub = node.get(kw)
            if isinstance(sub, dict):
                stack.extend(sub.values())
        for kw in docs._SCHEMA_KWS:
            stack.append(node.get(kw))
        for kw in docs._SCHEMA_LIST_KWS:
            sub = node.get(kw)
            if isinstance(sub, list):
                stack.extend(sub)


class SchemaTranslation:
    """The result of translating one schema: KBNF text plus helpers for tests and tools."""

    def __init__(
        self, kbnf: str, root: Node, compiler: cp.Compiler, layout: Layout, schema: Any
    ) -> None:
        self.kbnf = kbnf
        self.root = root
        self._compiler = compiler
        self.layout = layout
        self.schema = schema

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` is valid under the translated schema (exact IR semantics)."""
        return self._compiler.alg.matches(self.root, value)

    def dumps(self, value: Any) -> str:
        """Serialize ``value`` in the grammar's layout, object keys in the grammar's order."""
        return self.layout.dumps(self._order(self.root, value, 0))

    def _order(self, node: Node, value: Any, depth: int) -> Any:
        alg = self._compiler.alg
        if depth > MAX_RECURSION_DEPTH or not isinstance(value, (dict, list)):
            return value
        try:
            alts = alg.alternatives(node)
        except Unsupported:
            return value
        kind = "obj" if isinstance(value, dict) else "arr"
        cands = [a for a in alts if a.kind == kind]
        if not cands:
            return value
        chosen = next((a for a in cands if _matches_safely(alg, a, value)), cands[0])
        if isinstance(value, list):
            prefix, rest = chosen.args[0], chosen.args[1]
            return [
                self._order(prefix[i] if i < len(prefix) else rest, v, depth + 1)
                for i, v in enumerate(value)
            ]
        props, req, tail, _mn, _mx, deps, _ex, _ev = chosen.args
        order = [k for k, _ in props]
        for k in list(req) + [k for k, ds in deps] + [d for _, ds in deps for d in ds]:
            if k not in order:
                order.append(k)
        named = dict(props)
        out: dict[str, Any] = {}
        for k in order:
            if k in value:
                sub = named[k] if k in named else alg.tail_value(tail, k)
                out[k] = self._order(sub, value[k], depth + 1)
        for k, v in value.items():
            if k not in out:
                out[k] = self._order(alg.tail_value(tail, k), v, depth + 1)
        return out


def _matches_safely(alg: Any, node: Node, value: Any) -> bool:
    """IR matching for layout decisions; values it cannot check count as non-matching."""
    try:
        return bool(alg.matches(node, value))
    except (Unsupported, TypeError, ValueError):
        return False


def translate(
    schema_or_type: Any, options: TranslatorOptions | None = None, **keywords: Any
) -> SchemaTranslation:
    """Translate and return a :class:`SchemaTranslation`; ``options`` or the same fields as
    keywords (see :class:`TranslatorOptions` and :func:`to_kbnf`)."""
    options = _options(options, keywords)

    def warn(message: str, keyword: str, pointer: str) -> None:
        warnings.warn(
            f"{message} (keyword {keyword!r} at {pointer or '/'}); approximated because "
            "lenient=True: the grammar may accept some invalid documents",
            SchemaApproximationWarning,
            stacklevel=4,
        )

    o = options
    layout = Layout(o.whitespace, o.indent, o.max_whitespace)
    schema, _from_python = json_schema_of(schema_or_type, by_alias=o.by_alias)
    reg, base = docs.mapping_registry(schema, o.registry, o.max_subschemas)

    compiler = cp.Compiler(
        reg,
        lenient=o.lenient,
        max_depth=o.max_schema_depth,
        warn=warn,
        max_pattern_length=o.max_pattern_length,
        max_work=o.max_schema_work,
    )

    def subset_warn(message: str, keyword: str, pointer: str) -> None:
        warnings.warn(
            f"{message} (keyword {keyword!r} at {pointer or '/'})",
            SchemaSubsetWarning,
            stacklevel=4,
        )

    compiler.subset_warn = subset_warn

    def on_unsupported(message: str, keyword: str, node: Node | None) -> None:
        pointer = compiler.origin.get(node, "") if node is not None else ""
        if not o.lenient:
            raise UnsupportedSchemaError(message, keyword, pointer or "/")
        warn(message, keyword, pointer)

    # Regex and schema trees are walked recursively; long property names and deep schemas need
    # more than the default limit (the work itself is bounded by the limits above).
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))
    # (no garbage collection while the translation allocates: see _collector_paused)
    with _collector_paused():
        emitter: Emitter | None = None
        try:
            root = compiler.compile_root(base)
            emitter = Emitter(
                compiler.alg,
                layout,
                o.max_nesting,
                on_unsupported,
                compiler.is_empty,
                on_subset=lambda m, k, n: subset_warn(
                    m, k, compiler.origin.get(n, "") if n else ""
                ),
                max_schema_depth=o.max_schema_depth,
                pointer_of=compiler.origin.get,
                max_number_length=o.max_number_length or None,
                property_order=o.property_order,
            )
            emitter.emit_start(root)
            text = emitter.render()
        except cp._Located as e:
            raise UnsupportedSchemaError(e.err.message, e.err.keyword, e.pointer or "/") from None
        except Unsupported as e:
            raise UnsupportedSchemaError(e.message, e.keyword, "/") from None
        except RecursionError:
            # Depth is bounded by max_schema_depth and the regex budgets; this is the backstop
            # (e.g. a raised max_schema_depth, or a pattern/key nested thousands of levels).
            where = emitter.recursion_pointer if emitter is not None else None
            if where is None:
                where = compiler.current
            raise LimitExceededError(
                "schema, pattern or property name nested too deeply to translate (Python "
                f"recursion limit {RECURSION_LIMIT}) near {docs._short_pointer(where)}; hint: "
                f"max_schema_depth is {o.max_schema_depth}; keep it at or below the default "
                f"({DEFAULT_MAX_SCHEMA_DEPTH}) and split deeply nested patterns"
            ) from None
        finally:
            sys.setrecursionlimit(old_limit)
    return SchemaTranslation(text, root, compiler, layout, schema)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block (and resumed after it only if it
    ran before: a nested pause, or one in another thread, leaves that to the outer one).

    A large translation allocates hundreds of thousands of containers (ASTs, automata, rules)
    that live for a while and are then freed by reference counting (the translator makes no
    reference cycles). While they live, the collector, counting allocations, runs young
    collections over them and promotes them, which sets off collections of the whole heap:
    their cost grows with the caller's heap, not with the schema (a 40 ms full collection in a
    400-schema benchmark process holding a tokenizer, inside a 130 ms translation)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def translated_kbnf(schema_or_type: Any, options: TranslatorOptions) -> str:
    """``translate(schema_or_type, options).kbnf``, the translation's other objects freed before
    the garbage collector resumes (so that its next run does not walk them first)."""
    with _collector_paused():
        return translate(schema_or_type, options).kbnf


def to_kbnf(schema_or_type: Any, options: TranslatorOptions | None = None, **keywords: Any) -> str:
    """KBNF (start rule ``start``) accepting exactly the valid documents in the chosen layout.

    Args:
        schema_or_type: a JSON Schema (dict, bool or JSON text), or any Python type Pydantic
            can describe (models, dataclasses, TypedDict, ``list[int]``, ``Literal[...]``...).
        options: a :class:`TranslatorOptions`; or its fields as keywords (``whitespace="flexible"``,
            ``indent=2``, ``lenient=True``, ``max_schema_depth=64``, ...), not both.

    Raises:
        SchemaError: the schema is invalid (bad keyword values, unresolvable ``$ref``).
        UnsupportedSchemaError: a keyword cannot be enforced exactly (strict mode).
        LimitExceededError: the schema exceeds a size or complexity limit.
    """
    options = _options(options, keywords)
    text = common_shape_kbnf(schema_or_type, options)
    return text if text is not None else translated_kbnf(schema_or_type, options)


def common_shape_kbnf(schema: Any, options: TranslatorOptions) -> str | None:
    """The KBNF :func:`to_kbnf` returns, when the engine translates the schema: the common shape
    (typed properties, arrays, strings, numbers, small enums), to the Python translator's text
    byte for byte (see engine_rs/src/schema), in tens of microseconds; else None."""
    if isinstance(schema, dict) and options.common_shape_applies():
        return translate_common_schema(schema, options.max_number_length or None)
    return None


def _options(options: TranslatorOptions | None, keywords: Mapping[str, Any]) -> TranslatorOptions:
    if options is None:
        return TranslatorOptions(**keywords)
    if keywords:
        raise TypeError("pass translator options as a TranslatorOptions or as keywords, not both")
    return options


def canonical_schema_key(schema_or_type: Any, **options: Any) -> str:
    """A stable hash of the schema's JSON (keys in their order, which the translation follows),
    the options (:class:`TranslatorOptions` fields; defaults filled in) and the structout
    version."""
    import structout

    by_alias = options.get("by_alias", True)
    schema, _ = json_schema_of(schema_or_type, by_alias=by_alias)
    payload = canonical_json(
        {
            "schema": schema,
            "options": TranslatorOptions(**options).key_fields(),
            "version": getattr(structout, "__version__", "0"),
            "translator": _TRANSLATOR_REVISION,
        }
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _json_key(k: Any) -> str:
    """An object key as ``json.dumps`` converts it."""
    if isinstance(k, str):
        return k
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, (int, float)):
        return json.dumps(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


# Keys keep their order: the translator's output depends on it (properties are emitted in the
# schema's order), so schemas that differ only in key order must not share a cache key.
_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, default=repr)


def canonical_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=True, default=repr)`` (keys in
    their order), also for values deeper than the interpreter's recursion limit."""
    try:
        return _CANONICAL.encode(value)
    except RecursionError:
        return _canonical_json_iterative(value)


def _canonical_json_iterative(value: Any) -> str:
    """:func:`canonical_json` without recursion (values of any depth; the same text)."""
    out: list[str] = []
    text, leave = object(), object()  # markers of work items: (text, "..."), (leave, id)
    active: set[int] = set()  # containers being written (a cycle raises, as in json.dumps)
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if type(v) is tuple and len(v) == 2 and (v[0] is text or v[0] is leave):
            if v[0] is text:
                out.append(v[1])
            else:
                active.discard(v[1])
            continue
        if isinstance(v, (dict, list, tuple)):
            if id(v) in active:
                raise ValueError("Circular reference detected")
            active.add(id(v))
            parts: list[Any]
            if isinstance(v, dict):
                parts = [(text, "{")]
                for i, (k, x) in enumerate(v.items()):
                    key = json.dumps(_json_key(k), ensure_ascii=True)
                    parts.append((text, ("," if i else "") + key + ":"))
                    parts.append(x)
                parts.append((text, "}"))
            else:
                parts = [(text, "[")]
                for i, x in enumerate(v):
                    if i:
                        parts.append((text, ","))
                    parts.append(x)
                parts.append((text, "]"))
            parts.append((leave, id(v)))
            stack.extend(reversed(parts))
        else:
            out.append(json.dumps(v, ensure_ascii=True, default=repr))
    return "".join(out)


# Bump when the emitted grammar for an unchanged schema changes (invalidates caches).
_TRANSLATOR_REVISION = 8
