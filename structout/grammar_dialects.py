"""Translate the grammar dialects vLLM users send (GBNF, Lark) into KBNF.

vLLM's ``structured_outputs.grammar`` (``guided_grammar``) is llama.cpp's GBNF for the xgrammar
backend and Lark for the guidance (llguidance) backend. These translators produce KBNF with the
*same language* (start rule ``start``) or raise :class:`structout.errors.GrammarError` with
``line:col``, the offending line, a caret and a hint. Nothing is silently widened or narrowed.

Semantics: a grammar denotes the set of strings derivable from its start rule, each terminal
standing for its regular language (Lark's Earley parser with ``lexer="dynamic_complete"``).
llguidance's lexer is greedy, so it may reject a few strings of that language whose only split
into lexemes is not the longest-match one (``A: /a+/`` followed by ``"ab"``); the translation
keeps the context-free language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn, Union

from structout.errors import GrammarError
from structout.kbnf_text import literal, regex_terminal

__all__ = ["detect_dialect", "gbnf_to_kbnf", "grammar_to_kbnf", "lark_to_kbnf"]


# ---------------------------------------------------------------------------------------------
# Syntax tree shared by both dialects, and its KBNF printer
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Lit:
    text: str  # exact characters (UTF-8 encoded by KBNF)


@dataclass(frozen=True)
class _Class:
    negated: bool
    ranges: tuple[tuple[int, int], ...]  # inclusive code point ranges, non-empty


@dataclass(frozen=True)
class _Regex:
    pattern: str  # Rust regex syntax; quotes are escaped when printed


@dataclass(frozen=True)
class _Ref:
    name: str  # already a KBNF identifier


@dataclass(frozen=True)
class _Seq:
    items: tuple[_Node, ...]


@dataclass(frozen=True)
class _Alt:
    items: tuple[_Node, ...]  # at least two


@dataclass(frozen=True)
class _Rep:
    item: _Node
    lo: int
    hi: int | None  # None: unbounded; lo <= hi


_Node = Union[_Lit, _Class, _Regex, _Ref, _Seq, _Alt, _Rep]

# Binding levels of printed expressions: a child binding looser than its parent needs is wrapped.
_ALT, _SEQ, _POSTFIX, _ATOM = 0, 1, 2, 3
_SURROGATES = (0xD800, 0xDFFF)
_MAX_CODE_POINT = 0x10FFFF


def _regex_char(cp: int) -> str:
    """One code point as a Rust regex atom, valid inside and outside classes."""
    ch = chr(cp)
    if ch.isascii() and ch.isalnum():
        return ch
    return f"\\x{{{cp:X}}}"


def _class_regex(node: _Class) -> str:
    parts = []
    for lo, hi in node.ranges:
        # Rust regex rejects surrogate code points; no UTF-8 text contains them anyway.
        for a, b in ((lo, min(hi, _SURROGATES[0] - 1)), (max(lo, _SURROGATES[1] + 1), hi)):
            if a < b:
                parts.append(f"{_regex_char(a)}-{_regex_char(b)}")
            elif a == b:
                parts.append(_regex_char(a))
    return "[" + ("^" if node.negated else "") + "".join(parts) + "]"


def _print(node: _Node) -> tuple[str, int]:
    """KBNF text of ``node`` and its binding level."""
    if isinstance(node, _Lit):
        return literal(node.text), _ATOM
    if isinstance(node, _Class):
        return regex_terminal(_class_regex(node)), _ATOM
    if isinstance(node, _Regex):
        return regex_terminal(node.pattern), _ATOM
    if isinstance(node, _Ref):
        return node.name, _ATOM
    if isinstance(node, _Seq):
        if not node.items:
            return "''", _ATOM
        if len(node.items) == 1:
            return _print(node.items[0])
        flat: list[_Node] = []
        for x in node.items:  # concatenation is associative: no parentheses for nested ones
            flat.extend(x.items if isinstance(x, _Seq) and x.items else (x,))
        return " ".join(_wrapped(x, _POSTFIX) for x in flat), _SEQ
    if isinstance(node, _Alt):
        return " | ".join(_wrapped(x, _SEQ) for x in node.items), _ALT
    if node.hi == 0:
        return "''", _ATOM
    inner = _wrapped(node.item, _ATOM)
    lo, hi = node.lo, node.hi
    if (lo, hi) == (0, None):
        op = "*"
    elif (lo, hi) == (1, None):
        op = "+"
    elif (lo, hi) == (0, 1):
        op = "?"
    elif hi is None:
        op = f"{{{lo},}}"
    elif lo == hi:
        op = f"{{{lo}}}"
    else:
        op = f"{{{lo},{hi}}}"
    return inner + op, _POSTFIX


def _wrapped(node: _Node, level: int) -> str:
    text, own = _print(node)
    return text if own >= level else f"({text})"


def _print_rules(rules: list[tuple[str, _Node]]) -> str:
    return "".join(f"{name} ::= {_print(body)[0]};\n" for name, body in rules)


def _seq(items: list[_Node]) -> _Node:
    return items[0] if len(items) == 1 else _Seq(tuple(items))


def _alt(items: list[_Node]) -> _Node:
    return items[0] if len(items) == 1 else _Alt(tuple(items))


# ---------------------------------------------------------------------------------------------
# Errors and names
# ---------------------------------------------------------------------------------------------


def _fail(text: str, pos: int, message: str, hint: str, length: int = 1) -> NoReturn:
    """Raise GrammarError at character offset ``pos`` of ``text`` (line:col are 1-based)."""
    pos = max(0, min(pos, len(text)))
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    end = len(text) if end < 0 else end
    line = text.count("\n", 0, pos) + 1
    col = pos - start + 1
    excerpt = text[start:end].replace("\t", " ").rstrip("\r")
    caret = " " * (col - 1) + "^" * max(1, min(length, end - pos))
    raise GrammarError(
        f"error at {line}:{col}: {message}\n  | {excerpt}\n  | {caret}\n  = hint: {hint}"
    )


class _Namer:
    """Maps source names to distinct KBNF identifiers (``[A-Za-z_][A-Za-z0-9_]*``)."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._taken: set[str] = set()

    def reserve(self, kbnf: str) -> None:
        self._taken.add(kbnf)

    def bind(self, source: str, kbnf: str) -> None:
        self._names[source] = kbnf
        self._taken.add(kbnf)

    def fresh(self, base: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", base) or "r"
        if base[0].isdigit():
            base = "r" + base
        name, n = base, 2
        while name in self._taken:
            name, n = f"{base}_{n}", n + 1
        self._taken.add(name)
        return name

    def get(self, source: str) -> str:
        if source not in self._names:
            self._names[source] = self.fresh(source)
        return self._names[source]


_HEX = "0123456789abcdefABCDEF"


def _code_point(text: str, pos: int, digits: str, kind: str) -> int:
    """The value of an escape's hex digits; an error at ``pos`` unless it is a scalar value."""
    if not digits or any(c not in _HEX for c in digits):
        _fail(text, pos, f"bad {kind} escape", "write \\xHH, \\uHHHH or \\UHHHHHHHH in hex")
    cp = int(digits, 16)
    if cp > _MAX_CODE_POINT or _SURROGATES[0] <= cp <= _SURROGATES[1]:
        _fail(
            text,
            pos,
            f"escape U+{cp:04X} is not a Unicode scalar value",
            "UTF-8 text cannot contain surrogates or code points above U+10FFFF",
        )
    return cp


# ---------------------------------------------------------------------------------------------
# GBNF (llama.cpp)
# ---------------------------------------------------------------------------------------------

_GBNF_NAME = re.compile(r"[A-Za-z0-9_-]+")
_GBNF_RULE_START = re.compile(r"[A-Za-z0-9_-]+[ \t]*::=")
_GBNF_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_GBNF_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


class _GbnfParser:
    """Recursive descent over llama.cpp GBNF; a rule's body ends where ``name ::=`` begins."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.namer = _Namer()
        self.namer.bind("root", "start")
        self.refs: list[tuple[str, int]] = []  # (source name, offset) of every reference

    def fail(self, message: str, hint: str, pos: int | None = None, length: int = 1) -> NoReturn:
        _fail(self.text, self.pos if pos is None else pos, message, hint, length)

    def skip_space(self) -> None:
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            elif ch.isspace():
                self.pos += 1
            else:
                return

    def at_rule_start(self) -> bool:
        return _GBNF_RULE_START.match(self.text, self.pos) is not None

    def parse(self) -> str:
        rules: list[tuple[str, _Node]] = []
        defined: dict[str, int] = {}
        self.skip_space()
        while self.pos < len(self.text):
            m = _GBNF_NAME.match(self.text, self.pos)
            if m is None or not self.at_rule_start():
                self.fail("expected a rule `name ::= ...`", "every rule is `name ::= expression`")
            name = m.group(0)
            if name in defined:
                self.fail(
                    f"rule `{name}` is defined twice",
                    "merge the definitions with `|` (llama.cpp keeps only the last one)",
                    length=len(name),
                )
            defined[name] = self.pos
            self.pos = self.text.index("::=", self.pos) + 3
            body = self.alternates()
            # alternates() stops at the end, at the next `name ::=` or at a stray `)`.
            if self.pos < len(self.text) and not self.at_rule_start():
                self.fail("unmatched `)`", "remove it or add the matching `(`")
            rules.append((self.namer.get(name), body))
        for name, pos in self.refs:
            if name not in defined:
                self.fail(
                    f"undefined rule `{name}`",
                    f"define it with `{name} ::= ...`",
                    pos=pos,
                    length=len(name),
                )
        if "root" not in defined:
            _fail(self.text, 0, "no `root` rule", "GBNF grammars start at `root ::= ...`")
        return _print_rules(rules)

    def alternates(self) -> _Node:
        alts = [self.sequence()]
        while self.pos < len(self.text) and self.text[self.pos] == "|":
            self.pos += 1
            alts.append(self.sequence())
        return _alt(alts)

    def sequence(self) -> _Node:
        items: list[_Node] = []
        while True:
            self.skip_space()
            if self.pos >= len(self.text) or self.at_rule_start():
                break
            ch = self.text[self.pos]
            if ch in "|)":
                break
            if ch in "*+?{":
                if not items:
                    self.fail(f"`{ch}` has nothing to repeat", "put it after an item: `x*`")
                items[-1] = self.postfix(items[-1])
                continue
            items.append(self.atom())
        return _seq(items) if items else _Seq(())

    def postfix(self, item: _Node) -> _Node:
        ch = self.text[self.pos]
        self.pos += 1
        if ch == "*":
            return _Rep(item, 0, None)
        if ch == "+":
            return _Rep(item, 1, None)
        if ch == "?":
            return _Rep(item, 0, 1)
        start = self.pos - 1
        m = re.compile(r"\s*(\d+)\s*(?:(,)\s*(\d*)\s*)?\}").match(self.text, self.pos)
        if m is None:
            self.fail("bad repetition", "write `{m}`, `{m,}` or `{m,n}`", pos=start)
        lo = int(m.group(1))
        hi: int | None = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        if hi is not None and hi < lo:
            self.fail("repetition `{m,n}` with m > n", "swap the bounds", pos=start)
        self.pos = m.end()
        return _Rep(item, lo, hi)

    def atom(self) -> _Node:
        ch = self.text[self.pos]
        if ch == '"':
            return self.literal()
        if ch == "[":
            return self.char_class()
        if ch == ".":
            self.pos += 1
            return _Regex("(?s:.)")  # llama.cpp: any code point, newlines included
        if ch == "(":
            open_pos = self.pos
            self.pos += 1
            body = self.alternates()
            if self.pos >= len(self.text) or self.text[self.pos] != ")":
                self.fail("unclosed `(`", "add the matching `)`", pos=open_pos)
            self.pos += 1
            return body
        m = _GBNF_NAME.match(self.text, self.pos)
        if m is None:
            self.fail(f"unexpected character `{ch}`", 'expected a name, "literal", [class] or (')
        self.refs.append((m.group(0), self.pos))
        self.pos = m.end()
        return _Ref(self.namer.get(m.group(0)))

    def char(self) -> int:
        """One possibly escaped character of a literal or class; advances past it."""
        start = self.pos
        ch = self.text[self.pos]
        if ch != "\\":
            self.pos += 1
            return ord(ch)
        if self.pos + 1 >= len(self.text):
            self.fail("unfinished escape", 'end the literal with `"`')
        esc = self.text[self.pos + 1]
        if esc in _GBNF_SIMPLE_ESCAPES:
            self.pos += 2
            return ord(_GBNF_SIMPLE_ESCAPES[esc])
        if esc in _GBNF_HEX_DIGITS:
            n = _GBNF_HEX_DIGITS[esc]
            digits = self.text[self.pos + 2 : self.pos + 2 + n]
            if len(digits) != n:
                digits = ""
            self.pos += 2 + n
            return _code_point(self.text, start, digits, f"\\{esc}")
        self.fail(
            f"unknown escape `\\{esc}`",
            'GBNF escapes are \\n \\t \\r \\\\ \\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH',
            length=2,
        )

    def literal(self) -> _Node:
        start = self.pos
        self.pos += 1
        chars: list[str] = []
        while True:
            if self.pos >= len(self.text) or self.text[self.pos] == "\n":
                self.fail("unterminated string literal", 'close it with `"`', pos=start)
            if self.text[self.pos] == '"':
                self.pos += 1
                return _Lit("".join(chars))
            chars.append(chr(self.char()))

    def char_class(self) -> _Node:
        start = self.pos
        self.pos += 1
        negated = self.text.startswith("^", self.pos)
        self.pos += negated
        ranges: list[tuple[int, int]] = []
        while True:
            if self.pos >= len(self.text):
                self.fail("unterminated character class", "close it with `]`", pos=start)
            if self.text[self.pos] == "]":
                break
            lo = self.char()
            hi = lo
            if self.text.startswith("-", self.pos) and not self.text.startswith("-]", self.pos):
                range_pos = self.pos
                self.pos += 1
                hi = self.char()
                if hi < lo:
                    self.fail("character range out of order", "write `[a-z]`, low first", range_pos)
            ranges.append((lo, hi))
        self.pos += 1
        if not ranges:
            self.fail(
                "empty character class",
                "`[]` matches nothing; `[^]` matches any character (or use `.`)",
                pos=start,
                length=self.pos - start,
            )
        return _Class(negated, tuple(ranges))


def gbnf_to_kbnf(text: str) -> str:
    """Translate llama.cpp GBNF to KBNF with the same language (``root`` becomes ``start``).

    Supported: ``name ::= ...`` rules (a rule ends where the next ``name ::=`` begins; names are
    ``[A-Za-z0-9_-]+``), ``"literals"`` and ``[classes]`` / ``[^classes]`` with ranges and the
    escapes ``\\n \\t \\r \\\\ \\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH`` (all code points, as in
    llama.cpp), ``.`` (any code point, newline included), groups, ``|``, ``* + ?``, ``{m}``,
    ``{m,}``, ``{m,n}`` and ``#`` comments. Names are mapped to distinct KBNF identifiers
    (``-`` becomes ``_``, a suffix ``_2``... resolves collisions).

    Raises:
        GrammarError: a syntax error, an undefined or twice-defined rule, no ``root`` rule, an
            empty class ``[]`` or an escape that is not a Unicode scalar value (``line:col``).
    """
    return _GbnfParser(text).parse()


# ---------------------------------------------------------------------------------------------
# Lark (as llguidance accepts it)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tok:
    kind: str  # NL NAME STRING REGEXP NUMBER OP DIRECTIVE SPECIAL GREF EOF, or punctuation
    value: str
    pos: int


_LARK_TOKENS = re.compile(
    r"""
    (?P<NL>(?:\r?\n[ \t]*(?:(?://|\#)[^\n]*)?)+)
  | (?P<SKIP>[ \t\f]+|(?://|\#)[^\n]*)
  | (?P<STRING>"(?:\\.|[^"\\\n])*"i?)
  | (?P<REGEXP>/(?:\\.|[^/\\])+/[a-z]*)
  | (?P<DIRECTIVE>%[a-z_]+)
  | (?P<SPECIAL><[^<>\s]+>)
  | (?P<GREF>@[A-Za-z0-9_-]+)
  | (?P<NUMBER>\d+)
  | (?P<NAME>[_A-Za-z][_A-Za-z0-9-]*)
  | (?P<PUNCT>\.\.|->|[:|()\[\]{}~.,&=+*?!])
    """,
    re.VERBOSE,
)
_RULE_NAME = re.compile(r"_?[a-z][_a-z0-9-]*|_[_a-z0-9-]*")
_TERMINAL_NAME = re.compile(r"_?[A-Z][_A-Z0-9-]*")
_LARK_STRING_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}

# llguidance's `%import common.X` (parser/src/lark/common.rs, from Lark's common.lark).
_COMMON = {
    "DIGIT": r"[0-9]",
    "HEXDIGIT": r"[a-fA-F0-9]",
    "INT": r"[0-9]+",
    "SIGNED_INT": r"(\+|-)?[0-9]+",
    "DECIMAL": r"([0-9]+\.[0-9]*)|(\.[0-9]+)",
    "_EXP": r"[eE](\+|-)?[0-9]+",
    "FLOAT": r"([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+",
    "SIGNED_FLOAT": (
        r"(\+|-)?(([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+)"
    ),
    "NUMBER": r"([0-9]+)|([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+",
    "SIGNED_NUMBER": (
        r"(\+|-)?(([0-9]+)|([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?"
        r"|[0-9]+[eE](\+|-)?[0-9]+)"
    ),
    "ESCAPED_STRING": r"\"([^\"\\]|\\.)*\"",
    "LCASE_LETTER": r"[a-z]",
    "UCASE_LETTER": r"[A-Z]",
    "LETTER": r"[A-Za-z]",
    "WORD": r"[A-Za-z]+",
    "CNAME": r"[_A-Za-z][_A-Za-z0-9]*",
    "WS_INLINE": r"[ \t]+",
    "WS": r"[ \t\f\r\n]+",
    "CR": r"\r",
    "LF": r"\n",
    "NEWLINE": r"(\r?\n)+",
    "SH_COMMENT": r"#[^\n]*",
    "CPP_COMMENT": r"//[^\n]*",
    "C_COMMENT": r"\/\*[^*]*\*+(?:[^/*][^*]*\*+)*\/",
    "SQL_COMMENT": r"--[^\n]*",
}

_REFUSED_DIRECTIVES = {
    "%json": (
        "inline JSON Schemas (`%json`) are not supported in Lark grammars",
        (
            "llguidance's %json allows unbounded whitespace and has its own schema semantics; "
            "send the schema as structured_outputs.json, or compose "
            "structout.schema.to_kbnf(schema) into a KBNF grammar yourself"
        ),
    ),
    "%regex": ("`%regex { ... }` is not supported", "write the terminal as a /regex/"),
    "%declare": ("`%declare` is not supported", "define the terminal with `NAME: ...`"),
    "%override": ("`%override` is not supported", "edit the rule's definition instead"),
    "%extend": ("`%extend` is not supported", "add the alternatives to the rule's definition"),
    "%lark": ("nested `%lark { ... }` grammars are not supported", "inline the rules"),
    "%if": ("`%if` is not supported", "write the grammar without conditions"),
}


class _LarkParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = self.tokenize()
        self.i = 0
        self.depth = 0  # open brackets: newlines inside them are plain whitespace
        self.defs: dict[str, tuple[_Node, int, bool]] = {}  # name -> (body, offset, is_terminal)
        self.order: list[str] = []
        self.refs: list[tuple[str, int, str | None]] = []  # (name, offset, enclosing terminal)
        self.ignores: list[_Node] = []
        self.current_terminal: str | None = None

    def fail(self, tok: _Tok, message: str, hint: str) -> NoReturn:
        _fail(self.text, tok.pos, message, hint, max(1, len(tok.value)))

    def tokenize(self) -> list[_Tok]:
        toks: list[_Tok] = []
        pos = 0
        while pos < len(self.text):
            m = _LARK_TOKENS.match(self.text, pos)
            if m is None:
                _fail(self.text, pos, f"unexpected character `{self.text[pos]}`", "check syntax")
            kind = m.lastgroup or ""
            if kind == "PUNCT":
                kind = m.group(0)
            if kind != "SKIP":
                toks.append(_Tok(kind, m.group(0), pos))
            pos = m.end()
        toks.append(_Tok("EOF", "", len(self.text)))
        return toks

    def peek(self) -> _Tok:
        while self.depth > 0 and self.toks[self.i].kind == "NL":
            self.i += 1
        return self.toks[self.i]

    def next(self) -> _Tok:
        tok = self.peek()
        if tok.kind != "EOF":
            self.i += 1
        return tok

    def expect(self, kind: str, hint: str) -> _Tok:
        tok = self.next()
        if tok.kind != kind:
            self.fail(tok, f"expected `{kind}`, found {self.describe(tok)}", hint)
        return tok

    @staticmethod
    def describe(tok: _Tok) -> str:
        return {"NL": "end of line", "EOF": "end of grammar"}.get(tok.kind, f"`{tok.value}`")

    # -- statements ----------------------------------------------------------------------------

    def parse(self) -> str:
        while True:
            tok = self.next()
            if tok.kind == "EOF":
                break
            if tok.kind == "NL":
                continue
            if tok.kind == "DIRECTIVE":
                self.directive(tok)
            elif tok.kind == "NAME":
                self.definition(tok, False)
            elif tok.kind in ("?", "!") and self.peek().kind == "NAME":
                self.definition(self.next(), True)  # inlining / keep-tokens: tree shape only
            else:
                self.fail(tok, f"unexpected {self.describe(tok)}", "expected `name: ...` or `%...`")
            end = self.next()
            if end.kind not in ("NL", "EOF"):
                self.fail(end, f"unexpected {self.describe(end)}", "one definition per line")
            if end.kind == "EOF":
                break
        return self.emit()

    def definition(self, name_tok: _Tok, prefixed: bool) -> None:
        raw = name_tok.value
        is_terminal = self.classify(name_tok)
        if prefixed and is_terminal:
            self.fail(name_tok, "`?` and `!` apply to rules, not terminals", "remove the prefix")
        tok = self.next()
        if tok.kind == ".":  # priority: orders ambiguous parses, the language is unchanged
            self.expect("NUMBER", "a priority is a number: `NAME.2: ...`")
            tok = self.next()
        if tok.kind == "[":
            self.options(tok)
            tok = self.next()
        if tok.kind == "{":
            self.fail(tok, "templates are not supported", "write out each instance as a rule")
        if tok.kind != ":":
            self.fail(tok, f"expected `:`, found {self.describe(tok)}", f"write `{raw}: ...`")
        if raw in self.defs:
            self.fail(name_tok, f"`{raw}` is defined twice", "merge the definitions with `|`")
        self.current_terminal = raw if is_terminal else None
        body = self.expansions()
        self.current_terminal = None
        self.defs[raw] = (body, name_tok.pos, is_terminal)
        self.order.append(raw)

    def options(self, open_tok: _Tok) -> None:
        """llguidance's ``name[capture]``; options that change the language are refused."""
        while True:
            tok = self.next()
            if tok.kind == "]":
                return
            if tok.kind == ",":
                continue
            if tok.kind != "NAME":
                self.fail(tok, f"unexpected {self.describe(tok)} in options", "see llguidance")
            if tok.value != "capture":
                self.fail(
                    tok,
                    f"the lexeme option `{tok.value}` is not supported",
                    "only `[capture]` is accepted: lazy/stop/suffix/max_tokens change what "
                    "the rule matches",
                )
            if self.peek().kind == "=":
                self.next()
                self.expect("STRING", 'write `capture="name"`')

    def classify(self, tok: _Tok) -> bool:
        """True for a terminal (UPPERCASE) name, False for a rule (lowercase) name."""
        raw = tok.value
        if _TERMINAL_NAME.fullmatch(raw):
            return True
        if _RULE_NAME.fullmatch(raw):
            return False
        self.fail(tok, f"mixed-case name `{raw}`", "rules are lowercase, terminals UPPERCASE")

    def directive(self, tok: _Tok) -> None:
        if tok.value in _REFUSED_DIRECTIVES:
            message, hint = _REFUSED_DIRECTIVES[tok.value]
            self.fail(tok, message, hint)
        if tok.value == "%ignore":
            self.current_terminal = "%ignore"
            self.ignores.append(self.expansions())
            self.current_terminal = None
        elif tok.value == "%import":
            self.import_common()
        elif tok.value == "%llguidance":
            open_tok = self.expect("{", "write `%llguidance {}`")
            if self.next().kind != "}":
                self.fail(
                    open_tok,
                    "`%llguidance` options are not supported",
                    "options change how llguidance lexes; only `%llguidance {}` is accepted",
                )
        else:
            self.fail(tok, f"unknown directive `{tok.value}`", "see Lark's grammar reference")

    def import_common(self) -> None:
        module = self.next()
        if module.kind != "NAME" or module.value != "common":
            self.fail(
                module,
                "only `%import common.NAME` is supported",
                "define the imported rules in this grammar",
            )
        tok = self.next()
        names: list[_Tok] = []
        if tok.kind == ".":
            names.append(self.expect("NAME", "write `%import common.NAME`"))
        elif tok.kind == "(":
            self.depth += 1
            while True:
                names.append(self.expect("NAME", "write `%import common (A, B)`"))
                sep = self.next()
                if sep.kind == ")":
                    break
                if sep.kind != ",":
                    self.fail(sep, f"unexpected {self.describe(sep)}", "separate names with `,`")
            self.depth -= 1
        else:
            self.fail(tok, f"unexpected {self.describe(tok)}", "write `%import common.NAME`")
        alias = None
        if len(names) == 1 and self.peek().kind == "->":
            self.next()
            alias = self.expect("NAME", "write `%import common.NAME -> ALIAS`")
        for name in names:
            if name.value not in _COMMON:
                self.fail(
                    name,
                    f"`common.{name.value}` is not a known common terminal",
                    "known: " + ", ".join(sorted(_COMMON)),
                )
            target = alias or name
            if not self.classify(target):
                self.fail(target, "an imported terminal needs an UPPERCASE name", "rename it")
            if target.value in self.defs:
                self.fail(target, f"`{target.value}` is defined twice", "remove one definition")
            self.defs[target.value] = (_Regex(_COMMON[name.value]), target.pos, True)
            self.order.append(target.value)

    # -- expressions ---------------------------------------------------------------------------

    def expansions(self) -> _Node:
        alts = [self.alias()]
        while True:
            tok = self.peek()
            if tok.kind == "|":
                self.next()
            elif tok.kind == "NL" and self.toks[self.i + 1].kind == "|":
                self.i += 2  # a continuation line `| ...`
            else:
                return _alt(alts)
            alts.append(self.alias())

    def alias(self) -> _Node:
        items: list[_Node] = []
        while self.peek().kind not in ("|", ")", "]", "NL", "EOF", "->"):
            items.append(self.expr())
        if self.peek().kind == "->":  # tree shaping only
            self.next()
            self.expect("NAME", "write `-> name`")
        return _seq(items) if items else _Seq(())

    def expr(self) -> _Node:
        item = self.atom()
        tok = self.peek()
        if tok.kind in ("+", "*", "?"):
            self.next()
            return _Rep(item, *{"+": (1, None), "*": (0, None), "?": (0, 1)}[tok.kind])
        if tok.kind == "~":
            self.next()
            lo = int(self.expect("NUMBER", "write `item ~ n` or `item ~ n..m`").value)
            hi = lo
            if self.peek().kind == "..":
                self.next()
                hi = int(self.expect("NUMBER", "write `item ~ n..m`").value)
            return self.repeat(tok, item, lo, hi)
        if tok.kind == "{":
            self.next()
            lo_tok = self.peek()
            if lo_tok.kind not in ("NUMBER", ","):
                self.fail(tok, "templates are not supported", "write out each instance")
            lo = int(self.next().value) if lo_tok.kind == "NUMBER" else 0
            hi2: int | None = lo
            if self.peek().kind == ",":
                self.next()
                hi2 = int(self.next().value) if self.peek().kind == "NUMBER" else None
            self.expect("}", "write `item{m,n}`")
            return self.repeat(tok, item, lo, hi2)
        return item

    def repeat(self, tok: _Tok, item: _Node, lo: int, hi: int | None) -> _Node:
        if hi is not None and hi < lo:
            self.fail(tok, "repetition with minimum above maximum", "swap the bounds")
        return _Rep(item, lo, hi)

    def atom(self) -> _Node:
        tok = self.next()
        if tok.kind in ("(", "["):
            self.depth += 1
            body = self.expansions()
            close = ")" if tok.kind == "(" else "]"
            self.depth -= 1
            end = self.next()
            if end.kind != close:
                self.fail(tok, f"unclosed `{tok.kind}`", f"add the matching `{close}`")
            return body if tok.kind == "(" else _Rep(body, 0, 1)
        if tok.kind == "STRING":
            if self.peek().kind == "..":
                self.next()
                hi_tok = self.expect("STRING", 'write `"a".."z"`')
                return self.char_range(tok, hi_tok)
            return self.string(tok)
        if tok.kind == "REGEXP":
            return self.regexp(tok)
        if tok.kind == "NAME":
            is_terminal = self.classify(tok)
            if self.current_terminal is not None and not is_terminal:
                owner = self.current_terminal
                owner = owner if owner == "%ignore" else f"terminal `{owner}`"
                self.fail(
                    tok,
                    f"{owner} refers to the rule `{tok.value}`",
                    "terminals may only use terminals, strings and regexes",
                )
            self.refs.append((tok.value, tok.pos, self.current_terminal))
            return _Ref(tok.value)  # renamed in emit()
        if tok.kind == "SPECIAL":
            self.fail(
                tok,
                "special tokens in Lark grammars are not supported",
                "structout constrains text; write the token's text as a string if it is text",
            )
        if tok.kind == "GREF":
            self.fail(tok, "grammar references `@name` are not supported", "inline the grammar")
        if tok.kind == "DIRECTIVE" and tok.value in _REFUSED_DIRECTIVES:
            message, hint = _REFUSED_DIRECTIVES[tok.value]
            self.fail(tok, message, hint)
        if tok.kind in ("~", "&"):
            self.fail(
                tok,
                f"the regex operator `{tok.kind}` ({'not' if tok.kind == '~' else 'and'}) "
                "is not supported",
                "write the terminal as a single /regex/",
            )
        self.fail(tok, f"unexpected {self.describe(tok)}", "expected an item")

    def string_value(self, tok: _Tok) -> tuple[str, bool]:
        """The characters of a "..." token (llguidance's JSON escapes, plus \\xHH, \\UHHHHHHHH)."""
        raw = tok.value
        insensitive = raw.endswith("i")
        body = raw[1 : -2 if insensitive else -1]
        out: list[str] = []
        i = 0
        while i < len(body):
            ch = body[i]
            if ch != "\\":
                if ord(ch) < 0x20 or ch == "\x7f":
                    _fail(self.text, tok.pos + 1 + i, "control character in a string", "escape it")
                out.append(ch)
                i += 1
                continue
            esc = body[i + 1]
            at = tok.pos + 1 + i
            if esc in _LARK_STRING_ESCAPES:
                out.append(_LARK_STRING_ESCAPES[esc])
                i += 2
            elif esc in _GBNF_HEX_DIGITS:
                n = _GBNF_HEX_DIGITS[esc]
                digits = body[i + 2 : i + 2 + n]
                out.append(chr(_code_point(self.text, at, digits if len(digits) == n else "", esc)))
                i += 2 + n
            else:
                _fail(
                    self.text,
                    at,
                    f"unsupported escape `\\{esc}` in a string",
                    'use \\" \\\\ \\/ \\b \\f \\n \\r \\t \\xHH \\uHHHH (Lark and llguidance '
                    "read other escapes differently)",
                    2,
                )
        return "".join(out), insensitive

    def string(self, tok: _Tok) -> _Node:
        text, insensitive = self.string_value(tok)
        if not insensitive:
            return _Lit(text)
        if not text.isascii():
            self.fail(
                tok,
                "case-insensitive strings must be ASCII",
                "case folding of other characters differs between regex engines; use a /regex/",
            )
        return _Regex("(?i:" + "".join(_regex_char(ord(c)) for c in text) + ")")

    def char_range(self, lo_tok: _Tok, hi_tok: _Tok) -> _Node:
        lo, lo_i = self.string_value(lo_tok)
        hi, hi_i = self.string_value(hi_tok)
        if len(lo) != 1 or len(hi) != 1 or lo_i or hi_i:
            self.fail(lo_tok, "a range needs two single characters", 'write `"a".."z"`')
        if ord(hi) < ord(lo):
            self.fail(lo_tok, "character range out of order", "write the lower bound first")
        return _Class(False, ((ord(lo), ord(hi)),))

    def regexp(self, tok: _Tok) -> _Node:
        end = tok.value.rindex("/")
        body, flags = tok.value[1:end], tok.value[end + 1 :]
        for k, flag in enumerate(flags):
            if flag in "xl" or flag not in "imsux":
                _fail(
                    self.text,
                    tok.pos + end + 1 + k,
                    f"regex flag `{flag}` is not supported",
                    "supported flags: i, m, s (and u, which is the default)",
                )
        return _Regex(_translate_regex(self.text, tok.pos + 1, body, flags.replace("u", "")))

    # -- output --------------------------------------------------------------------------------

    def emit(self) -> str:
        if "start" not in self.defs:
            _fail(self.text, 0, "no `start` rule", "Lark grammars start at `start: ...`")
        for name, pos, owner in self.refs:
            if name not in self.defs:
                _fail(
                    self.text, pos, f"undefined name `{name}`", f"define `{name}: ...`", len(name)
                )
            if owner is not None and not self.defs[name][2]:
                _fail(self.text, pos, f"terminal `{owner}` uses rule `{name}`", "use terminals")
        self.check_terminal_cycles()
        namer = _Namer()
        ignore = None
        if self.ignores:  # `start ::= user_start ignore;` (names taken first: users get others)
            namer.reserve("start")
            ignore = namer.fresh("lark_ignore")
            namer.bind("start", namer.fresh("lark_start"))
        else:
            namer.bind("start", "start")
        rules: list[tuple[str, _Node]] = []
        if ignore is not None:
            rules.append(("start", _Seq((_Ref(namer.get("start")), _Ref(ignore)))))
        for name in self.order:
            body, _, is_terminal = self.defs[name]
            gap = None if is_terminal else ignore
            rules.append((namer.get(name), self.rename(body, namer, gap)))
        if ignore is not None:
            items = [self.rename(x, namer, None) for x in self.ignores]
            rules.append((ignore, _Rep(_alt(items), 0, None)))
        return _print_rules(rules)

    def rename(self, node: _Node, namer: _Namer, gap: str | None) -> _Node:
        """Source names to KBNF names; with ``gap``, each token gets ``gap`` (ignored text)
        before it: the token stream may have ignored text between tokens and at both ends."""
        if isinstance(node, _Ref):
            ref = _Ref(namer.get(node.name))
            is_token = self.defs[node.name][2]
            return _Seq((_Ref(gap), ref)) if gap is not None and is_token else ref
        if isinstance(node, (_Lit, _Class, _Regex)):
            return _Seq((_Ref(gap), node)) if gap is not None else node
        if isinstance(node, _Seq):
            return _Seq(tuple(self.rename(x, namer, gap) for x in node.items))
        if isinstance(node, _Alt):
            return _Alt(tuple(self.rename(x, namer, gap) for x in node.items))
        return _Rep(self.rename(node.item, namer, gap), node.lo, node.hi)

    def check_terminal_cycles(self) -> None:
        """Lark and llguidance compile terminals to regexes, so they cannot be recursive."""
        uses: dict[str, set[str]] = {}
        for name, _, owner in self.refs:
            if owner is not None and owner in self.defs:
                uses.setdefault(owner, set()).add(name)
        state: dict[str, int] = {}  # 1: on the DFS stack, 2: done

        def visit(name: str) -> None:
            state[name] = 1
            for child in sorted(uses.get(name, ())):
                if state.get(child) == 1:
                    pos = self.defs[child][1]
                    _fail(self.text, pos, f"terminal `{child}` is recursive", "use a rule")
                if child not in state:
                    visit(child)
            state[name] = 2

        for name in sorted(uses):
            if name not in state:
                visit(name)


_LOOKAROUND = re.compile(r"\(\?(?:=|!|<=|<!|P=|>)")


def _translate_regex(text: str, offset: int, body: str, flags: str) -> str:
    """A Lark ``/body/flags`` as a Rust regex (llguidance reads the body as Rust syntax).

    ``\\/`` becomes ``/``; control characters become ``\\x{..}``; look-around and
    backreferences are refused (a full-match terminal has no equivalent)."""
    out: list[str] = []
    depth = 0  # nesting of Rust character classes
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt.isdigit() and nxt != "0" and depth == 0:
                _fail(
                    text,
                    offset + i,
                    "backreferences are not supported in regexes",
                    "a backreference is not regular; rewrite it as grammar rules",
                    2,
                )
            out.append("/" if nxt == "/" else body[i : i + 2])
            i += 2
            continue
        if depth == 0 and _LOOKAROUND.match(body, i):
            _fail(
                text,
                offset + i,
                "look-around, atomic groups and named backreferences are not supported",
                "rewrite the terminal without `(?=`, `(?!`, `(?<=`, `(?<!`, `(?>` or `(?P=`",
                3,
            )
        if ch == "[":
            depth += 1
            out.append(ch)
            i += 1
            if body.startswith("^", i):
                out.append("^")
                i += 1
            if body.startswith("]", i):  # a leading `]` is a literal
                out.append("\\]")
                i += 1
            continue
        if ch == "]" and depth > 0:
            depth -= 1
        if ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{{{ord(ch):X}}}")
        else:
            out.append(ch)
        i += 1
    pattern = "".join(out)
    return f"(?{flags}:{pattern})" if flags else pattern


def lark_to_kbnf(text: str) -> str:
    """Translate a Lark grammar, as llguidance accepts it, to KBNF (start rule ``start``).

    Supported: ``rule: ...`` and ``TERMINAL: ...`` definitions (``?``/``!`` prefixes, priorities
    ``.N``, aliases ``-> name`` and ``[capture]`` are accepted: they do not change the
    language), ``|`` (also on continuation lines), ``"strings"`` with JSON escapes plus
    ``\\xHH``/``\\UHHHHHHHH``, ASCII ``"..."i``, ``"a".."z"``, ``/regex/`` in Rust syntax with
    flags ``i m s u``, ``( )``, ``[optional]``, ``? * +``, ``~ n``, ``~ n..m``, ``{m,n}``,
    ``%ignore`` (ignored text allowed before every token of a rule and at the end),
    ``%import common.X`` / ``%import common (X, Y)`` / ``-> ALIAS`` with llguidance's
    definitions, ``%llguidance {}``, ``//`` and ``#`` comments.

    Refused with GrammarError: ``%json``, ``%regex``, ``%declare``, ``%override``, ``%extend``,
    other imports, templates, special tokens ``<...>``, ``@grammar`` references, the ``~``/``&``
    regex operators, lexeme options other than ``capture``, regex look-around, backreferences
    and flags ``x``/``l``, recursive terminals, and syntax errors (all with ``line:col``).
    """
    return _LarkParser(text).parse()


# ---------------------------------------------------------------------------------------------
# Detection and dispatch
# ---------------------------------------------------------------------------------------------

_LARK_LINE = re.compile(r"\s*(?:[!?]?[_A-Za-z][_A-Za-z0-9-]*(?:\.\d+)?(?:\[[^\]\n]*\])?\s*:|%)")
_GBNF_COMMENT = re.compile(r'#(?!")[^\n]*')
_KBNF_COMMENT = re.compile(r"\(\*.*?\*\)", re.DOTALL)


def detect_dialect(text: str) -> str:
    """Guess a grammar's dialect: ``"kbnf"``, ``"gbnf"`` or ``"lark"``.

    The heuristic, cheap and line-based:

    1. Text containing ``::=`` is KBNF if, with ``(* ... *)`` comments and ``#`` comments
       (a ``#`` not followed by ``"``) removed, some non-blank line ends with ``;`` (KBNF
       terminates every rule with ``;``); otherwise it is GBNF (rules end at the next
       ``name ::=``; its start rule is ``root``).
    2. Otherwise it is Lark if some line starts with ``name:`` (optionally ``?name``,
       ``name.2``, ``name[...]``) or a ``%`` directive.

    Raises:
        GrammarError: no rule of any dialect is found.
    """
    if "::=" in text:
        stripped = _GBNF_COMMENT.sub("", _KBNF_COMMENT.sub("", text))
        if any(line.rstrip().endswith(";") for line in stripped.splitlines()):
            return "kbnf"
        return "gbnf"
    if any(_LARK_LINE.match(line) for line in text.splitlines()):
        return "lark"
    _fail(
        text,
        0,
        "cannot tell the grammar's dialect",
        "KBNF rules are `name ::= ...;`, GBNF rules `name ::= ...` (start `root`), Lark rules "
        "`name: ...` (start `start`); pass dialect= explicitly",
    )


def grammar_to_kbnf(text: str, dialect: str | None = None) -> str:
    """KBNF for a grammar in ``dialect`` (``"kbnf"``, ``"gbnf"`` or ``"lark"``; ``None``: see
    :func:`detect_dialect`). KBNF text is returned unchanged.

    Raises:
        GrammarError: the grammar cannot be translated exactly (see the translators).
        ValueError: ``dialect`` is not one of the names above.
    """
    if dialect is None:
        dialect = detect_dialect(text)
    if dialect == "kbnf":
        return text
    if dialect == "gbnf":
        return gbnf_to_kbnf(text)
    if dialect == "lark":
        return lark_to_kbnf(text)
    raise ValueError(f"unknown grammar dialect {dialect!r}; expected 'kbnf', 'gbnf' or 'lark'")
