"""KBNF rules under construction: symbols, rule naming, rendering, and the final pruning pass.

Invariant: rule names are unique (``fresh``); identical regex terminals share one named rule.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .._ir import Unsupported

# A KBNF symbol: a rule name, a quoted literal, a #"regex" terminal, a repetition
# ``("rep", [symbols...], lo, hi)`` (``hi`` None for unbounded), ``any_order!``
# ``("any_order", [separator symbols...], [(member rule name, kind suffix), ...], lo, hi)``
# (see :func:`any_order`), or ``unique!`` ``("unique", [separator symbols...], [member symbols...],
# lo, hi)`` (see :func:`unique_list`).
Sym = Any
Alt = list[Sym]


class RuleSet:
    """Named rules in insertion order (the order they are rendered in).

    A rule is kept as the printed texts of its distinct alternatives (``rules``) and, per
    alternative, the symbols it uses that may name rules (``refs``, see :func:`alt_refs`):
    printing and pruning need nothing else.
    """

    def __init__(self) -> None:
        self.rules: dict[str, list[str]] = {}
        self.refs: dict[str, list[list[str]]] = {}
        self.term_memo: dict[str, str] = {}
        self.counter: dict[str, int] = {}
        self.used_names: set[str] = set()
        #: The alternatives of rules that hold an ``any_order!`` (re-rendered by ``_prune``).
        self.any_order_alts: dict[str, list[Alt]] = {}

    def fresh(self, hint: str) -> str:
        """The hint's rule name, else it with the first free suffix ``_n`` (``counter``: the
        next suffix to try per name)."""
        hint = _rule_name_base(hint)
        n = self.counter.get(hint, 0)
        name = f"{hint}_{n}" if n else hint
        used = self.used_names
        while name in used:
            n += 1
            name = f"{hint}_{n}"
        self.counter[hint] = n + 1
        used.add(name)
        return name

    def add_rule(self, name: str, alts: list[Alt]) -> None:
        if any(isinstance(s, tuple) and s[0] == "any_order" for a in alts for s in a):
            self.any_order_alts[name] = alts
        else:
            self.any_order_alts.pop(name, None)
        self.add_rendered(name, *render_rule(alts))

    def add_rendered(self, name: str, texts: list[str], refs: list[list[str]]) -> None:
        """Adds a rule as :func:`render_rule` gives it (the lists are kept, never changed)."""
        self.rules[name] = texts
        self.refs[name] = refs

    def terminal(self, regex_text: str, hint: str) -> Sym:
        """A named rule holding one regex terminal (shared by identical regexes)."""
        return self.shared_rendered(f'#"{regex_text}"', [], hint)  # (a terminal names no rule)

    def shared_rule(self, alt: Alt, hint: str) -> Sym:
        """A named rule with this one alternative (terminals, special nonterminals), shared by
        every identical alternative."""
        return self.shared_rendered(*render_alt_refs(alt), hint)

    def shared_rendered(self, text: str, names: list[str], hint: str) -> Sym:
        """:meth:`shared_rule` of the alternative ``render_alt_refs`` gives as ``(text, names)``
        (``names`` is kept, never changed)."""
        name = self.term_memo.get(text)
        if name is None:
            name = self.fresh(hint)
            self.term_memo[text] = name
            self.rules[name] = [text]
            self.refs[name] = [names]
        return name

    def render_rules(self, ws_max: int | None) -> str:
        """Prune, then print the rules (``start`` first); ``ws_max``: add the ``ws`` rule."""
        self._prune()
        if ws_max is not None:
            self.add_rule("ws", [["''"], [f'#"[ \\t\\n\\r]{{1,{ws_max}}}"']])
        rules = self.rules
        lines = [f"start ::= {' | '.join(rules['start'])};"] if rules["start"] else []
        lines += [f"{n} ::= {' | '.join(t)};" for n, t in rules.items() if t and n != "start"]
        return "\n".join(lines) + "\n"

    def _prune(self) -> None:
        """Remove unproductive rules and the alternatives that use them; keep reachable ones."""
        rules = self.rules
        productive = self._productive()
        if "start" not in productive:
            raise Unsupported("the schema accepts no value at all (every branch is empty)", "")
        for name, alts in self.any_order_alts.items():
            if name in rules:
                rules[name], self.refs[name] = render_rule(_productive_members(alts, productive))
        # Kept alternatives: those whose names are all productive rules (or no rules at all).
        dead = rules.keys() - productive
        refs = self.refs
        reach = {"start"}
        stack = ["start"]
        while stack:
            for deps in refs[stack.pop()]:
                if dead and not dead.isdisjoint(deps):
                    continue
                for d in deps:
                    d = d.lstrip("?")
                    if d not in reach and d in rules:
                        reach.add(d)
                        stack.append(d)
        if dead:
            for name in reach:
                uses = refs[name]
                kept = [i for i, deps in enumerate(uses) if dead.isdisjoint(deps)]
                if len(kept) < len(uses):  # (else the rule stays as it is)
                    rules[name] = [rules[name][i] for i in kept]
                    refs[name] = [uses[i] for i in kept]
        if len(reach) < len(rules):
            self.rules = {k: v for k, v in rules.items() if k in reach}
            self.refs = {k: v for k, v in refs.items() if k in reach}

    def _productive(self) -> set[str]:
        """The rules that derive some text: those with an alternative that uses only such
        rules."""
        try:
            return self._productive_depth_first()
        except _NotDecided:
            return self._productive_worklist()

    def _productive_depth_first(self) -> set[str]:
        """One depth-first pass deciding each rule after the rules it uses (stopping at its
        first productive alternative); raises _NotDecided on a rule that uses itself (through
        others) or on rules nested deeper than :data:`MAX_DEPTH_FIRST`."""
        rules, refs = self.rules, self.refs
        known: dict[str, bool | None] = {}  # None: being decided
        for name in rules:
            if name not in known:
                _decide(name, 0, rules, refs, known)
        return {name for name, ok in known.items() if ok}

    def _productive_worklist(self) -> set[str]:
        """A worklist over the alternatives still waiting for rules, each counting its distinct
        rule names not yet known productive."""
        rules = self.rules
        productive: set[str] = set()
        queue: list[str] = []
        # per waiting rule name: the alternatives waiting for it, as [rule, names still missing]
        users: dict[str, list[list[Any]]] = {}
        for name, alts in self.refs.items():
            for deps in alts:
                for d in deps:
                    if d not in productive and d in rules:
                        break
                else:
                    productive.add(name)
                    queue.append(name)
                    break
            else:  # every alternative waits for some rule
                for deps in alts:
                    need = {d for d in deps if d not in productive and d in rules}
                    w: list[Any] = [name, len(need)]
                    for d in need:
                        users.setdefault(d, []).append(w)
        while queue:
            for w in users.get(queue.pop(), ()):
                w[1] -= 1
                if w[1] == 0 and w[0] not in productive:
                    productive.add(w[0])
                    queue.append(w[0])
        return productive


def _decide(
    name: str,
    depth: int,
    rules: dict[str, list[str]],
    refs: dict[str, list[list[str]]],
    known: dict[str, bool | None],
) -> bool:
    """Whether rule ``name`` is productive, deciding the rules it uses first (see
    :meth:`RuleSet._productive_depth_first`). A module function, not a closure calling itself:
    such a closure is a reference cycle, which would keep the rules until the garbage collector
    runs."""
    if depth > MAX_DEPTH_FIRST:
        raise _NotDecided
    known[name] = None
    ok = False
    for deps in refs[name]:
        for d in deps:
            if d in rules:
                k = known[d] if d in known else _decide(d, depth + 1, rules, refs, known)
                if k is None:
                    raise _NotDecided
                if not k:
                    break
        else:
            ok = True
            break
    known[name] = ok
    return ok


#: Deepest rule nesting :meth:`RuleSet._productive_depth_first` follows (recursively).
MAX_DEPTH_FIRST = 1000


class _NotDecided(Exception):
    """The depth-first pass cannot decide which rules are productive."""


#: Hints that are already rule names (most are: property and definition names).
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")


@lru_cache(maxsize=4096)
def _rule_name_base(hint: str) -> str:
    """A KBNF rule name made from a hint (hints repeat: property and definition names)."""
    if _PLAIN_NAME.fullmatch(hint):
        return hint
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "r"
    if not (base[0].isalpha() or base[0] == "_"):
        base = "r_" + base
    return base[:48]


def rep(seq: Alt, lo: int, hi: int | None) -> Sym:
    return ("rep", list(seq), lo, hi)


def _productive_members(alts: list[Alt], productive: set[str]) -> list[Alt]:
    """``alts`` without the ``any_order!`` members that may be left out and derive nothing
    (their names are ``?``-marked in the references, so they do not decide productivity); an
    ``any_order!`` left with no member drops its alternative."""
    out = []
    for alt in alts:
        new: Alt = []
        for s in alt:
            if isinstance(s, tuple) and s[0] == "any_order":
                members = [(n, k) for n, k in s[2] if not k or n in productive]
                many = any(k in ("*", "+") for _, k in members)
                if not members or (not many and len(members) < s[3]):
                    break
                s = any_order(s[1], members, s[3], s[4])
            new.append(s)
        else:
            out.append(new)
    return out


def any_order(sep: Alt, members: list[tuple[str, str]], lo: int = 0, hi: int | None = None) -> Sym:
    """``any_order!(sep, m1, m2?, m3*, lo, hi)``: the members (rule names) in any order, joined
    by ``sep``; a member's suffix is ``""`` (exactly once), ``"?"`` (at most once) or ``"*"``;
    ``lo`` to ``hi`` members in all (``hi`` None for unbounded; written only when they bound
    anything: one member is always read)."""
    return ("any_order", list(sep), list(members), lo, hi)


def _counts(lo: int, hi: int | None) -> list[str]:
    """The count arguments of ``unique!`` / ``any_order!`` (``lo`` 1 and ``hi`` None: none)."""
    if hi is not None:
        return [str(lo), str(hi)]
    return [str(lo)] if lo > 1 else []


def unique_list(sep: Alt, members: list[Sym], lo: int, hi: int | None) -> Sym:
    """``unique!(sep, m1, ..., mk, lo, hi)``: ``lo..hi`` items (``lo >= 1``, ``hi`` None for
    unbounded) joined by ``sep``, item i matching ``m_min(i, k)``, pairwise distinct as JSON
    values (the engine compares them)."""
    return ("unique", list(sep), list(members), lo, hi)


def render_sym(sym: Sym) -> str:
    if isinstance(sym, tuple) and sym[0] == "any_order":
        _, sep, members, lo, hi = sym
        args = [render_alt(sep), *(name + kind for name, kind in members), *_counts(lo, hi)]
        return "any_order!(" + ", ".join(args) + ")"
    if isinstance(sym, tuple) and sym[0] == "unique":
        _, sep, members, lo, hi = sym
        args = [render_alt(sep), *(render_sym(m) for m in members), *_counts(lo, hi)]
        return "unique!(" + ", ".join(args) + ")"
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
    try:
        return " ".join(alt)  # plain symbols, the common case
    except TypeError:  # a repetition among them
        return _render_with_reps(alt)


def _render_with_reps(alt: Alt) -> str:
    return " ".join([render_sym(x) for x in alt])


def render_rule(alts: list[Alt]) -> tuple[list[str], list[list[str]]]:
    """A rule's distinct alternatives as printed texts, and the names each one uses (see
    :class:`RuleSet`)."""
    if len(alts) == 1:
        text, names = render_alt_refs(alts[0])
        return [text], [names]
    texts: list[str] = []
    refs: list[list[str]] = []
    seen: set[str] = set()
    for a in alts:
        text, names = render_alt_refs(a)  # (lists are unhashable: the text is the key)
        if text not in seen:
            seen.add(text)
            texts.append(text)
            refs.append(names)
    return texts, refs


def render_alt_refs(alt: Alt) -> tuple[str, list[str]]:
    """``(render_alt(alt), alt_refs(alt))``."""
    if not alt:
        return "''", []
    try:
        text = " ".join(alt)  # plain symbols, the common case
    except TypeError:  # a repetition among them
        return _render_with_reps(alt), alt_refs(alt)
    return text, [s for s in alt if s[:1] not in _NOT_A_NAME]


def alt_refs(alt: Alt) -> list[str]:
    """Rule names an alternative uses (special nonterminals such as ``json_len!(…)`` included:
    callers keep only names of rules)."""
    out: list[str] = []
    for s in alt:
        if isinstance(s, tuple) and s[0] == "any_order":
            # (members that may be left out, `?`-marked: only reachability follows them)
            out.extend(alt_refs(s[1]))
            out.extend(name if not kind else "?" + name for name, kind in s[2])
        elif isinstance(s, tuple) and s[0] == "unique":
            # (every member counts: a member that derives nothing drops the alternative)
            out.extend(alt_refs(s[1]))
            out.extend(alt_refs(s[2]))
        elif isinstance(s, tuple):
            out.extend(alt_refs(s[1]))
        elif s[:1] not in _NOT_A_NAME:
            out.append(s)
    return out


#: First characters of symbols that are not rule names: literals and regex terminals.
_NOT_A_NAME = frozenset("'\"#")
