"""String values and keys: string-language formulas → regex terminals, ``json_len!`` or rules."""

from __future__ import annotations

import re

from .. import _automata as am
from .. import _json_text as tr
from .. import _regex as rx
from .. import _string_formulas as sl
from .._ir import Node
from .layout import kbnf_literal
from .regex_format import RegexFormatRules
from .regex_rules import fits, within_budgets
from .rules import Sym, render_alt_refs
from .text_cache import TERMINAL_TEXTS


class StringRules(RegexFormatRules):
    def generic_string(self) -> Sym:
        """Any JSON string: the engine's ``json_string_except!()`` (no words to avoid), which
        it builds without parsing or determinizing a regex."""
        return self.shared_rendered(*_GENERIC_STRING, "json_string")

    def string(
        self, f: sl.Formula, node: Node | None, hint: str, compact: bool = False
    ) -> Sym | None:
        if f == sl.NOTHING:
            return None
        if f == sl.ALL:
            return self.generic_string()
        if f[0] == "cfg":
            return self.cfg_string(f[1])
        excluded = sl.complement_words(f)
        if excluded is not None:
            return self.string_except(excluded, hint)
        try:
            got = self.realized.get((id(f), compact))
            if got is not None and got[0] is f:
                real = got[1]
            else:
                real = sl.realize(f, key_mode=compact, engine_length=True)
                self.realized[(id(f), compact)] = (f, real)
        except sl.NotRegular as e:
            self.on_unsupported(str(e), "format", node)
            return self.generic_string()
        except am.AutomatonTooLarge as e:
            real, exact = self._length_subset(f, compact)
            if real is None:
                self.on_unsupported(
                    f"string constraints too complex to enforce exactly ({e})", "pattern", node
                )
                return self.generic_string()
            if not exact and self.on_subset is not None:
                self.on_subset(
                    "pattern/format with a length limit: the exact intersection is too large; "
                    "the grammar accepts a subset (the length budget is split over the parts)",
                    "maxLength",
                    node,
                )
        if isinstance(real, am.DFA):
            return self.dfa_rules(real, True, hint)
        if isinstance(real, sl.LengthBounded):
            return self.length_bounded(real, compact, hint)
        if real == rx.NONE or rx.is_empty(real):
            return None
        counted = counted_chars(real, longer_than=SHORT_BOUND)
        if counted is not None:
            # `p c{a,b} s` with a large `b` (e.g. `maxLength: 50`): the engine's `json_len!`
            # counts the characters in an automaton whose size does not grow with `b`. A regex
            # `c{a,b}` would be unrolled into `b` copies of `c`'s automaton (~150 states per
            # JSON character), then copied again into every terminal it merges with.
            return self.length_bounded(counted, compact, hint)
        literal = tr.constant_literal(real, compact)
        if literal is not None and fits(literal):
            # (a format's language: its literal printed once; no key hashing its large AST)
            return self.terminal(tr.to_rust(literal), hint)
        plain = tr.plain_string_literals(real)
        if plain is not None and within_budgets(plain[1], plain[2]):
            # (strings JSON spells one way, e.g. an enum's: printed and measured in one walk)
            return self.terminal(plain[0], hint)
        cached = TERMINAL_TEXTS.get((real, compact))
        if cached is not None:
            return self.terminal(cached, hint)
        encoded = tr.json_string_regex(real, compact)
        if fits(encoded):
            text = tr.to_rust(encoded)
            TERMINAL_TEXTS.put((real, compact), text)
            return self.terminal(text, hint)
        return self.regex_sym(encoded, hint)

    def string_except(self, words: list[str], hint: str) -> Sym:
        """A JSON string whose decoded value is none of ``words``: the engine's
        ``json_string_except!`` builds it from the words' trie (linear in their length), where a
        regex complement would be a large expression to render, parse and determinize. Words
        holding a lone surrogate are left out: no JSON string spells them (and KBNF cannot)."""
        spellable = (w for w in words if not _SURROGATE.search(w))
        text = "json_string_except!(" + ", ".join(map(kbnf_literal, spellable)) + ")"
        return self.shared_rule([text], hint)

    def length_bounded(self, real: sl.LengthBounded, compact: bool, hint: str) -> Sym:
        """A JSON string whose decoded value is in ``real.core`` and has ``lo..hi`` code points:
        the engine's ``json_len!`` counts decoded characters (an escape is one) exactly."""
        body = tr.to_rust(tr.json_body(real.core, compact))
        text = f'json_len!(#"{body}", {real.lo}, {real.hi})'
        return self.shared_rule(["'\"'", text, "'\"'"], hint)

    def _length_subset(self, f: sl.Formula, compact: bool) -> tuple[sl.Realized | None, bool]:
        """``core ∧ length`` when even the length product is too big:
        ``shrink(core) ∧ min length`` (a subset)."""
        split = sl.split_length(f)
        if split is None:
            return None, False
        core_f, lo, hi = split
        try:
            real = sl.realize(core_f, key_mode=compact)
            core = real.to_regex(20_000) if isinstance(real, am.DFA) else real
            if core is None or isinstance(core, sl.LengthBounded):
                return None, False
            shrunk = sl.shrink_to(core, hi)
            return (
                sl.realize(sl.f_and(sl.f_re(shrunk), sl.f_len(lo, None)), key_mode=compact),
                False,
            )
        except (am.AutomatonTooLarge, sl.NotRegular):
            return None, False


#: The generic string's rule, rendered.
_GENERIC_STRING = render_alt_refs(["json_string_except!()"])

#: A lone surrogate code point (no JSON string spells one).
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Largest length bound written as a regex repetition (`"c{0,8}"`, a small table that merges with
#: its neighbours); larger bounds become `json_len!`, which the engine counts instead of unrolling.
SHORT_BOUND = 8


def counted_chars(node: rx.Node, longer_than: int) -> sl.LengthBounded | None:
    """``p c{a,b} s`` (``c`` a set of single characters, ``p`` and ``s`` of fixed lengths, ``b``
    above ``longer_than``) as ``json_len!(p c* s, a + |p| + |s|, b + |p| + |s|)``, the same
    language; else None."""
    items = node[1] if node[0] == "cat" else (node,)
    # (the bound first: measuring a large repeated body is the expensive part)
    reps = [
        i
        for i, x in enumerate(items)
        if x[0] == "rep"
        and x[3] is not None
        and x[3] > longer_than
        and rx.length_range(x[1]) == (1, 1)
    ]
    if not reps:
        return None
    i = max(reps, key=lambda j: items[j][3])
    fixed = 0
    for j, x in enumerate(items):
        if j != i:
            lo, hi = rx.length_range(x)
            if lo != hi:
                return None
            fixed += lo
    x = items[i]
    lo, hi = x[2] + fixed, x[3] + fixed
    if hi > sl.MAX_ENGINE_LENGTH:
        return None
    core = rx.cat(*items[:i], rx.rep(x[1], 0, None), *items[i + 1 :])
    return sl.LengthBounded(core, lo, hi)
