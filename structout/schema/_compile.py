"""JSON Schema documents → IR nodes (see :mod:`._ir`).

Handles draft 2020-12 and 2019-09, and the older forms found in the wild (draft-04/06/07:
``definitions``, ``id``, array ``items`` with ``additionalItems``, ``dependencies``, boolean
``exclusiveMinimum``/``exclusiveMaximum``, ``$ref`` overriding its siblings).

Every subschema is compiled at most once per annotation mode; ``$ref`` targets become lazy
:class:`._ir.Node` refs so recursive schemas stay finite.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection
from fractions import Fraction
from itertools import combinations
from typing import Any
from urllib.parse import urldefrag

from ..errors import LimitExceededError, SchemaError
from . import _automata as am
from . import _formats as fmt
from . import _ir
from . import _numbers as nm
from . import _regex as rx
from . import _string_formulas as sl
from ._documents import (
    _TYPE_ALIASES,
    _TYPE_NAMES,
    Location,
    Registry,
    Scope,
    _active,
    _did_you_mean,
    _is_depth_error,
    _short_pointer,
    defrag,
    depth_error,
    json_pointer_escape,
    limit_error,
)
from ._ir import MAX_WORK, Algebra, Node, Unsupported


def _weak_resolver(compiler: Compiler) -> Callable[[Any], Node]:
    """``compiler._resolve_key`` without a strong reference to the compiler (which holds the
    algebra that calls it; whoever uses the algebra holds the compiler too)."""
    ref = weakref.ref(compiler)

    def resolve(key: Any) -> Node:
        alive = ref()
        if alive is None:
            raise ReferenceError("the schema compiler of this algebra was freed")
        return alive._resolve_key(key)

    return resolve


class Compiler:
    """Compiles a registry's schemas into IR nodes of one :class:`Algebra`."""

    def __init__(
        self,
        registry: Registry,
        lenient: bool = False,
        max_depth: int = 256,
        warn: Any = None,
        max_pattern_length: int = 16_384,
        max_work: int = MAX_WORK,
    ) -> None:
        self.reg = registry
        self.lenient = lenient
        self.max_depth = max_depth
        self.max_pattern_length = max_pattern_length
        # (the algebra calls back through a weak reference: a bound method would make the
        # cycle compiler -> algebra -> compiler, which keeps a translation's IR and schema alive
        # until the garbage collector runs, instead of freeing them with the compiler)
        self.alg = Algebra(_weak_resolver(self), max_work=max_work)
        self.cache: dict[tuple[str, bool, Scope], Node] = {}
        self._scopes: list[Scope] = []
        self.depth = 0
        self.warn = warn
        self.subset_warn: Any = None
        self.origin: dict[Node, str] = {}
        # the pointer of the subschema compiled last (for errors without a location)
        self.current = ""

    # --- entry points ---

    def compile_root(self, uri: str) -> Node:
        loc = self.reg.locate(defrag(uri), "")
        return self.ref_to(loc, False)

    def ref_to(self, loc: Location, ann: bool) -> Node:
        """A lazy reference to a location, carrying the current dynamic scope."""
        return self.alg.ref(("loc", loc.doc_uri, loc.pointer, ann, self._scope()))

    def _resolve_key(self, key: Any) -> Node:
        _, doc_uri, ptr, ann, scope = key
        return self.compile(self.reg.locate(doc_uri, ptr), ann, scope)

    def _scope(self) -> Scope:
        return self._scopes[-1] if self._scopes else ()

    def _enter_scope(self, scope: Scope, loc: Location) -> Scope:
        """The dynamic scope after entering ``loc``'s resource: for each dynamic anchor the
        outermost resource that declares it (what ``$dynamicRef`` resolves to)."""
        names = self.reg.resource_dyn.get(loc.base)
        if not names:
            return scope
        bound = dict(scope)
        new = [n for n in names if n not in bound]
        if not new:
            return scope
        for n in new:
            bound[n] = loc.base
        return tuple(sorted(bound.items()))

    # --- errors ---

    def unsupported(self, message: str, keyword: str, loc: Location) -> None:
        """Raise in strict mode; warn in lenient mode (the caller then does its best effort)."""
        if not self.lenient:
            raise _Located(Unsupported(message, keyword), loc.pointer)
        if self.warn is not None:
            self.warn(message, keyword, loc.pointer)

    def bad(self, message: str, loc: Location, kw: str = "") -> SchemaError:
        ptr = f"{loc.pointer}/{kw}" if kw else loc.pointer
        return SchemaError(message, ptr or "/")

    # --- schemas ---

    def compile(self, loc: Location, ann: bool = False, scope: Scope | None = None) -> Node:
        if scope is None:
            scope = self._scope()
        if self.reg.resource_dyn:  # (no dynamic anchor: every scope is empty)
            scope = self._enter_scope(scope, loc)
        key = (loc.key, ann, scope)
        got = self.cache.get(key)
        if got is not None:
            return got
        self.depth += 1
        if self.depth > self.max_depth:
            self.depth -= 1
            raise depth_error(self.max_depth, loc.pointer)
        self.current = loc.pointer
        self._scopes.append(scope)
        try:
            node = self._compile(loc, ann)
        except Unsupported as e:
            raise _Located(e, loc.pointer) from None
        finally:
            self.depth -= 1
            self._scopes.pop()
        self.cache[key] = node
        self.origin.setdefault(node, loc.pointer)
        return node

    def sub(self, loc: Location, *path: Any, ann: bool = False) -> Node:
        return self.compile(self.walk(loc, *path), ann)

    def walk(self, loc: Location, *path: Any) -> Location:
        """The location ``path`` leads to from ``loc``."""
        ptr = loc.pointer
        node = loc.value
        base, draft, rptr = loc.base, loc.draft, loc.resource_ptr
        for p in path:
            node = node[p]
            ptr = f"{ptr}/{json_pointer_escape(str(p))}"
            base, draft, rptr = self.reg._enter(node, base, draft, ptr, rptr)
        return Location(node, loc.doc_uri, ptr, base, draft, rptr)

    def _compile(self, loc: Location, ann: bool) -> Node:
        s = loc.value
        alg = self.alg
        if s is True:
            return alg.ANY
        if s is False:
            return alg.NEVER
        if not isinstance(s, dict):
            raise self.bad(f"a schema must be an object or a boolean, got {type(s).__name__}", loc)
        if _COMBINING.isdisjoint(s):
            return self._typed(loc, ann)  # (what the conjunction of this one part is)
        draft = loc.draft
        if _active(s, "unevaluatedProperties", draft) or _active(s, "unevaluatedItems", draft):
            return self._unevaluated(loc, s)
        if draft <= 3:
            for kw in ("disallow", "extends", "divisibleBy"):
                if kw in s:
                    self.unsupported(f"draft-03 keyword {kw!r}", kw, loc)
        # (position in the schema, node): merged objects list properties in the order their
        # keywords appear in the schema (see Algebra.and_), e.g. a `$ref`'s before the sibling
        # `properties` that follow it.
        at = {k: i for i, k in enumerate(s)}
        parts: list[tuple[int, Node]] = []

        def add(kw: str, node: Node) -> None:
            parts.append((at.get(kw, len(at)), node))

        if "$ref" in s:
            ref = s["$ref"]
            if not isinstance(ref, str):
                raise self.bad("$ref must be a string", loc, "$ref")
            target = self.reg.resolve_ref(ref, loc)
            tnode = self.ref_to(target, ann)
            if draft <= 7:
                return tnode
            add("$ref", tnode)
        for kw in ("$dynamicRef", "$recursiveRef"):
            if _active(s, kw, draft):
                add(kw, self._dynamic_ref(s[kw], kw, loc, ann))
        add("properties" if "properties" in s else "type", self._typed(loc, ann))
        if "enum" in s:
            vals = s["enum"]
            if not isinstance(vals, list):
                raise self.bad("enum must be an array", loc, "enum")
            if vals and all(type(v) is str for v in vals):
                add("enum", alg.str_literals(list(dict.fromkeys(vals))))
            else:
                add("enum", alg.or_(*(self.literal(v) for v in vals)))
        if _active(s, "const", draft):
            add("const", self.literal(s["const"]))
        one_of: list[Node] | None = None
        for kw in ("allOf", "anyOf", "oneOf"):
            if kw in s:
                subs = s[kw]
                if not isinstance(subs, list) or not subs:
                    raise self.bad(f"{kw} must be a non-empty array", loc, kw)
                nodes = [self.sub(loc, kw, i, ann=ann) for i in range(len(subs))]
                if kw == "allOf":
                    add(kw, alg.and_all(nodes))
                elif kw == "anyOf":
                    add(kw, self._any_of(nodes, ann, loc))
                else:
                    one_of = nodes
        if "not" in s:
            inner = self.sub(loc, "not")
            try:
                add("not", alg.not_(inner))
            except Unsupported as e:
                self.unsupported(e.message, "not", loc)
        if _active(s, "if", draft) and ("then" in s or "else" in s or ann):
            i_node = self.sub(loc, "if", ann=ann)
            t_node = self.sub(loc, "then", ann=ann) if "then" in s else alg.ANY
            e_node = self.sub(loc, "else", ann=ann) if "else" in s else alg.ANY
            try:
                not_i = alg.not_(i_node)
            except Unsupported as e:
                self.unsupported(e.message, "if", loc)
                not_i = alg.ANY
            add("if", alg.or_(alg.and_(i_node, t_node), alg.and_(not_i, e_node)))
        dep_schemas: dict[str, tuple[str, ...]] = {}
        if _active(s, "dependentSchemas", draft):
            ds = s["dependentSchemas"]
            if not isinstance(ds, dict):
                raise self.bad("dependentSchemas must be an object", loc, "dependentSchemas")
            for k in ds:
                dep_schemas[k] = ("dependentSchemas", k)
        if isinstance(s.get("dependencies"), dict):
            for k, v in s["dependencies"].items():
                if isinstance(v, (dict, bool)):
                    dep_schemas[k] = ("dependencies", k)
        for k, path in dep_schemas.items():
            dnode = self.sub(loc, *path, ann=ann)
            absent = alg.obj(props=[(k, alg.NEVER)])
            present = alg.and_(alg.obj(required=[k]), dnode)
            add(path[0], self.only_objects(alg.or_(absent, present)))
        if one_of is not None:
            # Decided last, against its siblings: exactly one of B1..Bn holds among the
            # documents that satisfy the rest S, so the branches are S∧Bi (a discriminator
            # that S requires then separates branches that only constrain its value).
            return self._one_of(one_of, loc, parts, at["oneOf"])
        parts.sort(key=lambda p: p[0])  # stable: equal positions keep their order
        return alg.and_all(node for _, node in parts)

    def _dynamic_ref(self, ref: Any, kw: str, loc: Location, ann: bool) -> Node:
        if not isinstance(ref, str):
            raise self.bad(f"{kw} must be a string", loc, kw)
        target = self.reg.resolve_ref(ref, loc)
        if kw == "$recursiveRef":
            if self.reg.recursive_anchor:
                self.unsupported("$recursiveRef with $recursiveAnchor (dynamic scope)", kw, loc)
            return self.ref_to(target, ann)
        frag = urldefrag(ref)[1]
        tv = target.value
        if isinstance(tv, dict) and frag and tv.get("$dynamicAnchor") == frag:
            # the outermost resource in the dynamic scope that declares the anchor wins
            outer = dict(self._scope()).get(frag)
            if outer is not None:
                hit = self.reg.anchors.get(f"{outer}#{frag}")
                if hit is not None:
                    target = self.reg.locate(hit[0], hit[1])
        return self.ref_to(target, ann)

    def _unevaluated(self, loc: Location, s: dict[str, Any]) -> Node:
        """Recompile the in-place part in annotation mode, then apply unevaluated*."""
        rest = {
            k: v for k, v in s.items() if k not in ("unevaluatedProperties", "unevaluatedItems")
        }
        inner = self.compile(
            Location(
                rest, loc.doc_uri, loc.pointer + "|in-place", loc.base, loc.draft, loc.resource_ptr
            ),
            True,
        )
        alg = self.alg
        uprop = self.sub(loc, "unevaluatedProperties") if "unevaluatedProperties" in s else None
        uitem = self.sub(loc, "unevaluatedItems") if "unevaluatedItems" in s else None
        out = []
        for a in alg.alternatives(inner):
            if a.kind == "obj" and uprop is not None:
                props, req, tail, mn, mx, deps, ex, ev = a.args
                props2 = [(k, v if sl.matches(ev, k) else alg.and_(v, uprop)) for k, v in props]
                tail2 = list(tail) + [(sl.f_not(ev), uprop)]
                a = alg.obj(props2, req, tail2, mn, mx, deps, ex, sl.ALL)
            elif a.kind == "arr" and uitem is not None:
                prefix, rest_n, mn, mx, cont, uniq, ev = a.args
                pn, all_, cnodes = ev
                if not all_:
                    extra = alg.or_(uitem, *cnodes)
                    prefix = list(prefix) + [rest_n] * max(0, pn - len(prefix))
                    prefix = [p if i < pn else alg.and_(p, extra) for i, p in enumerate(prefix)]
                    a = alg.arr(
                        prefix, alg.and_(rest_n, extra), mn, mx, cont, uniq, (pn, True, cnodes)
                    )
            out.append(a)
        return alg.or_(*out)

    def _any_of(self, nodes: list[Node], ann: bool, loc: Location) -> Node:
        alg = self.alg
        if not ann or len(nodes) == 1:
            return alg.or_(*nodes)
        if len(nodes) > 5:
            self.unsupported("anyOf with more than 5 branches under unevaluated*", "anyOf", loc)
            return alg.or_(*nodes)
        out = []
        for r in range(1, len(nodes) + 1):
            for combo in combinations(nodes, r):
                out.append(alg.and_all(combo))
        return alg.or_(*out)

    def _one_of(
        self,
        branches_only: list[Node],
        loc: Location,
        siblings: list[tuple[int, Node]],
        position: int,
    ) -> Node:
        """``oneOf`` conjoined with its sibling keywords ``siblings`` (``(position, node)``).

        Branch i is ``S ∧ Bi`` (S: the siblings, merged in keyword order so that property order
        still follows the schema), minus every other branch it overlaps. Subtracting the bare
        ``Bj`` is the same as subtracting ``S ∧ Bj`` inside ``S ∧ Bi`` and keeps the complement
        small.
        """
        alg = self.alg

        def in_context(b: Node) -> Node:
            ordered = sorted([*siblings, (position, b)], key=lambda p: p[0])
            return alg.and_all(node for _, node in ordered)

        nodes = [in_context(b) for b in branches_only]
        if len(nodes) == 1:
            return nodes[0]
        n = len(nodes)
        overlap = [[False] * n for _ in range(n)]
        for i in range(n):
            for j in range(i + 1, n):
                ov = not self.is_empty(alg.and_(nodes[i], nodes[j]))
                overlap[i][j] = overlap[j][i] = ov
        if not any(any(r) for r in overlap):
            return alg.or_(*nodes)
        try:
            if n > 12:
                raise LimitExceededError("oneOf with more than 12 overlapping branches")
            branches = []
            for i in range(n):
                b = nodes[i]
                for j in range(n):
                    if j != i and overlap[i][j]:
                        b = alg.and_(b, alg.not_(branches_only[j]))
                branches.append(b)
            res = alg.or_(*branches)
            self._force(res)
            return res
        except LimitExceededError as e:
            if _is_depth_error(e):
                raise
        except Unsupported as e:
            self.unsupported(f"oneOf with overlapping branches: {e.message}", "oneOf", loc)
            return alg.or_(*nodes)
        # The exact form (each branch minus all the others) is too large. Per pair, keep the
        # exact complement where it stays small, else subtract a simple, sufficient reason for
        # not matching the other branch (a key it requires is absent, or a property it cannot
        # accept is present): never accepts invalid documents, may refuse some valid ones.
        subset = False
        try:
            branches = []
            for i in range(n):
                b = nodes[i]
                for j in range(n):
                    if j == i or not overlap[i][j]:
                        continue
                    try:
                        cand = alg.and_(b, alg.not_(branches_only[j]))
                        self._force(cand)
                        b = cand
                    except LimitExceededError as e:
                        if _is_depth_error(e):
                            raise
                        excl, exact = self._exclusion(branches_only[j], nodes[i])
                        b = alg.and_(b, excl)
                        subset = subset or not exact
                branches.append(b)
            res = alg.or_(*branches)
            self._force(res)
        except (Unsupported, LimitExceededError) as e:
            if _is_depth_error(e):
                raise
            msg = e.message if isinstance(e, Unsupported) else str(e)
            self.unsupported(f"oneOf with overlapping branches too complex ({msg})", "oneOf", loc)
            return alg.or_(*nodes)
        if subset and self.subset_warn is not None:
            self.subset_warn(
                "oneOf with overlapping branches: exact exclusion too large, the grammar accepts "
                "a subset (branches exclude each other by a missing or present key)",
                "oneOf",
                loc.pointer,
            )
        return res

    def _force(self, node: Node) -> None:
        """Resolve the top of a node now, so that size limits surface here."""
        try:
            for a in self.alg.alternatives(node):
                if a.kind == "obj":
                    for _k, v in a.args[0]:
                        if v.kind == "ref" and isinstance(v.args[0], tuple):
                            self.alg.alternatives(v)
        except Unsupported as e:
            if "infinite recursion" not in e.message:
                raise

    def _exclusion(self, other: Node, this: Node) -> tuple[Node, bool]:
        """A small subset of ``not other``, and whether it loses nothing inside ``this``.

        Alternatives of ``other`` that no document of ``this`` matches need no exclusion;
        non-objects are complemented exactly; an object alternative is excluded by lacking a
        key it requires (exact when ``this`` never has that key) or, failing that, by carrying
        a property whose values in ``this`` it never accepts (a subset).
        """
        alg = self.alg
        mine = [a for a in alg.alternatives(this) if a.kind == "obj"]
        always = set.intersection(*(set(a.args[1]) for a in mine)) if mine else set()
        parts = []
        exact = True
        non_obj = [alg.type_atom(t) for t in _ir.TYPE_KINDS if t != "obj"]
        for a in alg.alternatives(other):
            if self.is_empty(alg.and_(this, a)):
                continue
            if a.kind != "obj":
                parts.append(alg.not_(a))
                continue
            keys = [k for k in a.args[1] if k not in always]
            if keys:
                absent = [k for k in keys if self.is_empty(alg.and_(this, alg.obj(required=[k])))]
                exact = exact and bool(absent)
                key = (absent or keys)[0]
                parts.append(alg.or_(*non_obj, alg.obj(props=[(key, alg.NEVER)])))
                continue
            # else: a property whose values in this branch never satisfy the other branch;
            # requiring it to be present excludes the other branch
            found = self._disjoint_key(a, mine)
            if found is None:
                raise Unsupported("no property tells the branches apart", "oneOf")
            exact = False
            parts.append(alg.or_(*non_obj, alg.obj(required=[found])))
        return alg.and_all(parts), exact

    def _disjoint_key(self, other: Node, mine: list[Node]) -> str | None:
        alg = self.alg
        for k, v in other.args[0]:
            ok = bool(mine)
            for m in mine:
                named = dict(m.args[0])
                mv = named[k] if k in named else alg.tail_value(m.args[2], k)
                if not self.is_empty(alg.and_(mv, v)) or self.is_empty(mv):
                    ok = False
                    break
            if ok:
                return str(k)
        return None

    def only_objects(self, node: Node) -> Node:
        alg = self.alg
        return alg.or_(node, *(alg.type_atom(t) for t in _ir.TYPE_KINDS if t != "obj"))

    # --- emptiness (conservative: True only when certain) ---

    def is_empty(self, node: Node, depth: int = 0) -> bool:
        alg = self.alg
        if depth > 24:
            return False
        try:
            node = alg.resolve(node)
        except Unsupported:
            return False
        k = node.kind
        if k == "never":
            return True
        if k in ("any", "null", "bool"):
            return False
        if k == "union":
            return all(self.is_empty(a, depth + 1) for a in node.args[0])
        if k == "num":
            try:
                r = nm.realize(node.args[0])
                if isinstance(r, tuple):
                    return rx.is_empty(r)
                return bool(r.is_empty())
            except (am.AutomatonTooLarge, ValueError):
                return False
        if k == "str":
            try:
                return sl.is_empty(node.args[0])
            except am.AutomatonTooLarge:
                return False
        if k == "arr":
            prefix, rest, mn, _mx, cont, _u, _ev = node.args
            for i in range(min(mn, len(prefix))):
                if self.is_empty(prefix[i], depth + 1):
                    return True
            if mn > len(prefix) and self.is_empty(rest, depth + 1):
                return True
            return any(lo > 0 and self.is_empty(c, depth + 1) for c, lo, _hi, _st in cont)
        if k == "obj":
            props, req, tail, _mn, _mx, _d, _ex, _ev = node.args
            pd = dict(props)
            for r in req:
                v = pd[r] if r in pd else alg.tail_value(tail, r)
                if self.is_empty(v, depth + 1):
                    return True
            return False
        return False

    # --- literals ---

    def literal(self, v: Any) -> Node:
        alg = self.alg
        k = _ir.kind_of(v)
        if k == "null":
            return alg.NULL
        if k == "bool":
            return alg.bool_(v is True, v is False)
        if k == "num":
            f = _ir.to_fraction(v)
            return alg.num(nm.n_iv(f, True, f, True))
        if k == "str":
            return alg.str_(sl.f_lit(v))
        if k == "arr":
            return alg.arr([self.literal(x) for x in v], alg.NEVER, len(v), len(v))
        return alg.obj(
            [(kk, self.literal(x)) for kk, x in v.items()],
            list(v.keys()),
            [(sl.ALL, alg.NEVER)],
        )

    # --- type-specific keywords ---

    def _typed(self, loc: Location, ann: bool = False) -> Node:
        s = loc.value
        t = s.get("type")
        kind = _KIND_OF_TYPE.get(t) if isinstance(t, str) else None
        if kind is not None:  # one type name (the common case)
            return self.alg.or_(self._type_atom(kind, loc, ann, t == "integer"))
        kinds: Collection[str] = _ir.TYPE_KINDS
        integer_only = False
        if "type" in s:
            kinds, integer_only = self._type_kinds(loc)
        atoms = [self._type_atom(k, loc, ann, integer_only) for k in _ir.TYPE_KINDS if k in kinds]
        return self.alg.or_(*atoms)

    def _type_kinds(self, loc: Location) -> tuple[set[str], bool]:
        """The IR kinds ``type`` allows, and whether numbers must be integers."""
        t = loc.value["type"]
        names = [t] if isinstance(t, str) else t
        if not isinstance(names, list) or not names or not all(isinstance(x, str) for x in names):
            raise self.bad("type must be a type name or a non-empty array of names", loc, "type")
        for x in names:
            if x not in _TYPE_NAMES:
                if x == "any" and loc.draft <= 3:
                    continue
                raise self.bad(
                    f"unknown type {x!r}{_did_you_mean(x, _TYPE_NAMES, _TYPE_ALIASES)}",
                    loc,
                    "type",
                )
        if "any" in names and loc.draft <= 3:
            names = list(_TYPE_NAMES)
        integer_only = "integer" in names and "number" not in names
        return {_KIND_OF_TYPE[x] for x in names}, integer_only

    def _type_atom(self, kind: str, loc: Location, ann: bool, integer_only: bool) -> Node:
        """The values of one IR kind that the type-specific keywords allow."""
        if kind == "null":
            return self.alg.NULL
        if kind == "bool":
            return self.alg.BOOL
        if kind == "num":
            return self._number(loc, integer_only)
        if kind == "str":
            return self._string(loc)
        if kind == "arr":
            return self._array(loc, ann)
        return self._object(loc, ann)

    def _num_value(self, loc: Location, kw: str) -> Fraction:
        v = loc.value[kw]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.bad(f"{kw} must be a number", loc, kw)
        try:
            return _ir.to_fraction(v)
        except ValueError:
            raise self.bad(f"{kw} must be finite", loc, kw) from None

    def _count(self, loc: Location, kw: str) -> int | None:
        s = loc.value
        if kw not in s:
            return None
        v = s[kw]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v):
            raise self.bad(f"{kw} must be a non-negative integer", loc, kw)
        return int(v)

    def _number(self, loc: Location, integer_only: bool) -> Node:
        s = loc.value
        parts: list[nm.NumFormula] = []
        if integer_only:
            # draft-04 and older: an integer is a numeral without a fraction (1.0 is not one).
            # Later drafts count 1.0 as an integer, but the grammar admits only plain integers
            # (json.loads reads 1.0 as a float; models would loop on zeros): a documented subset.
            parts.append(("intlex",) if loc.draft <= 4 else ("intplain",))
        lo: Fraction | None = None
        hi: Fraction | None = None
        lo_incl = hi_incl = True
        if "minimum" in s:
            lo = self._num_value(loc, "minimum")
        if "maximum" in s:
            hi = self._num_value(loc, "maximum")
        for kw, is_lo in (("exclusiveMinimum", True), ("exclusiveMaximum", False)):
            if kw not in s:
                continue
            v = s[kw]
            if isinstance(v, bool):  # draft-04 form
                if v:
                    if is_lo:
                        lo_incl = False
                    else:
                        hi_incl = False
                continue
            x = self._num_value(loc, kw)
            parts.append(
                nm.n_iv(x, False, None, False) if is_lo else nm.n_iv(None, False, x, False)
            )
        parts.append(nm.n_iv(lo, lo_incl, hi, hi_incl))
        if "multipleOf" in s:
            m = self._num_value(loc, "multipleOf")
            if m <= 0:
                raise self.bad("multipleOf must be greater than 0", loc, "multipleOf")
            parts.append(("mult", m))
        return self.alg.num(nm.n_and(*parts))

    def _string(self, loc: Location) -> Node:
        s = loc.value
        if _STRING_KWS.isdisjoint(s):
            return self.alg.STR  # (what no constraint gives: str_(ALL))
        parts: list[sl.Formula] = []
        mn = self._count(loc, "minLength")
        mx = self._count(loc, "maxLength")
        if mn is not None or mx is not None:
            parts.append(sl.f_len(mn or 0, mx))
        if "pattern" in s:
            p = s["pattern"]
            if not isinstance(p, str):
                raise self.bad("pattern must be a string", loc, "pattern")
            parts.append(self.pattern(p, loc, "pattern"))
        if "format" in s:
            f = s["format"]
            if not isinstance(f, str):
                raise self.bad("format must be a string", loc, "format")
            if f in fmt.UNSUPPORTED_FORMATS:
                self.unsupported(f"format {f!r} is not a regular language", "format", loc)
            else:
                ff = fmt.format_formula(f)
                if ff is not None:
                    parts.append(ff)
        return self.alg.str_(sl.f_and(*parts))

    def pattern(self, p: str, loc: Location, kw: str) -> sl.Formula:
        # where the regex is: the keyword's value, or (patternProperties) one of its keys
        ptr = f"{loc.pointer}/{kw}" + (f"/{json_pointer_escape(p)}" if kw != "pattern" else "")
        if len(p) > self.max_pattern_length:
            raise limit_error(
                f"{kw} regex of {len(p)} characters at {_short_pointer(ptr)} exceeds "
                f"max_pattern_length = {self.max_pattern_length}; hint: raise it, e.g. "
                f"to_kbnf(schema, max_pattern_length={len(p)}) (translation time and grammar "
                "size grow with the pattern)",
                "max_pattern_length",
                ptr,
            )
        try:
            return sl.pattern_formula(p)
        except rx.RegexUnsupported as e:
            self.unsupported(
                f"pattern {p!r} uses {e.message}, which no grammar can enforce", kw, loc
            )
            return sl.ALL
        except rx.RegexSyntaxError as e:
            raise self.bad(f"invalid regular expression: {e}", loc, kw) from None
        except rx.RegexTooDeep as e:
            raise limit_error(
                f"{kw} regex at {_short_pointer(ptr)}: {e} (translator limit "
                f"MAX_PATTERN_NESTING = {rx.MAX_PATTERN_NESTING}); hint: flatten the groups",
                "MAX_PATTERN_NESTING",
                ptr,
            ) from None

    def _array(self, loc: Location, ann: bool = False) -> Node:
        s = loc.value
        alg = self.alg
        prefix: list[Node] = []
        rest = alg.ANY
        pn = 0
        ev_all = False
        items = s.get("items")
        if _active(s, "prefixItems", loc.draft):
            pis = s["prefixItems"]
            if not isinstance(pis, list):
                raise self.bad("prefixItems must be an array", loc, "prefixItems")
            prefix = [self.sub(loc, "prefixItems", i) for i in range(len(pis))]
            pn = len(prefix)
        if isinstance(items, list):
            prefix = [self.sub(loc, "items", i) for i in range(len(items))]
            pn = len(prefix)
            if "additionalItems" in s:
                rest = self.sub(loc, "additionalItems")
                ev_all = True
        elif items is not None:
            if not isinstance(items, (dict, bool)):
                raise self.bad("items must be a schema", loc, "items")
            rest = self.sub(loc, "items")
            ev_all = True
        mn = self._count(loc, "minItems") or 0
        mx = self._count(loc, "maxItems")
        contains = []
        cnodes: tuple[Node, ...] = ()
        if _active(s, "contains", loc.draft):
            c = self.sub(loc, "contains")
            lo = self._count(loc, "minContains") if loc.draft >= 2019 else None
            hi = self._count(loc, "maxContains") if loc.draft >= 2019 else None
            lo = 1 if lo is None else lo
            contains.append((c, lo, hi, 0))
            cnodes = (c,)
        unique = s.get("uniqueItems") is True
        ev = (pn, ev_all, cnodes) if ann else (0, False, ())
        return alg.arr(prefix, rest, mn, mx, contains, unique, ev)

    def _object(self, loc: Location, ann: bool = False) -> Node:
        s = loc.value
        alg = self.alg
        props: list[tuple[str, Node]] = []
        ev: list[sl.Formula] = []
        pp = s.get("properties", {})
        if not isinstance(pp, dict):
            raise self.bad("properties must be an object", loc, "properties")
        patterns: list[tuple[sl.Formula, Node]] = []
        ppat = s.get("patternProperties", {})
        if not isinstance(ppat, dict):
            raise self.bad("patternProperties must be an object", loc, "patternProperties")
        for p in ppat:
            f = self.pattern(p, loc, "patternProperties")
            patterns.append((f, self.sub(loc, "patternProperties", p)))
            ev.append(f)
        at = self.walk(loc, "properties") if pp else loc
        for name in pp:
            v = self.sub(at, name)
            for f, pn in patterns:
                if sl.matches(f, name):
                    v = alg.and_(v, pn)
            props.append((name, v))
        if pp and ann:  # (evaluated keys matter only in annotation mode)
            ev.append(sl.f_lit(*pp.keys()))
        tail: list[tuple[sl.Formula, Node]] = list(patterns)
        if "additionalProperties" in s:
            ap = self.sub(loc, "additionalProperties")
            covered = sl.f_or(*(f for f, _ in patterns)) if patterns else sl.NOTHING
            tail.append((sl.f_not(covered), ap))
            ev.append(sl.ALL)
        required: list[str] = []
        if "required" in s:
            r = s["required"]
            if isinstance(r, bool) and loc.draft <= 3:
                r = []
            if not isinstance(r, list) or not all(isinstance(x, str) for x in r):
                raise self.bad("required must be an array of strings", loc, "required")
            required = list(r)
        if loc.draft <= 3:
            for name in pp:
                sub = pp[name]
                if isinstance(sub, dict) and sub.get("required") is True:
                    required.append(name)
        if _active(s, "propertyNames", loc.draft):
            pn_node = self.sub(loc, "propertyNames")
            kf = self.key_language(pn_node, loc)
            tail.append((sl.f_not(kf), alg.NEVER))
            props = [(k, v if sl.matches(kf, k) else alg.NEVER) for k, v in props]
        deps: list[tuple[str, tuple[str, ...]]] = []
        for kw in ("dependentRequired", "dependencies"):
            d = s.get(kw)
            if d is None or not _active(s, kw, loc.draft):
                continue
            if not isinstance(d, dict):
                raise self.bad(f"{kw} must be an object", loc, kw)
            for k, v in d.items():
                if kw == "dependencies" and isinstance(v, (dict, bool)):
                    continue
                names = [v] if isinstance(v, str) and loc.draft <= 3 else v
                if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
                    raise self.bad(f"{kw} values must be arrays of strings", loc, kw)
                deps.append((k, tuple(names)))
        mn = self._count(loc, "minProperties") or 0
        mx = self._count(loc, "maxProperties")
        evf = sl.f_or(*ev) if (ev and ann) else sl.NOTHING
        return alg.obj(props, required, tail, mn, mx, deps, (), evf)

    def key_language(self, node: Node, loc: Location) -> sl.Formula:
        """The set of strings a ``propertyNames`` schema accepts (as a string formula)."""
        alg = self.alg
        fs = []
        for a in alg.alternatives(node):
            if a.kind == "str":
                fs.append(a.args[0])
        return sl.f_or(*fs) if fs else sl.NOTHING


#: Keywords that ``Compiler._compile`` conjoins with the type-specific ones (or warns about).
_COMBINING = frozenset(
    [
        *("unevaluatedProperties", "unevaluatedItems", "disallow", "extends", "divisibleBy"),
        *("$ref", "$dynamicRef", "$recursiveRef", "enum", "const", "allOf", "anyOf", "oneOf"),
        *("not", "if", "dependentSchemas", "dependencies"),
    ]
)

#: The keywords ``Compiler._string`` reads.
_STRING_KWS = frozenset(["minLength", "maxLength", "pattern", "format"])

#: The IR kind of each JSON Schema type name.
_KIND_OF_TYPE = {
    "null": "null",
    "boolean": "bool",
    "object": "obj",
    "array": "arr",
    "number": "num",
    "integer": "num",
    "string": "str",
}


class _Located(Exception):
    """An Unsupported error with the JSON pointer of the schema that raised it."""

    def __init__(self, err: Unsupported, pointer: str) -> None:
        super().__init__(err.message)
        self.err = err
        self.pointer = pointer.replace("|in-place", "")
