"""Sets of Unicode code points as sorted, merged, inclusive intervals.

A charset is a tuple ``((lo, hi), ...)`` with ``lo <= hi``, sorted by ``lo`` and with no two
intervals touching or overlapping. Tuples keep charsets hashable so regex ASTs can be interned.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from itertools import chain

Interval = tuple[int, int]
Charset = tuple[Interval, ...]

MAX_CP = 0x10FFFF
SURROGATES: Charset = ((0xD800, 0xDFFF),)
EMPTY: Charset = ()
ANY: Charset = ((0, MAX_CP),)


def make(intervals: Iterable[Interval]) -> Charset:
    """Normalize arbitrary intervals into a charset."""
    out: list[Interval] = []
    for lo, hi in sorted(intervals):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def single(cp: int) -> Charset:
    return ((cp, cp),)


def of_chars(chars: str) -> Charset:
    return make((ord(c), ord(c)) for c in chars)


def union(*sets: Charset) -> Charset:
    if len(sets) == 1:
        return sets[0]  # a charset is normalized already
    return make(chain.from_iterable(sets))


def complement(s: Charset) -> Charset:
    out: list[Interval] = []
    prev = 0
    for lo, hi in s:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return tuple(out)


def intersect(a: Charset, b: Charset) -> Charset:
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def difference(a: Charset, b: Charset) -> Charset:
    return intersect(a, complement(b))


def contains(s: Charset, cp: int) -> bool:
    lo_i, hi_i = 0, len(s)
    while lo_i < hi_i:
        mid = (lo_i + hi_i) // 2
        lo, hi = s[mid]
        if cp < lo:
            hi_i = mid
        elif cp > hi:
            lo_i = mid + 1
        else:
            return True
    return False


def size(s: Charset) -> int:
    return sum(hi - lo + 1 for lo, hi in s)


def is_subset(a: Charset, b: Charset) -> bool:
    return not difference(a, b)


# --- ECMA-262 predefined classes -------------------------------------------------------------

DIGIT: Charset = ((0x30, 0x39),)
WORD: Charset = make([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
SPACE: Charset = make(
    [
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)
LINE_TERMINATORS: Charset = make([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
DOT: Charset = complement(LINE_TERMINATORS)

# Unicode general categories (long and short names, matched loosely).
_GC_LONG = {
    "letter": "L",
    "casedletter": "LC",
    "uppercaseletter": "Lu",
    "lowercaseletter": "Ll",
    "titlecaseletter": "Lt",
    "modifierletter": "Lm",
    "otherletter": "Lo",
    "mark": "M",
    "combiningmark": "M",
    "nonspacingmark": "Mn",
    "spacingmark": "Mc",
    "enclosingmark": "Me",
    "number": "N",
    "decimalnumber": "Nd",
    "digit": "Nd",
    "letternumber": "Nl",
    "othernumber": "No",
    "punctuation": "P",
    "punct": "P",
    "connectorpunctuation": "Pc",
    "dashpunctuation": "Pd",
    "openpunctuation": "Ps",
    "closepunctuation": "Pe",
    "initialpunctuation": "Pi",
    "finalpunctuation": "Pf",
    "otherpunctuation": "Po",
    "symbol": "S",
    "mathsymbol": "Sm",
    "currencysymbol": "Sc",
    "modifiersymbol": "Sk",
    "othersymbol": "So",
    "separator": "Z",
    "spaceseparator": "Zs",
    "lineseparator": "Zl",
    "paragraphseparator": "Zp",
    "other": "C",
    "control": "Cc",
    "cntrl": "Cc",
    "format": "Cf",
    "surrogate": "Cs",
    "privateuse": "Co",
    "unassigned": "Cn",
}
_GC_SHORT = {
    c.lower(): c
    for c in [
        "L",
        "LC",
        "Lu",
        "Ll",
        "Lt",
        "Lm",
        "Lo",
        "M",
        "Mn",
        "Mc",
        "Me",
        "N",
        "Nd",
        "Nl",
        "No",
        "P",
        "Pc",
        "Pd",
        "Ps",
        "Pe",
        "Pi",
        "Pf",
        "Po",
        "S",
        "Sm",
        "Sc",
        "Sk",
        "So",
        "Z",
        "Zs",
        "Zl",
        "Zp",
        "C",
        "Cc",
        "Cf",
        "Cs",
        "Co",
        "Cn",
    ]
}


@lru_cache(maxsize=1)
def _category_table() -> dict[str, Charset]:
    """Intervals per two-letter general category, computed once from ``unicodedata``."""
    acc: dict[str, list[Interval]] = {}
    cat_of = unicodedata.category
    start = 0
    cur = cat_of(chr(0))
    for cp in range(1, sys.maxunicode + 2):
        c = cat_of(chr(cp)) if cp <= sys.maxunicode else None
        if c != cur:
            acc.setdefault(cur, []).append((start, cp - 1))
            start = cp
            cur = c  # type: ignore[assignment]
    return {k: make(v) for k, v in acc.items()}


def unicode_property(name: str) -> Charset:
    """The charset of a ``\\p{...}`` property (general categories and a few binary ones)."""
    raw = name
    if "=" in name:
        key, _, name = name.partition("=")
        if key.replace("_", "").lower() not in ("gc", "generalcategory"):
            raise KeyError(raw)
    key = name.replace("_", "").replace(" ", "").replace("-", "").lower()
    if key in ("any",):
        return ANY
    if key in ("ascii",):
        return ((0, 0x7F),)
    if key in ("asciihexdigit",):
        return of_chars("0123456789abcdefABCDEF")
    if key in ("whitespace", "space"):
        return SPACE
    if key in ("alphabetic", "alpha"):
        key = "l"
    cat = _GC_LONG.get(key) or _GC_SHORT.get(key)
    if cat is None:
        raise KeyError(raw)
    table = _category_table()
    if cat == "LC":
        return union(table.get("Lu", ()), table.get("Ll", ()), table.get("Lt", ()))
    if len(cat) == 1:
        return union(*(v for k, v in table.items() if k.startswith(cat)))
    return table.get(cat, ())
