"""The emitter: IR nodes → KBNF rules, dispatching each node kind to its part."""

from __future__ import annotations

from typing import Any, Callable

from .._documents import depth_error
from .._ir import Algebra, Node, Unsupported
from .arrays import ArrayRules
from .generic import GenericRules
from .layout import Layout
from .numbers import NumberRules
from .objects import ObjectRules
from .regex_format import RX_RULES
from .rules import Sym


def fixed_names(layout: Layout, max_depth: int) -> set[str]:
    """The rule names the emitter writes without ``fresh``: the start rule, whitespace, the
    boolean rule, the generic value's rules (per depth in the indent layout) and the ``regex``
    format's grammar. (The engine's translation of common schemas, ``engine_rs/src/schema``,
    takes the compact layout's set too.)"""
    sfxs = [f"_d{d}" for d in range(max_depth + 1)] if layout.depth_dependent else [""]
    names = {"start", "ws", "boolean", *RX_RULES}
    for sfx in sfxs:
        names.update(f"json_{kind}{sfx}" for kind in ("value", "object", "array", "member"))
    return names


#: ``Emitter.memo``'s answer for a key not emitted yet (its values include None: no value).
_UNSEEN = object()


class Emitter(ObjectRules, ArrayRules, GenericRules, NumberRules):
    """Emits the rules of one translation; ``emit_start`` then ``render``."""

    def __init__(
        self,
        alg: Algebra,
        layout: Layout,
        max_depth: int,
        on_unsupported: Callable[[str, str, Node | None], None],
        is_empty: Callable[[Node], bool],
        on_subset: Callable[[str, str, Node | None], None] | None = None,
        max_schema_depth: int = 256,
        pointer_of: Callable[[Node], str | None] | None = None,
        max_number_length: int | None = None,
        property_order: str = "schema",
    ) -> None:
        super().__init__()
        # Rules named without `fresh` take their names first, so that no hint (a definition's
        # name, say `boolean` or `start`) gets one and replaces or borrows that rule.
        self.used_names.update(fixed_names(layout, max_depth))
        self.alg = alg
        # Arrays/objects being emitted, outermost first: their number is the nesting depth of
        # the values, bounded by max_schema_depth (so emission never runs out of stack).
        self.nest: list[Node] = []
        self.max_schema_depth = max_schema_depth
        self.pointer_of = pointer_of
        self.recursion_pointer: str | None = None  # where Python's recursion limit was hit
        self.layout = layout
        self.max_depth = max_depth
        self.max_number_length = max_number_length
        self.property_order = property_order
        self.on_unsupported = on_unsupported
        self.on_subset = on_subset
        self.realized = {}
        self.is_empty = is_empty
        self.memo = {}
        self.generic_done = set()

    def emit_start(self, node: Node) -> None:
        sym = self.value(node, 0)
        if sym is None:
            raise Unsupported("the schema accepts no value at all", "")
        if self.layout.mode == "flexible":
            self.add_rule("start", [["ws", sym, "ws"]])
        else:
            self.add_rule("start", [[sym]])

    def value(self, node: Node, depth: int) -> Sym | None:
        if not self.layout.depth_dependent:
            depth = 0
        elif depth > self.max_depth:
            return None
        key = (node, depth)
        got = self.memo.get(key, _UNSEEN)
        if got is not _UNSEEN:
            return got
        k = node.kind
        if k == "never":
            self.memo[key] = None
            return None
        if k == "ref":
            name = self.fresh(self._ref_hint(node.args[0], depth))
            self.memo[key] = name
            body = self.value(self.alg.resolve(node), depth)
            self.add_rule(name, [[body]] if body is not None else [])
            return name
        if k == "null":
            sym: Sym | None = "'null'"
        elif k == "bool":
            t, f = node.args
            sym = "'true'" if t and not f else "'false'" if f and not t else self._bool_rule()
        elif k == "any":
            sym = self.generic_value(depth)
        elif k == "union":
            alts = []
            for a in node.args[0]:
                s = self.value(a, depth)
                if s is not None:
                    alts.append([s])
            if not alts:
                sym = None
            elif len(alts) == 1:
                sym = alts[0][0]
            else:
                sym = self.fresh("any_of")
                self.add_rule(sym, alts)
        elif k == "num":
            sym = self.number(node)
        elif k == "str":
            sym = self.string(node.args[0], node, "str")
        elif k in ("arr", "obj"):
            self.nest.append(node)
            try:
                if len(self.nest) > self.max_schema_depth:
                    raise depth_error(self.max_schema_depth, self._nest_pointer())
                sym = self.array(node, depth) if k == "arr" else self.object(node, depth)
            except RecursionError:
                if self.recursion_pointer is None:
                    self.recursion_pointer = self._nest_pointer()
                raise
            finally:
                self.nest.pop()
        else:
            raise AssertionError(k)
        self.memo[key] = sym
        return sym

    def _nest_pointer(self) -> str:
        """The pointer of the innermost array/object being emitted that has a known origin."""
        if self.pointer_of is not None:
            for n in reversed(self.nest):
                p = self.pointer_of(n)
                if p is not None:
                    return p
        return ""

    def _ref_hint(self, key: Any, depth: int) -> str:
        if isinstance(key, tuple) and key and key[0] == "loc":
            frag = key[2].replace("|in-place", "")
            last = frag.rstrip("/").rsplit("/", 1)[-1] if frag else "root"
            name = last or "root"
        else:
            name = "def"
        return f"{name}_d{depth}" if self.layout.depth_dependent else name

    def _bool_rule(self) -> Sym:
        if "boolean" not in self.rules:
            self.add_rule("boolean", [["'true'"], ["'false'"]])
        return "boolean"

    def render(self) -> str:
        """The KBNF text of the rules reachable from ``start`` (unproductive ones dropped)."""
        return self.render_rules(self.layout.max_ws if self.layout.mode == "flexible" else None)
