"""Number values: number formulas → regex terminals or DFA rules."""

from __future__ import annotations

from .. import _automata as am
from .. import _json_text as tr
from .. import _numbers as nm
from .. import _regex as rx
from .._ir import Node
from .base import EmitterBase
from .regex_rules import fits
from .rules import Sym

# Nearly every grammar holds these: printed (and measured, see regex_rules.metrics) once per
# process.
tr.print_once(nm.GENERIC_NUMBER)
tr.print_once(nm.GENERIC_INTEGER)


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
        return self.number_terminal(real, hint)

    def number_terminal(self, real: rx.Node, hint: str) -> Sym:
        """The symbol of a number regex; with ``max_number_length`` set, only its texts of at most
        that many characters (the engine's exact ``len!``): a sound subset for generation, where
        a small model may otherwise write digits until its token budget runs out."""
        limit = self.max_number_length
        if limit is None or not fits(real):
            return self.regex_sym(real, hint)
        return self.shared_rule([f'len!(#"{tr.to_rust(real)}", 1, {limit})'], hint)
