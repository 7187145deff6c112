"""What every part of the emitter shares: the state, and the calls the parts make to each other."""

from __future__ import annotations

from typing import Any, Callable

from .. import _regex as rx
from .. import _string_formulas as sl
from .._ir import Algebra, Node
from .layout import Layout
from .regex_rules import RegexRules
from .rules import Sym


class EmitterBase(RegexRules):
    """State shared by the parts (initialized by :class:`Emitter`).

    ``memo`` maps (IR node, depth) to its symbol; a node is emitted once per depth (depth is
    always 0 outside the indent layout), so shared subschemas become shared rules.
    """

    alg: Algebra
    layout: Layout
    max_depth: int
    #: Most characters a number may have (None: unbounded); see NumberRules.number_terminal.
    max_number_length: int | None
    #: ``"schema"``: object members in the schema's order; ``"any"``: in any order.
    property_order: str
    on_unsupported: Callable[[str, str, Node | None], None]
    on_subset: Callable[[str, str, Node | None], None] | None
    # (id(formula), key mode) -> (formula, realized): by identity, with no hash of a large
    # formula (IR nodes are interned, so a formula is looked up as the same object)
    realized: dict[tuple[int, bool], tuple[sl.Formula, Any]]
    memo: dict[tuple[Node, int], Sym | None]

    def value(self, node: Node, depth: int) -> Sym | None:
        """The symbol of the values of ``node`` at nesting ``depth`` (None: no value)."""
        raise NotImplementedError

    def number_terminal(self, real: rx.Node, hint: str) -> Sym:
        """The symbol of a number regex (see :class:`NumberRules`)."""
        raise NotImplementedError
