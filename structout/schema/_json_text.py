"""From decoded-string languages to regexes over JSON text, printed for KBNF ``#"..."`` terminals.

:func:`encode_json` maps a regex AST over *decoded* code points to an AST over the characters of
the JSON string literal's body: every code point becomes the alternation of the spellings JSON
allows for it that we accept. Which spellings: the raw character (except ``"``, ``\\`` and
controls), the short escapes (``\\"``, ``\\\\``, ``\\/``, ``\\b``, ``\\f``, ``\\n``, ``\\r``,
``\\t``), ``\\uXXXX`` for controls and for non-ASCII characters when the set's non-ASCII part
is small (or everything), and surrogate pairs for astral characters when the set's astral part
is small (or everything). Since each code point is encoded independently, the encoded language
is exactly the set of accepted spellings of the decoded language. A set that contains every
code point gets the generic JSON character (every escape, any hex case).

:func:`to_rust` prints an AST in the syntax shared by Rust's ``regex`` crate and Python's
``re`` (so unit tests can run the printed text): quote and backslash are printed as
``\\x22``/``\\x5C`` so the text can sit inside ``#"..."`` without ambiguity.
"""

from __future__ import annotations

from functools import lru_cache
from operator import is_
from typing import Any

from structout.lru import LRU

from . import _charset as cs
from . import _regex as rx

HEX_CHARS: dict[int, cs.Charset] = {}
for _v in range(16):
    _d = "0123456789abcdef"[_v]
    HEX_CHARS[_v] = cs.of_chars(_d + _d.upper())

_BS = ord("\\")
_QUOTE = ord('"')
SHORT_ESCAPES: dict[int, str] = {
    _QUOTE: '"',
    _BS: "\\",
    ord("/"): "/",
    8: "b",
    12: "f",
    10: "n",
    13: "r",
    9: "t",
}
RAW_OK: cs.Charset = cs.difference(
    ((0x20, cs.MAX_CP),), cs.union(cs.of_chars('"\\'), cs.SURROGATES)
)
ASTRAL: cs.Charset = ((0x10000, cs.MAX_CP),)
U_DOMAIN: cs.Charset = cs.difference(cs.union(((0, 0x1F),), ((0x7F, 0xFFFF),)), cs.SURROGATES)
NON_ASCII_BMP: cs.Charset = cs.difference(((0x80, 0xFFFF),), cs.SURROGATES)
MAX_U_INTERVALS = 16
_NOT_SURROGATES: cs.Charset = cs.complement(cs.SURROGATES)
#: The complement of the characters JSON spells only as themselves (printable ASCII but the
#: quote, the backslash and the slash, which have short escapes).
_NOT_SELF_SPELLED: cs.Charset = cs.complement(cs.difference(((0x20, 0x7E),), cs.of_chars('"\\/')))


@lru_cache(maxsize=4096)
def hex_range(lo: int, hi: int, width: int = 4) -> rx.Node:
    """Regex for hex numerals of exactly ``width`` digits (either case) with value in [lo, hi].

    Memoized: the sets of a key complement (every character but one, per trie node) spell the
    same control and non-ASCII ranges as ``\\uXXXX`` each."""
    return _digits_range(_digits(lo, width), _digits(hi, width), 16, HEX_CHARS)


def _digits(v: int, width: int) -> list[int]:
    out = []
    for _ in range(width):
        out.append(v % 16)
        v //= 16
    return out[::-1]


def _digits_range(
    lo: list[int], hi: list[int], base: int, charset_of: dict[int, cs.Charset]
) -> rx.Node:
    if not lo:
        return rx.EPS

    def dset(a: int, b: int) -> rx.Node:
        return rx.cset(cs.union(*(charset_of[v] for v in range(a, b + 1))))

    if lo[0] == hi[0]:
        return rx.cat(dset(lo[0], lo[0]), _digits_range(lo[1:], hi[1:], base, charset_of))
    rest = len(lo) - 1
    anyd = rx.rep(dset(0, base - 1), rest, rest)
    parts = []
    first_full = lo[0]
    if any(d != 0 for d in lo[1:]):
        parts.append(
            rx.cat(dset(lo[0], lo[0]), _digits_range(lo[1:], [base - 1] * rest, base, charset_of))
        )
        first_full = lo[0] + 1
    last_full = hi[0]
    tail = None
    if any(d != base - 1 for d in hi[1:]):
        tail = rx.cat(dset(hi[0], hi[0]), _digits_range([0] * rest, hi[1:], base, charset_of))
        last_full = hi[0] - 1
    if first_full <= last_full:
        parts.append(rx.cat(dset(first_full, last_full), anyd))
    if tail is not None:
        parts.append(tail)
    return rx.alt(*parts)


