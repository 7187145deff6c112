"""The context-free string format ``regex``: rules for ECMA-262 patterns in JSON strings."""

from __future__ import annotations

from .. import _charset as cs
from .. import _formats as fm
from .. import _json_text as tr
from .. import _numbers as nm
from .. import _regex as rx
from .base import EmitterBase
from .layout import kbnf_literal
from .rules import Alt, Sym, rep

#: The rules of the ``regex`` format's grammar, named without ``fresh``.
RX_RULES = (
    "rx_string",
    "rx_body",
    "rx_alt",
    "rx_term",
    "rx_atom",
    "rx_quant",
    "rx_esc",
    "rx_class",
    "rx_item",
    "rx_cesc",
    "rx_hex",
)


class RegexFormatRules(EmitterBase):
    def _dchars(self, chars: str | cs.Charset, hint: str = "rx_c") -> Sym:
        """A symbol for one decoded character of a set, in its JSON spellings."""
        cset = cs.of_chars(chars) if isinstance(chars, str) else chars
        node = tr.encode_set(cset, True)
        fs = rx.finite_strings(node, 1)
        if fs is not None and len(fs) == 1:
            return kbnf_literal(fs[0])
        return self.terminal(tr.to_rust(node), hint)

    def _dlit(self, text: str) -> Alt:
        return [self._dchars(ch) for ch in text]

    def cfg_string(self, name: str) -> Sym:
        """Rules for a context-free string format (only ``regex``)."""
        assert name == "regex"
        if "rx_body" in self.rules:
            return "rx_string"
        # (the rule names of RX_RULES are taken when the emitter starts: see FIXED_NAMES)
        hexd = self._dchars("0123456789abcdefABCDEF", "rx_hexdigit")
        self.add_rule(
            "rx_hex",
            [[*self._dlit("\\x"), hexd, hexd], [*self._dlit("\\u"), hexd, hexd, hexd, hexd]],
        )
        bar = self._dchars("|")
        self.add_rule("rx_body", [["rx_alt", rep([bar, "rx_alt"], 0, None)]])
        self.add_rule("rx_alt", [[rep(["rx_term"], 0, None)]])
        plain = cs.complement(cs.of_chars(fm.REGEX_SYNTAX))
        self.add_rule(
            "rx_term",
            [
                [self._dchars("^$")],
                [*self._dlit("\\"), self._dchars("bB")],
                ["rx_atom", rep(["rx_quant"], 0, 1)],
            ],
        )
        self.add_rule(
            "rx_atom",
            [
                [self._dchars(plain, "rx_plain")],
                [self._dchars(".")],
                ["rx_esc"],
                ["rx_class"],
                [self._dchars("("), rep(self._dlit("?:"), 0, 1), "rx_body", self._dchars(")")],
            ],
        )
        esc_tail = fm.REGEX_ESC_CLASSES + fm.REGEX_ESC_CONTROLS + fm.REGEX_ESC_SYNTAX
        self.add_rule("rx_esc", [[*self._dlit("\\"), self._dchars(esc_tail)], ["rx_hex"]])
        braces = self._brace_regex()
        self.add_rule(
            "rx_quant",
            [
                [self._dchars("*+?"), rep([self._dchars("?")], 0, 1)],
                [braces, rep([self._dchars("?")], 0, 1)],
            ],
        )
        self.add_rule(
            "rx_cesc",
            [[*self._dlit("\\"), self._dchars(esc_tail + "b-")], ["rx_hex"]],
        )
        ranges = []
        for group in fm.REGEX_RANGE_GROUPS:
            for i, a in enumerate(group):
                ranges.append(rx.cat(rx.lit(a), rx.lit("-"), rx.cset(cs.of_chars(group[i:]))))
        range_term = self.terminal(tr.to_rust(tr.factor(rx.alt(*ranges))), "rx_range")
        cchar = cs.complement(cs.of_chars(fm.REGEX_CLASS_EXCLUDED))
        self.add_rule("rx_item", [[self._dchars(cchar, "rx_cchar")], ["rx_cesc"], [range_term]])
        self.add_rule(
            "rx_class",
            [
                [
                    self._dchars("["),
                    rep([self._dchars("^")], 0, 1),
                    rep(["rx_item"], 1, None),
                    self._dchars("]"),
                ]
            ],
        )
        self.add_rule("rx_string", [["'\"'", "rx_body", "'\"'"]])
        return "rx_string"

    def _brace_regex(self) -> Sym:
        """``{n}``, ``{n,}`` and ``{n,m}`` in the accepted subset (all ASCII, one spelling)."""
        num = rx.alt(rx.lit("0"), rx.cat(nm.NZDIGIT, rx.rep(nm.DIGIT, 0, 8)))
        pairs = []
        for k in range(1, 9):  # fewer digits in n than in m
            n_k = rx.lit("0") if k == 1 else None
            lo_k = rx.cat(nm.NZDIGIT, rx.rep(nm.DIGIT, k - 1, k - 1))
            lo_any = rx.alt(lo_k, n_k) if n_k is not None else lo_k
            hi_more = rx.cat(nm.NZDIGIT, rx.rep(nm.DIGIT, k, 8))
            pairs.append(rx.cat(lo_any, rx.lit(","), hi_more))
        for v in range(100):  # same number of digits (at most two), n <= m
            hi = nm.int_range(v, 9 if v < 10 else 99)
            pairs.append(rx.cat(rx.lit(str(v)), rx.lit(","), hi))
        node = rx.cat(rx.lit("{"), rx.alt(num, rx.cat(num, rx.lit(",")), *pairs), rx.lit("}"))
        return self.terminal(tr.to_rust(tr.factor(node)), "rx_braces")
