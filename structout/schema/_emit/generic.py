"""Any JSON value (the ``true`` schema): one shared set of ``json_*`` rules per depth."""

from __future__ import annotations

from .. import _numbers as nm
from .layout import Layout
from .rules import Alt, Sym, render_rule, rep
from .strings import StringRules

#: The rendered json_object/json_member/json_array/json_value rules of the depth-independent
#: layouts by (layout mode, string rule, number rule), for the usual names of those two rules
#: (the generic string's, and the names a number rule of the generic number's text gets): a
#: process-wide constant of at most 6 entries (the rules depend on nothing else), rendered at
#: first use.
_USUAL_BLOCKS: dict[tuple[str, Sym, Sym], list[tuple[str, list[str], list[list[str]]]]] = {}
_USUAL_STRINGS = frozenset(["json_string"])
_USUAL_NUMBERS = frozenset(["json_number", "number", "num"])


class GenericRules(StringRules):
    generic_done: set[str]  # names of the json_value rules already emitted

    def generic_value(self, depth: int) -> Sym | None:
        if self.layout.depth_dependent and depth > self.max_depth:
            return None
        sfx = f"_d{depth}" if self.layout.depth_dependent else ""
        name = f"json_value{sfx}"
        if name in self.generic_done:
            return name
        self.generic_done.add(name)
        # (the json_* names are the emitter's fixed names, taken before any other)
        string = self.generic_string()
        number = self.number_terminal(nm.GENERIC_NUMBER, "json_number")
        child = self.generic_value(depth + 1)
        lay = self.layout
        if not lay.depth_dependent and string in _USUAL_STRINGS and number in _USUAL_NUMBERS:
            key = (lay.mode, string, number)
            block = _USUAL_BLOCKS.get(key)
            if block is None:
                block = _USUAL_BLOCKS[key] = [
                    (n, *render_rule(alts))
                    for n, alts in _generic_rules(lay, depth, sfx, string, number, child)
                ]
        else:
            block = [
                (n, *render_rule(alts))
                for n, alts in _generic_rules(lay, depth, sfx, string, number, child)
            ]
        for n, texts, refs in block:
            self.add_rendered(n, texts, refs)
        return name


def _generic_rules(
    lay: Layout, depth: int, sfx: str, string: Sym, number: Sym, child: Sym | None
) -> list[tuple[str, list[Alt]]]:
    """The json_value rule at ``depth`` (``child``: the json_value rule one level deeper, None
    at the depth limit), after the json_object, json_member and json_array rules it uses."""
    out: list[tuple[str, list[Alt]]] = []
    alts: list[Alt] = [[string], [number], ["'true'"], ["'false'"], ["'null'"]]
    if child is not None:
        alts = [[f"json_object{sfx}"], [f"json_array{sfx}"]] + alts
        out.append(
            (
                f"json_object{sfx}",
                [
                    lay.empty("{}"),
                    lay.open("{", depth)
                    + [f"json_member{sfx}"]
                    + [rep(lay.comma(depth) + [f"json_member{sfx}"], 0, None)]
                    + lay.close("}", depth),
                ],
            )
        )
        out.append((f"json_member{sfx}", [[string] + lay.colon() + [child]]))
        out.append(
            (
                f"json_array{sfx}",
                [
                    lay.empty("[]"),
                    lay.open("[", depth)
                    + [child, rep(lay.comma(depth) + [child], 0, None)]
                    + lay.close("]", depth),
                ],
            )
        )
    out.append((f"json_value{sfx}", alts))
    return out
