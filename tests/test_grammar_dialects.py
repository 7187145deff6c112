"""GBNF and Lark to KBNF: the translations accept exactly what a reference accepts.

GBNF references: each grammar is also written as a small Python syntax tree, matched by an
independent backtracking matcher below (never by the translator's parser). Lark reference: the
`lark` package's Earley parser with ``lexer="dynamic_complete"`` (every split of the input into
terminals is tried: the context-free language the translation promises).
"""

from __future__ import annotations

import itertools
import random
import re
import sys
from collections.abc import Iterator
from typing import Any, Callable

import pytest

import structout
from structout.errors import GrammarError
from structout.grammar_dialects import (
    detect_dialect,
    gbnf_to_kbnf,
    grammar_to_kbnf,
    lark_to_kbnf,
)

# -- an independent reference for GBNF: nodes are tuples ------------------------------------------

Node = Any


def lit(s: str) -> Node:
    return ("lit", s)


def cls(spec: str, negated: bool = False) -> Node:
    """Ranges from a compact spec: 'a-z' pairs and single characters (no escapes)."""
    ranges = []
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            ranges.append((ord(spec[i]), ord(spec[i + 2])))
            i += 3
        else:
            ranges.append((ord(spec[i]), ord(spec[i])))
            i += 1
    return ("cls", negated, ranges)


def seq(*items: Node) -> Node:
    return ("seq", list(items))


def alt(*items: Node) -> Node:
    return ("alt", list(items))


def rep(item: Node, lo: int, hi: int | None) -> Node:
    return ("rep", item, lo, hi)


def ref(name: str) -> Node:
    return ("ref", name)


ANY: Node = ("any",)


def matcher(rules: dict[str, Node]) -> Callable[[str], bool]:
    """Full match of ``rules['root']`` by continuation-passing backtracking (no left recursion)."""

    def m(node: Node, s: str, i: int, k: Callable[[int], bool]) -> bool:
        kind = node[0]
        if kind == "lit":
            return s.startswith(node[1], i) and k(i + len(node[1]))
        if kind == "any":
            return i < len(s) and k(i + 1)
        if kind == "cls":
            if i >= len(s):
                return False
            inside = any(lo <= ord(s[i]) <= hi for lo, hi in node[2])
            return inside != node[1] and k(i + 1)
        if kind == "ref":
            return m(rules[node[1]], s, i, k)
        if kind == "alt":
            return any(m(x, s, i, k) for x in node[1])
        if kind == "seq":
            items = node[1]

            def go(j: int, pos: int) -> bool:
                return k(pos) if j == len(items) else m(items[j], s, pos, lambda p: go(j + 1, p))

            return go(0, i)
        _, item, lo, hi = node

        def more(count: int, pos: int) -> bool:
            if count >= lo and k(pos):
                return True
            if hi is not None and count >= hi:
                return False
            # an iteration must consume input, or repetition would not terminate
            return m(item, s, pos, lambda p: p > pos and more(count + 1, p))

        return more(0, i)

    return lambda s: m(rules["root"], s, 0, lambda p: p == len(s))


def sample(rules: dict[str, Node], rng: random.Random, depth: int = 0) -> str:
    """A random string of the reference grammar (a bounded depth keeps it short)."""

    def gen(node: Node, d: int) -> str:
        kind = node[0]
        if kind == "lit":
            return str(node[1])
        if kind == "any":
            return rng.choice("ab\n\u00e9\U0001f600")
        if kind == "cls":
            if node[1]:
                return rng.choice([c for c in 'az09 \n"\\-]^\u00e9' if not inside(node, c)])
            lo, hi = rng.choice(node[2])
            return chr(rng.randint(lo, hi))
        if kind == "ref":
            return gen(rules[node[1]], d + 1)
        if kind == "alt":
            options = node[1] if d < 8 else node[1][:1]
            return gen(rng.choice(options), d)
        if kind == "seq":
            return "".join(gen(x, d) for x in node[1])
        _, item, lo, hi = node
        top = lo + (2 if d < 6 else 0)
        n = rng.randint(lo, top if hi is None else min(hi, top))
        return "".join(gen(item, d + 1) for _ in range(n))

    return gen(rules["root"], depth)


