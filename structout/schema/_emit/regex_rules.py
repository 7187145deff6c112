"""Regexes → KBNF: one terminal when its DFA stays small, else rules over smaller terminals.

Large counted repetitions (``x{0,5000}``) multiply DFA states; they become KBNF counted
repetitions of a smaller terminal instead, which the engine handles cheaply.
"""

from __future__ import annotations

from .. import _automata as am
from .. import _charset as cs
from .. import _json_text as tr
from .. import _regex as rx
from .layout import kbnf_literal
from .rules import Alt, RuleSet, Sym, rep

REGEX_STATE_BUDGET = 3000
REGEX_NEST_BUDGET = 100


class RegexRules(RuleSet):
    def __init__(self) -> None:
        super().__init__()
        #: ``(charset, JSON string?)`` -> the terminal of the DFA transitions on it (see
        #: :meth:`dfa_rules`).
        self.charset_terms: dict[tuple[cs.Charset, bool], Sym] = {}

    def regex_sym(self, node: rx.Node, hint: str) -> Sym:
        """One symbol for a regex: a terminal, or rules when the terminal's DFA would be big.

        Large counted repetitions (``x{0,5000}``) multiply DFA states; they become KBNF
        counted repetitions of a smaller terminal instead, which the engine handles cheaply.
        """
        if fits(node):
            return self.terminal(tr.to_rust(node), hint)
        syms = self._regex_syms(node, hint)
        if len(syms) == 1 and isinstance(syms[0], str):
            return syms[0]
        name = self.fresh(hint)
        self.add_rule(name, [syms])
        return name

    def _small(self, node: rx.Node, hint: str) -> Sym:
        """A literal when the regex matches exactly one string, else a terminal."""
        fs = rx.finite_strings(node, 1)
        if fs is not None and len(fs) == 1 and fs[0]:
            return kbnf_literal(fs[0])
        return self.terminal(tr.to_rust(node), hint)

    def _regex_syms(self, node: rx.Node, hint: str) -> Alt:
        if fits(node):
            return [self._small(node, hint)]
        t = node[0]
        if t == "cat":
            # Greedy chunks of consecutive items that fit one terminal. The metrics of a
            # concatenation are the sum of the items' states and one more than their deepest
            # nesting, so they are accumulated per item (linear, not a re-measure per item).
            out: Alt = []
            buf: list[rx.Node] = []
            buf_states = buf_depth = 0
            for x in node[1]:
                x_states, x_depth = metrics(x)
                if (
                    buf_states + x_states <= REGEX_STATE_BUDGET
                    and 1 + max(buf_depth, x_depth) <= REGEX_NEST_BUDGET
                ):
                    buf.append(x)
                    buf_states += x_states
                    buf_depth = max(buf_depth, x_depth)
                    continue
                if buf:
                    out.append(self._small(rx.cat(*buf), hint))
                    buf, buf_states, buf_depth = [], 0, 0
                if fits(x):
                    buf.append(x)
                    buf_states, buf_depth = x_states, x_depth
                else:
                    out.extend(self._regex_syms(x, hint))
            if buf:
                out.append(self._small(rx.cat(*buf), hint))
            return out
        if t == "rep":
            inner = self._regex_syms(node[1], f"{hint}_c")
            if len(inner) != 1 or not isinstance(inner[0], str):
                # a named rule per level keeps KBNF expressions shallow
                name = self.fresh(f"{hint}_c")
                self.add_rule(name, [inner])
                inner = [name]
            return [rep(inner, node[2], node[3])]
        if t == "alt":
            name = self.fresh(hint)
            self.add_rule(name, [self._regex_syms(x, hint) for x in node[1]])
            return [name]
        return [self._small(node, hint)]

    def dfa_rules(self, dfa: am.DFA, json_string: bool, hint: str) -> Sym | None:
        live, edges = dfa.live_edges()
        if not live[dfa.start]:
            return None
        base = self.fresh(hint)
        names = {q: self.fresh(f"{base}_s{q}") for q in range(dfa.n) if live[q]}
        # (a transition's terminal: the same text, hence the same rule, in every DFA of the
        # translation, so found once per charset)
        terms = self.charset_terms
        for q, name in names.items():
            # the rule as add_rule renders it: distinct alternatives `''` (accepting) and
            # `terminal target` (one per target), each naming the rules it uses
            texts: list[str] = []
            refs: list[list[str]] = []
            if dfa.accept[q]:
                texts.append("''")
                refs.append([])
            for r, chars in edges[q].items():
                term = terms.get((chars, json_string))
                if term is None:
                    node = tr.encode_set(chars) if json_string else rx.cset(chars)
                    term = self.terminal(tr.to_rust(node), f"{base}_c")
                    terms[(chars, json_string)] = term
                target = names[r]
                texts.append(f"{term} {target}")
                refs.append([term, target])
            self.add_rendered(name, texts, refs)
        if json_string:
            self.add_rule(base, [["'\"'", names[dfa.start], "'\"'"]])
        else:
            self.add_rule(base, [[names[dfa.start]]])
        return base