# generic JSON string character: raw | short escape | \uXXXX (non-surrogate) | surrogate pair
_HEX = rx.cset(cs.union(*HEX_CHARS.values()))
GENERIC_CHAR: rx.Node = rx.alt(
    rx.cset(RAW_OK),
    rx.cat(rx.lit("\\"), rx.cset(cs.of_chars('"\\/bfnrt'))),
    rx.cat(rx.lit("\\u"), rx.alt(hex_range(0, 0xD7FF), hex_range(0xE000, 0xFFFF))),
    rx.cat(rx.lit("\\u"), hex_range(0xD800, 0xDBFF), rx.lit("\\u"), hex_range(0xDC00, 0xDFFF)),
)


@lru_cache(maxsize=8192)
def encode_set(s: cs.Charset, compact: bool = False) -> rx.Node:
    """Accepted JSON spellings of one code point from ``s``.

    Every character keeps all its spellings where ``s`` holds every character (the generic
    character, smallest as a regex). ``compact`` (object keys outside the named ones, where
    per-range escapes would make large regexes) otherwise narrows them to the raw character, the
    short escapes, ``\\uXXXX`` for controls and, where ``s`` holds every non-ASCII character of
    the BMP (resp. every astral one), ``\\uXXXX`` (resp. the surrogate pair) for those.
    """
    if not cs.intersect(s, _NOT_SELF_SPELLED):
        return rx.cset(s)  # what the general case below builds for these characters
    if s == cs.ANY or cs.is_subset(_NOT_SURROGATES, s):
        return GENERIC_CHAR
    parts: list[rx.Node] = []
    raw = cs.intersect(s, RAW_OK)
    if raw:
        parts.append(rx.cset(raw))
    esc = [SHORT_ESCAPES[c] for c in sorted(SHORT_ESCAPES) if cs.contains(s, c)]
    if esc:
        parts.append(rx.cat(rx.lit("\\"), rx.cset(cs.of_chars("".join(esc)))))
    ctrl = cs.intersect(s, ((0, 0x1F), (0x7F, 0x7F)))
    non_ascii = cs.intersect(s, NON_ASCII_BMP)
    u_parts: list[rx.Node] = []
    for lo, hi in ctrl:
        u_parts.append(hex_range(lo, hi))
    if non_ascii == NON_ASCII_BMP or (
        not compact and non_ascii and len(non_ascii) <= MAX_U_INTERVALS
    ):
        for lo, hi in non_ascii:
            u_parts.append(hex_range(lo, hi))
    if u_parts:
        parts.append(rx.cat(rx.lit("\\u"), rx.alt(*u_parts)))
    astral = cs.intersect(s, ASTRAL)
    if astral == ASTRAL:
        parts.append(
            rx.cat(
                rx.lit("\\u"), hex_range(0xD800, 0xDBFF), rx.lit("\\u"), hex_range(0xDC00, 0xDFFF)
            )
        )
    elif not compact and astral and len(astral) <= MAX_U_INTERVALS:
        for lo, hi in astral:
            parts.extend(surrogate_pairs(lo, hi))
    return rx.alt(*parts)


