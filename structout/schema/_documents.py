"""JSON Schema documents: drafts, keywords, JSON pointers, URIs and the registry of (sub)schemas
that ``$ref``/``$id``/``$anchor`` resolve against. :mod:`._compile` compiles what this locates.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional
from urllib.parse import unquote, urldefrag, urljoin

from ..errors import LimitExceededError, SchemaError

DEFAULT_BASE = "urn:structout:root"

# Dynamic scope summary: sorted (dynamic anchor name, outermost resource declaring it) pairs.
Scope = tuple[tuple[str, str], ...]

# Keywords whose values are subschemas (used to index $id/$anchor and to walk documents).
_SCHEMA_MAP_KWS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_KWS = (
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "items",
    "contentSchema",
)
_SCHEMA_LIST_KWS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")

# The first draft that defines a keyword; in schemas declaring an older draft the keyword is
# unknown and therefore ignored (as validators for that draft do).
_MIN_DRAFT = {
    "const": 6,
    "contains": 6,
    "propertyNames": 6,
    "if": 7,
    "then": 7,
    "else": 7,
    "dependentRequired": 2019,
    "dependentSchemas": 2019,
    "unevaluatedProperties": 2019,
    "unevaluatedItems": 2019,
    "minContains": 2019,
    "maxContains": 2019,
    "$recursiveRef": 2019,
    "$dynamicRef": 2020,
    "prefixItems": 2020,
}


def _active(s: dict[str, Any], kw: str, draft: int) -> bool:
    return kw in s and draft >= _MIN_DRAFT.get(kw, 0)


_TYPE_NAMES = {"null", "boolean", "object", "array", "number", "string", "integer"}
#: Names other languages use for JSON Schema types (for the hint of an unknown type).
_TYPE_ALIASES = {
    "float": "number", "double": "number", "decimal": "number", "int": "integer", "long": "integer",
    "str": "string", "text": "string", "bool": "boolean", "dict": "object", "map": "object",
    "list": "array", "tuple": "array", "none": "null",
}  # fmt: skip


def _did_you_mean(name: str, valid: Iterable[str], aliases: Mapping[str, str] = {}) -> str:
    """``"; did you mean 'string'? (valid names: ...)"``: the closest valid names, then all."""
    names = sorted(valid)
    close = [aliases[name.lower()]] if name.lower() in aliases else []
    close = close or difflib.get_close_matches(name, names, n=2, cutoff=0.6)
    close = close or [v for v in names if v.lower() == name.lower()]
    guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"{guess} (valid names: {', '.join(names)})"


def defrag(uri: str) -> str:
    """``urldefrag(uri)[0]``, without parsing a URI that has no fragment (the usual case)."""
    return uri if type(uri) is str and "#" not in uri else urldefrag(uri)[0]


def json_pointer_escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _short_pointer(pointer: str, limit: int = 160) -> str:
    """A JSON pointer for messages: abbreviated in the middle when very long."""
    pointer = pointer.replace("|in-place", "") or "/"
    if len(pointer) <= limit:
        return pointer
    levels = pointer.count("/")
    return f"{pointer[: limit // 3]}…{pointer[-(2 * limit) // 3 :]} ({levels} tokens)"


def limit_error(message: str, limit: str, pointer: str) -> LimitExceededError:
    """A translator limit was hit: the error carries ``limit`` (its name) and ``pointer`` (the
    whole JSON pointer; messages abbreviate very long ones)."""
    err = LimitExceededError(message)
    err.limit = limit  # type: ignore[attr-defined]
    err.pointer = pointer.replace("|in-place", "") or "/"  # type: ignore[attr-defined]
    return err


def depth_error(max_depth: int, pointer: str) -> LimitExceededError:
    """``max_schema_depth`` exceeded at ``pointer`` (size fallbacks, e.g. in ``oneOf``, never
    absorb it)."""
    return limit_error(
        f"schema nesting deeper than {max_depth} levels at {_short_pointer(pointer)} "
        f"(limit max_schema_depth = {max_depth}); hint: raise it, e.g. "
        f"to_kbnf(schema, max_schema_depth={max(2 * max_depth, 1)}), to translate deeper schemas",
        "max_schema_depth",
        pointer,
    )


def _is_depth_error(e: BaseException) -> bool:
    return getattr(e, "limit", None) == "max_schema_depth"


def _draft_of(schema_uri: Any) -> int | None:
    if not isinstance(schema_uri, str):
        return None
    s = schema_uri
    if "draft-03" in s or "draft-02" in s or "draft-01" in s:
        return 3
    if "draft-04" in s:
        return 4
    if "draft-06" in s:
        return 6
    if "draft-07" in s:
        return 7
    if "2019-09" in s:
        return 2019
    if "2020-12" in s:
        return 2020
    return None


class Location:
    """A subschema: its value, pointer within its document, base URI and draft."""

    __slots__ = ("base", "doc_uri", "draft", "pointer", "resource_ptr", "value")

    def __init__(
        self, value: Any, doc_uri: str, pointer: str, base: str, draft: int, resource_ptr: str
    ) -> None:
        self.value = value
        self.doc_uri = doc_uri
        self.pointer = pointer
        self.base = base
        self.draft = draft
        self.resource_ptr = resource_ptr

    @property
    def key(self) -> str:
        return f"{self.doc_uri}#{self.pointer}"


#: Where a subschema sits: ``(parent, keyword, key)`` (``key`` None for a keyword holding one
#: subschema); the root is ``(None, its pointer, None)``.
_At = tuple[Any, str, Optional[str]]

#: Keywords whose values hold subschemas by name (``dependencies``: those that are schemas).
_MAP_KWS = frozenset([*_SCHEMA_MAP_KWS, "dependencies"])
#: The order ``Registry._index`` visits the children of a subschema in, by keyword: maps, then
#: single subschemas, then lists (``items`` as a single subschema; a list of them comes last).
_LIST_ITEMS_ORDER = {
    kw: i
    for i, kw in enumerate([*_SCHEMA_MAP_KWS, "dependencies", *_SCHEMA_KWS, *_SCHEMA_LIST_KWS])
}
_CHILD_ORDER = {**_LIST_ITEMS_ORDER, "items": len(_MAP_KWS) + _SCHEMA_KWS.index("items")}
_CHILD_KWS = frozenset(_CHILD_ORDER)

#: Keywords ``Registry._index_one`` reads: a subschema with none of them declares nothing.
_DECLARES = frozenset(["$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"])


def _pointer(at: _At) -> str:
    """The JSON pointer of a subschema's location."""
    steps: list[str] = []
    while at[0] is not None:
        parent, kw, key = at
        steps.append(kw if key is None else f"{kw}/{json_pointer_escape(key)}")
        at = parent
    return at[1] + "".join("/" + s for s in reversed(steps))


