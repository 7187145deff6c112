"""The schema IR: interned nodes with exact intersection, union and complement.

A node denotes a set of JSON values. Kinds and arguments:

* ``any`` / ``never``,
* ``union (alts)``: alternatives, none of them a union, ``any`` or ``never``,
* ``ref (key,)``: a named node resolved lazily through :meth:`Algebra.resolve` (schema
  locations, and synthetic keys ``("and", a, b)`` / ``("not", a)`` that keep operations on
  recursive schemas finite),
* ``null ()``, ``bool (allow_true, allow_false)``, ``num (formula,)`` (see :mod:`._numbers`),
  ``str (formula,)`` (see :mod:`._string_formulas`),
* ``arr (prefix, rest, min, max, contains, unique, ev)``: ``prefix`` item nodes by position,
  ``rest`` for later positions, length bounds, ``contains`` as ``(node, min, max, start)``
  (at least/at most that many items at positions >= start match node), ``unique`` items, and
  ``ev = (prefix_n, all, contains_nodes)``: which items count as *evaluated* for
  ``unevaluatedItems``,
* ``obj (props, required, tail, min, max, deps, exists, ev)``: ``props`` are ``(name, node)``
  for *named* keys in emission order; ``tail`` is a tuple of ``(key_formula, node)``
  constraints that all apply to every present key not in ``props``; ``required`` is a sorted
  tuple; ``deps`` are ``(key, (required keys...))``; ``exists`` are ``(key_formula, node)``
  (at least one present key in the language has a value in node); ``ev`` is the formula of
  key names evaluated for ``unevaluatedProperties``.

Nodes are interned per :class:`Algebra`, so identity is structural equality (and the hash of a
node is its identity's, O(1)).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable

from ..errors import LimitExceededError
from . import _numbers as nm
from . import _string_formulas as sl

#: How deep the translator's recursive walks of *values* and *pattern text* may go. Schemas are
#: bounded by ``max_schema_depth`` (checked before translation); values checked against the IR
#: (``Algebra.matches``), values re-ordered for the grammar's layout (``Translation.dumps``) and
#: ``format: regex`` pattern text are walked recursively, a few Python frames per level. This
#: bound keeps them well inside Python's default recursion limit (1,000 frames). Deeper input is
#: not an error of the schema: the check answers "unsupported" (``matches``), leaves the value as
#: it is (``dumps``) or refuses the pattern (``regex_format_ok``).
MAX_RECURSION_DEPTH = 200
TYPE_KINDS = ("null", "bool", "num", "str", "arr", "obj")
#: Kinds of the nodes that are neither ``any``, ``never`` nor a union.
_ATOM_KINDS = frozenset([*TYPE_KINDS, "ref"])


class Node:
    """An interned node: equal to and hashed as itself only (object's own ``==`` and ``hash``)."""

    __slots__ = ("args", "kind", "uid")

    def __init__(self, kind: str, args: tuple[Any, ...], uid: int) -> None:
        self.kind = kind
        self.args = args
        self.uid = uid

    def __repr__(self) -> str:
        if self.kind == "ref":
            return f"Ref({self.args[0]!r})"
        return f"{self.kind}#{self.uid}"


class Unsupported(Exception):
    """Raised inside the algebra; the compiler turns it into UnsupportedSchemaError."""

    def __init__(self, message: str, keyword: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.keyword = keyword


#: Default budget of union/intersection steps per translation (see ``Algebra.work``).
MAX_WORK = 500_000


class Algebra:
    def __init__(
        self,
        resolver: Callable[[Any], Node],
        max_nodes: int = 400_000,
        max_alternatives: int = 512,
        max_work: int = MAX_WORK,
    ) -> None:
        # Interned nodes by hash((kind, args)) (a formula can be a large tree: hashed once per
        # lookup); ``_count`` nodes in all. It starts with the constant nodes.
        table, self._count, constants = _constant_nodes()
        self._table = dict(table)
        self.ANY, self.NEVER, self.NULL, self.BOOL, self.NUM, self.STR, self.ARR, self.OBJ = (
            constants
        )
        #: The unconstrained atom of each type, in TYPE_KINDS order.
        self._full_atoms = constants[2:]
        self.resolver = resolver
        self.max_nodes = max_nodes
        self.max_work = max_work
        # Steps of union/intersection work done so far: bounds the time, as memoized
        # intersections of many overlapping branches can take long without creating nodes.
        self.work = 0
        self.max_alternatives = max_alternatives
        self._resolved: dict[Any, Node] = {}
        self._in_progress: set = set()  # type: ignore[type-arg]
        self._and_memo: dict[tuple[Node, Node], Node] = {}
        self._not_memo: dict[Node, Node] = {}

    # --- construction ---

    def _make_constants(self) -> None:
        """The nodes every algebra starts with (into an empty table)."""
        self.ANY = self.mk("any")
        self.NEVER = self.mk("never")
        self.NULL = self.mk("null")
        self.BOOL = self.mk("bool", True, True)
        self.NUM = self.mk("num", nm.NUM_ALL)
        self.STR = self.mk("str", sl.ALL)
        self.ARR = self.arr()
        self.OBJ = self.obj()

    def mk(self, kind: str, *args: Any) -> Node:
        h = hash((kind, args))
        bucket = self._table.get(h, ())
        for n in bucket:
            if n.kind == kind and n.args == args:
                return n
        if self._count >= self.max_nodes:
            raise LimitExceededError(
                f"schema too complex: more than {self.max_nodes} IR nodes (max_nodes)"
            )
        n = Node(kind, args, self._count)
        self._count += 1
        self._table[h] = (*bucket, n)  # (buckets are immutable: tables share the constants')
        return n

    def ref(self, key: Any) -> Node:
        return self.mk("ref", key)

    def num(self, f: nm.NumFormula) -> Node:
        return self.NEVER if f == nm.NUM_NONE else self.mk("num", f)

    def str_(self, f: sl.Formula) -> Node:
        return self.NEVER if f == sl.NOTHING else self.mk("str", f)

    def bool_(self, t: bool, f: bool) -> Node:
        return self.mk("bool", t, f) if (t or f) else self.NEVER

    def arr(
        self,
        prefix: Sequence[Node] = (),
        rest: Node | None = None,
        min_items: int = 0,
        max_items: int | None = None,
        contains: Sequence[tuple[Node, int, int | None, int]] = (),
        unique: bool = False,
        ev: tuple[int, bool, tuple[Node, ...]] = (0, False, ()),
    ) -> Node:
        rest = self.ANY if rest is None else rest
        prefix = list(prefix)
        if max_items is not None and len(prefix) > max_items:
            prefix = prefix[:max_items]
        if rest.kind == "never":
            max_items = len(prefix) if max_items is None else min(max_items, len(prefix))
        # a required prefix position that cannot hold any value
        for i, p in enumerate(prefix):
            if p.kind == "never":
                if i < min_items:
                    return self.NEVER
                prefix = prefix[:i]
                max_items = i if max_items is None else min(max_items, i)
                break
        if max_items is not None and max_items < min_items:
            return self.NEVER
        # trailing prefix entries equal to rest are redundant
        while prefix and prefix[-1] is rest:
            prefix.pop()
        if max_items is not None and max_items <= 1:
            unique = False
        cont = []
        for node, lo, hi, start in contains:
            if hi is not None and hi < lo:
                return self.NEVER
            if lo == 0 and hi is None:
                continue
            if node.kind == "never":
                if lo > 0:
                    return self.NEVER
                continue
            cont.append((node, lo, hi, start))
        return self.mk("arr", tuple(prefix), rest, min_items, max_items, tuple(cont), unique, ev)

    def obj(
        self,
        props: Sequence[tuple[str, Node]] = (),
        required: Iterable[str] = (),
        tail: Sequence[tuple[sl.Formula, Node]] = (),
        min_props: int = 0,
        max_props: int | None = None,
        deps: Sequence[tuple[str, tuple[str, ...]]] = (),
        exists: Sequence[tuple[sl.Formula, Node]] = (),
        ev: sl.Formula = sl.NOTHING,
    ) -> Node:
        if max_props is not None and max_props < min_props:
            return self.NEVER
        pd = dict(props)
        req = tuple(sorted(set(required)))
        for k in req:
            if k in pd and pd[k].kind == "never":
                return self.NEVER
        tl = []
        for f, v in tail:
            if f == sl.NOTHING or v.kind == "any":
                continue
            if (f, v) not in tl:
                tl.append((f, v))
        ex = []
        for f, v in exists:
            if f == sl.NOTHING or v.kind == "never":
                return self.NEVER
            if (f, v) not in ex:
                ex.append((f, v))
        dp = []
        for k, ds in deps:
            ds = tuple(d for d in ds if d != k)
            if ds and (k, ds) not in dp:
                dp.append((k, ds))
        if max_props == 0 and req:
            return self.NEVER
        return self.mk(
            "obj", tuple(props), req, tuple(tl), min_props, max_props, tuple(dp), tuple(ex), ev
        )

    # --- resolution ---

    def resolve(self, node: Node) -> Node:
        """Follow refs until a non-ref node."""
        seen = []
        while node.kind == "ref":
            key = node.args[0]
            got = self._resolved.get(key)
            if got is None:
                if key in self._in_progress:
                    raise Unsupported(
                        "the schema refers to itself without consuming input (infinite recursion)",
                        "$ref",
                    )
                self._in_progress.add(key)
                try:
                    got = self._compute(key)
                finally:
                    self._in_progress.discard(key)
                self._resolved[key] = got
            seen.append(key)
            node = got
            if len(seen) > 10_000:
                raise Unsupported("reference chain too long", "$ref")
        return node

    def _compute(self, key: Any) -> Node:
        if isinstance(key, tuple) and key and key[0] == "and":
            return self.and_(self.resolve(key[1]), self.resolve(key[2]))
        if isinstance(key, tuple) and key and key[0] == "not":
            return self.not_(self.resolve(key[1]))
        return self.resolver(key)

    # --- union ---

    def _spend(self, steps: int) -> None:
        self.work += steps
        if self.work > self.max_work:
            err = LimitExceededError(
                f"schema too complex: more than {self.max_work} steps combining subschemas "
                "(max_schema_work; raise it, e.g. to_kbnf(schema, max_schema_work=...))"
            )
            err.limit = "max_schema_work"  # type: ignore[attr-defined]
            raise err

    def or_(self, *items: Node) -> Node:
        if len(items) == 1 and items[0].kind in _ATOM_KINDS:
            return self._or_atom(items[0])
        if items == self._full_atoms:  # (an untyped subschema) what the merge below gives
            self._spend(len(items))
            return self.ANY
        alts: list[Node] = []
        seen: set[Node] = set()  # nodes are interned: hashing is O(1), equality is identity
        has_any = False
        for it in items:
            if it.kind == "any":
                has_any = True
                continue
            if it.kind == "never":
                continue
            for a in it.args[0] if it.kind == "union" else (it,):
                if a not in seen:
                    seen.add(a)
                    alts.append(a)
        if has_any:
            # ``any`` absorbs everything unless an alternative carries annotations
            # (unevaluated*) that a plain ``any`` would lose
            if not any(_carries_annotations(a) for a in alts):
                return self.ANY
            alts = [self.type_atom(t) for t in TYPE_KINDS] + alts
        if not alts:
            return self.NEVER
        # merge simple atoms of the same type
        merged: list[Node] = []
        strs = [a for a in alts if a.kind == "str"]
        nums = [a for a in alts if a.kind == "num"]
        bools = [a for a in alts if a.kind == "bool"]
        for a in alts:
            if a.kind == "str":
                if a is strs[0]:
                    merged.append(self.str_(sl.f_or(*(s.args[0] for s in strs))))
            elif a.kind == "num":
                if a is nums[0]:
                    merged.append(self.num(nm.n_or(*(s.args[0] for s in nums))))
            elif a.kind == "bool":
                if a is bools[0]:
                    merged.append(
                        self.bool_(any(b.args[0] for b in bools), any(b.args[1] for b in bools))
                    )
            else:
                merged.append(a)
        merged = [m for m in merged if m.kind != "never"]
        # arrays/objects subsumed by the unconstrained atom of their kind (unless they carry
        # annotations for unevaluated*)
        for k, full in (("arr", self.ARR), ("obj", self.OBJ)):
            if full in merged:
                merged = [m for m in merged if m.kind != k or m is full or _carries_annotations(m)]
        objs = [m for m in merged if m.kind == "obj"]
        self._spend(len(alts) + (len(objs) ** 2 if 2 < len(objs) <= 64 else 0))
        if 2 < len(objs) <= 64:
            drop = set()
            for i, a in enumerate(objs):
                for j, b in enumerate(objs):
                    if i != j and j not in drop and _obj_subsumes(b, a):
                        drop.add(i)
                        break
            if drop:
                gone = {objs[i] for i in drop}
                merged = [m for m in merged if m not in gone]
        kinds = {m.kind for m in merged}
        if (
            len(merged) == 6
            and kinds == set(TYPE_KINDS)
            and all(self._is_full_atom(m) for m in merged)
        ):
            return self.ANY
        if len(merged) > self.max_alternatives:
            raise LimitExceededError(
                f"schema too complex: a union with more than {self.max_alternatives} alternatives"
            )
        if len(merged) == 1:
            return merged[0]
        if not merged:
            return self.NEVER
        return self.mk("union", tuple(merged))

    def str_literals(self, words: Sequence[str]) -> Node:
        """``or_`` of the literal nodes of distinct strings (one step each), without them: their
        union merges into this one formula."""
        self._spend(len(words))
        return self.str_(sl.f_lit(*words))

    def _or_atom(self, a: Node) -> Node:
        """``or_(a)`` of one typed atom or ref: one step of work, and only the merge of the
        atoms of its type (which a lone one goes through too) can rewrite it."""
        self._spend(1)
        k = a.kind
        if k == "str":
            g = sl.f_or(a.args[0])
            return a if g is a.args[0] else self.str_(g)
        if k == "num":
            g = nm.n_or(a.args[0])
            return a if g is a.args[0] else self.num(g)
        if k == "bool":
            return self.bool_(a.args[0], a.args[1])
        return a

    def _is_full_atom(self, n: Node) -> bool:
        return n in (self.NULL, self.BOOL, self.NUM, self.STR, self.ARR, self.OBJ)

    def type_atom(self, kind: str) -> Node:
        return {
            "null": self.NULL,
            "bool": self.BOOL,
            "num": self.NUM,
            "str": self.STR,
            "arr": self.ARR,
            "obj": self.OBJ,
        }[kind]

    # --- intersection ---

    def and_(self, a: Node, b: Node) -> Node:
        if a is b:
            return a
        if a.kind == "never" or b.kind == "never":
            return self.NEVER
        if a.kind == "any":
            return b
        if b.kind == "any":
            return a
        # The memo key is canonical (the intersection is commutative), but the result is built
        # in argument order: a merged object lists `first`'s properties before `second`'s, so
        # callers that pass subschemas in the order they appear in the schema get that order.
        first, second = a, b
        if a.uid > b.uid:
            a, b = b, a
        key = (a, b)
        got = self._and_memo.get(key)
        if got is not None:
            return got
        self._spend(1)
        if a.kind == "ref" or b.kind == "ref":
            res = self.ref(("and", first, second))
        elif a.kind == "union" or b.kind == "union":
            xs = self._expand(first)
            ys = self._expand(second)
            # only alternatives of the same kind (or refs) can intersect
            pairs = [
                (x, y)
                for x in xs
                for y in ys
                if x.kind == y.kind or x.kind == "ref" or y.kind == "ref"
            ]
            if len(pairs) > 4 * self.max_alternatives:
                raise LimitExceededError("schema too complex: intersection of large unions")
            res = self.or_(*(self.and_(x, y) for x, y in pairs))
        else:
            res = self._and_atoms(first, second)
        self._and_memo[key] = res
        return res

    def _expand(self, n: Node) -> tuple[Node, ...]:
        """Alternatives of a union, with refs resolved when that is safe (not in progress)."""
        alts = n.args[0] if n.kind == "union" else (n,)
        if not any(x.kind == "ref" for x in alts):
            return alts
        out: list[Node] = []
        for x in alts:
            if x.kind == "ref" and x.args[0] not in self._in_progress:
                try:
                    r = self.resolve(x)
                except Unsupported:
                    out.append(x)
                    continue
                out.extend(r.args[0] if r.kind == "union" else (r,))
            else:
                out.append(x)
        return tuple(out)

    def and_all(self, items: Iterable[Node]) -> Node:
        acc = self.ANY
        for it in items:
            acc = self.and_(acc, it)
            if acc.kind == "never":
                return acc
        return acc

    def _and_atoms(self, a: Node, b: Node) -> Node:
        if a.kind != b.kind:
            return self.NEVER
        k = a.kind
        if k == "null":
            return a
        if k == "bool":
            return self.bool_(a.args[0] and b.args[0], a.args[1] and b.args[1])
        if k == "num":
            return self.num(nm.n_and(a.args[0], b.args[0]))
        if k == "str":
            return self.str_(sl.f_and(a.args[0], b.args[0]))
        if k == "arr":
            return self._and_arr(a, b)
        if k == "obj":
            return self._and_obj(a, b)
        raise AssertionError(k)

    def _and_arr(self, a: Node, b: Node) -> Node:
        pa, ra, mina, maxa, ca, ua, eva = a.args
        pb, rb, minb, maxb, cb, ub, evb = b.args
        n = max(len(pa), len(pb))
        prefix = []
        for i in range(n):
            x = pa[i] if i < len(pa) else ra
            y = pb[i] if i < len(pb) else rb
            prefix.append(self.and_(x, y))
        rest = self.and_(ra, rb)
        mx = maxa if maxb is None else (maxb if maxa is None else min(maxa, maxb))
        ev = (max(eva[0], evb[0]), eva[1] or evb[1], tuple(dict.fromkeys(eva[2] + evb[2])))
        return self.arr(prefix, rest, max(mina, minb), mx, ca + cb, ua or ub, ev)

    def tail_value(self, tail: Sequence[tuple[sl.Formula, Node]], name: str) -> Node:
        """The value node a tail-constrained key ``name`` gets."""
        return self.and_all(v for f, v in tail if sl.matches(f, name))

    def _and_obj(self, a: Node, b: Node) -> Node:
        propsa, reqa, taila, mina, maxa, depa, exa, eva = a.args
        propsb, reqb, tailb, minb, maxb, depb, exb, evb = b.args
        da, db = dict(propsa), dict(propsb)
        names = list(da) + [k for k in db if k not in da]
        props = []
        for k in names:
            x = da[k] if k in da else self.tail_value(taila, k)
            y = db[k] if k in db else self.tail_value(tailb, k)
            props.append((k, self.and_(x, y)))
        # tail constraints: a key that is unnamed in the result is unnamed in both
        tail = list(taila) + [t for t in tailb if t not in taila]
        mx = maxa if maxb is None else (maxb if maxa is None else min(maxa, maxb))
        return self.obj(
            props,
            set(reqa) | set(reqb),
            tail,
            max(mina, minb),
            mx,
            depa + depb,
            exa + exb,
            sl.f_or(eva, evb),
        )

    # --- complement ---

    def not_(self, a: Node) -> Node:
        got = self._not_memo.get(a)
        if got is not None:
            return got
        res = self._not(a)
        self._not_memo[a] = res
        return res

    def _not(self, a: Node) -> Node:
        k = a.kind
        if k == "any":
            return self.NEVER
        if k == "never":
            return self.ANY
        if k == "ref":
            return self.ref(("not", a))
        if k == "union":
            acc = self.ANY
            for alt in a.args[0]:
                acc = self.and_(acc, self.not_(alt))
            return acc
        others = [self.type_atom(t) for t in TYPE_KINDS if t != k]
        if k == "null":
            return self.or_(*others)
        if k == "bool":
            return self.or_(self.bool_(not a.args[0], not a.args[1]), *others)
        if k == "num":
            return self.or_(self.num(nm.n_not(a.args[0])), *others)
        if k == "str":
            return self.or_(self.str_(sl.f_not(a.args[0])), *others)
        if k == "arr":
            return self.or_(self._not_arr(a), *others)
        if k == "obj":
            return self.or_(self._not_obj(a), *others)
        raise AssertionError(k)

    def _not_arr(self, a: Node) -> Node:
        prefix, rest, mn, mx, contains, unique, _ev = a.args
        if unique:
            raise Unsupported("the complement of uniqueItems (arrays with duplicates)", "not")
        out = []
        if mn > 0:
            out.append(self.arr(max_items=mn - 1))
        if mx is not None:
            out.append(self.arr(min_items=mx + 1))
        for i, p in enumerate(prefix):
            np_ = self.not_(p)
            if np_.kind != "never":
                out.append(self.arr([self.ANY] * i + [np_], min_items=i + 1))
        nr = self.not_(rest)
        if nr.kind != "never":
            out.append(self.arr(contains=[(nr, 1, None, len(prefix))]))
        for node, lo, hi, start in contains:
            if lo > 0:
                out.append(self.arr(contains=[(node, 0, lo - 1, start)]))
            if hi is not None:
                out.append(self.arr(contains=[(node, hi + 1, None, start)]))
        return self.or_(*out)

    def _not_obj(self, a: Node) -> Node:
        props, req, tail, mn, mx, deps, exists, _ev = a.args
        out = []
        for k in req:
            out.append(self.obj(props=[(k, self.NEVER)]))
        for k, v in props:
            nv = self.not_(v)
            if nv.kind != "never":
                out.append(self.obj(props=[(k, nv)], required=[k]))
        named = [k for k, _ in props]
        unnamed = sl.f_not(sl.f_lit(*named)) if named else sl.ALL
        for f, v in tail:
            nv = self.not_(v)
            if nv.kind != "never":
                kf = sl.f_and(f, unnamed)
                if kf != sl.NOTHING:
                    out.append(self.obj(exists=[(kf, nv)]))
        if mn > 0:
            out.append(self.obj(max_props=mn - 1))
        if mx is not None:
            out.append(self.obj(min_props=mx + 1))
        for k, ds in deps:
            for d in ds:
                out.append(self.obj(props=[(k, self.ANY), (d, self.NEVER)], required=[k]))
        for f, v in exists:
            out.append(self.obj(tail=[(f, self.not_(v))]))
        return self.or_(*out)

    # --- matching concrete values (exact semantics of the IR) ---

    def matches(self, node: Node, value: Any, depth: int = 0) -> bool:
        if depth > MAX_RECURSION_DEPTH:
            raise Unsupported("value nesting too deep to check")
        k = node.kind
        if k == "any":
            return True
        if k == "never":
            return False
        if k == "ref":
            return self.matches(self.resolve(node), value, depth + 1)
        if k == "union":
            return any(self.matches(x, value, depth + 1) for x in node.args[0])
        vk = kind_of(value)
        if vk != k:
            return False
        if k == "null":
            return True
        if k == "bool":
            return bool(node.args[0] if value else node.args[1])
        if k == "num":
            return nm.n_matches(node.args[0], to_fraction(value), not isinstance(value, float))
        if k == "str":
            return sl.matches(node.args[0], value)
        if k == "arr":
            return self._match_arr(node, value, depth)
        if k == "obj":
            return self._match_obj(node, value, depth)
        raise AssertionError(k)

    def _match_arr(self, node: Node, value: list[Any], depth: int) -> bool:
        prefix, rest, mn, mx, contains, unique, _ev = node.args
        n = len(value)
        if n < mn or (mx is not None and n > mx):
            return False
        for i, item in enumerate(value):
            sch = prefix[i] if i < len(prefix) else rest
            if not self.matches(sch, item, depth + 1):
                return False
        for cnode, lo, hi, start in contains:
            c = sum(1 for item in value[start:] if self.matches(cnode, item, depth + 1))
            if c < lo or (hi is not None and c > hi):
                return False
        if unique:
            seen = []
            for item in value:
                key = canonical_value(item)
                if key in seen:
                    return False
                seen.append(key)
        return True

    def _match_obj(self, node: Node, value: dict[str, Any], depth: int) -> bool:
        props, req, tail, mn, mx, deps, exists, _ev = node.args
        pd = dict(props)
        n = len(value)
        if n < mn or (mx is not None and n > mx):
            return False
        for k in req:
            if k not in value:
                return False
        for k, v in value.items():
            sch = pd[k] if k in pd else self.tail_value(tail, k)
            if not self.matches(sch, v, depth + 1):
                return False
        for k, ds in deps:
            if k in value and any(d not in value for d in ds):
                return False
        for f, v in exists:
            if not any(
                sl.matches(f, k) and self.matches(v, x, depth + 1) for k, x in value.items()
            ):
                return False
        return True

    # --- views ---

    def alternatives(self, node: Node, depth: int = 0) -> list[Node]:
        """The node as a list of typed atoms (refs and unions at the top resolved)."""
        node = self.resolve(node)
        if node.kind == "never":
            return []
        if node.kind == "any":
            return [self.type_atom(t) for t in TYPE_KINDS]
        if node.kind == "union":
            out: list[Node] = []
            for a in node.args[0]:
                if depth > 64:
                    raise Unsupported("reference chain too deep", "$ref")
                out.extend(self.alternatives(a, depth + 1))
            return out
        return [node]


@lru_cache(maxsize=1)
def _constant_nodes() -> tuple[dict[int, tuple[Node, ...]], int, tuple[Node, ...]]:
    """The interning table of the constant nodes, their number, and the nodes (``ANY`` to
    ``OBJ``): the same in every algebra, and nodes are immutable, so they are built once."""
    alg = Algebra.__new__(Algebra)
    alg._table, alg._count, alg.max_nodes = {}, 0, 8
    alg._make_constants()
    nodes = (alg.ANY, alg.NEVER, alg.NULL, alg.BOOL, alg.NUM, alg.STR, alg.ARR, alg.OBJ)
    return alg._table, alg._count, nodes


def _subset_node(a: Node, b: Node) -> bool:
    """Cheap syntactic check that every value of ``a`` is a value of ``b``."""
    return a is b or b.kind == "any" or a.kind == "never"


def _obj_subsumes(b: Node, a: Node) -> bool:
    """Whether object atom ``b`` syntactically contains object atom ``a`` (``a`` redundant).

    Only when ``a`` carries no annotations beyond ``b``'s (so unevaluated* are unaffected).
    """
    pa, ra, ta, mina, maxa, da, ea, eva = a.args
    pb, rb, tb, minb, maxb, db, eb, evb = b.args
    if eva != evb and eva != sl.NOTHING:
        return False
    if not set(rb) <= set(ra) or minb > mina:
        return False
    if maxb is not None and (maxa is None or maxa > maxb):
        return False
    if not set(db) <= set(da) or not set(eb) <= set(ea) or not set(tb) <= set(ta):
        return False
    da_props = dict(pa)
    db_props = dict(pb)
    for k, vb in pb:
        va = da_props.get(k)
        if va is None or not _subset_node(va, vb):
            return False
    for k, va in pa:
        if k in db_props:
            continue
        for f, v in tb:
            if sl.matches(f, k) and not _subset_node(va, v):
                return False
    return True


def _carries_annotations(n: Node) -> bool:
    """Whether ``n`` may carry evaluation annotations (for unevaluated*) that matter."""
    if n.kind == "obj":
        return bool(n.args[7] != sl.NOTHING)
    if n.kind == "arr":
        return bool(n.args[6] != (0, False, ()))
    if n.kind == "ref":
        return _key_is_ann(n.args[0])
    return False


def _key_is_ann(key: Any) -> bool:
    if isinstance(key, tuple) and key and key[0] == "loc":
        return bool(key[3])
    if isinstance(key, tuple):
        return any(
            _key_is_ann(x.args[0]) for x in key[1:] if isinstance(x, Node) and x.kind == "ref"
        ) or any(isinstance(x, Node) and _carries_annotations(x) for x in key[1:])
    return False


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float, Fraction)):
        return "num"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "arr"
    if isinstance(value, dict):
        return "obj"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def to_fraction(value: Any) -> Fraction:
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError("non-finite number")
        return Fraction(repr(value))
    raise TypeError(type(value).__name__)


def canonical_value(value: Any) -> Any:
    """A hashable key with JSON equality (1 == 1.0, object key order irrelevant)."""
    k = kind_of(value)
    if k == "num":
        return ("num", to_fraction(value))
    if k == "arr":
        return ("arr", tuple(canonical_value(v) for v in value))
    if k == "obj":
        return ("obj", tuple(sorted((kk, canonical_value(v)) for kk, v in value.items())))
    return (k, value)
