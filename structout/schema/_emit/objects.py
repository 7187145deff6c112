"""Objects: named members in schema order, tail regions of other keys, counting, dependencies.

Named properties come first (required ones always present, optional ones may be left out),
then the other allowed keys. With ``property_order="any"`` an object without tail-exists
constraints takes its members in any order instead: one ``any_order!`` of the named members
(each at most once, the required ones exactly once) and the other keys (any number), with
``minProperties``/``maxProperties`` as the ``any_order!``'s counts of members read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _automata as am
from .. import _string_formulas as sl
from .._ir import Node, Unsupported
from .arrays import MAX_ARRAY_STATES
from .rules import Alt, Sym, any_order, rep
from .strings import StringRules

MAX_OBJ_VARIANTS = 64
MAX_TAIL_REGIONS = 64
MAX_TAIL_EXISTS = 4
# Objects with more named members than this (and no property counting) use the segment-tree
# rules of ObjectRules._object_tree (linear rules, O(n log n) normalized grammar).
TREE_MIN_MEMBERS = 24


class ObjVariant:
    __slots__ = ("named", "required", "texists")

    def __init__(
        self, named: dict[str, Node], required: set[str], texists: list[tuple[sl.Formula, Node]]
    ) -> None:
        self.named = named
        self.required = required
        self.texists = texists


class ObjectRules(StringRules):
    def object(self, node: Node, depth: int) -> Sym | None:
        variants = self._obj_variants(node)
        name = self.fresh("object")
        self.memo[(node, depth)] = name
        props, req, tail, mn, mx, deps, _exists, _ev = node.args
        order = [k for k, _ in props]
        listed = set(order)
        for k in [*req, *(dk for dk, _ in deps), *(d for _, ds in deps for d in ds)]:
            if k not in listed:
                listed.add(k)
                order.append(k)
        regions = self._tail_regions(tail, order, node)
        alts: list[Alt] = []
        for var in variants:
            alts.extend(self._object_variant(var, order, regions, mn, mx, depth, name))
        self.add_rule(name, alts)
        return name

    def _obj_variants(self, node: Node) -> list[ObjVariant]:
        alg = self.alg
        props, req, tail, _mn, _mx, deps, exists, _ev = node.args
        named: dict[str, Node] = dict(props)
        # keys that must be named: required ones, then each dependency's key and its keys
        for k in [*req, *(x for dk, ds in deps for x in (dk, *ds))]:
            if k not in named:
                named[k] = alg.tail_value(tail, k)
        variants = [ObjVariant(named, set(req), [])]
        for k, ds in deps:
            new = []
            for v in variants:
                if k in v.required:
                    new.append(ObjVariant(v.named, v.required | set(ds), v.texists))
                else:
                    absent = dict(v.named)
                    absent[k] = alg.NEVER
                    new.append(ObjVariant(absent, v.required, v.texists))
                    new.append(ObjVariant(v.named, v.required | {k} | set(ds), v.texists))
            variants = new
            if len(variants) > MAX_OBJ_VARIANTS:
                raise Unsupported("too many dependentRequired combinations", "dependentRequired")
        for f, val in exists:
            new = []
            for v in variants:
                for k, kv in v.named.items():
                    if kv.kind != "never" and sl.matches(f, k):
                        nd = dict(v.named)
                        nd[k] = alg.and_(kv, val)
                        new.append(ObjVariant(nd, v.required | {k}, v.texists))
                new.append(ObjVariant(v.named, v.required, v.texists + [(f, val)]))
            variants = new
            if len(variants) > MAX_OBJ_VARIANTS:
                raise Unsupported("object constraints need too many variants", "not")
        out = []
        for v in variants:
            if any(v.named[k].kind == "never" for k in v.required):
                continue
            out.append(v)
        return out

    def _tail_regions(
        self, tail: Sequence[tuple[sl.Formula, Node]], order: list[str], node: Node
    ) -> list[tuple[sl.Formula, Node]]:
        """Partition unnamed keys by which tail constraints apply; drop impossible parts.

        Regions are split one constraint at a time (inside / outside its key language) and
        empty key languages are dropped right away, so disjoint patterns stay linear. Regions
        whose keys can have no value are dropped at the end; until then their emptiness only
        counts towards the limit, so it is decided only when the limit is reached (their
        parts are no larger: dropping them then leaves the same regions).
        """
        alg = self.alg
        if (
            2 ** len(tail) <= MAX_TAIL_REGIONS
            and all(v.kind == "never" for _, v in tail)
            and any(f == sl.ALL for f, _ in tail)
        ):
            # No key outside the named ones (``additionalProperties: false``): every region but
            # the one outside all the key languages has no value, and that one is empty (the
            # split cannot reach the limit).
            return []
        unnamed = sl.f_not(sl.f_lit(*order)) if order else sl.ALL
        # (key language, value, whether the language is known not to be empty)
        regions: list[tuple[sl.Formula, Node, bool]] = [(unnamed, alg.ANY, True)]
        for f, v in tail:
            split: list[tuple[sl.Formula, Node, bool]] = []
            for kf, val, _ in regions:
                for part_f, part_v in (
                    (sl.f_and(kf, f), alg.and_(val, v)),
                    (sl.f_and(kf, sl.f_not(f)), val),
                ):
                    if part_f == sl.NOTHING:
                        continue
                    if part_v.kind == "never":
                        split.append((part_f, part_v, False))
                    elif not self._key_empty(part_f):
                        split.append((part_f, part_v, True))
            regions = split
            if len(regions) > MAX_TAIL_REGIONS:
                regions = [r for r in regions if r[2] or not self._key_empty(r[0])]
                regions = [(kf, val, True) for kf, val, _ in regions]
                if len(regions) > MAX_TAIL_REGIONS:
                    raise Unsupported("too many overlapping patternProperties", "patternProperties")
        return [(kf, val) for kf, val, _ in regions if val.kind != "never"]

    def _key_empty(self, f: sl.Formula) -> bool:
        try:
            return sl.is_empty(f)
        except am.AutomatonTooLarge:
            return False

    def _object_variant(
        self,
        var: ObjVariant,
        order: list[str],
        regions: list[tuple[sl.Formula, Node]],
        mn: int,
        mx: int | None,
        depth: int,
        base: str,
    ) -> list[Alt]:
        alg = self.alg
        lay = self.layout
        comma = lay.comma(depth)
        colon = lay.colon()
        # named members (in order, as their key literal), skipping forbidden ones
        members: list[tuple[Sym, Sym, bool]] = []
        for k in order:
            v = var.named[k]
            sym = self.value(v, depth + 1) if v.kind != "never" else None
            if sym is None:
                if k in var.required:
                    return []
                continue
            members.append((lay.key_literal(k), sym, k in var.required))
        # tail items: plain regions, and per tail-exists "hit" items
        region_items: list[Alt] = []
        for kf, v in regions:
            ks = self.string(kf, None, "key", compact=True)
            vs = self.value(v, depth + 1)
            if ks is not None and vs is not None:
                region_items.append([ks] + colon + [vs])
        # one tail member may satisfy several tail-exists constraints at once
        nex = len(var.texists)
        if nex > MAX_TAIL_EXISTS:
            raise Unsupported("too many 'some key must ...' constraints on one object", "not")
        hit_items: list[tuple[frozenset[int], list[Alt]]] = []
        for mask in range(1, 1 << nex):
            group = [var.texists[j] for j in range(nex) if mask >> j & 1]
            hits = []
            for kf, v in regions:
                keyf = sl.f_and(kf, *(f for f, _ in group))
                ks = self.string(keyf, None, "key", compact=True) if keyf != sl.NOTHING else None
                vs = self.value(alg.and_all([v, *(w for _, w in group)]), depth + 1)
                if ks is not None and vs is not None:
                    hits.append([ks, *colon, vs])
            if hits:
                hit_items.append((frozenset(j for j in range(nex) if mask >> j & 1), hits))
        counting = mn > 0 or mx is not None
        n = len(members)
        start: Sym
        if self._takes_any_order(members, bool(region_items), bool(nex), mn, mx):
            start = self._object_any_order(members, region_items, comma, colon, base, mn, mx)
        elif not counting and not nex:
            if n > TREE_MIN_MEMBERS:
                return self._object_tree(members, region_items, depth, base)
            start = self._object_chain(members, region_items, comma, colon, base)
        else:
            start = self._object_states(
                members, region_items, hit_items, nex, mn, mx, comma, colon, base
            )
        out: list[Alt] = []
        empty_ok = not any(r for _, _, r in members) and (not counting or mn == 0) and nex == 0
        if empty_ok:
            out.append(lay.empty("{}"))
        out.append(lay.open("{", depth) + [start] + lay.close("}", depth))
        return out

    def _takes_any_order(
        self,
        members: list[tuple[Sym, Sym, bool]],
        others: bool,
        texists: bool,
        mn: int,
        mx: int | None,
    ) -> bool:
        """Whether an object's members are emitted in any order: asked for, no tail-exists
        constraint, an order to free (two members, or one and other keys), and some non-empty
        object within ``minProperties``/``maxProperties`` (otherwise the schema-order rules
        decide that nothing but ``{}``, or nothing, is left). Otherwise the schema's order (a
        sound subset: the same documents, some in fewer key orders)."""
        named = len(members)
        required = sum(1 for _, _, r in members if r)
        return (
            self.property_order == "any"
            and not texists
            and (named >= 2 or (named == 1 and others))
            and (mx is None or (mx >= 1 and required <= mx))
            and (others or named >= mn)
        )

    def _object_any_order(
        self,
        members: list[tuple[Sym, Sym, bool]],
        region_items: list[Alt],
        comma: Alt,
        colon: Alt,
        base: str,
        mn: int,
        mx: int | None,
    ) -> Sym:
        """``any_order!(comma, m_1, m_2?, ..., kv*, mn, mx)``: every named member at most once
        (a required one exactly once), the other keys' pairs any number of times, and from
        ``minProperties`` to ``maxProperties`` of them in all (the counts only when given)."""
        args: list[tuple[str, str]] = []
        for key_lit, sym, required in members:
            name = self.fresh(f"{base}_m")
            self.add_rule(name, [[key_lit, *colon, sym]])
            args.append((name, "" if required else "?"))
        if region_items:
            item = self.fresh(f"{base}_kv")
            self.add_rule(item, region_items)
            args.append((item, "*"))
        return any_order(comma, args, mn, mx)

    def _object_chain(
        self,
        members: list[tuple[Sym, Sym, bool]],
        region_items: list[Alt],
        comma: Alt,
        colon: Alt,
        base: str,
    ) -> str:
        """The start state of an object without counting or tail-exists constraints: states
        ``(i, first)`` before named member ``i`` (``i == n + 1``: the other keys after them; the
        state after the last member is that state, not a rule naming it), ``first``: nothing
        emitted yet. States are named and built from a stack in the order of
        :meth:`_object_states` (at most ``2 * (n + 2)`` of them: within its budget).
        """
        n = len(members)
        item_alt = None
        if region_items:
            item_alt = self.fresh(f"{base}_kv")
            self.add_rule(item_alt, region_items)
            more = rep(comma + [item_alt], 0, None)
        rules: dict[tuple[int, bool], str] = {}
        todo: list[tuple[int, bool]] = []
        hint = f"{base}_m"

        def rule(key: tuple[int, bool]) -> str:
            if key[0] == n:  # (after the last named member: the other keys' state itself)
                key = (n + 1, key[1])
            name = rules.get(key)
            if name is None:
                name = rules[key] = self.fresh(hint)
                todo.append(key)
            return name

        start = rule((0, True))
        while todo:
            key = todo.pop()
            i, first = key
            alts: list[Alt]
            if i < n:
                key_lit, sym, required = members[i]
                nxt = rule((i + 1, False))
                alts = [
                    [key_lit, *colon, sym, nxt] if first else [*comma, key_lit, *colon, sym, nxt]
                ]
                if not required:
                    alts.append([rule((i + 1, first))])
            elif item_alt is not None:
                alts = [[item_alt, more] if first else [more]]
            else:
                alts = [] if first else [["''"]]
            self.add_rule(rules[key], alts)
        return start

    def _object_states(
        self,
        members: list[tuple[Sym, Sym, bool]],
        region_items: list[Alt],
        hit_items: list[tuple[frozenset[int], list[Alt]]],
        nex: int,
        mn: int,
        mx: int | None,
        comma: Alt,
        colon: Alt,
        base: str,
    ) -> str:
        """The start state of an object with counting or tail-exists constraints."""
        counting = mn > 0 or mx is not None
        n = len(members)
        full = frozenset(range(nex))
        rules: dict[tuple[Any, ...], str] = {}
        todo: list[tuple[Any, ...]] = []

        def clamp(c: int) -> int:
            if not counting:
                return 0
            return c if mx is not None else min(c, mn)

        # Without counting there are at most 2 states per named member plus the tail states
        # (linear in the schema); the budget bounds what counting adds on top.
        budget = MAX_ARRAY_STATES + 2 * (n + 2) * (1 << nex)

        hint = f"{base}_m"

        def rule(key: tuple[Any, ...]) -> str:
            name = rules.get(key)
            if name is None:
                if len(rules) > budget:
                    raise Unsupported(
                        "object constraints need too many grammar states", "minProperties"
                    )
                name = rules[key] = self.fresh(hint)
                todo.append(key)
            return name

        # states: ("named", i, c, first) before named member i, ("tail", c, first, sat) after
        # them; c counts members (clamped), first: nothing emitted yet, sat: tail-exists met
        start = rule(("named", 0, 0, True))
        while todo:
            key = todo.pop()
            name = rules[key]
            alts: list[Alt] = []
            if key[0] == "named":
                _, i, c, first = key
                if i == n:
                    alts.append([rule(("tail", c, first, frozenset()))])
                else:
                    key_lit, sym, required = members[i]
                    sep = [] if first else comma
                    c2 = c + 1
                    if mx is None or c2 <= mx:
                        nxt = rule(("named", i + 1, clamp(c2), False))
                        alts.append([*sep, key_lit, *colon, sym, nxt])
                    if not required:
                        alts.append([rule(("named", i + 1, c, first))])
            else:
                _, c, first, sat = key
                done = (not counting or c >= mn) and sat == full
                if done and not first:
                    alts.append(["''"])
                sep = [] if first else comma
                c2 = c + 1
                if mx is None or c2 <= mx:
                    for it in region_items:
                        alts.append(sep + it + [rule(("tail", clamp(c2), False, sat))])
                    for hit_group, hits in hit_items:
                        for it in hits:
                            alts.append(
                                sep + it + [rule(("tail", clamp(c2), False, sat | hit_group))]
                            )
            self.add_rule(name, alts)
        return start

    def _object_tree(
        self, members: list[tuple[Sym, Sym, bool]], region_items: list[Alt], depth: int, base: str
    ) -> list[Alt]:
        """Objects with many named members and no counting: rules linear in the members, and
        normalized grammars of O(n log n) symbols.

        The chain form (``after_i ::= ', ' member_i after_{i+1} | after_{i+1}``) has unit and
        nullable chains that grammar normalization inlines into O(n^2) productions (5,000
        optional properties: 60M symbols). Here the state after member ``i`` offers the next
        member directly: ``after_i ::= '' | ', ' pick[a,b) | ...`` where the ranges ``[a,b)``
        are the O(log n) nodes of a segment tree over the members that cover the allowed next
        members (up to the next required one); ``pick[a,b) ::= pick[a,m) | pick[m,b)`` and the
        leaf ``pick[j,j+1) ::= key_j ': ' value_j after_{j+1}``. Same language, same order.
        """
        lay = self.layout
        comma = lay.comma(depth)
        colon = lay.colon()
        n = len(members)
        next_req = [n] * (n + 1)  # first required member at index >= i (n: none)
        for i in range(n - 1, -1, -1):
            next_req[i] = i if members[i][2] else next_req[i + 1]
        item_alt = None
        if region_items:
            item_alt = self.fresh(f"{base}_kv")
            self.add_rule(item_alt, region_items)
        more = [rep(comma + [item_alt], 0, None)] if item_alt is not None else []
        after: dict[int, str] = {}
        picks: dict[tuple[int, int], str] = {}

        def pick(a: int, b: int) -> str:
            name = picks.get((a, b))
            if name is None:
                name = picks[(a, b)] = self.fresh(f"{base}_p")
                todo.append(("pick", a, b))
            return name

        def after_sym(i: int) -> str:
            name = after.get(i)
            if name is None:
                name = after[i] = self.fresh(f"{base}_a")
                todo.append(("after", i, 0))
            return name

        def choices(i: int) -> list[tuple[int, int]]:
            """The member ranges that may come next after deciding members before ``i``."""
            hi = min(next_req[i] + 1, n)
            return _cover(i, hi, 0, n) if i < hi else []

        todo: list[tuple[str, int, int]] = []
        out: list[Alt] = []
        if next_req[0] == n:
            out.append(lay.empty("{}"))
            if item_alt is not None:
                out.append(lay.open("{", depth) + [item_alt, *more] + lay.close("}", depth))
        for a, b in choices(0):
            out.append(lay.open("{", depth) + [pick(a, b)] + lay.close("}", depth))
        while todo:
            kind, a, b = todo.pop()
            if kind == "pick":
                if b - a == 1:
                    key_lit, sym, _req = members[a]
                    alts = [[key_lit, *colon, sym, after_sym(a + 1)]]
                else:
                    m = (a + b) // 2
                    alts = [[pick(a, m)], [pick(m, b)]]
                self.add_rule(picks[(a, b)], alts)
            else:
                i = a
                alts = [comma + [pick(c, d)] for c, d in choices(i)]
                if next_req[i] == n:
                    alts.append(["''"])
                    if item_alt is not None:
                        alts.append(comma + [item_alt, *more])
                self.add_rule(after[i], alts)
        return out


def _cover(lo: int, hi: int, a: int, b: int) -> list[tuple[int, int]]:
    """Segment-tree nodes [a', b') of the tree over [a, b) partitioning [lo, hi) (lo < hi)."""
    if lo <= a and b <= hi:
        return [(a, b)]
    m = (a + b) // 2
    out = []
    if lo < m:
        out.extend(_cover(lo, hi, a, m))
    if hi > m:
        out.extend(_cover(lo, hi, m, b))
    return out