def surrogate_pairs(lo: int, hi: int) -> list[rx.Node]:
    """The ``\\uD8xx\\uDCxx`` spellings (either hex case) of the astral code points in [lo, hi].

    A code point ``c`` is the pair ``(0xD800 + (c - 0x10000) // 0x400, 0xDC00 + (c - 0x10000) %
    0x400)``; an interval of code points is at most three blocks of pairs: the rest of its first
    high surrogate, the high surrogates in between with every low one, and the start of its last
    high surrogate. Exact: every pair decodes to a code point of the interval, and no lone
    surrogate is accepted.
    """
    h_lo, l_lo = divmod(lo - 0x10000, 0x400)
    h_hi, l_hi = divmod(hi - 0x10000, 0x400)
    if h_lo == h_hi:
        blocks = [(h_lo, h_lo, l_lo, l_hi)]
    else:
        blocks = [(h_lo, h_lo, l_lo, 0x3FF)]
        if h_lo + 1 <= h_hi - 1:
            blocks.append((h_lo + 1, h_hi - 1, 0, 0x3FF))
        blocks.append((h_hi, h_hi, 0, l_hi))
    return [
        rx.cat(
            rx.lit("\\u"),
            hex_range(0xD800 + a, 0xD800 + b),
            rx.lit("\\u"),
            hex_range(0xDC00 + c, 0xDC00 + d),
        )
        for a, b, c, d in blocks
    ]


def encode_json(node: rx.Node, compact: bool = False) -> rx.Node:
    """Map a decoded-string AST to the AST of accepted JSON string-literal bodies.

    A node whose parts all encode to themselves (sets of characters JSON spells only as
    themselves, such as the printable ASCII of most key complements) is returned as it is when
    it is in the form ``rx.cat``/``rx.alt`` build (see :func:`_normal`), since rebuilding it
    would give an equal node; the output is the same as rebuilding every node.
    """
    return _encode_part(node, compact, {})


def _encode_part(n: rx.Node, compact: bool, memo: dict[int, tuple[rx.Node, rx.Node]]) -> rx.Node:
    """:func:`encode_json` of a part, ``memo`` holding the parts encoded so far by identity (a
    module function: see :func:`_print_part`)."""
    got = memo.get(id(n))
    if got is not None:
        return got[1]
    t = n[0]
    res: rx.Node
    if id(n) in _SELF_SPELLED_ASCII:
        res = n  # (what encode_set gives for a character JSON spells only as itself)
    elif t == "set":
        res = encode_set(n[1], compact)
        if res == n:
            res = n
    elif t == "cat" or t == "alt":
        kids = [_encode_part(x, compact, memo) for x in n[1]]
        if all(map(is_, kids, n[1])) and _normal(n):
            res = n
        else:
            res = rx.cat(*kids) if t == "cat" else rx.alt(*kids)
    elif t == "rep":
        body = _encode_part(n[1], compact, memo)
        res = n if body is n[1] else rx.rep(body, n[2], n[3])
    else:
        res = n
    memo[id(n)] = (n, res)
    return res


#: Ids of the interned one-character nodes (``rx.lit``'s) of the characters JSON spells only as
#: themselves: most characters of literal strings (enums, constants, keys), skipped by
#: :func:`encode_json` without a call to :func:`encode_set`.
_SELF_SPELLED_ASCII: frozenset[int] = frozenset(
    id(n) for n in rx._ASCII_SETS if not cs.intersect(n[1], _NOT_SELF_SPELLED)
)


def _normal(n: rx.Node) -> bool:
    """Whether ``rx.cat(*parts)`` (``rx.alt(*parts)``) of this cat (alt) node's parts gives an
    equal node: at least two parts, none empty or impossible, none of the same kind (nested),
    and for an alternation at most one set, first, no optional part and no repeated part."""
    parts = n[1]
    if len(parts) < 2:
        return False
    kind = n[0]
    sets = 0
    for i, p in enumerate(parts):
        t = p[0]
        if t == kind or t == "eps" or t == "none":
            return False
        if kind == "alt":
            if t == "set":
                sets += 1
                if i != 0:
                    return False
            elif t == "rep" and p[2] == 0 and p[3] == 1:
                return False
    if kind == "alt" and len({id(p) for p in parts}) != len(parts):
        return False
    return sets <= 1


