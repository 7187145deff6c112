"""Number values: number formulas → regex terminals or DFA rules."""

from __future__ import annotations

from .. import _automata as am
from .. import _numbers as nm
from .. import _regex as rx
from .._ir import Node
from .base import EmitterBase
from .rules import Sym


class NumberRules(EmitterBase):
    def number(self, node: Node) -> Sym | None:
        f = node.args[0]
        try:
            real = nm.realize(f)
        except (am.AutomatonTooLarge, ValueError) as e:
            self.on_unsupported(
                f"number constraints too complex to enforce exactly ({e})", "multipleOf", node
            )
            real = nm.GENERIC_NUMBER
        if isinstance(real, am.DFA):
            return self.dfa_rules(real, False, "num")
        if real == rx.NONE or rx.is_empty(real):
            return None
        hint = (
            "integer" if f in (("int",), ("intplain",)) else "number" if f == nm.NUM_ALL else "num"
        )
        return self.regex_sym(real, hint)
