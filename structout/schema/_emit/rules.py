"""KBNF rules under construction: symbols, rule naming, rendering, and the final pruning pass.

Invariant: rule names are unique (``fresh``); identical regex terminals share one named rule.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .._ir import Unsupported

# A KBNF symbol: a rule name, a quoted literal, a #"regex" terminal, or a repetition
# ``("rep", [symbols...], lo, hi)`` (``hi`` None for unbounded).
Sym = Any
Alt = list[Sym]


class RuleSet:
    """Named rules in insertion order (the order they are rendered in)."""

    def __init__(self) -> None:
        self.rules: dict[str, list[Alt]] = {}
        # The printed text of each rule's alternatives, in the order of ``rules[name]``.
        self.texts: dict[str, list[str]] = {}
        self.term_memo: dict[str, str] = {}
        self.counter: dict[str, int] = {}
        self.used_names: set[str] = set()

    def fresh(self, hint: str) -> str:
        hint = _rule_name_base(hint)
        n = self.counter.get(hint, 0)
        while True:
            name = hint if n == 0 else f"{hint}_{n}"
            n += 1
            if name not in self.used_names:
                break
        self.counter[hint] = n
        self.used_names.add(name)
        return name

    def add_rule(self, name: str, alts: list[Alt]) -> None:
        uniq: list[Alt] = []
        texts: list[str] = []
        seen: set[str] = set()
        for a in alts:
            key = render_alt(a)  # alternatives hold lists (unhashable); their text is a key
            if key not in seen:
                seen.add(key)
                uniq.append(a)
                texts.append(key)
        self.rules[name] = uniq
        self.texts[name] = texts

    def terminal(self, regex_text: str, hint: str) -> Sym:
        """A named rule holding one regex terminal (shared by identical regexes)."""
        return self.shared_rule([f'#"{regex_text}"'], hint)

    def shared_rule(self, alt: Alt, hint: str) -> Sym:
        """A named rule with this one alternative (terminals, special nonterminals), shared by
        every identical alternative."""
        key = render_alt(alt)
        name = self.term_memo.get(key)
        if name is None:
            name = self.fresh(hint)
            self.term_memo[key] = name
            self.add_rule(name, [alt])
        return name

    def render_rules(self, ws_max: int | None) -> str:
        """Prune, then print the rules (``start`` first); ``ws_max``: add the ``ws`` rule."""
        self._prune()
        lines = []
        if ws_max is not None:
            self.add_rule("ws", [["''"], [f'#"[ \\t\\n\\r]{{1,{ws_max}}}"']])
        order = ["start"] + [k for k in self.rules if k != "start"]
        for name in order:
            texts = self.texts.get(name)
            if not texts:
                continue
            body = " | ".join(texts)
            lines.append(f"{name} ::= {body};")
        return "\n".join(lines) + "\n"

    def _prune(self) -> None:
        """Remove unproductive rules and the alternatives that use them; keep reachable ones."""
        rules = self.rules
        names = set(rules)
        refs: dict[str, list[list[str]]] = {
            name: [[t for t in alt_refs(a) if t in names] for a in alts]
            for name, alts in rules.items()
        }
        # productive symbols by a worklist over reverse dependencies
        users: dict[str, list[tuple[str, int]]] = {}
        missing: dict[tuple[str, int], int] = {}
        productive: set[str] = set()
        queue: list[str] = []
        for name, alts in refs.items():
            for i, deps in enumerate(alts):
                uniq = set(deps)
                missing[(name, i)] = len(uniq)
                for d in uniq:
                    users.setdefault(d, []).append((name, i))
                if not uniq and name not in productive:
                    productive.add(name)
                    queue.append(name)
        while queue:
            d = queue.pop()
            for name, i in users.get(d, ()):
                missing[(name, i)] -= 1
                if missing[(name, i)] == 0 and name not in productive:
                    productive.add(name)
                    queue.append(name)
        if "start" not in productive:
            raise Unsupported("the schema accepts no value at all (every branch is empty)", "")
        # Kept alternatives (with their texts) and their references, all to productive rules.
        keep: dict[str, list[tuple[Alt, str, list[str]]]] = {}
        for name, alts in rules.items():
            if name in productive:
                keep[name] = [
                    (a, text, deps)
                    for a, text, deps in zip(alts, self.texts[name], refs[name])
                    if all(t in productive for t in deps)
                ]
        reach: set[str] = set()
        stack = ["start"]
        while stack:
            nm_ = stack.pop()
            if nm_ in reach:
                continue
            reach.add(nm_)
            for _, _, deps in keep[nm_]:
                stack.extend(deps)
        self.rules = {k: [a for a, _, _ in v] for k, v in keep.items() if k in reach}
        self.texts = {k: [t for _, t, _ in v] for k, v in keep.items() if k in reach}


@lru_cache(maxsize=4096)
def _rule_name_base(hint: str) -> str:
    """A KBNF rule name made from a hint (hints repeat: property and definition names)."""
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "r"
    if not (base[0].isalpha() or base[0] == "_"):
        base = "r_" + base
    return base[:48]


def rep(seq: Alt, lo: int, hi: int | None) -> Sym:
    return ("rep", list(seq), lo, hi)


def render_sym(sym: Sym) -> str:
    if isinstance(sym, tuple):
        _, seq, lo, hi = sym
        group = "(" + render_alt(seq) + ")"
        if (lo, hi) == (0, None):
            return group + "*"
        if (lo, hi) == (1, None):
            return group + "+"
        if (lo, hi) == (0, 1):
            return group + "?"
        if hi is None:
            return f"{group}{{{lo},}}"
        if lo == hi:
            return f"{group}{{{lo}}}"
        return f"{group}{{{lo},{hi}}}"
    return str(sym)


def render_alt(alt: Alt) -> str:
    if not alt:
        return "''"
    return " ".join(render_sym(x) for x in alt)


def alt_refs(alt: Alt) -> list[str]:
    """Rule names an alternative uses (special nonterminals such as ``json_len!(…)`` included:
    callers keep only names of rules)."""
    out: list[str] = []
    for s in alt:
        if isinstance(s, tuple):
            out.extend(alt_refs(s[1]))
        elif s[:1] not in _NOT_A_NAME:
            out.append(s)
    return out


#: First characters of symbols that are not rule names: literals and regex terminals.
_NOT_A_NAME = frozenset("'\"#")
