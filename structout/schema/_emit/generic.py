"""Any JSON value (the ``true`` schema): one shared set of ``json_*`` rules per depth."""

from __future__ import annotations

from .. import _numbers as nm
from .rules import Alt, Sym, rep
from .strings import StringRules


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
        for n in (name, f"json_object{sfx}", f"json_array{sfx}"):
            self.used_names.add(n)
        string = self.generic_string()
        number = self.number_terminal(nm.GENERIC_NUMBER, "json_number")
        alts: list[Alt] = [[string], [number], ["'true'"], ["'false'"], ["'null'"]]
        child = self.generic_value(depth + 1)
        if child is not None:
            alts = [[f"json_object{sfx}"], [f"json_array{sfx}"]] + alts
            lay = self.layout
            self.add_rule(
                f"json_object{sfx}",
                [
                    lay.empty("{}"),
                    lay.open("{", depth)
                    + [f"json_member{sfx}"]
                    + [rep(lay.comma(depth) + [f"json_member{sfx}"], 0, None)]
                    + lay.close("}", depth),
                ],
            )
            self.used_names.add(f"json_member{sfx}")
            self.add_rule(f"json_member{sfx}", [[string] + lay.colon() + [child]])
            self.add_rule(
                f"json_array{sfx}",
                [
                    lay.empty("[]"),
                    lay.open("[", depth)
                    + [child, rep(lay.comma(depth) + [child], 0, None)]
                    + lay.close("]", depth),
                ],
            )
        self.add_rule(name, alts)
        return name
