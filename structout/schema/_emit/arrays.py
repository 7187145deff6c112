"""Arrays: prefix items, rest items, length bounds, ``contains`` counting and ``uniqueItems``."""

from __future__ import annotations

from typing import Any

from .. import _string_formulas as sl
from .._ir import Node, Unsupported
from .base import EmitterBase
from .layout import kbnf_literal
from .rules import Alt, Sym, rep, unique_list

MAX_ARRAY_STATES = 4000


class ArrayRules(EmitterBase):
    def array(self, node: Node, depth: int) -> Sym | None:
        prefix, rest, mn, mx, contains, unique, _ev = node.args
        lay = self.layout
        if unique:
            return self._unique_array(node, depth)
        name = self.fresh("array")
        self.memo[(node, depth)] = name
        alts: list[Alt] = []
        if contains:
            body = self._array_automaton(node, depth, name)
            if body is None:
                self.add_rule(name, [])
                return name
            empty_ok, nonempty = body
            if empty_ok:
                alts.append(lay.empty("[]"))
            if nonempty is not None:
                alts.append(lay.open("[", depth) + [nonempty] + lay.close("]", depth))
            self.add_rule(name, alts)
            return name
        item_syms, rest_sym, mx = self._item_syms(prefix, rest, mx, depth)
        if mx is not None and mx < mn:
            self.add_rule(name, [])
            return name
        if mn == 0:
            alts.append(lay.empty("[]"))
        if mx is None or mx > 0:
            seq = self._array_seq(item_syms, rest_sym, mn, mx, depth, name)
            if seq is not None:
                alts.append(lay.open("[", depth) + seq + lay.close("]", depth))
        self.add_rule(name, alts)
        return name

    def _item_syms(
        self, prefix: list[Node], rest: Node, mx: int | None, depth: int
    ) -> tuple[list[Sym | None], Sym | None, int | None]:
        """The symbols of the prefix items and of the rest, and the effective max length: no
        item from the first prefix item that matches nothing on, none beyond the prefix when
        the rest matches nothing."""
        item_syms = [self.value(p, depth + 1) for p in prefix]
        rest_sym = self.value(rest, depth + 1)
        for i, s in enumerate(item_syms):
            if s is None:
                mx = i if mx is None else min(mx, i)
                break
        if rest_sym is None:
            mx = len(prefix) if mx is None else min(mx, len(prefix))
        return item_syms, rest_sym, mx

    def _array_seq(
        self,
        items: list[Sym | None],
        rest: Sym | None,
        mn: int,
        mx: int | None,
        depth: int,
        base: str,
    ) -> Alt | None:
        """Symbols for a non-empty item sequence (prefix items then rest items)."""
        lay = self.layout
        comma = lay.comma(depth)
        p = len(items)
        if p == 0:
            assert rest is not None
            lo = max(mn, 1) - 1
            hi = None if mx is None else mx - 1
            rep = self._repeat(comma + [rest], lo, hi, base)
            return [rest] + rep
        # chain over prefix positions: tail(j) = items from position j on (j >= 1 emitted)
        nxt: str | None = None
        for j in range(p, 0, -1):
            tname = self.fresh(f"{base}_from{j}")
            alts: list[Alt] = []
            if j < p:
                if mx is None or j < mx:
                    sym = items[j]
                    if sym is not None:
                        alts.append(comma + [sym] + ([nxt] if nxt else []))
                if j >= mn:
                    alts.append(["''"])
            else:
                # rest items: between max(mn - p, 0) and mx - p more
                lo = max(mn - p, 0)
                hi = None if mx is None else mx - p
                if rest is not None and (hi is None or hi > 0):
                    alts.append(self._repeat(comma + [rest], lo, hi, f"{base}_rest") or ["''"])
                elif lo == 0:
                    alts.append(["''"])
            self.add_rule(tname, alts)
            nxt = tname
        first = items[0]
        if first is None:
            return None
        return [first, nxt] if nxt else [first]

    def _repeat(self, seq: Alt, lo: int, hi: int | None, hint: str) -> Alt:
        """Symbols for ``seq{lo,hi}``."""
        if hi is not None and hi == 0:
            return []
        return [rep(seq, lo, hi)]

    def _array_automaton(self, node: Node, depth: int, base: str) -> tuple[bool, str | None] | None:
        """Arrays with contains constraints: rules over (length, counts) states."""
        alg = self.alg
        prefix, rest, mn, mx, contains, _u, _ev = node.args
        p = len(prefix)
        if len(contains) > 4:
            raise Unsupported("more than 4 contains constraints on one array", "contains")
        caps = []
        for _c, lo, hi, _st in contains:
            caps.append(hi + 1 if hi is not None else lo)
        nmax = mx if mx is not None else max(mn, p, 1, max((st for *_, st in contains), default=0))
        lay = self.layout
        comma = lay.comma(depth)
        states: dict[tuple[int, tuple[int, ...]], str] = {}
        todo: list[tuple[int, tuple[int, ...]]] = []
        complements: dict[Node, Node] = {}

        def state(n: int, counts: tuple[int, ...]) -> str:
            key = (n, counts)
            if key not in states:
                if len(states) > MAX_ARRAY_STATES:
                    raise Unsupported("array constraints need too many grammar states", "contains")
                states[key] = self.fresh(f"{base}_q")
                todo.append(key)
            return states[key]

        def accepting(n: int, counts: tuple[int, ...]) -> bool:
            if n < mn:
                return False
            for (_c, lo, hi, _st), k in zip(contains, counts):
                if k < lo or (hi is not None and k > hi):
                    return False
            return True

        start = state(0, tuple(0 for _ in contains))
        start_empty = accepting(0, tuple(0 for _ in contains))
        while todo:
            n, counts = todo.pop()
            name = states[(n, counts)]
            alts: list[Alt] = []
            if n > 0 and accepting(n, counts):
                alts.append(["''"])
            if mx is None or n < mx:
                pos = n
                base_item = prefix[pos] if pos < p else rest
                # choices per contains constraint: hit, or miss (exact when capped above)
                choices: list[list[tuple[Node, int]]] = []
                for (c, _lo, hi, st), _k in zip(contains, counts):
                    if pos < st:
                        choices.append([(alg.ANY, 0)])
                        continue
                    opts = [(c, 1)]
                    if hi is not None:
                        if c not in complements:
                            complements[c] = alg.not_(c)
                        opts.append((complements[c], 0))
                    else:
                        opts.append((alg.ANY, 0))
                    choices.append(opts)
                combos: list[list[tuple[Node, int]]] = [[]]
                for ch in choices:
                    combos = [cmb + [o] for cmb in combos for o in ch]
                for cmb in combos:
                    item = base_item
                    for c_node, _inc in cmb:
                        item = alg.and_(item, c_node)
                    sym = self.value(item, depth + 1)
                    if sym is None:
                        continue
                    n2 = n + 1 if (mx is not None or n + 1 <= nmax) else nmax
                    if mx is None and n2 > nmax:
                        n2 = nmax
                    new_counts = tuple(
                        min(k + inc, cap) if cap else k + inc
                        for (k, (_c, inc), cap) in zip(counts, cmb, caps)
                    )
                    # counts above a max are dead
                    dead = any(
                        hi is not None and nk > hi
                        for nk, (_c, _lo, hi, _st) in zip(new_counts, contains)
                    )
                    if dead:
                        continue
                    nxt = state(n2, new_counts)
                    sep = [] if n == 0 else comma
                    alts.append(sep + [sym, nxt])
            self.add_rule(name, alts)
        return start_empty, start

    def _unique_array(self, node: Node, depth: int) -> Sym | None:
        """uniqueItems: rules over the subsets used when every item comes from a small finite
        set of values (exact and cheap), else the engine's ``unique!`` (items compared as JSON
        values while they are read)."""
        prefix, rest, mn, mx, contains, _u, _ev = node.args
        if contains:
            raise Unsupported("uniqueItems together with contains", "uniqueItems")
        domains = [self.finite_values(x) for x in list(prefix) + [rest]]
        universe: list[Any] = []
        for d in domains:
            for v in d or []:
                if v not in universe:
                    universe.append(v)
        if any(d is None for d in domains) or len(universe) > 8:
            return self._unique_list(node, depth)
        lay = self.layout
        comma = lay.comma(depth)
        name = self.fresh("unique_array")
        p = len(prefix)
        states: dict[tuple[int, frozenset[int]], str] = {}
        todo: list[tuple[int, frozenset[int]]] = []

        def state(n: int, used: frozenset[int]) -> str:
            key = (min(n, p), used)
            if key not in states:
                states[key] = self.fresh(f"{name}_q")
                todo.append((n, used))
            return states[key]

        lit_syms = [self.literal_sym(v, depth + 1) for v in universe]
        start = state(0, frozenset())
        seen_keys = set()
        while todo:
            n, used = todo.pop()
            key = (min(n, p), used)
            if key in seen_keys:
                continue
            seen_keys.add(key)
            st = states[key]
            alts: list[Alt] = []
            if n > 0 and n >= mn:
                alts.append(["''"])
            if mx is None or n < mx:
                dom = domains[n] if n < p else domains[p]
                for i, v in enumerate(universe):
                    if i in used or v not in (dom or []):
                        continue
                    sep = [] if n == 0 else comma
                    alts.append(sep + [lit_syms[i], state(n + 1, used | {i})])
            self.add_rule(st, alts)
        alts = []
        if mn == 0:
            alts.append(lay.empty("[]"))
        alts.append(lay.open("[", depth) + [start] + lay.close("]", depth))
        self.add_rule(name, alts)
        return name

    def _unique_list(self, node: Node, depth: int) -> Sym:
        """uniqueItems over any items: ``unique!(comma, p1, ..., rest, min, max)`` (item i
        matches the i-th member, the last member every later item; the engine refuses an
        item equal to an earlier one, prefix items included)."""
        prefix, rest, mn, mx, _c, _u, _ev = node.args
        lay = self.layout
        name = self.fresh("unique_array")
        self.memo[(node, depth)] = name
        item_syms, rest_sym, mx = self._item_syms(prefix, rest, mx, depth)
        p = len(prefix)
        if mx is not None and mx < mn:
            self.add_rule(name, [])
            return name
        alts: list[Alt] = []
        if mn == 0:
            alts.append(lay.empty("[]"))
        if mx is None or mx > 0:
            members = item_syms[:mx] if mx is not None and mx <= p else item_syms + [rest_sym]
            body = unique_list(lay.comma(depth), members, max(mn, 1), mx)
            alts.append(lay.open("[", depth) + [body] + lay.close("]", depth))
        self.add_rule(name, alts)
        return name

    def finite_values(self, node: Node, limit: int = 8) -> list[Any] | None:
        """Canonical JSON texts of all values of ``node`` when they are few (else None)."""
        alg = self.alg
        out: list[Any] = []
        for a in alg.alternatives(node):
            if a.kind == "null":
                vals: list[Any] | None = [None]
            elif a.kind == "bool":
                vals = ([True] if a.args[0] else []) + ([False] if a.args[1] else [])
            elif a.kind == "str":
                ss = sl.finite_values(a.args[0], limit)
                vals = None if ss is None else list(ss)
            elif a.kind == "num":
                f = a.args[0]
                if f[0] == "iv" and f[1] is not None and f[1] == f[3] and f[2] and f[4]:
                    v = f[1]
                    vals = [int(v) if v.denominator == 1 else float(v)]
                else:
                    vals = None
            else:
                vals = None
            if vals is None:
                return None
            for v in vals:
                if v not in out:
                    out.append(v)
            if len(out) > limit:
                return None
        return out

    def literal_sym(self, value: Any, depth: int) -> Sym:
        return kbnf_literal(self.layout.dumps(value))