def inside(node: Node, c: str) -> bool:
    return any(lo <= ord(c) <= hi for lo, hi in node[2])


def mutations(s: str, rng: random.Random, alphabet: str) -> Iterator[str]:
    for _ in range(4):
        if s:
            i = rng.randrange(len(s))
            yield s[:i] + s[i + 1 :]
            yield s[:i] + rng.choice(alphabet) + s[i + 1 :]
        i = rng.randrange(len(s) + 1)
        yield s[:i] + rng.choice(alphabet) + s[i:]


def enumerate_strings(alphabet: str, max_len: int) -> Iterator[str]:
    for n in range(max_len + 1):
        for t in itertools.product(alphabet, repeat=n):
            yield "".join(t)


# -- GBNF grammars with their references -----------------------------------------------------------

JSON_GBNF = r"""
# llama.cpp's grammars/json.gbnf, in its usual style
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space
ws ::= | " " | "\n" [ \t]{0,20}
"""

_ws = alt(lit(""), lit(" "), seq(lit("\n"), rep(cls(" \t"), 0, 20)))
_string_char = alt(
    ("cls", True, [(ord('"'), ord('"')), (ord("\\"), ord("\\")), (0x7F, 0x7F), (0, 0x1F)]),
    seq(lit("\\"), alt(cls('"\\bfnrt'), seq(lit("u"), rep(cls("0-9a-fA-F"), 4, 4)))),
)
JSON_REF = {
    "root": ref("object"),
    "value": alt(
        ref("object"),
        ref("array"),
        ref("string"),
        ref("number"),
        seq(alt(lit("true"), lit("false"), lit("null")), ref("ws")),
    ),
    "object": seq(
        lit("{"),
        ref("ws"),
        rep(
            seq(
                ref("string"),
                lit(":"),
                ref("ws"),
                ref("value"),
                rep(
                    seq(lit(","), ref("ws"), ref("string"), lit(":"), ref("ws"), ref("value")),
                    0,
                    None,
                ),
            ),
            0,
            1,
        ),
        lit("}"),
        ref("ws"),
    ),
    "array": seq(
        lit("["),
        ref("ws"),
        rep(seq(ref("value"), rep(seq(lit(","), ref("ws"), ref("value")), 0, None)), 0, 1),
        lit("]"),
        ref("ws"),
    ),
    "string": seq(lit('"'), rep(_string_char, 0, None), lit('"'), ref("ws")),
    "number": seq(
        seq(rep(lit("-"), 0, 1), alt(cls("0-9"), seq(cls("1-9"), rep(cls("0-9"), 0, 15)))),
        rep(seq(lit("."), rep(cls("0-9"), 1, None)), 0, 1),
        rep(seq(cls("eE"), rep(cls("-+"), 0, 1), cls("0-9"), rep(cls("1-9"), 0, 15)), 0, 1),
        ref("ws"),
    ),
    "ws": _ws,
}

ARITHMETIC_GBNF = r"""
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
"""
ARITHMETIC_REF = {
    "root": rep(seq(ref("expr"), lit("="), ref("ws"), ref("term"), lit("\n")), 1, None),
    "expr": seq(ref("term"), rep(seq(cls("-+*/"), ref("term")), 0, None)),
    "term": alt(
        ref("ident"), ref("num"), seq(lit("("), ref("ws"), ref("expr"), lit(")"), ref("ws"))
    ),
    "ident": seq(cls("a-z"), rep(cls("a-z0-9_"), 0, None), ref("ws")),
    "num": seq(rep(cls("0-9"), 1, None), ref("ws")),
    "ws": rep(cls(" \t\n"), 0, None),
}

LIST_GBNF = r"""
root ::= item{1,3}
item ::= "- " list-text "\n"   # dashes in names
list-text ::= [^\n]+ | "\u00e9" "\U0001F600"
"""
LIST_REF = {
    "root": rep(ref("item"), 1, 3),
    "item": seq(lit("- "), ref("list-text"), lit("\n")),
    "list-text": alt(rep(("cls", True, [(10, 10)]), 1, None), lit("\u00e9\U0001f600")),
}