_METRICS_CACHE: dict[int, tuple[rx.Node, int, int]] = {}

#: Metrics of the process-wide constant regexes (:func:`_json_text.print_once`: the generic number,
#: format strings), by identity, measured at their first use; the node is kept, so its id stays
#: its own.
_CONSTANT_METRICS: dict[int, tuple[rx.Node, int, int]] = {}


#: What :func:`metrics` returns for a regex over either budget: every caller only compares the
#: metrics (or their sums) with the budgets, so the exact size of a regex that does not fit is
#: never needed, and measuring stops as soon as a regex is known not to fit.
TOO_BIG = (REGEX_STATE_BUDGET + 1, REGEX_NEST_BUDGET + 1)


def metrics(node: rx.Node) -> tuple[int, int]:
    """(estimated DFA states, group nesting depth) of a regex, memoized by identity; exact when
    within both budgets, else :data:`TOO_BIG`.

    Counted repetitions multiply states; the engine's regex parser limits nesting.
    """
    got = _METRICS_CACHE.get(id(node)) or _CONSTANT_METRICS.get(id(node))
    if got is not None and got[0] is node:
        return got[1], got[2]
    t = node[0]
    if t == "set":
        states, depth = (1 if node[1] and node[1][-1][1] < 0x80 else 4), 0
    elif t in ("cat", "alt"):
        states = depth = 0
        for x in node[1]:
            x_states, x_depth = metrics(x)
            states += x_states
            depth = max(depth, x_depth)
            if states > REGEX_STATE_BUDGET or depth >= REGEX_NEST_BUDGET:
                break
        depth += 1
    elif t == "rep":
        k = node[3] if node[3] is not None else node[2] + 1
        inner = metrics(node[1])
        states, depth = inner[0] * max(k, 1), 1 + inner[1]
    else:
        states, depth = 1, 0
    if states > REGEX_STATE_BUDGET or depth > REGEX_NEST_BUDGET:
        states, depth = TOO_BIG
    if tr.is_constant(node):
        _CONSTANT_METRICS[id(node)] = (node, states, depth)
        return states, depth
    if len(_METRICS_CACHE) > 50_000:
        _METRICS_CACHE.clear()
    _METRICS_CACHE[id(node)] = (node, states, depth)
    return states, depth


def fits(node: rx.Node) -> bool:
    """Whether one regex terminal is reasonable: few DFA states and shallow nesting."""
    return within_budgets(*metrics(node))


def within_budgets(states: int, depth: int) -> bool:
    """Whether a regex of these :func:`metrics` is one reasonable terminal."""
    return states <= REGEX_STATE_BUDGET and depth <= REGEX_NEST_BUDGET