def json_string_regex(node: rx.Node, compact: bool = False) -> rx.Node:
    """AST for complete JSON string literals (with quotes) whose decoded value is in ``node``
    (for a node registered by :func:`strings_once`, the very AST built and printed then)."""
    got = _CONSTANT_STRINGS.get((id(node), compact))
    if got is not None:
        return got[2]
    return _quoted(json_body(node, compact))


def constant_literal(node: rx.Node, compact: bool) -> rx.Node | None:
    """The JSON string literal of a node registered by :func:`strings_once` (what
    :func:`json_string_regex` returns for it), else None."""
    got = _CONSTANT_STRINGS.get((id(node), compact))
    return got[2] if got is not None and got[0] is node else None


def plain_string_literals(node: rx.Node) -> tuple[str, int, int] | None:
    """For a language of strings that JSON spells in one way only (every character printable
    ASCII but ``"``, ``\\`` and ``/``: most enums), ``(text, states, depth)``: what
    ``to_rust(json_string_regex(node))`` prints and what the emitter's ``metrics`` gives for it,
    found in one walk of the factored strings (such a node encodes to itself, so the encoding,
    measuring and printing walks of the general path have nothing to change). None for any other
    node (the general path then handles it)."""
    if (id(node), False) in _CONSTANT_STRINGS or (id(node), True) in _CONSTANT_STRINGS:
        return None
    body = _plain_walk(factor(node))
    if body is None:
        return None
    kind, text, states, depth = body
    # rx.cat(quote, body, quote): a cat body's parts are spliced in, an alternation grouped.
    if kind == "cat":
        return f"{_QUOTE_TEXT}{text}{_QUOTE_TEXT}", states + 2, depth
    if kind == "alt":
        text = f"(?:{text})"
    return f"{_QUOTE_TEXT}{text}{_QUOTE_TEXT}", states + 2, depth + 1


#: The printed ``"`` of a JSON string literal's quotes.
_QUOTE_TEXT = "\\x22"


def _plain_walk(n: rx.Node) -> tuple[str, str, int, int] | None:
    """``(kind, text, states, depth)`` of a node built of self-spelled characters, as
    :func:`_print` prints it and ``metrics`` measures it (a character set of printable ASCII:
    one state); None when a set holds another character or another kind of node occurs."""
    t = n[0]
    if t == "set":
        text = _SELF_SPELLED_TEXT.get(id(n))
        if text is None:
            if cs.intersect(n[1], _NOT_SELF_SPELLED):
                return None
            text = _set_text(n[1])
        return t, text, 1, 0
    if t == "cat" or t == "alt":
        texts: list[str] = []
        states = depth = 0
        for x in n[1]:
            text = _SELF_SPELLED_TEXT.get(id(x))  # (most parts: one character, inline)
            if text is not None:
                texts.append(text)
                states += 1
                continue
            got = _plain_walk(x)
            if got is None:
                return None
            kind, text, x_states, x_depth = got
            texts.append(f"(?:{text})" if t == "cat" and kind == "alt" else text)
            states += x_states
            depth = max(depth, x_depth)
        return t, ("".join(texts) if t == "cat" else "|".join(texts)), states, depth + 1
    if t == "rep":
        got = _plain_walk(n[1])
        if got is None:
            return None
        kind, text, x_states, x_depth = got
        if kind in ("cat", "alt", "rep"):
            text = f"(?:{text})"
        k = n[3] if n[3] is not None else n[2] + 1
        return t, text + rx.quantifier(n[2], n[3]), x_states * max(k, 1), x_depth + 1
    return None


def _quoted(body: rx.Node) -> rx.Node:
    return rx.cat(rx.lit('"'), body, rx.lit('"'))


# --- printing ---------------------------------------------------------------------------------

_META = set("\\.+*?()|[]{}^$#&-~")


