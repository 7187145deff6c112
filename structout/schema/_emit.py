"""IR nodes → KBNF rules, in one of three layouts.

* ``compact``: ``{"a": 1, "b": [1, 2]}``: one space after ``:`` and ``,``, none elsewhere.
* ``flexible``: any JSON whitespace (runs of at most ``max_whitespace`` characters) between
  tokens and around the document.
* ``indent``: what ``json.dumps(value, indent=n)`` writes (empty containers as ``{}``/``[]``);
  rules depend on the nesting depth, so nesting is limited to ``max_depth``.

Lexical things (strings, numbers, keys) become regex terminals; structure becomes rules. Objects
follow the schema's property order: named properties first (required ones always present,
optional ones may be left out), then the other allowed keys. A final pass drops unproductive
rules (e.g. recursion that can never end).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Callable

from . import _automata as am
from . import _charset as cs
from . import _numbers as nm
from . import _regex as rx
from . import _strlang as sl
from . import _textre as tr
from ._compile import depth_error
from ._ir import Algebra, Node, Unsupported

# A KBNF symbol: a rule name, a quoted literal, a #"regex" terminal, or a repetition
# ``("rep", [symbols...], lo, hi)`` (``hi`` None for unbounded).
Sym = Any
Alt = list[Sym]

MAX_OBJ_VARIANTS = 64
MAX_TAIL_REGIONS = 64
MAX_TAIL_EXISTS = 4
REGEX_STATE_BUDGET = 3000
REGEX_NEST_BUDGET = 100
MAX_ARRAY_STATES = 4000
MAX_LITERAL_SET = 20000
# Objects with more named members than this (and no property counting) use the segment-tree
# rules of Emitter._object_tree (linear rules, O(n log n) normalized grammar).
TREE_MIN_MEMBERS = 24


def kbnf_literal(text: str) -> str:
    """Quote ``text`` as a KBNF single-quoted literal."""
    out = []
    for ch in text:
        cp = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "'":
            out.append("\\'")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        elif cp > 0x7F:
            out.append(f"\\u{{{cp:04x}}}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


class Layout:
    def __init__(self, whitespace: str, indent: int | None, max_ws: int) -> None:
        if indent is not None:
            self.mode = "indent"
        elif whitespace == "flexible":
            self.mode = "flexible"
        elif whitespace == "compact":
            self.mode = "compact"
        else:
            raise ValueError(f"whitespace must be 'compact' or 'flexible', got {whitespace!r}")
        self.indent = indent or 0
        self.max_ws = max_ws

    @property
    def depth_dependent(self) -> bool:
        return self.mode == "indent"

    def _nl(self, depth: int) -> str:
        return "\n" + " " * (self.indent * depth)

    def open(self, bracket: str, depth: int) -> Alt:
        if self.mode == "compact":
            return [kbnf_literal(bracket)]
        if self.mode == "flexible":
            return [kbnf_literal(bracket), "ws"]
        return [kbnf_literal(bracket + self._nl(depth + 1))]

    def close(self, bracket: str, depth: int) -> Alt:
        if self.mode == "compact":
            return [kbnf_literal(bracket)]
        if self.mode == "flexible":
            return ["ws", kbnf_literal(bracket)]
        return [kbnf_literal(self._nl(depth) + bracket)]

    def empty(self, pair: str) -> Alt:
        if self.mode == "flexible":
            return [kbnf_literal(pair[0]), "ws", kbnf_literal(pair[1])]
        return [kbnf_literal(pair)]

    def comma(self, depth: int) -> Alt:
        if self.mode == "compact":
            return [kbnf_literal(", ")]
        if self.mode == "flexible":
            return ["ws", kbnf_literal(","), "ws"]
        return [kbnf_literal("," + self._nl(depth + 1))]

    def colon(self) -> Alt:
        if self.mode == "flexible":
            return ["ws", kbnf_literal(":"), "ws"]
        return [kbnf_literal(": ")]

    def key_literal(self, name: str) -> Sym:
        return kbnf_literal(json.dumps(name, ensure_ascii=False))

    def dumps(self, value: Any) -> str:
        """Serialize a value the way this layout prints it (flexible: like compact)."""
        if self.mode == "indent":
            return json.dumps(value, indent=self.indent, ensure_ascii=False)
        return json.dumps(value, ensure_ascii=False)


class _ObjVariant:
    __slots__ = ("named", "required", "texists")

    def __init__(
        self, named: dict[str, Node], required: set[str], texists: list[tuple[sl.Formula, Node]]
    ) -> None:
        self.named = named
        self.required = required
        self.texists = texists


class Emitter:
    def __init__(
        self,
        alg: Algebra,
        layout: Layout,
        max_depth: int,
        on_unsupported: Callable[[str, str, Node], None],
        is_empty: Callable[[Node], bool],
        on_subset: Callable[[str, str, Node | None], None] | None = None,
        max_schema_depth: int = 256,
        pointer_of: Callable[[Node], str | None] | None = None,
    ) -> None:
        self.alg = alg
        # Arrays/objects being emitted, outermost first: their number is the nesting depth of
        # the values, bounded by max_schema_depth (so emission never runs out of stack).
        self.nest: list[Node] = []
        self.max_schema_depth = max_schema_depth
        self.pointer_of = pointer_of
        self.recursion_pointer: str | None = None  # where Python's recursion limit was hit
        self.layout = layout
        self.max_depth = max_depth
        self.on_unsupported = on_unsupported
        self.on_subset = on_subset
        self.realized: dict[tuple[sl.Formula, bool], Any] = {}
        self.is_empty = is_empty
        self.rules: dict[str, list[Alt]] = {}
        self.comments: dict[str, str] = {}
        self.memo: dict[tuple[Node, int], Sym | None] = {}
        self.term_memo: dict[str, str] = {}
        self.counter: dict[str, int] = {}
        self.used_names: set[str] = set()
        self.generic_done: set[Any] = set()

    # --- naming ---

    def fresh(self, hint: str) -> str:
        hint = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "r"
        if not (hint[0].isalpha() or hint[0] == "_"):
            hint = "r_" + hint
        hint = hint[:48]
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
        seen: set[str] = set()
        for a in alts:
            key = render_alt(a)  # alternatives hold lists (unhashable); their text is a key
            if key not in seen:
                seen.add(key)
                uniq.append(a)
        self.rules[name] = uniq

    def terminal(self, regex_text: str, hint: str) -> Sym:
        """A named rule holding one regex terminal (shared by identical regexes)."""
        name = self.term_memo.get(regex_text)
        if name is None:
            name = self.fresh(hint)
            self.term_memo[regex_text] = name
            self.add_rule(name, [[f'#"{regex_text}"']])
        return name

    def regex_sym(self, node: rx.Node, hint: str) -> Sym:
        """One symbol for a regex: a terminal, or rules when the terminal's DFA would be big.

        Large counted repetitions (``x{0,5000}``) multiply DFA states; they become KBNF
        counted repetitions of a smaller terminal instead, which the engine handles cheaply.
        """
        if _fits(node):
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
        if _fits(node):
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
                x_states, x_depth = _metrics(x)
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
                if _fits(x):
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

    # --- entry ---

    def emit_start(self, node: Node) -> None:
        sym = self.value(node, 0)
        if sym is None:
            raise Unsupported("the schema accepts no value at all", "")
        if self.layout.mode == "flexible":
            self.add_rule("start", [["ws", sym, "ws"]])
        else:
            self.add_rule("start", [[sym]])
        self.used_names.add("start")

    def value(self, node: Node, depth: int) -> Sym | None:
        if not self.layout.depth_dependent:
            depth = 0
        elif depth > self.max_depth:
            return None
        key = (node, depth)
        if key in self.memo:
            return self.memo[key]
        k = node.kind
        if k == "never":
            self.memo[key] = None
            return None
        if k == "ref":
            name = self.fresh(self._ref_hint(node.args[0], depth))
            self.memo[key] = name
            body = self.value(self.alg.resolve(node), depth)
            self.add_rule(name, [[body]] if body is not None else [])
            return name
        if k == "null":
            sym: Sym | None = "'null'"
        elif k == "bool":
            t, f = node.args
            sym = "'true'" if t and not f else "'false'" if f and not t else self._bool_rule()
        elif k == "any":
            sym = self.generic_value(depth)
        elif k == "union":
            alts = []
            for a in node.args[0]:
                s = self.value(a, depth)
                if s is not None:
                    alts.append([s])
            if not alts:
                sym = None
            elif len(alts) == 1:
                sym = alts[0][0]
            else:
                sym = self.fresh("any_of")
                self.add_rule(sym, alts)
        elif k == "num":
            sym = self.number(node)
        elif k == "str":
            sym = self.string(node.args[0], node, "str")
        elif k in ("arr", "obj"):
            self.nest.append(node)
            try:
                if len(self.nest) > self.max_schema_depth:
                    raise depth_error(self.max_schema_depth, self._nest_pointer())
                sym = self.array(node, depth) if k == "arr" else self.object(node, depth)
            except RecursionError:
                if self.recursion_pointer is None:
                    self.recursion_pointer = self._nest_pointer()
                raise
            finally:
                self.nest.pop()
        else:
            raise AssertionError(k)
        self.memo[key] = sym
        return sym

    def _nest_pointer(self) -> str:
        """The pointer of the innermost array/object being emitted that has a known origin."""
        if self.pointer_of is not None:
            for n in reversed(self.nest):
                p = self.pointer_of(n)
                if p is not None:
                    return p
        return ""

    def _ref_hint(self, key: Any, depth: int) -> str:
        if isinstance(key, tuple) and key and key[0] == "loc":
            frag = key[2].replace("|in-place", "")
            last = frag.rstrip("/").rsplit("/", 1)[-1] if frag else "root"
            name = last or "root"
        else:
            name = "def"
        return f"{name}_d{depth}" if self.layout.depth_dependent else name

    def _bool_rule(self) -> Sym:
        if "boolean" not in self.rules:
            self.used_names.add("boolean")
            self.add_rule("boolean", [["'true'"], ["'false'"]])
        return "boolean"

    # --- generic JSON ---

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
        number = self.terminal(tr.to_rust(nm.GENERIC_NUMBER), "json_number")
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

    def generic_string(self) -> Sym:
        return self.terminal(
            tr.to_rust(tr.json_string_regex(rx.rep(rx.ANYCHAR, 0, None))), "json_string"
        )

    # --- strings and numbers ---

    def string(
        self, f: sl.Formula, node: Node | None, hint: str, compact: bool = False
    ) -> Sym | None:
        if f == sl.NOTHING:
            return None
        if f == sl.ALL:
            return self.generic_string()
        if f[0] == "cfg":
            return self.cfg_string(f[1])
        try:
            key = (f, compact)
            real = self.realized.get(key)
            if real is None:
                real = self.realized[key] = sl.realize(f, key_mode=compact, engine_length=True)
        except sl.NotRegular as e:
            self.on_unsupported(str(e), "format", node)  # type: ignore[arg-type]
            return self.generic_string()
        except am.AutomatonTooLarge as e:
            real, exact = self._length_subset(f, compact)
            if real is None:
                self.on_unsupported(
                    f"string constraints too complex to enforce exactly ({e})", "pattern", node
                )  # type: ignore[arg-type]
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
        cached = _TERMINAL_TEXTS.get((real, compact))
        if cached is not None:
            return self.terminal(cached, hint)
        encoded = tr.json_string_regex(tr.factor(real), compact)
        if _fits(encoded):
            text = tr.to_rust(encoded)
            _TERMINAL_TEXTS.put((real, compact), text)
            return self.terminal(text, hint)
        counted = _counted_chars(real)
        if counted is not None:
            # `c{a,b}` of one character set with a large `b` (e.g. `maxLength: 32767`): one
            # `json_len!` terminal instead of KBNF repetitions of a one-character terminal,
            # which would cost an Earley set per character and full trie walks for masks.
            return self.length_bounded(counted, compact, hint)
        return self.regex_sym(encoded, hint)

    def length_bounded(self, real: sl.LengthBounded, compact: bool, hint: str) -> Sym:
        """A JSON string whose decoded value is in ``real.core`` and has ``lo..hi`` code points:
        the engine's ``json_len!`` counts decoded characters (an escape is one) exactly."""
        body = tr.to_rust(tr.encode_json(tr.factor(real.core), compact))
        text = f'json_len!(#"{body}", {real.lo}, {real.hi})'
        name = self.term_memo.get(text)
        if name is None:
            name = self.fresh(hint)
            self.term_memo[text] = name
            self.add_rule(name, [["'\"'", text, "'\"'"]])
        return name

    def _length_subset(self, f: sl.Formula, compact: bool) -> tuple[rx.Node | am.DFA | None, bool]:
        """``core ∧ length`` when even the length product is too big:
        ``shrink(core) ∧ min length`` (a subset)."""
        split = sl.split_length(f)
        if split is None:
            return None, False
        core_f, lo, hi = split
        try:
            real = sl.realize(core_f, key_mode=compact)
            if isinstance(real, am.DFA):
                real = real.to_regex(20_000)
            if real is None:
                return None, False
            shrunk = sl.shrink_to(real, hi)
            return (
                sl.realize(sl.f_and(sl.f_re(shrunk), sl.f_len(lo, None)), key_mode=compact),
                False,
            )
        except (am.AutomatonTooLarge, sl.NotRegular):
            return None, False

    # --- context-free string formats ---

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
        from . import _formats as fm

        for n in (
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
        ):
            self.used_names.add(n)
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

    def dfa_rules(self, dfa: am.DFA, json_string: bool, hint: str) -> Sym | None:
        live, edges = dfa.live_edges()
        if not live[dfa.start]:
            return None
        base = self.fresh(hint)
        names = {q: f"{base}_s{q}" for q in range(dfa.n) if live[q]}
        for n in names.values():
            self.used_names.add(n)
        terms: dict[cs.Charset, Sym] = {}
        for q, name in names.items():
            alts: list[Alt] = []
            if dfa.accept[q]:
                alts.append(["''"])
            for r, chars in edges[q].items():
                term = terms.get(chars)
                if term is None:
                    node = tr.encode_set(chars) if json_string else rx.cset(chars)
                    term = terms[chars] = self.terminal(tr.to_rust(node), f"{base}_c")
                alts.append([term, names[r]])
            self.add_rule(name, alts)
        if json_string:
            self.add_rule(base, [["'\"'", names[dfa.start], "'\"'"]])
        else:
            self.add_rule(base, [[names[dfa.start]]])
        return base

    # --- arrays ---

    def array(self, node: Node, depth: int) -> Sym | None:
        prefix, rest, mn, mx, contains, unique, _ev = node.args
        lay = self.layout
        if unique:
            return self._unique_array(node, depth)
        name = self.fresh("array")
        self.memo[(node, depth)] = name
        alts: list[Alt] = []
        if contains:
            body = self._array_automaton(node, depth, name)
            if body is None:
                self.add_rule(name, [])
                return name
            empty_ok, nonempty = body
            if empty_ok:
                alts.append(lay.empty("[]"))
            if nonempty is not None:
                alts.append(lay.open("[", depth) + [nonempty] + lay.close("]", depth))
            self.add_rule(name, alts)
            return name
        item_syms = [self.value(p, depth + 1) for p in prefix]
        rest_sym = self.value(rest, depth + 1)
        # effective max length
        p = len(prefix)
        for i, s in enumerate(item_syms):
            if s is None:
                mx = i if mx is None else min(mx, i)
                break
        if rest_sym is None:
            mx = p if mx is None else min(mx, p)
        if mx is not None and mx < mn:
            self.add_rule(name, [])
            return name
        if mn == 0:
            alts.append(lay.empty("[]"))
        if mx is None or mx > 0:
            seq = self._array_seq(item_syms, rest_sym, mn, mx, depth, name)
            if seq is not None:
                alts.append(lay.open("[", depth) + seq + lay.close("]", depth))
        self.add_rule(name, alts)
        return name

    def _array_seq(
        self,
        items: list[Sym | None],
        rest: Sym | None,
        mn: int,
        mx: int | None,
        depth: int,
        base: str,
    ) -> Alt | None:
        """Symbols for a non-empty item sequence (prefix items then rest items)."""
        lay = self.layout
        comma = lay.comma(depth)
        p = len(items)
        if p == 0:
            assert rest is not None
            lo = max(mn, 1) - 1
            hi = None if mx is None else mx - 1
            rep = self._repeat(comma + [rest], lo, hi, base)
            return [rest] + rep
        # chain over prefix positions: tail(j) = items from position j on (j >= 1 emitted)
        nxt: str | None = None
        for j in range(p, 0, -1):
            tname = f"{base}_from{j}"
            self.used_names.add(tname)
            alts: list[Alt] = []
            if j < p:
                if mx is None or j < mx:
                    sym = items[j]
                    if sym is not None:
                        alts.append(comma + [sym] + ([nxt] if nxt else []))
                if j >= mn:
                    alts.append(["''"])
            else:
                # rest items: between max(mn - p, 0) and mx - p more
                lo = max(mn - p, 0)
                hi = None if mx is None else mx - p
                if rest is not None and (hi is None or hi > 0):
                    alts.append(self._repeat(comma + [rest], lo, hi, f"{base}_rest") or ["''"])
                elif lo == 0:
                    alts.append(["''"])
            self.add_rule(tname, alts)
            nxt = tname
        first = items[0]
        if first is None:
            return None
        return [first, nxt] if nxt else [first]

    def _repeat(self, seq: Alt, lo: int, hi: int | None, hint: str) -> Alt:
        """Symbols for ``seq{lo,hi}``."""
        if hi is not None and hi == 0:
            return []
        return [rep(seq, lo, hi)]

    def _array_automaton(self, node: Node, depth: int, base: str) -> tuple[bool, str | None] | None:
        """Arrays with contains constraints: rules over (length, counts) states."""
        alg = self.alg
        prefix, rest, mn, mx, contains, _u, _ev = node.args
        p = len(prefix)
        if len(contains) > 4:
            raise Unsupported("more than 4 contains constraints on one array", "contains")
        caps = []
        for c, lo, hi, _st in contains:
            caps.append(hi + 1 if hi is not None else lo)
        nmax = mx if mx is not None else max(mn, p, 1, max((st for *_, st in contains), default=0))
        lay = self.layout
        comma = lay.comma(depth)
        states: dict[tuple[int, tuple[int, ...]], str] = {}
        todo: list[tuple[int, tuple[int, ...]]] = []
        complements: dict[Node, Node] = {}

        def state(n: int, counts: tuple[int, ...]) -> str:
            key = (n, counts)
            if key not in states:
                if len(states) > MAX_ARRAY_STATES:
                    raise Unsupported("array constraints need too many grammar states", "contains")
                states[key] = self.fresh(f"{base}_q")
                todo.append(key)
            return states[key]

        def accepting(n: int, counts: tuple[int, ...]) -> bool:
            if n < mn:
                return False
            for (c, lo, hi, _st), k in zip(contains, counts):
                if k < lo or (hi is not None and k > hi):
                    return False
            return True

        start = state(0, tuple(0 for _ in contains))
        start_empty = accepting(0, tuple(0 for _ in contains))
        while todo:
            n, counts = todo.pop()
            name = states[(n, counts)]
            alts: list[Alt] = []
            if n > 0 and accepting(n, counts):
                alts.append(["''"])
            if mx is None or n < mx:
                pos = n
                base_item = prefix[pos] if pos < p else rest
                # choices per contains constraint: hit, or miss (exact when capped above)
                choices: list[list[tuple[Node, int]]] = []
                for (c, lo, hi, st), k in zip(contains, counts):
                    if pos < st:
                        choices.append([(alg.ANY, 0)])
                        continue
                    opts = [(c, 1)]
                    if hi is not None:
                        if c not in complements:
                            complements[c] = alg.not_(c)
                        opts.append((complements[c], 0))
                    else:
                        opts.append((alg.ANY, 0))
                    choices.append(opts)
                combos: list[list[tuple[Node, int]]] = [[]]
                for ch in choices:
                    combos = [cmb + [o] for cmb in combos for o in ch]
                for cmb in combos:
                    item = base_item
                    for c_node, _inc in cmb:
                        item = alg.and_(item, c_node)
                    sym = self.value(item, depth + 1)
                    if sym is None:
                        continue
                    n2 = n + 1 if (mx is not None or n + 1 <= nmax) else nmax
                    if mx is None and n2 > nmax:
                        n2 = nmax
                    new_counts = tuple(
                        min(k + inc, cap) if cap else k + inc
                        for (k, (_c, inc), cap) in zip(counts, cmb, caps)
                    )
                    # counts above a max are dead
                    dead = any(
                        hi is not None and nk > hi
                        for nk, (_c, _lo, hi, _st) in zip(new_counts, contains)
                    )
                    if dead:
                        continue
                    nxt = state(n2, new_counts)
                    sep = [] if n == 0 else comma
                    alts.append(sep + [sym, nxt])
            self.add_rule(name, alts)
        return start_empty, start

    def _unique_array(self, node: Node, depth: int) -> Sym | None:
        """uniqueItems: exact only when every item comes from a small finite set of values."""
        prefix, rest, mn, mx, contains, _u, _ev = node.args
        if contains:
            raise Unsupported("uniqueItems together with contains", "uniqueItems")
        domains = [self.finite_values(x) for x in list(prefix) + [rest]]
        if any(d is None for d in domains):
            raise Unsupported(
                "uniqueItems over items that are not a small finite set of values", "uniqueItems"
            )
        universe: list[Any] = []
        for d in domains:
            for v in d or []:
                if v not in universe:
                    universe.append(v)
        if len(universe) > 8:
            raise Unsupported("uniqueItems over more than 8 possible item values", "uniqueItems")
        lay = self.layout
        comma = lay.comma(depth)
        name = self.fresh("unique_array")
        p = len(prefix)
        states: dict[tuple[int, frozenset[int]], str] = {}
        todo: list[tuple[int, frozenset[int]]] = []

        def state(n: int, used: frozenset[int]) -> str:
            key = (min(n, p), used)
            if key not in states:
                states[key] = self.fresh(f"{name}_q")
                todo.append((n, used))
            return states[key]

        lit_syms = [self.literal_sym(v, depth + 1) for v in universe]
        start = state(0, frozenset())
        seen_keys = set()
        while todo:
            n, used = todo.pop()
            key = (min(n, p), used)
            if key in seen_keys:
                continue
            seen_keys.add(key)
            st = states[key]
            alts: list[Alt] = []
            if n > 0 and n >= mn:
                alts.append(["''"])
            if mx is None or n < mx:
                dom = domains[n] if n < p else domains[p]
                for i, v in enumerate(universe):
                    if i in used or v not in (dom or []):
                        continue
                    sep = [] if n == 0 else comma
                    alts.append(sep + [lit_syms[i], state(n + 1, used | {i})])
            self.add_rule(st, alts)
        alts = []
        if mn == 0:
            alts.append(lay.empty("[]"))
        alts.append(lay.open("[", depth) + [start] + lay.close("]", depth))
        self.add_rule(name, alts)
        return name

    def finite_values(self, node: Node, limit: int = 8) -> list[Any] | None:
        """Canonical JSON texts of all values of ``node`` when they are few (else None)."""
        alg = self.alg
        out: list[Any] = []
        for a in alg.alternatives(node):
            if a.kind == "null":
                vals: list[Any] | None = [None]
            elif a.kind == "bool":
                vals = ([True] if a.args[0] else []) + ([False] if a.args[1] else [])
            elif a.kind == "str":
                ss = sl.finite_values(a.args[0], limit)
                vals = None if ss is None else list(ss)
            elif a.kind == "num":
                f = a.args[0]
                if f[0] == "iv" and f[1] is not None and f[1] == f[3] and f[2] and f[4]:
                    v = f[1]
                    vals = [int(v) if v.denominator == 1 else float(v)]
                else:
                    vals = None
            else:
                vals = None
            if vals is None:
                return None
            for v in vals:
                if v not in out:
                    out.append(v)
            if len(out) > limit:
                return None
        return out

    def literal_sym(self, value: Any, depth: int) -> Sym:
        return kbnf_literal(self.layout.dumps(value))

    # --- objects ---

    def object(self, node: Node, depth: int) -> Sym | None:
        variants = self._obj_variants(node)
        name = self.fresh("object")
        self.memo[(node, depth)] = name
        props, req, tail, mn, mx, deps, _exists, _ev = node.args
        order = [k for k, _ in props]
        for k in list(req) + [k for k, ds in deps] + [d for _, ds in deps for d in ds]:
            if k not in order:
                order.append(k)
        regions = self._tail_regions(tail, order, node)
        alts: list[Alt] = []
        for var in variants:
            alts.extend(self._object_variant(var, order, regions, mn, mx, depth, name))
        self.add_rule(name, alts)
        return name

    def _obj_variants(self, node: Node) -> list[_ObjVariant]:
        alg = self.alg
        props, req, tail, _mn, _mx, deps, exists, _ev = node.args
        named: dict[str, Node] = dict(props)

        def promote(k: str) -> None:
            if k not in named:
                named[k] = alg.tail_value(tail, k)

        for k in req:
            promote(k)
        for k, ds in deps:
            promote(k)
            for d in ds:
                promote(d)
        variants = [_ObjVariant(named, set(req), [])]
        for k, ds in deps:
            new = []
            for v in variants:
                if k in v.required:
                    new.append(_ObjVariant(v.named, v.required | set(ds), v.texists))
                else:
                    absent = dict(v.named)
                    absent[k] = alg.NEVER
                    new.append(_ObjVariant(absent, v.required, v.texists))
                    new.append(_ObjVariant(v.named, v.required | {k} | set(ds), v.texists))
            variants = new
            if len(variants) > MAX_OBJ_VARIANTS:
                raise Unsupported("too many dependentRequired combinations", "dependentRequired")
        for f, val in exists:
            new = []
            for v in variants:
                for k, kv in v.named.items():
                    if kv.kind != "never" and sl.matches(f, k):
                        nd = dict(v.named)
                        nd[k] = alg.and_(kv, val)
                        new.append(_ObjVariant(nd, v.required | {k}, v.texists))
                new.append(_ObjVariant(v.named, v.required, v.texists + [(f, val)]))
            variants = new
            if len(variants) > MAX_OBJ_VARIANTS:
                raise Unsupported("object constraints need too many variants", "not")
        out = []
        for v in variants:
            if any(v.named[k].kind == "never" for k in v.required):
                continue
            out.append(v)
        return out

    def _tail_regions(
        self, tail: Sequence[tuple[sl.Formula, Node]], order: list[str], node: Node
    ) -> list[tuple[sl.Formula, Node]]:
        """Partition unnamed keys by which tail constraints apply; drop impossible parts.

        Regions are split one constraint at a time (inside / outside its key language) and
        empty key languages are dropped right away, so disjoint patterns stay linear.
        """
        alg = self.alg
        unnamed = sl.f_not(sl.f_lit(*order)) if order else sl.ALL
        regions: list[tuple[sl.Formula, Node]] = [(unnamed, alg.ANY)]
        for f, v in tail:
            split: list[tuple[sl.Formula, Node]] = []
            for kf, val in regions:
                for part_f, part_v in (
                    (sl.f_and(kf, f), alg.and_(val, v)),
                    (sl.f_and(kf, sl.f_not(f)), val),
                ):
                    if part_f == sl.NOTHING or self._key_empty(part_f):
                        continue
                    split.append((part_f, part_v))
            regions = split
            if len(regions) > MAX_TAIL_REGIONS:
                raise Unsupported("too many overlapping patternProperties", "patternProperties")
        return [(kf, val) for kf, val in regions if val.kind != "never"]

    def _key_empty(self, f: sl.Formula) -> bool:
        try:
            return sl.is_empty(f)
        except am.AutomatonTooLarge:
            return False

    def _object_variant(
        self,
        var: _ObjVariant,
        order: list[str],
        regions: list[tuple[sl.Formula, Node]],
        mn: int,
        mx: int | None,
        depth: int,
        base: str,
    ) -> list[Alt]:
        alg = self.alg
        lay = self.layout
        comma = lay.comma(depth)
        colon = lay.colon()
        # named members (in order), skipping forbidden ones
        members: list[tuple[str, Sym, bool]] = []
        for k in order:
            v = var.named[k]
            sym = self.value(v, depth + 1) if v.kind != "never" else None
            if sym is None:
                if k in var.required:
                    return []
                continue
            members.append((k, sym, k in var.required))
        # tail items: plain regions, and per tail-exists "hit" items
        region_items: list[Alt] = []
        for kf, v in regions:
            ks = self.string(kf, None, "key", compact=True)
            vs = self.value(v, depth + 1)
            if ks is not None and vs is not None:
                region_items.append([ks] + colon + [vs])
        # one tail member may satisfy several tail-exists constraints at once
        nex = len(var.texists)
        if nex > MAX_TAIL_EXISTS:
            raise Unsupported("too many 'some key must ...' constraints on one object", "not")
        hit_items: list[tuple[frozenset[int], list[Alt]]] = []
        for mask in range(1, 1 << nex):
            group = [var.texists[j] for j in range(nex) if mask >> j & 1]
            hits = []
            for kf, v in regions:
                keyf = sl.f_and(kf, *(f for f, _ in group))
                ks = self.string(keyf, None, "key", compact=True) if keyf != sl.NOTHING else None
                vs = self.value(alg.and_all([v, *(w for _, w in group)]), depth + 1)
                if ks is not None and vs is not None:
                    hits.append([ks, *colon, vs])
            if hits:
                hit_items.append((frozenset(j for j in range(nex) if mask >> j & 1), hits))
        counting = mn > 0 or mx is not None
        n = len(members)
        if not counting and not nex and n > TREE_MIN_MEMBERS:
            return self._object_tree(members, region_items, depth, base)
        full = frozenset(range(nex))
        rules: dict[tuple[Any, ...], str] = {}
        todo: list[tuple[Any, ...]] = []

        def clamp(c: int) -> int:
            if not counting:
                return 0
            return c if mx is not None else min(c, mn)

        # Without counting there are at most 2 states per named member plus the tail states
        # (linear in the schema); the budget bounds what counting adds on top.
        budget = MAX_ARRAY_STATES + 2 * (n + 2) * (1 << nex)

        def rule(key: tuple[Any, ...]) -> str:
            if key not in rules:
                if len(rules) > budget:
                    raise Unsupported(
                        "object constraints need too many grammar states", "minProperties"
                    )
                rules[key] = self.fresh(f"{base}_m")
                todo.append(key)
            return rules[key]

        # states: ("named", i, c, first) before named member i, ("tail", c, first, sat) after
        # them; c counts members (clamped), first: nothing emitted yet, sat: tail-exists met
        simple_tail = bool(region_items) and not counting and not nex
        item_alt = None
        if simple_tail:
            item_alt = self.fresh(f"{base}_kv")
            self.add_rule(item_alt, region_items)
        start = rule(("named", 0, 0, True))
        while todo:
            key = todo.pop()
            name = rules[key]
            alts: list[Alt] = []
            if key[0] == "named":
                _, i, c, first = key
                if i == n:
                    alts.append([rule(("tail", c, first, frozenset()))])
                else:
                    k, sym, required = members[i]
                    sep = [] if first else comma
                    c2 = c + 1
                    if mx is None or c2 <= mx:
                        nxt = rule(("named", i + 1, clamp(c2), False))
                        alts.append(sep + [lay.key_literal(k)] + colon + [sym, nxt])
                    if not required:
                        alts.append([rule(("named", i + 1, c, first))])
            else:
                _, c, first, sat = key
                if item_alt is not None:
                    more = rep(comma + [item_alt], 0, None)
                    alts.append([item_alt, more] if first else [more])
                else:
                    done = (not counting or c >= mn) and sat == full
                    if done and not first:
                        alts.append(["''"])
                    sep = [] if first else comma
                    c2 = c + 1
                    if mx is None or c2 <= mx:
                        for it in region_items:
                            alts.append(sep + it + [rule(("tail", clamp(c2), False, sat))])
                        for group, hits in hit_items:
                            for it in hits:
                                alts.append(
                                    sep + it + [rule(("tail", clamp(c2), False, sat | group))]
                                )
            self.add_rule(name, alts)
        out: list[Alt] = []
        empty_ok = not any(r for _, _, r in members) and (not counting or mn == 0) and nex == 0
        if empty_ok:
            out.append(lay.empty("{}"))
        out.append(lay.open("{", depth) + [start] + lay.close("}", depth))
        return out

    def _object_tree(
        self, members: list[tuple[str, Sym, bool]], region_items: list[Alt], depth: int, base: str
    ) -> list[Alt]:
        """Objects with many named members and no counting: rules linear in the members, and
        normalized grammars of O(n log n) symbols.

        The chain form (``after_i ::= ', ' member_i after_{i+1} | after_{i+1}``) has unit and
        nullable chains that grammar normalization inlines into O(n^2) productions (5,000
        optional properties: 60M symbols). Here the state after member ``i`` offers the next
        member directly: ``after_i ::= '' | ', ' pick[a,b) | ...`` where the ranges ``[a,b)``
        are the O(log n) nodes of a segment tree over the members that cover the allowed next
        members (up to the next required one); ``pick[a,b) ::= pick[a,m) | pick[m,b)`` and the
        leaf ``pick[j,j+1) ::= key_j ': ' value_j after_{j+1}``. Same language, same order.
        """
        lay = self.layout
        comma = lay.comma(depth)
        colon = lay.colon()
        n = len(members)
        next_req = [n] * (n + 1)  # first required member at index >= i (n: none)
        for i in range(n - 1, -1, -1):
            next_req[i] = i if members[i][2] else next_req[i + 1]
        item_alt = None
        if region_items:
            item_alt = self.fresh(f"{base}_kv")
            self.add_rule(item_alt, region_items)
        more = [rep(comma + [item_alt], 0, None)] if item_alt is not None else []
        after: dict[int, str] = {}
        picks: dict[tuple[int, int], str] = {}

        def cover(lo: int, hi: int, a: int = 0, b: int = n) -> list[tuple[int, int]]:
            """Segment-tree nodes [a', b') partitioning [lo, hi) (lo < hi)."""
            if lo <= a and b <= hi:
                return [(a, b)]
            m = (a + b) // 2
            out = []
            if lo < m:
                out.extend(cover(lo, hi, a, m))
            if hi > m:
                out.extend(cover(lo, hi, m, b))
            return out

        def pick(a: int, b: int) -> str:
            name = picks.get((a, b))
            if name is None:
                name = picks[(a, b)] = self.fresh(f"{base}_p")
                todo.append(("pick", a, b))
            return name

        def after_sym(i: int) -> str:
            name = after.get(i)
            if name is None:
                name = after[i] = self.fresh(f"{base}_a")
                todo.append(("after", i, 0))
            return name

        def choices(i: int) -> list[tuple[int, int]]:
            """The member ranges that may come next after deciding members before ``i``."""
            hi = min(next_req[i] + 1, n)
            return cover(i, hi) if i < hi else []

        todo: list[tuple[str, int, int]] = []
        out: list[Alt] = []
        if next_req[0] == n:
            out.append(lay.empty("{}"))
            if item_alt is not None:
                out.append(lay.open("{", depth) + [item_alt, *more] + lay.close("}", depth))
        for a, b in choices(0):
            out.append(lay.open("{", depth) + [pick(a, b)] + lay.close("}", depth))
        while todo:
            kind, a, b = todo.pop()
            if kind == "pick":
                if b - a == 1:
                    k, sym, _req = members[a]
                    alts = [[lay.key_literal(k), *colon, sym, after_sym(a + 1)]]
                else:
                    m = (a + b) // 2
                    alts = [[pick(a, m)], [pick(m, b)]]
                self.add_rule(picks[(a, b)], alts)
            else:
                i = a
                alts = [comma + [pick(c, d)] for c, d in choices(i)]
                if next_req[i] == n:
                    alts.append(["''"])
                    if item_alt is not None:
                        alts.append(comma + [item_alt, *more])
                self.add_rule(after[i], alts)
        return out

    # --- output ---

    def render(self) -> str:
        self._prune()
        lines = []
        if self.layout.mode == "flexible":
            n = self.layout.max_ws
            self.rules["ws"] = [["''"], [f'#"[ \\t\\n\\r]{{1,{n}}}"']]
        order = ["start"] + [k for k in self.rules if k != "start"]
        for name in order:
            alts = self.rules.get(name)
            if not alts:
                continue
            body = " | ".join(render_alt(a) for a in alts)
            lines.append(f"{name} ::= {body};")
        return "\n".join(lines) + "\n"

    def _prune(self) -> None:
        """Remove unproductive rules and the alternatives that use them; keep reachable ones."""
        rules = self.rules
        names = set(rules)
        refs: dict[str, list[list[str]]] = {
            name: [[t for t in _alt_refs(a) if t in names] for a in alts]
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
        keep: dict[str, list[Alt]] = {}
        for name, alts in rules.items():
            if name in productive:
                keep[name] = [
                    a for a, deps in zip(alts, refs[name]) if all(t in productive for t in deps)
                ]
        reach: set[str] = set()
        stack = ["start"]
        while stack:
            nm_ = stack.pop()
            if nm_ in reach or nm_ not in keep:
                continue
            reach.add(nm_)
            for a in keep[nm_]:
                stack.extend(t for t in _alt_refs(a) if t in keep)
        self.rules = {k: v for k, v in keep.items() if k in reach}


_METRICS: dict[int, tuple[rx.Node, int, int]] = {}


def _metrics(node: rx.Node) -> tuple[int, int]:
    """(estimated DFA states, group nesting depth) of a regex, memoized by identity.

    Counted repetitions multiply states; the engine's regex parser limits nesting.
    """
    got = _METRICS.get(id(node))
    if got is not None and got[0] is node:
        return got[1], got[2]
    t = node[0]
    if t == "set":
        states, depth = (1 if node[1] and node[1][-1][1] < 0x80 else 4), 0
    elif t in ("cat", "alt"):
        ms = [_metrics(x) for x in node[1]]
        states, depth = sum(m[0] for m in ms), 1 + max(m[1] for m in ms)
    elif t == "rep":
        k = node[3] if node[3] is not None else node[2] + 1
        inner = _metrics(node[1])
        states, depth = inner[0] * max(k, 1), 1 + inner[1]
    else:
        states, depth = 1, 0
    if len(_METRICS) > 50_000:
        _METRICS.clear()
    _METRICS[id(node)] = (node, states, depth)
    return states, depth


class _TextCache:
    """Terminal texts of string regexes across translations, least recently used first out.

    Formats such as ``date-time`` take tens of milliseconds to encode and print; schemas of one
    service repeat them. Bounded by the total text held (the keys, regex ASTs, are of the same
    order) and by the number of entries.
    """

    def __init__(self, max_entries: int = 256, max_chars: int = 1 << 19) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.chars = 0
        self.map: OrderedDict[tuple[rx.Node, bool], str] = OrderedDict()

    def get(self, key: tuple[rx.Node, bool]) -> str | None:
        text = self.map.get(key)
        if text is not None:
            self.map.move_to_end(key)
        return text

    def put(self, key: tuple[rx.Node, bool], text: str) -> None:
        if len(text) > self.max_chars // 8 or key in self.map:
            return
        self.map[key] = text
        self.chars += len(text)
        while self.chars > self.max_chars or len(self.map) > self.max_entries:
            _, old = self.map.popitem(last=False)
            self.chars -= len(old)

    def clear(self) -> None:
        self.map.clear()
        self.chars = 0


_TERMINAL_TEXTS = _TextCache()


def _counted_chars(node: rx.Node) -> sl.LengthBounded | None:
    """``p c{a,b} s`` (``c`` a set of single characters, ``p`` and ``s`` of fixed lengths) as
    ``json_len!(p c* s, a + |p| + |s|, b + |p| + |s|)``, the same language; else None."""
    items = node[1] if node[0] == "cat" else (node,)
    reps = [
        i
        for i, x in enumerate(items)
        if x[0] == "rep" and x[3] is not None and rx.length_range(x[1]) == (1, 1)
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


def _fits(node: rx.Node) -> bool:
    """Whether one regex terminal is reasonable: few DFA states and shallow nesting."""
    states, depth = _metrics(node)
    return states <= REGEX_STATE_BUDGET and depth <= REGEX_NEST_BUDGET


def estimate_states(node: rx.Node) -> int:
    """A rough upper estimate of the DFA states a regex needs (counted repeats multiply)."""
    return _metrics(node)[0]


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


def _alt_refs(alt: Alt) -> list[str]:
    out: list[str] = []
    for s in alt:
        out.extend(_rule_refs(s))
    return out


def _rule_refs(sym: Sym) -> list[str]:
    """Rule names a symbol uses."""
    if isinstance(sym, tuple):
        out: list[str] = []
        for x in sym[1]:
            out.extend(_rule_refs(x))
        return out
    if sym.startswith(("'", '"', "#")):
        return []
    return [sym]