# Classes full of characters that need escaping in Rust regex and KBNF; names that collide.
ESCAPES_GBNF = r"""
root ::= a-b a_b start x{2,} ("." | .)?
a-b ::= [\]\\^"[-]+
a_b ::= "\"\\\x41\u00e9\t" | [^a-c\u00e9]
start ::= "'" | "" | [\x00-\x08]
x ::= "x"
"""
ESCAPES_REF = {
    "root": seq(
        ref("a-b"),
        ref("a_b"),
        ref("start"),
        rep(ref("x"), 2, None),
        rep(alt(lit("."), ANY), 0, 1),
    ),
    "a-b": rep(cls('\\]^"[-'), 1, None),
    "a_b": alt(lit('"\\A\u00e9\t'), ("cls", True, [(ord("a"), ord("c")), (0xE9, 0xE9)])),
    "start": alt(lit("'"), lit(""), ("cls", False, [(0, 8)])),
    "x": lit("x"),
}

GBNF_CASES = [
    ("json", JSON_GBNF, JSON_REF, '{}[]":,01 \n\\ua-.e', 4),
    ("arithmetic", ARITHMETIC_GBNF, ARITHMETIC_REF, "a1=+( )\n", 5),
    ("list", LIST_GBNF, LIST_REF, "- a\n", 6),
    ("escapes", ESCAPES_GBNF, ESCAPES_REF, "]\\^\"[-xa\u00e9'.\n", 5),
]


@pytest.mark.parametrize("name,gbnf,reference,alphabet,max_len", GBNF_CASES)
def test_gbnf_translation_accepts_the_same_strings(
    name: str, gbnf: str, reference: dict[str, Node], alphabet: str, max_len: int
) -> None:
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20000))
    try:
        _compare_gbnf(name, gbnf, reference, alphabet, max_len)
    finally:
        sys.setrecursionlimit(old_limit)


def _compare_gbnf(
    name: str, gbnf: str, reference: dict[str, Node], alphabet: str, max_len: int
) -> None:
    kbnf = gbnf_to_kbnf(gbnf)
    grammar = structout.compile_grammar(kbnf)
    expected = matcher(reference)
    rng = random.Random(name)
    strings = set(enumerate_strings(alphabet, max_len))
    for _ in range(300):
        s = sample(reference, rng)
        if len(s) > 24:  # the backtracking reference is exponential in the worst case
            continue
        strings.add(s)
        strings.update(mutations(s, rng, alphabet))
    positives = 0
    for s in sorted(strings):
        want = expected(s)
        positives += want
        assert grammar.accepts(s.encode()) == want, (name, s, kbnf)
    assert positives >= 50, positives  # the comparison covers the language, not only its outside


def test_gbnf_names_and_escapes() -> None:
    kbnf = gbnf_to_kbnf(ESCAPES_GBNF)
    names = re.findall(r"^(\w+) ::=", kbnf, re.MULTILINE)
    assert names == ["start", "a_b", "a_b_2", "start_2", "x"]
    g = structout.compile_grammar(kbnf)
    assert g.accepts('-]"\\A\u00e9\txx\U0001f600'.encode())  # `.`: a whole code point
    assert g.accepts("^\"\u00e4'xx\n".encode())  # `.` matches a newline in GBNF
    assert not g.accepts('^"\u00e9xx'.encode())
    # \xHH is a code point in GBNF (two UTF-8 bytes above 0x7F)
    assert structout.compile_grammar(gbnf_to_kbnf('root ::= "\\xe9"')).accepts("\u00e9".encode())