def _cp(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    if cp == _QUOTE:
        return "\\x22"
    if cp == _BS:
        return "\\x5C"
    if 0x21 <= cp < 0x7F:
        if ch in _META or (in_class and ch in "[]^-&~"):
            return "\\" + ch
        return ch
    if cp == 0x20:
        return " "
    if cp < 0x100:
        return f"\\x{cp:02X}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04X}"
    return f"\\U{cp:08X}"


@lru_cache(maxsize=16384)
def _set_text(s: cs.Charset) -> str:
    if len(s) == 1 and s[0][0] == s[0][1]:
        return _cp(s[0][0], False)
    comp = cs.complement(s)
    neg = False
    body = s
    if len(comp) < len(s) and comp:
        neg, body = True, comp
    parts = []
    for lo, hi in body:
        if lo == hi:
            parts.append(_cp(lo, True))
        elif hi == lo + 1:
            parts.append(_cp(lo, True) + _cp(hi, True))
        else:
            parts.append(f"{_cp(lo, True)}-{_cp(hi, True)}")
    return "[" + ("^" if neg else "") + "".join(parts) + "]"


#: The printed text of each interned one-character node of :data:`_SELF_SPELLED_ASCII` (what
#: :func:`_set_text` gives), by id: the characters of enum values, printed without a call.
_SELF_SPELLED_TEXT: dict[int, str] = {
    id(n): _cp(n[1][0][0], False) for n in rx._ASCII_SETS if id(n) in _SELF_SPELLED_ASCII
}


def to_rust(node: rx.Node) -> str:
    """Print an AST as a regex (Rust ``regex`` syntax, also valid for Python ``re``)."""
    got = _CONSTANT_PARTS.get(id(node))  # (a constant by identity: no hash of a large AST)
    if got is not None and got[0] is node:
        return got[1]
    text = _CONSTANT_TEXTS.get(node)
    if text is not None:
        return text
    # A translation prints the same AST object many times (a pattern shared by many objects,
    # the terminals of one key language): the recent ones by identity, the AST kept alive with
    # its text so that its id is not reused meanwhile.
    got = _RECENT_PRINTS.get(id(node))
    if got is not None and got[0] is node:
        return got[1]
    text = _print(node)
    _RECENT_PRINTS.put(id(node), (node, text))
    return text


#: Recently printed ASTs by identity (see :func:`to_rust`), bounded in entries and in text.
_RECENT_PRINTS: LRU[int, tuple[rx.Node, str]] = LRU(
    512, weigh=lambda entry: len(entry[1]), max_weight=4 << 20
)


#: Texts of regexes nearly every grammar holds (the generic JSON string, number, integer),
#: printed once per process by :func:`print_once` when their modules load; and the same by
#: identity (``id(node) -> (node, text)``): what :func:`_print` starts from, for the parts of
#: larger regexes that are these very objects (e.g. the generic character of counted strings).
_CONSTANT_TEXTS: dict[rx.Node, str] = {}
_CONSTANT_PARTS: dict[int, tuple[rx.Node, str]] = {}


def print_once(node: rx.Node) -> rx.Node:
    """Registers ``node`` as a constant whose text :func:`to_rust` returns without printing."""
    text = _CONSTANT_TEXTS[node] = _print(node)
    _CONSTANT_PARTS[id(node)] = (node, text)
    return node


def is_constant(node: rx.Node) -> bool:
    """Whether ``node`` is registered by :func:`print_once` (a process-wide constant)."""
    got = _CONSTANT_PARTS.get(id(node))
    return got is not None and got[0] is node


def _print(node: rx.Node) -> str:
    return _print_part(node, dict(_CONSTANT_PARTS))


def _print_part(n: rx.Node, memo: dict[int, tuple[rx.Node, str]]) -> str:
    """:func:`_print` of a part, ``memo`` holding the parts printed so far by identity. (A
    module function, not a closure calling itself: such a closure is a reference cycle, which
    would keep the memo until the garbage collector runs.)"""
    got = memo.get(id(n))
    if got is not None:
        return got[1]
    t = n[0]
    if t == "eps":
        res = "(?:)"
    elif t == "none":
        res = "[^\\x00-\\U0010FFFF]"
    elif t == "set":
        res = _set_text(n[1])
    elif t == "cat":
        res = "".join(
            [f"(?:{_print_part(x, memo)})" if x[0] == "alt" else _print_part(x, memo) for x in n[1]]
        )
    elif t == "alt":
        res = "|".join([_print_part(x, memo) for x in n[1]])
    elif t == "rep":
        inner = n[1]
        text = _print_part(inner, memo)
        if inner[0] in ("cat", "alt", "rep", "eps"):
            text = f"(?:{text})"
        res = text + rx.quantifier(n[2], n[3])
    else:
        raise AssertionError(t)
    memo[id(n)] = (n, res)
    return res


# the character of every generic and counted JSON string
print_once(GENERIC_CHAR)


def factor(node: rx.Node) -> rx.Node:
    """Factor common prefixes out of alternations of literals (smaller regexes for enums).

    The last alternation factored is remembered by identity: the emitter factors a string
    language for its one-walk printing and, when that declines, again for the general path."""
    global _LAST_FACTORED
    if node[0] != "alt":
        return node
    last = _LAST_FACTORED
    if last[0] is node:
        return last[1]
    seqs = [it[1] if it[0] == "cat" else (it,) for it in node[1]]
    factored = _factor_seqs(seqs, 0)
    _LAST_FACTORED = (node, factored)  # (the node is kept: its id stays its own)
    return factored


#: ``(node, factor(node))`` of the last alternation :func:`factor` factored.
_LAST_FACTORED: tuple[rx.Node, rx.Node] = (rx.NONE, rx.NONE)

#: The key :func:`_factor_seqs` groups the interned one-character nodes (``rx.lit``'s) under, by
#: identity: their code point, as for every other set of one code point (no hash of a node).
_CHAR_KEY: dict[int, int] = {id(n): o for o, n in enumerate(rx._ASCII_SETS)}


def _factor_seqs(seqs: list[tuple[rx.Node, ...]], start: int) -> rx.Node:
    """The alternation of the sequences' suffixes from ``start`` on, common prefixes factored
    (branches in the order of their first sequence)."""
    groups: dict[Any, list[tuple[rx.Node, ...]]] = {}
    heads: list[tuple[Any, rx.Node]] = []  # (group key, the group's first head)
    empty = False
    key_of = _CHAR_KEY.get
    for sq in seqs:
        if len(sq) <= start:
            empty = True
            continue
        head = sq[start]
        # equal heads share a group: a set of one code point under that code point (whether
        # interned or not), any other node under itself
        key: Any = key_of(id(head))
        if key is None:
            key = head
            if head[0] == "set" and len(head[1]) == 1 and head[1][0][0] == head[1][0][1]:
                key = head[1][0][0]
        group = groups.get(key)
        if group is None:
            groups[key] = [sq]
            heads.append((key, head))
        else:
            group.append(sq)
    branches = []
    rest = start + 1
    for key, first in heads:
        members = groups[key]
        if len(members) == 1:
            branches.append(rx.cat(first, *members[0][rest:]))
        else:
            branches.append(rx.cat(first, _factor_seqs(members, rest)))
    if empty:
        branches.append(rx.EPS)
    return rx.alt(*branches)


def json_body(node: rx.Node, compact: bool = False) -> rx.Node:
    """``encode_json(factor(node), compact)``: the bodies of the JSON string literals of
    ``node``'s strings, common prefixes factored (for a node registered by
    :func:`strings_once`, the very body built and printed then)."""
    got = _CONSTANT_STRINGS.get((id(node), compact))
    if got is not None:
        return got[1]
    return encode_json(factor(node), compact)


#: ``(id(node), compact) -> (node, body, literal)`` for the process-wide constant regexes of
#: :func:`strings_once` (the node is kept, so its id stays its own).
_CONSTANT_STRINGS: dict[tuple[int, bool], tuple[rx.Node, rx.Node, rx.Node]] = {}


def strings_once(node: rx.Node) -> rx.Node:
    """Registers ``node``, a process-wide constant (e.g. a format's language), so that
    :func:`json_body` and :func:`json_string_regex` return its JSON string bodies and literals
    (both key modes) built and printed once, now."""
    for compact in (False, True):
        body = print_once(json_body(node, compact))
        _CONSTANT_STRINGS[(id(node), compact)] = (node, body, print_once(_quoted(body)))
    return node