class Registry:
    """Documents by URI, with ``$id``/``$anchor``/``$dynamicAnchor`` indexes."""

    def __init__(self, max_subschemas: int) -> None:
        self.docs: dict[str, Any] = {}
        self.resources: dict[str, tuple[str, str, int]] = {}  # uri -> (doc_uri, pointer, draft)
        self.anchors: dict[str, tuple[str, str, int]] = {}  # uri#anchor -> location
        self.dynamic_anchors: dict[str, list[str]] = {}  # anchor name -> [uri#anchor]
        self.resource_dyn: dict[str, set[str]] = {}  # resource uri -> its dynamic anchors
        self.recursive_anchor = False
        self.count = 0
        self.max_subschemas = max_subschemas

    def add(self, uri: str, doc: Any, default_draft: int = 2020) -> None:
        uri = defrag(uri)
        if uri in self.docs:
            return
        self.docs[uri] = doc
        draft = default_draft
        if isinstance(doc, dict):
            draft = _draft_of(doc.get("$schema")) or default_draft
        self.resources.setdefault(uri, (uri, "", draft))
        self._index(doc, uri, "", uri, draft)

    def _index(self, root: Any, doc_uri: str, ptr: str, base: str, draft: int) -> None:
        """Index ``$id``/``$anchor``/``$dynamicAnchor`` of every subschema, depth first in
        document order (the first declaration of an anchor wins). Iterative: documents of any
        depth are walked without recursion (only ``max_subschemas`` bounds the work).

        A subschema's JSON pointer is kept as its parent's plus the step to it, and spelled out
        only for the few subschemas that declare an identifier (or hit the limit)."""
        root_at: _At = (None, ptr, None)
        stack: list[tuple[Any, _At, str, int]] = [(root, root_at, base, draft)]
        while stack:
            node, at, base, draft = stack.pop()
            self.count += 1
            if self.count > self.max_subschemas:
                raise LimitExceededError(
                    f"schema too large: more than {self.max_subschemas} subschemas "
                    f"(max_subschemas, at {_short_pointer(_pointer(at))}); raise max_subschemas "
                    "to translate larger schemas"
                )
            if not isinstance(node, dict):
                continue
            if _DECLARES.isdisjoint(node):
                node_base, node_draft = base, draft
            else:
                node_base, node_draft = self._index_one(node, doc_uri, _pointer(at), base, draft)
            base, draft = node_base, node_draft
            found = _CHILD_KWS.intersection(node)
            if not found:
                continue
            order = _LIST_ITEMS_ORDER if isinstance(node.get("items"), list) else _CHILD_ORDER
            children: list[tuple[Any, _At, str, int]] = []
            for kw in sorted(found, key=order.__getitem__) if len(found) > 1 else found:
                sub = node[kw]
                if kw in _MAP_KWS:
                    if isinstance(sub, dict):
                        for k, v in sub.items():
                            if kw != "dependencies" or isinstance(v, (dict, bool)):
                                children.append((v, (at, kw, k), base, draft))
                elif isinstance(sub, (dict, bool)):
                    if kw in _SCHEMA_KWS:
                        children.append((sub, (at, kw, None), base, draft))
                elif isinstance(sub, list) and kw in _SCHEMA_LIST_KWS:
                    for i, v in enumerate(sub):
                        children.append((v, (at, kw, str(i)), base, draft))
            stack.extend(reversed(children))

    def _index_one(
        self, node: dict[str, Any], doc_uri: str, ptr: str, base: str, draft: int
    ) -> tuple[str, int]:
        """Record one subschema's identifiers; its base URI and draft for its children."""
        d = _draft_of(node.get("$schema"))
        if d is not None:
            draft = d
        id_kw = "$id" if draft >= 6 else "id"
        ident = node.get(id_kw)
        if isinstance(ident, str) and not (draft >= 2019 and ident.startswith("#")):
            url, frag = urldefrag(ident)
            if url:
                base = _join(base, url)
                self.resources.setdefault(base, (doc_uri, ptr, draft))
            if frag and draft < 2019:
                self.anchors.setdefault(f"{base}#{frag}", (doc_uri, ptr, draft))
        elif isinstance(ident, str) and ident.startswith("#") and draft < 2019:
            self.anchors.setdefault(f"{base}{ident}", (doc_uri, ptr, draft))
        anchor = node.get("$anchor")
        if isinstance(anchor, str):
            self.anchors.setdefault(f"{base}#{anchor}", (doc_uri, ptr, draft))
        dyn = node.get("$dynamicAnchor")
        if isinstance(dyn, str):
            self.anchors.setdefault(f"{base}#{dyn}", (doc_uri, ptr, draft))
            self.dynamic_anchors.setdefault(dyn, []).append(f"{base}#{dyn}")
            self.resource_dyn.setdefault(base, set()).add(dyn)
        if node.get("$recursiveAnchor") is True:
            self.recursive_anchor = True
        return base, draft

    def locate(self, doc_uri: str, pointer: str) -> Location:
        """Walk ``pointer`` in a document, tracking base URI and draft."""
        doc = self.docs[doc_uri]
        base = doc_uri
        draft = self.resources.get(doc_uri, (doc_uri, "", 2020))[2]
        node = doc
        cur = ""
        resource_ptr = ""
        base, draft, resource_ptr = self._enter(node, base, draft, cur, resource_ptr)
        if pointer:
            if not pointer.startswith("/"):
                raise SchemaError(f"invalid JSON pointer {pointer!r}", pointer)
            for raw in pointer.split("/")[1:]:
                tok = raw.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and tok in node:
                    node = node[tok]
                elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
                    node = node[int(tok)]
                else:
                    raise SchemaError(
                        f"unresolvable JSON pointer {pointer!r} in {doc_uri}", pointer
                    )
                cur = f"{cur}/{raw}"
                base, draft, resource_ptr = self._enter(node, base, draft, cur, resource_ptr)
        return Location(node, doc_uri, cur, base, draft, resource_ptr)

    def _enter(
        self, node: Any, base: str, draft: int, ptr: str, resource_ptr: str
    ) -> tuple[str, int, str]:
        if isinstance(node, dict) and ("$schema" in node or "$id" in node or "id" in node):
            d = _draft_of(node.get("$schema"))
            if d is not None:
                draft = d
            ident = node.get("$id" if draft >= 6 else "id")
            if isinstance(ident, str):
                url = defrag(ident)
                if url:
                    base = _join(base, url)
                    resource_ptr = ptr
        return base, draft, resource_ptr

    def resolve_ref(self, ref: str, loc: Location) -> Location:
        target = ref if _is_absolute(ref) else _join(loc.base, ref)
        url, frag = urldefrag(target)
        if not url:
            url = loc.base
        frag = unquote(frag)
        if frag and not frag.startswith("/"):
            hit = self.anchors.get(f"{url}#{frag}")
            if hit is None:
                raise SchemaError(
                    f"unresolvable $ref {ref!r}: no anchor {frag!r} in {url}", loc.pointer
                )
            return self.locate(hit[0], hit[1])
        res = self.resources.get(url)
        if res is None:
            raise SchemaError(
                f"unresolvable $ref {ref!r}: document {url!r} is unknown (pass it in `registry`)",
                loc.pointer,
            )
        doc_uri, ptr, _ = res
        try:
            return self.locate(doc_uri, ptr + frag)
        except SchemaError:
            if not ptr or not frag:
                raise
        # The pointer does not exist inside the nested resource; schemas in the wild that
        # give subschemas an ``id`` often still mean the document root, which is the only
        # place left where it could resolve.
        return self.locate(doc_uri, frag)


def _is_absolute(uri: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*:", uri) is not None


def _join(base: str, ref: str) -> str:
    if _is_absolute(ref):
        return ref
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if base.startswith("urn:") or not re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", base):
        # non-hierarchical bases: resolve against a dummy hierarchical URI
        joined = urljoin("http://structout.invalid/" + base.split(":", 1)[-1].lstrip("/"), ref)
        return base.split(":", 1)[0] + ":" + joined[len("http://structout.invalid/") :]
    return urljoin(base, ref)


def mapping_registry(
    root: Any, registry: Mapping[str, Any] | None, max_subschemas: int
) -> tuple[Registry, str]:
    reg = Registry(max_subschemas)
    base = DEFAULT_BASE
    if isinstance(root, dict):
        d = _draft_of(root.get("$schema")) or 2020
        ident = root.get("$id" if d >= 6 else "id")
        if isinstance(ident, str) and _is_absolute(defrag(ident)):
            base = defrag(ident)
    reg.add(base, root)
    for uri, doc in (registry or {}).items():
        reg.add(uri, doc)
    return reg, base