GBNF_ERRORS = [
    ('root ::= "abc\n', "1:10", "unterminated string"),
    ("root ::= b\nb ::= c", "2:7", "undefined rule `c`"),
    ('a ::= "x"', "1:1", "no `root` rule"),
    ('root ::= "\\q"', "1:11", "unknown escape"),
    ('root ::= "a"\nroot ::= "b"', "2:1", "defined twice"),
    ("root ::= []", "1:10", "empty character class"),
    ('root ::= ("a"', "1:10", "unclosed `(`"),
    ('root ::= "a")', "1:13", "unmatched `)`"),
    ('root ::= "a"{3,1}', "1:13", "m > n"),
    ('root ::= "\\uD800"', "1:11", "not a Unicode scalar value"),
    ("root ::= [z-a]", "1:12", "out of order"),
    ('root ::= * "a"', "1:10", "nothing to repeat"),
]


@pytest.mark.parametrize("text,where,what", GBNF_ERRORS)
def test_gbnf_errors(text: str, where: str, what: str) -> None:
    with pytest.raises(GrammarError) as err:
        gbnf_to_kbnf(text)
    message = str(err.value)
    assert f"error at {where}:" in message and what in message and "hint:" in message, message


# -- Lark ------------------------------------------------------------------------------------------

SQL_LARK = r"""
?start: select_statement
?select_statement: "SELECT " column_list " FROM " table_name [" WHERE " condition]
?column_list: column_name ("," column_name)*
?table_name: identifier
?column_name: identifier
condition: column_name "=" NUMBER
    | column_name "<" NUMBER
?identifier: /[a-c_][a-c0-9_]*/
%import common.INT -> NUMBER
"""

ARITH_LARK = r"""
// left-recursive expressions with ignored whitespace
start: sum
sum: sum ADD_OP product | product
product: product "*" atom | atom
atom: NUMBER | "-" atom | "(" sum ")"
ADD_OP: "+" | "-"
%import common.NUMBER
%import common (WS_INLINE)
%ignore WS_INLINE
"""

TERMINALS_LARK = r"""
start: WORD ("," WORD)* ["!"i] TAIL~1..2 EXTRA? KW
WORD: LETTER+ | "\x41" DIGIT ~ 2
LETTER: "a".."c" | "\u00e9"
DIGIT: /[0-9]/
TAIL: /x?y/ | "\"" | "\\"
EXTRA: /A(b|c)/i
KW.2: "ok"i
"""

