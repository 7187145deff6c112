"""Regular expressions over code points: an AST, an ECMA-262 parser and printers.

The AST is made of hashable tuples:

* ``("set", charset)``: one code point from the set,
* ``("cat", (a, b, ...))``: concatenation,
* ``("alt", (a, b, ...))``: alternation,
* ``("rep", a, lo, hi)``: ``a{lo,hi}``, ``hi is None`` for unbounded,
* ``EPS`` (the empty string), ``NONE`` (the empty language),
* ``BOL`` / ``EOL``: the ``^`` / ``$`` assertions, only present right after parsing.

:func:`parse_ecma` reads a JSON Schema ``pattern`` (ECMA-262 syntax, ``u`` flag semantics with
Annex B leniency) and :func:`search_language` turns the unanchored search semantics of
``pattern`` into an AST whose *full-match* language is exactly the set of strings the pattern
finds a match in.
"""

from __future__ import annotations

from typing import Any

from . import _charset as cs

Node = tuple[Any, ...]

EPS: Node = ("eps",)
NONE: Node = ("none",)
BOL: Node = ("bol",)
EOL: Node = ("eol",)
ANYCHAR: Node = ("set", cs.ANY)


class RegexUnsupported(Exception):
    """A construct that no regular language (without look-around) can express."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RegexSyntaxError(Exception):
    """The pattern is not a valid ECMA-262 regular expression."""


#: Deepest nesting of groups in a pattern (the AST is walked recursively; deeper patterns are
#: refused with RegexTooDeep before any walk could run out of stack).
MAX_PATTERN_NESTING = 1000


class RegexTooDeep(Exception):
    """Groups nested deeper than :data:`MAX_PATTERN_NESTING`."""


# --- constructors (with light simplification) ---------------------------------------------------


def cset(s: cs.Charset) -> Node:
    return ("set", s) if s else NONE


#: The one-character sets of ASCII, by code point (shared by the literals made of them), and
#: their characters by the identity of these very nodes (no hash of a node per character).
_ASCII_SETS: tuple[Node, ...] = tuple(("set", ((o, o),)) for o in range(128))
_ASCII_TEXT: dict[int, str] = {id(n): chr(o) for o, n in enumerate(_ASCII_SETS)}


def lit(text: str) -> Node:
    # What ``cat`` builds from one single-character set per character (none is empty or nested).
    if len(text) == 1:
        return ("set", cs.single(ord(text)))
    if not text:
        return EPS
    if text.isascii():
        return ("cat", tuple(map(_ASCII_SETS.__getitem__, text.encode())))
    return ("cat", tuple([("set", ((o, o),)) for o in map(ord, text)]))


def cat(*items: Node) -> Node:
    out: list[Node] = []
    for it in items:
        if it == NONE:
            return NONE
        if it == EPS:
            continue
        if it[0] == "cat":
            out.extend(it[1])
        else:
            out.append(it)
    if not out:
        return EPS
    if len(out) == 1:
        return out[0]
    return ("cat", tuple(out))


def alt(*items: Node) -> Node:
    out: list[Node] = []
    seen = set()
    sets: list[cs.Charset] = []
    has_eps = False
    for it in items:
        if it == NONE:
            continue
        parts = it[1] if it[0] == "alt" else (it,)
        for p in parts:
            if p == EPS:
                has_eps = True
                continue
            if p[0] == "rep" and p[2] == 0 and p[3] == 1:
                has_eps = True
                p = p[1]
            if p[0] == "set":
                sets.append(p[1])
                continue
            # identity dedupe: structural hashing of large trees is quadratic
            key = p if p[0] == "set" or len(p) < 2 or p[0] == "eps" else id(p)
            if key not in seen:
                seen.add(key)
                out.append(p)
    if sets:
        out.insert(0, ("set", cs.union(*sets)))
    if not out:
        return EPS if has_eps else NONE
    body = out[0] if len(out) == 1 else ("alt", tuple(out))
    if has_eps:
        return rep(body, 0, 1)
    return body


def rep(node: Node, lo: int, hi: int | None) -> Node:
    if hi is not None and hi < lo:
        return NONE
    if node == NONE:
        return EPS if lo == 0 else NONE
    if node == EPS or hi == 0:
        return EPS
    if lo == 1 and hi == 1:
        return node
    if node[0] == "rep":
        merged = _merge_counts(node[2], node[3], lo, hi)
        if merged is not None:
            return rep(node[1], merged[0], merged[1])
    return ("rep", node, lo, hi)


def _merge_counts(a: int, b: int | None, c: int, d: int | None) -> tuple[int, int | None] | None:
    """``(x{a,b}){c,d}`` as ``x{lo,hi}`` when the possible counts form one interval, else None.

    The counts are the union over n in [c, d] of [n*a, n*b]; it is an interval only when
    consecutive ranges touch (e.g. ``(x{4})*`` is multiples of 4, not ``x*``).
    """
    if b is not None and a == b:
        if a == 1:
            return c, d
        if c == d:
            return a * c, a * c
        return None
    n0 = max(c, 1)
    if d is not None and d < n0:  # only n = 0 (c == d == 0)
        return 0, 0
    if c == 0 and a > 1:
        return None  # 0, then a gap before a
    if b is not None and n0 * (b - a) < a - 1 and (d is None or d > n0):
        return None
    return c * a, (None if d is None or b is None else d * b)


def opt(node: Node) -> Node:
    return rep(node, 0, 1)


# --- ECMA-262 parser ------------------------------------------------------------------------------

_SYNTAX_CHARS = set("^$\\.*+?()[]{}|/")


class _Parser:
    def __init__(self, src: str) -> None:
        self.s = src
        self.i = 0
        self.depth = 0
        self.group_count = self._count_groups()

    def _count_groups(self) -> int:
        n = 0
        i = 0
        in_class = False
        s = self.s
        while i < len(s):
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if in_class:
                if c == "]":
                    in_class = False
            elif c == "[":
                in_class = True
            elif (
                c == "("
                and (i + 1 >= len(s) or s[i + 1] != "?" or s[i + 1 : i + 3] == "?<")
                and s[i + 1 : i + 4] not in ("?<=", "?<!")
            ):
                n += 1
            i += 1
        return n

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def eof(self) -> bool:
        return self.i >= len(self.s)

    def error(self, msg: str) -> RegexSyntaxError:
        return RegexSyntaxError(f"{msg} at offset {self.i} in pattern {self.s!r}")

    def parse(self) -> Node:
        node = self.disjunction()
        if not self.eof():
            raise self.error("unbalanced ')'")
        return node

    def disjunction(self) -> Node:
        self.depth += 1
        if self.depth > MAX_PATTERN_NESTING:
            raise RegexTooDeep(
                f"groups nested deeper than {MAX_PATTERN_NESTING} levels at offset {self.i}"
            )
        alts = [self.alternative()]
        while self.peek() == "|":
            self.i += 1
            alts.append(self.alternative())
        self.depth -= 1
        return alts[0] if len(alts) == 1 else ("alt", tuple(alts))

    def alternative(self) -> Node:
        items: list[Node] = []
        while not self.eof() and self.peek() not in "|)":
            items.append(self.term())
        if not items:
            return EPS
        return items[0] if len(items) == 1 else ("cat", tuple(items))

    def term(self) -> Node:
        c = self.peek()
        if c == "^":
            self.i += 1
            return BOL
        if c == "$":
            self.i += 1
            return EOL
        if c == "\\" and self.peek(1) in ("b", "B"):
            raise RegexUnsupported(f"word-boundary assertion \\{self.peek(1)}")
        if c == "(" and self.s.startswith(("(?<=", "(?<!"), self.i):
            raise RegexUnsupported("look-behind assertion")
        if c == "(" and self.s.startswith(("(?=", "(?!"), self.i):
            positive = self.s[self.i + 2] == "="
            self.i += 3
            inner = self.disjunction()
            if self.peek() != ")":
                raise self.error("missing ')'")
            self.i += 1
            if self.peek() in ("*", "+", "?", "{") and (
                self.peek() != "{" or self._braces(peek=True)
            ):
                raise RegexUnsupported("quantified look-ahead")
            return ("look", positive, inner)
        atom = self.atom()
        return self.quantifier(atom)

    def quantifier(self, atom: Node) -> Node:
        c = self.peek()
        lo: int
        hi: int | None
        if c == "*":
            lo, hi = 0, None
            self.i += 1
        elif c == "+":
            lo, hi = 1, None
            self.i += 1
        elif c == "?":
            lo, hi = 0, 1
            self.i += 1
        elif c == "{":
            q = self._braces()
            if q is None:
                return atom
            lo, hi = q
        else:
            return atom
        if self.peek() == "?":  # lazy: same language
            self.i += 1
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._braces(peek=True)):
            raise self.error("nothing to repeat")
        if atom in (BOL, EOL):
            raise RegexUnsupported("quantified assertion")
        return ("rep", atom, lo, hi)

    def _braces(self, peek: bool = False) -> tuple[int, int | None] | None:
        j = self.i + 1
        s = self.s
        k = j
        while k < len(s) and s[k].isdigit():
            k += 1
        if k == j:
            return None
        lo = int(s[j:k])
        hi: int | None = lo
        if k < len(s) and s[k] == ",":
            k += 1
            m = k
            while k < len(s) and s[k].isdigit():
                k += 1
            hi = int(s[m:k]) if k > m else None
        if k >= len(s) or s[k] != "}":
            return None
        if hi is not None and hi < lo:
            raise self.error("numbers out of order in {} quantifier")
        if not peek:
            self.i = k + 1
        return lo, hi

    def atom(self) -> Node:
        c = self.peek()
        if c == ".":
            self.i += 1
            return ("set", cs.DOT)
        if c == "(":
            return self.group()
        if c == "[":
            return ("set", self.char_class())
        if c == "\\":
            return self.atom_escape()
        if c in ("*", "+", "?"):
            raise self.error("nothing to repeat")
        if c == "{":
            if self._braces(peek=True):
                raise self.error("nothing to repeat")
            self.i += 1
            return ("set", cs.single(ord("{")))
        if c == ")":
            raise self.error("unbalanced ')'")
        self.i += 1
        return ("set", cs.single(ord(c)))

    def group(self) -> Node:
        s = self.s
        self.i += 1
        if s.startswith("?:", self.i):
            self.i += 2
        elif s.startswith("?<", self.i):
            end = s.find(">", self.i)
            if end < 0:
                raise self.error("unterminated group name")
            name = s[self.i + 2 : end]
            if not name or not all(ch.isalnum() or ch in "_$" for ch in name):
                raise self.error("invalid group name")
            self.i = end + 1
        elif self.peek() == "?":
            raise self.error("invalid group")
        node = self.disjunction()
        if self.peek() != ")":
            raise self.error("missing ')'")
        self.i += 1
        return node

    def atom_escape(self) -> Node:
        self.i += 1
        c = self.peek()
        if c == "":
            raise self.error("\\ at end of pattern")
        if c.isdigit() and c != "0":
            j = self.i
            while j < len(self.s) and self.s[j].isdigit():
                j += 1
            num = int(self.s[self.i : j])
            if num <= self.group_count:
                raise RegexUnsupported("backreference")
            raise self.error("invalid escape")
        if c == "k" and self.peek(1) == "<":
            raise RegexUnsupported("named backreference")
        return ("set", self.class_escape(in_class=False))

    def class_escape(self, in_class: bool) -> cs.Charset:
        """Parse after the backslash; return a charset."""
        c = self.peek()
        self.i += 1
        simple = {"d": cs.DIGIT, "w": cs.WORD, "s": cs.SPACE}
        if c in simple:
            return simple[c]
        if c.lower() in simple:
            return cs.complement(simple[c.lower()])
        if c in ("p", "P"):
            if self.peek() != "{":
                raise self.error("invalid property escape")
            end = self.s.find("}", self.i)
            if end < 0:
                raise self.error("unterminated property escape")
            name = self.s[self.i + 1 : end]
            self.i = end + 1
            try:
                prop = cs.unicode_property(name)
            except KeyError:
                raise RegexUnsupported(f"unknown Unicode property \\p{{{name}}}") from None
            return prop if c == "p" else cs.complement(prop)
        controls = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13}
        if c in controls:
            return cs.single(controls[c])
        if c == "b" and in_class:
            return cs.single(8)
        if c == "-" and in_class:
            return cs.single(ord("-"))
        if c == "c":
            d = self.peek()
            if d.isascii() and d.isalpha():
                self.i += 1
                return cs.single(ord(d) % 32)
            raise self.error("invalid control escape")
        if c == "0" and not self.peek().isdigit():
            return cs.single(0)
        if c == "x":
            h = self.s[self.i : self.i + 2]
            if len(h) == 2 and all(ch in "0123456789abcdefABCDEF" for ch in h):
                self.i += 2
                return cs.single(int(h, 16))
            raise self.error("invalid \\x escape")
        if c == "u":
            return cs.single(self._unicode_escape())
        if c in _SYNTAX_CHARS or (c in "-,:=!<>'\"#&~%@`;_ " and not c.isalnum()):
            return cs.single(ord(c))
        raise self.error(f"invalid escape \\{c}")

    def _unicode_escape(self) -> int:
        s = self.s
        if self.peek() == "{":
            end = s.find("}", self.i)
            h = s[self.i + 1 : end] if end > 0 else ""
            if (
                not h
                or not all(ch in "0123456789abcdefABCDEF" for ch in h)
                or int(h, 16) > cs.MAX_CP
            ):
                raise self.error("invalid \\u{...} escape")
            self.i = end + 1
            return int(h, 16)
        h = s[self.i : self.i + 4]
        if len(h) != 4 or not all(ch in "0123456789abcdefABCDEF" for ch in h):
            raise self.error("invalid \\u escape")
        self.i += 4
        cp = int(h, 16)
        if 0xD800 <= cp <= 0xDBFF and s[self.i : self.i + 2] == "\\u":
            h2 = s[self.i + 2 : self.i + 6]
            if len(h2) == 4 and all(ch in "0123456789abcdefABCDEF" for ch in h2):
                lo = int(h2, 16)
                if 0xDC00 <= lo <= 0xDFFF:
                    self.i += 6
                    return 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
        return cp

    def char_class(self) -> cs.Charset:
        self.i += 1
        negate = False
        if self.peek() == "^":
            negate = True
            self.i += 1
        parts: list[cs.Charset] = []
        while True:
            if self.eof():
                raise self.error("unterminated character class")
            if self.peek() == "]":
                self.i += 1
                break
            a = self._class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                b = self._class_atom()
                if len(a) == 1 and a[0][0] == a[0][1] and len(b) == 1 and b[0][0] == b[0][1]:
                    if a[0][0] > b[0][0]:
                        raise self.error("range out of order in character class")
                    parts.append(((a[0][0], b[0][0]),))
                else:  # Annex B: a class escape in a range means the literal '-'
                    parts.extend([a, cs.single(ord("-")), b])
            else:
                parts.append(a)
        res = cs.union(*parts) if parts else cs.EMPTY
        return cs.complement(res) if negate else res

    def _class_atom(self) -> cs.Charset:
        c = self.peek()
        if c == "\\":
            self.i += 1
            return self.class_escape(in_class=True)
        self.i += 1
        return cs.single(ord(c))


def parse_ecma(pattern: str) -> Node:
    """Parse an ECMA-262 pattern into an AST (with BOL/EOL assertions)."""
    return _Parser(pattern).parse()


# --- search semantics → full-match language -------------------------------------------------


def _has_anchor(node: Node) -> bool:
    t = node[0]
    if t in ("bol", "eol", "look"):
        return True
    if t in ("cat", "alt"):
        return any(_has_anchor(x) for x in node[1])
    if t == "rep":
        return _has_anchor(node[1])
    return False


def _has_look(node: Node) -> bool:
    t = node[0]
    if t == "look":
        return True
    if t in ("cat", "alt"):
        return any(_has_look(x) for x in node[1])
    if t == "rep":
        return _has_look(node[1])
    return False


def _drop_anchors(node: Node) -> Node:
    t = node[0]
    if t in ("bol", "eol"):
        return NONE
    if t == "cat":
        return cat(*(_drop_anchors(x) for x in node[1]))
    if t == "alt":
        return alt(*(_drop_anchors(x) for x in node[1]))
    if t == "rep":
        return rep(_drop_anchors(node[1]), node[2], node[3])
    return node


def _split_leading(node: Node) -> list[tuple[bool, Node]]:
    """Variants of ``node`` as (anchored at start, rest) with all leading ``^`` removed."""
    t = node[0]
    if t == "bol":
        return [(True, EPS)]
    if t == "alt":
        if not _has_anchor(node):
            # one variant: splitting would copy what follows into every branch
            return [(False, node)]
        out: list[tuple[bool, Node]] = []
        for x in node[1]:
            out.extend(_split_leading(x))
        return out
    if t == "cat":
        items = node[1]
        head = _split_leading(items[0])
        out = []
        for anchored, rest in head:
            tail = cat(*items[1:])
            if anchored:
                # further '^' right at the start hold trivially: strip them too
                out.extend((True, r2) for _, r2 in _split_leading(cat(rest, tail)))
            elif not _nullable(rest):
                out.append((anchored, cat(rest, tail)))
            else:
                # rest may be empty: the anchor could still come from the tail
                out.append((False, cat(rest, tail)))
        # Merge: for an unanchored head that may be empty and a tail starting with ^ we keep
        # the anchor inside; the final check rejects it (conservatively unsupported).
        return out
    return [(False, node)]


def _split_trailing(node: Node) -> list[tuple[bool, Node]]:
    t = node[0]
    if t == "eol":
        return [(True, EPS)]
    if t == "alt":
        if not _has_anchor(node):
            return [(False, node)]
        out: list[tuple[bool, Node]] = []
        for x in node[1]:
            out.extend(_split_trailing(x))
        return out
    if t == "cat":
        items = node[1]
        out = []
        for anchored, rest in _split_trailing(items[-1]):
            out.append((anchored, cat(*items[:-1], rest)))
        return out
    return [(False, node)]


def first_chars(node: Node) -> tuple[cs.Charset, bool]:
    """An over-approximation of the characters that start the language's non-empty strings,
    and whether the empty string may be in it (exact for assertion-free regexes)."""
    t = node[0]
    if t == "set":
        return node[1], False
    if t in ("eps", "none"):
        return cs.make(()), t == "eps"
    if t == "cat":
        acc = []
        for x in node[1]:
            f, n = first_chars(x)
            acc.append(f)
            if not n:
                return cs.union(*acc), False
        return cs.union(*acc), True
    if t == "alt":
        parts = [first_chars(x) for x in node[1]]
        return cs.union(*(f for f, _ in parts)), any(n for _, n in parts)
    if t == "rep":
        f, n = first_chars(node[1])
        return f, n or node[2] == 0
    return cs.make([(0, cs.MAX_CP)]), True


def _nullable(node: Node) -> bool:
    t = node[0]
    if t in ("eps", "bol", "eol", "look"):
        return True
    if t in ("set", "none"):
        return False
    if t == "cat":
        return all(_nullable(x) for x in node[1])
    if t == "alt":
        return any(_nullable(x) for x in node[1])
    if t == "rep":
        return node[2] == 0 or _nullable(node[1])
    raise AssertionError(t)


def _strip_assertions(node: Node) -> Node:
    """Rebuild with the simplifying constructors (the node is assertion-free)."""
    t = node[0]
    if t == "cat":
        return cat(*(_strip_assertions(x) for x in node[1]))
    if t == "alt":
        return alt(*(_strip_assertions(x) for x in node[1]))
    if t == "rep":
        return rep(_strip_assertions(node[1]), node[2], node[3])
    if t == "set":
        return cset(node[1])
    return node


Lookahead = tuple[bool, Node]  # (positive, full-match language of the look-ahead)


def search_variants(node: Node) -> list[tuple[list[Lookahead], Node]]:
    """ECMA search semantics of ``node`` as variants ``(look-aheads, full-match AST)``.

    A string is in the pattern's language when, for some variant, it is in the AST's language
    and in every positive look-ahead language and in no negative one. Look-aheads are only
    supported right after a leading ``^`` (where they constrain the whole string).
    """
    pad = rep(ANYCHAR, 0, None)
    variants: list[tuple[list[Lookahead], Node]] = []
    for start_anchored, rest in _split_leading(node):
        looks: list[Node] = []
        while True:
            if rest[0] == "look":
                looks.append(rest)
                rest = EPS
            elif rest[0] == "cat" and rest[1][0][0] == "look":
                looks.append(rest[1][0])
                rest = cat(*rest[1][1:])
                continue
            break
        if looks and not start_anchored:
            raise RegexUnsupported("look-ahead that is not at the start of an anchored pattern")
        langs = [(lk[1], search_language(cat(BOL, lk[2]))) for lk in looks]
        for end_anchored, core in _split_trailing(rest):
            if _has_look(core):
                raise RegexUnsupported("a look-ahead in the middle of a pattern")
            if _has_anchor(core):
                # '^'/'$' left in the middle: taken as never matching there. That keeps only
                # matches without them (a subset), and is exact when they cannot match at all
                # (e.g. '/^x$/', a character before '^').
                core = _drop_anchors(core)
            core = _strip_assertions(core)
            variants.append(
                (langs, cat(EPS if start_anchored else pad, core, EPS if end_anchored else pad))
            )
    return variants


def search_language(node: Node) -> Node:
    """The full-match AST of strings in which ``node`` (ECMA search semantics) finds a match."""
    out: list[Node] = []
    for looks, core in search_variants(node):
        if looks:
            raise RegexUnsupported("look-ahead assertion")
        out.append(core)
    return alt(*out)


def compile_pattern(pattern: str) -> Node:
    """ECMA-262 ``pattern`` keyword → full-match AST (raises RegexUnsupported/RegexSyntaxError)."""
    return search_language(parse_ecma(pattern))


# --- analysis ----------------------------------------------------------------------------------


def length_range(node: Node) -> tuple[int, int | None]:
    """(min, max) length in code points of the strings of ``node`` (max None = unbounded)."""
    t = node[0]
    if t == "eps":
        return 0, 0
    if t == "none":
        return 0, 0
    if t == "set":
        return 1, 1
    hi: int | None
    if t == "cat":
        lo, hi = 0, 0
        for x in node[1]:
            a, b = length_range(x)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if t == "alt":
        rs = [length_range(x) for x in node[1]]
        lo = min(r[0] for r in rs)
        highs = [r[1] for r in rs]
        hi = None if any(h is None for h in highs) else max(h for h in highs if h is not None)
        return lo, hi
    if t == "rep":
        a, b = length_range(node[1])
        lo = a * node[2]
        if node[3] is None:
            hi = 0 if b == 0 else None
        else:
            hi = None if b is None else b * int(node[3])
        return lo, hi
    raise AssertionError(t)


def is_empty(node: Node) -> bool:
    t = node[0]
    if t == "none":
        return True
    if t == "set":
        return not node[1]
    if t == "cat":
        return any(is_empty(x) for x in node[1])
    if t == "alt":
        return all(is_empty(x) for x in node[1])
    if t == "rep":
        return node[2] > 0 and is_empty(node[1])
    return False


def finite_strings(node: Node, limit: int = 64) -> list[str] | None:
    """All strings of the language if it is finite and has at most ``limit`` members."""
    t = node[0]
    if t == "eps":
        return [""]
    if t == "none":
        return []
    if t == "set":
        if cs.size(node[1]) > limit:
            return None
        return [chr(c) for lo, hi in node[1] for c in range(lo, hi + 1)]
    if t == "alt":
        out: list[str] = []
        for x in node[1]:
            f = finite_strings(x, limit)
            if f is None:
                return None
            out.extend(f)
            if len(out) > limit:
                return None
        return sorted(set(out))
    if t == "cat":
        # A literal (one single character per item, as ``lit`` builds it): its one string.
        items = node[1]
        chars = [_ASCII_TEXT.get(id(x)) for x in items]
        if None not in chars:  # (other one-character sets: the general test below)
            return ["".join(chars)]  # type: ignore[arg-type]
        if all(x[0] == "set" and len(x[1]) == 1 and x[1][0][0] == x[1][0][1] for x in items):
            return ["".join([chr(x[1][0][0]) for x in items])]
        acc = [""]
        for x in items:
            f = finite_strings(x, limit)
            if f is None or len(acc) * len(f) > limit:  # (the product's length, before building it)
                return None
            acc = [a + b for a in acc for b in f]
        return sorted(set(acc))
    if t == "rep":
        if node[3] is None:
            return None if not is_empty(node[1]) and length_range(node[1])[1] != 0 else [""]
        f = finite_strings(node[1], limit)
        if f is None:
            return None
        out_set = set()
        layer = [""]
        for k in range(node[3] + 1):
            if k >= node[2]:
                out_set.update(layer)
            if k == node[3]:
                break
            # (the next layer's length, known before it is built: `x{1,255}` over 64 characters
            # must stop here, not after building 64^3 strings)
            if len(layer) * len(f) > limit or len(out_set) > limit:
                return None
            layer = [a + b for a in layer for b in f]
        return sorted(out_set)
    raise AssertionError(t)


def size(node: Node) -> int:
    t = node[0]
    if t in ("cat", "alt"):
        return 1 + sum(size(x) for x in node[1])
    if t == "rep":
        return 1 + size(node[1])
    if t == "set":
        return 1 + len(node[1])
    return 1


# --- printers ----------------------------------------------------------------------------------


def _py_cp(cp: int) -> str:
    if cp < 0x80 and (chr(cp).isalnum() or chr(cp) in " _"):
        return chr(cp)
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _py_set(s: cs.Charset) -> str:
    if len(s) == 1 and s[0][0] == s[0][1]:
        return _py_cp(s[0][0])
    parts = []
    for lo, hi in s:
        parts.append(_py_cp(lo) if lo == hi else f"{_py_cp(lo)}-{_py_cp(hi)}")
    return "[" + "".join(parts) + "]"


def to_python(node: Node) -> str:
    """A Python ``re`` pattern (use with ``re.fullmatch``) for the AST."""
    t = node[0]
    if t == "eps":
        return ""
    if t == "none":
        return "(?!)"
    if t == "set":
        return _py_set(node[1])
    if t == "cat":
        return "".join(_py_group(x) if x[0] == "alt" else to_python(x) for x in node[1])
    if t == "alt":
        return "|".join(to_python(x) for x in node[1])
    if t == "rep":
        inner = to_python(node[1])
        if node[1][0] in ("cat", "alt", "rep", "eps"):
            inner = f"(?:{inner})"
        return inner + quantifier(node[2], node[3])
    raise AssertionError(t)


def _py_group(node: Node) -> str:
    return f"(?:{to_python(node)})"


def quantifier(lo: int, hi: int | None) -> str:
    """The regex quantifier for ``{lo,hi}`` (``hi`` None: unbounded), shortest spelling."""
    if (lo, hi) == (0, None):
        return "*"
    if (lo, hi) == (1, None):
        return "+"
    if (lo, hi) == (0, 1):
        return "?"
    if hi is None:
        return f"{{{lo},}}"
    if lo == hi:
        return f"{{{lo}}}"
    return f"{{{lo},{hi}}}"