JSONISH_LARK = r"""
start: value
?value: object | array | ESCAPED_STRING | SIGNED_NUMBER | "true" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : ESCAPED_STRING ":" value
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

LARK_CASES = [
    (
        "sql",
        SQL_LARK,
        ["SELECT a FROM b", "SELECT a,b_1,c FROM c WHERE a=12", "SELECT _ FROM c WHERE b<0"],
        "SELCT FROMWHab,=<1 ",
        4,
    ),
    ("arith", ARITH_LARK, ["1 + 2*3", "-(1.5 - 2) * 3e4", " 7 ", "((1))"], "1+-*() .e", 5),
    (
        "terminals",
        TERMINALS_LARK,
        ["a,b!yOK", "A12,c\\\\ok", "\u00e9xyxyAbok", 'a!"Acok'],
        'abA1,!xy"\\okOK',
        4,
    ),
    ("jsonish", JSONISH_LARK, ['{"a": [1, -2.5e3, true]}', " [ ] ", '"x\\"y"'], '{}[]",: a1-\\', 4),
]


@pytest.mark.parametrize("name,lark_text,positives,alphabet,max_len", LARK_CASES)
def test_lark_translation_accepts_the_same_strings(
    name: str, lark_text: str, positives: list[str], alphabet: str, max_len: int
) -> None:
    lark = pytest.importorskip("lark")
    reference = lark.Lark(lark_text, parser="earley", lexer="dynamic_complete")

    def expected(s: str) -> bool:
        try:
            reference.parse(s)
        except lark.exceptions.LarkError:
            return False
        return True

    kbnf = lark_to_kbnf(lark_text)
    grammar = structout.compile_grammar(kbnf)
    rng = random.Random(name)
    strings = set(enumerate_strings(alphabet, max_len))
    for s in positives:
        assert expected(s), s
        strings.add(s)
        for _ in range(40):
            strings.update(mutations(s, rng, alphabet))
    accepted = 0
    for s in sorted(strings):
        want = expected(s)
        accepted += want
        assert grammar.accepts(s.encode()) == want, (name, s, kbnf)
    assert accepted >= len(positives)


def test_lark_ignore_and_start_names() -> None:
    kbnf = lark_to_kbnf('start: "a" lark_start\nlark_start: "b"\n%ignore " "\n')
    assert kbnf.splitlines()[:2] == [
        "start ::= lark_start lark_ignore;",
        "lark_start ::= lark_ignore 'a' lark_start_2;",
    ]
    g = structout.compile_grammar(kbnf)
    assert g.accepts(b" a  b ") and g.accepts(b"ab") and not g.accepts(b"a b c")


def test_lark_regex_translation() -> None:
    kbnf = lark_to_kbnf('start: /a\\/"[]x"]+/ /./s{1,2}')
    g = structout.compile_grammar(kbnf)
    assert g.accepts(b'a/"]]x\n') and g.accepts(b'a/"x\n\n')
    assert not g.accepts(b'a/"]') and not g.accepts(b'a/"]y\n\n')
    assert structout.compile_grammar(lark_to_kbnf("start: /[^a]/")).accepts(b"\n")


LARK_ERRORS = [
    ("start: <|python_tag|> x", "1:8", "special tokens in Lark grammars are not supported"),
    ('start: "a"\nfoo: %json {"type": "object"}', "2:6", "%json"),
    ("start: /a(?=b)/", "1:10", "look-around"),
    ("start: /(a)\\1/", "1:12", "backreferences"),
    ("start: /a/x", "1:11", "flag `x`"),
    ("start: x\nx: X", "2:4", "undefined name `X`"),
    ('start: "a"\n_sep{x}: x', "2:5", "templates"),
    ('start: "\u00e9"i', "1:8", "case-insensitive strings must be ASCII"),
    ("start: A\n%import foo.A", "2:9", "only `%import common.NAME`"),
    ('start[lazy]: "a"', "1:7", "lexeme option `lazy`"),
    ('start: ~"a"', "1:8", "operator `~`"),
    ('start: "\\d"', "1:9", "unsupported escape"),
    ('start: "a" (', "1:12", "unclosed `(`"),
    ('foo: "a"', "1:1", "no `start` rule"),
    ("start: A\nA: B\nB: A", "2:1", "recursive"),
    ("start: A\nA: b\nb: A", "2:4", "refers to the rule `b`"),
    ("start: Ab", "1:8", "mixed-case"),
    ('start: "a"\nstart: "b"', "2:1", "defined twice"),
    ("start: @sub", "1:8", "grammar references"),
    ("start: x\n%declare X", "2:1", "%declare"),
]


@pytest.mark.parametrize("text,where,what", LARK_ERRORS)
def test_lark_errors(text: str, where: str, what: str) -> None:
    with pytest.raises(GrammarError) as err:
        lark_to_kbnf(text)
    message = str(err.value)
    assert f"error at {where}:" in message and what in message and "hint:" in message, message


def test_detect_dialect_and_dispatch() -> None:
    assert detect_dialect(JSON_GBNF) == "gbnf"
    assert detect_dialect("start ::= 'a' ; (* x *)\n") == "kbnf"
    assert detect_dialect("start ::= #\"[;]\" 'x';") == "kbnf"
    assert detect_dialect('root ::= ";" # done;\n') == "gbnf"
    assert detect_dialect(SQL_LARK) == "lark"
    assert detect_dialect("%import common.WS\nstart: WS") == "lark"
    kbnf = "start ::= 'a';"
    assert grammar_to_kbnf(kbnf) == kbnf
    assert grammar_to_kbnf('root ::= "a"') == gbnf_to_kbnf('root ::= "a"')
    assert grammar_to_kbnf('start: "a"', "lark") == lark_to_kbnf('start: "a"')
    with pytest.raises(GrammarError, match="cannot tell the grammar's dialect"):
        detect_dialect("hello world")
    with pytest.raises(ValueError, match="unknown grammar dialect"):
        grammar_to_kbnf("x", "ebnf")
