"""``format`` values as exact regular languages (or documented exact subsets).

Each known format maps to a string formula (see :mod:`._string_formulas`). Where the full format
is not regular or needs tables we do not carry, the language is a *subset* of the valid strings
(never a superset), documented per format in ``FORMAT_NOTES``:

* ``hostname``: RFC 1123 labels (letters, digits, inner hyphens, at most 63 characters, no
  ``--`` in the 3rd and 4th positions, so no Punycode ``xn--`` labels) and at most 253
  characters overall; as a regular subset: up to 4 labels, or up to 12 labels of at most 20
  characters.
* ``time``/``date-time``: RFC 3339; leap seconds (``:60``) are accepted when the time converted
  to UTC is 23:59 and the offset's minutes are 00, 30 or 45.
* ``idn-hostname``: the ASCII subset (as ``hostname``); ``idn-email``: UTF-8 local parts,
  ASCII domains.

Unknown formats are annotations (JSON Schema 2020-12 default) and are ignored by the caller.
``regex`` is not a regular language: it is a context-free subset (see :func:`regex_format_ok`)
that the emitter writes as grammar rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from . import _json_text as tr
from . import _regex as rx
from . import _string_formulas as sl
from ._ir import MAX_RECURSION_DEPTH

FORMAT_NOTES: dict[str, str] = {
    "date": "RFC 3339 full-date with month lengths and leap years",
    "time": "RFC 3339 full-time; leap seconds only at 23:59 UTC with offset minutes 00/30/45",
    "date-time": "RFC 3339 date-time (see date and time)",
    "duration": "RFC 3339 Appendix A ISO 8601 duration",
    "email": "RFC 5321 Mailbox: dot-atom or quoted local part; hostname or address literal",
    "idn-email": "RFC 6531 local part (UTF-8 allowed); ASCII domain (as email)",
    "hostname": "RFC 1123; at most 4 labels, or at most 12 labels of at most 20 characters",
    "idn-hostname": "ASCII subset (as hostname)",
    "ipv4": "dotted quad without leading zeros",
    "ipv6": "RFC 4291 text forms, no zone id",
    "uri": "RFC 3986 URI",
    "uri-reference": "RFC 3986 URI-reference",
    "iri": "RFC 3987 IRI",
    "iri-reference": "RFC 3987 IRI-reference",
    "uri-template": "RFC 6570 level 4",
    "uuid": "RFC 4122 textual form (any version/variant, either case)",
    "json-pointer": "RFC 6901",
    "relative-json-pointer": "draft-handrews-relative-json-pointer-01",
    "regex": "a subset valid in both ECMA-262 (u flag) and Python re (context-free)",
}

UNSUPPORTED_FORMATS: set[str] = set()

_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{IPV4})"
IPV6 = (
    "(?:"
    + "|".join(
        [
            rf"(?:{_H16}:){{6}}{_LS32}",
            rf"::(?:{_H16}:){{5}}{_LS32}",
            rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)

_YEAR = r"[0-9]{4}"
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
DATE = (
    rf"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    rf"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    rf"|{_LEAP_YEAR}-02-29)"
)
_OFFSET = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_FRAC = r"(?:\.[0-9]+)?"


def _leap_second_times() -> str:
    alts = [rf"23:59:60{_FRAC}(?:[Zz]|[+-]00:00)"]
    for sign in (1, -1):
        for oh in range(24):
            for om in (0, 30, 45):
                if oh == 0 and om == 0:
                    continue
                local = (23 * 60 + 59 + sign * (oh * 60 + om)) % (24 * 60)
                hh, mm = divmod(local, 60)
                s = "+" if sign > 0 else "-"
                alts.append(rf"{hh:02d}:{mm:02d}:60{_FRAC}\{s}{oh:02d}:{om:02d}")
    return "(?:" + "|".join(alts) + ")"


TIME = rf"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRAC}{_OFFSET}|{_leap_second_times()})"
DATE_TIME = rf"{DATE}[Tt]{TIME}"

DURATION = (
    r"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
    r"(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
    r"|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)"
)

_ALNUM = "[A-Za-z0-9]"
_LDH = "[A-Za-z0-9-]"


def _label(maxlen: int) -> str:
    """An RFC 1123 label of at most ``maxlen`` (>= 4) characters, no '--' at positions 3-4."""
    k = maxlen - 5
    return (
        f"{_ALNUM}(?:{_LDH}?{_ALNUM}|{_LDH}{_LDH}{_ALNUM}"
        f"|{_LDH}(?:{_ALNUM}{_LDH}|-{_ALNUM}){_LDH}{{0,{k}}}{_ALNUM})?"
    )


HOSTNAME = (
    f"(?:{_label(63)}(?:\\.{_label(63)}){{0,2}}(?:\\.{_label(61)})?"
    f"|{_label(20)}(?:\\.{_label(20)}){{0,11}})"
)
# Email domains: same label rules, no overall limit beyond the labels themselves.
_EMAIL_DOMAIN = f"{_label(63)}(?:\\.{_label(63)})*"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOT_ATOM = rf"{_ATEXT}+(?:\.{_ATEXT}+)*"
_QUOTED = r'"(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\[\x20-\x7E])*"'
_ADDR_LITERAL = rf"\[(?:{IPV4}|IPv6:{IPV6})\]"
EMAIL = rf"(?:{_DOT_ATOM}|{_QUOTED})@(?:{_EMAIL_DOMAIN}|{_ADDR_LITERAL})"
# RFC 6531: UTF-8 (non-ASCII) characters are allowed in atoms and quoted strings.
_U8 = r"\u0080-\uD7FF\uE000-\u{10FFFF}"
_IDN_ATEXT = rf"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~\-{_U8}]"
_IDN_QUOTED = rf'"(?:[\x20\x21\x23-\x5B\x5D-\x7E{_U8}]|\\[\x20-\x7E])*"'
IDN_EMAIL = (
    rf"(?:{_IDN_ATEXT}+(?:\.{_IDN_ATEXT}+)*|{_IDN_QUOTED})@(?:{_EMAIL_DOMAIN}|{_ADDR_LITERAL})"
)

UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
JSON_POINTER = r"(?:/(?:[^~/]|~[01])*)*"
RELATIVE_JSON_POINTER = rf"(?:0|[1-9][0-9]*)(?:#|{JSON_POINTER})"


def _uri_parts(iri: bool) -> dict[str, str]:
    uc = (
        r"\u00A0-\uD7FF\uF900-\uFDCF\uFDF0-\uFFEF\u{10000}-\u{1FFFD}\u{20000}-\u{2FFFD}"
        r"\u{30000}-\u{3FFFD}\u{40000}-\u{4FFFD}\u{50000}-\u{5FFFD}\u{60000}-\u{6FFFD}"
        r"\u{70000}-\u{7FFFD}\u{80000}-\u{8FFFD}\u{90000}-\u{9FFFD}\u{A0000}-\u{AFFFD}"
        r"\u{B0000}-\u{BFFFD}\u{C0000}-\u{CFFFD}\u{D0000}-\u{DFFFD}\u{E1000}-\u{EFFFD}"
        if iri
        else ""
    )
    priv = r"\uE000-\uF8FF\u{F0000}-\u{FFFFD}\u{100000}-\u{10FFFD}" if iri else ""
    unres = rf"A-Za-z0-9\-._~{uc}"
    sub = r"!$&'()*+,;="
    pct = "%[0-9A-Fa-f]{2}"
    pchar = rf"(?:[{unres}{sub}:@]|{pct})"
    segment = f"{pchar}*"
    segment_nz = f"{pchar}+"
    segment_nz_nc = rf"(?:[{unres}{sub}@]|{pct})+"
    userinfo = rf"(?:[{unres}{sub}:]|{pct})*"
    ipvfuture = rf"[vV][0-9A-Fa-f]+\.[{unres.replace(uc, '')}{sub}:]+"
    host = rf"(?:\[(?:{IPV6}|{ipvfuture})\]|(?:[{unres}{sub}]|{pct})*)"
    authority = rf"(?:{userinfo}@)?{host}(?::[0-9]*)?"
    path_abempty = f"(?:/{segment})*"
    path_absolute = f"/(?:{segment_nz}(?:/{segment})*)?"
    path_rootless = f"{segment_nz}(?:/{segment})*"
    path_noscheme = f"{segment_nz_nc}(?:/{segment})*"
    query = rf"(?:{pchar}|[/?{priv}])*"
    fragment = rf"(?:{pchar}|[/?])*"
    scheme = r"[A-Za-z][A-Za-z0-9+\-.]*"
    hier = f"(?://{authority}{path_abempty}|{path_absolute}|{path_rootless})?"
    uri = f"{scheme}:{hier}(?:\\?{query})?(?:#{fragment})?"
    rel = (
        f"(?://{authority}{path_abempty}|{path_absolute}|{path_noscheme})?"
        f"(?:\\?{query})?(?:#{fragment})?"
    )
    return {"uri": uri, "ref": f"(?:{uri}|{rel})", "literal_extra": uc + priv}


def _uri_template() -> str:
    uc = _uri_parts(True)["literal_extra"]
    literal = (
        rf"(?:[\x21\x23\x24\x26-\x3B\x3D\x3F-\x5B\x5D\x5F\x61-\x7A\x7E{uc}]|%[0-9A-Fa-f]{{2}})"
    )
    varchar = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
    varname = rf"{varchar}(?:\.?{varchar})*"
    varspec = rf"{varname}(?::[1-9][0-9]{{0,3}}|\*)?"
    expression = rf"\{{[+#./;?&=,!@|]?{varspec}(?:,{varspec})*\}}"
    return rf"(?:{literal}|{expression})*"


def _format_sources() -> dict[str, str]:
    uri, iri = _uri_parts(False), _uri_parts(True)
    return {
        "date": DATE,
        "time": TIME,
        "date-time": DATE_TIME,
        "duration": DURATION,
        "email": EMAIL,
        "idn-email": IDN_EMAIL,
        "hostname": HOSTNAME,
        "idn-hostname": HOSTNAME,
        "ipv4": IPV4,
        "ipv6": IPV6,
        "uuid": UUID,
        "json-pointer": JSON_POINTER,
        "relative-json-pointer": RELATIVE_JSON_POINTER,
        "uri": uri["uri"],
        "uri-reference": uri["ref"],
        "iri": iri["uri"],
        "iri-reference": iri["ref"],
        "uri-template": _uri_template(),
    }


def _constant_language(src: str) -> Callable[[], sl.Formula]:
    """The full-match language of ``src``, parsed at first use and kept for the process (a
    constant: it depends on the fixed source text only), with its JSON string bodies."""

    @lru_cache(maxsize=1)
    def language() -> sl.Formula:
        node = rx.search_language(rx.cat(rx.BOL, rx.parse_ecma(src), rx.EOL))
        return sl.f_re(tr.strings_once(node))

    return language


#: The regular formats' languages by name, each a zero-argument constant.
_LANGUAGES = {name: _constant_language(src) for name, src in _format_sources().items()}


# --- format "regex": a context-free subset ------------------------------------------------------
#
# Regular expressions valid under ECMA-262 with the u flag *and* under Python's re (validators in
# the wild use either): alternation, groups ``(...)``/``(?:...)``, ``^ $ \b \B``, ``.``, the
# escapes ``\d \D \w \W \s \S \t \n \r \f \v``, escaped syntax characters and ``/``,
# ``\xHH``, ``\uHHHH``; classes ``[...]``/``[^...]`` (non-empty) with escapes, ``\b`` and ranges
# within digits, lower-case or upper-case letters in order; quantifiers ``* + ? {n} {n,} {n,m}``
# (``n`` fewer digits than ``m``, or both at most two digits with ``n <= m``; at most 9 digits),
# optionally lazy. Everything else (backreferences, look-around, named groups, ``\p``, ``\c``,
# ``\0``, unescaped ``{ } ]``, ...) is refused: a subset of the valid regexes.

REGEX_SYNTAX = "^$\\.*+?()[]{}|"
REGEX_ESC_CLASSES = "dDwWsS"
REGEX_ESC_CONTROLS = "tnrfv"
REGEX_ESC_SYNTAX = REGEX_SYNTAX + "/"
REGEX_CLASS_EXCLUDED = "\\]-^["
REGEX_RANGE_GROUPS = ("0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NUM = re.compile(r"0|[1-9][0-9]{0,8}")


def regex_braces_ok(lo: str, hi: str | None) -> bool:
    """Whether ``{lo,hi}`` is in the accepted quantifier subset."""
    if not _NUM.fullmatch(lo):
        return False
    if hi is None:
        return True
    if not _NUM.fullmatch(hi):
        return False
    if len(lo) < len(hi):
        return True
    return len(lo) == len(hi) <= 2 and int(lo) <= int(hi)


def regex_format_ok(s: str) -> bool:
    """Membership in the ``regex`` format subset (mirrors the emitted grammar)."""
    n = len(s)

    class Bad(Exception):
        pass

    def disjunction(i: int, depth: int) -> int:
        if depth > MAX_RECURSION_DEPTH:
            raise Bad
        i = alternative(i, depth)
        while i < n and s[i] == "|":
            i = alternative(i + 1, depth)
        return i

    def alternative(i: int, depth: int) -> int:
        while i < n and s[i] not in "|)":
            i = term(i, depth)
        return i

    def term(i: int, depth: int) -> int:
        c = s[i]
        if c in "^$":
            return i + 1
        if c == "\\" and i + 1 < n and s[i + 1] in "bB":
            return i + 2
        return quantifier(atom(i, depth))

    def atom(i: int, depth: int) -> int:
        c = s[i]
        if c == ".":
            return i + 1
        if c == "\\":
            return escape(i, inside=False)
        if c == "[":
            return klass(i)
        if c == "(":
            j = i + 1
            if s.startswith("?:", j):
                j += 2
            elif j < n and s[j] == "?":
                raise Bad
            j = disjunction(j, depth + 1)
            if j >= n or s[j] != ")":
                raise Bad
            return j + 1
        if c in REGEX_SYNTAX:
            raise Bad
        return i + 1

    def quantifier(i: int) -> int:
        if i < n and s[i] in "*+?":
            i += 1
        elif i < n and s[i] == "{":
            m = re.match(r"\{([0-9]+)(,([0-9]*))?\}", s[i:])
            if not m:
                raise Bad
            lo, hi = m.group(1), m.group(3)
            if not regex_braces_ok(lo, hi or None):
                raise Bad
            i += m.end()
        else:
            return i
        if i < n and s[i] == "?":
            i += 1
        return i

    def escape(i: int, inside: bool) -> int:
        if i + 1 >= n:
            raise Bad
        c = s[i + 1]
        if c in REGEX_ESC_CLASSES or c in REGEX_ESC_CONTROLS or c in REGEX_ESC_SYNTAX:
            return i + 2
        if inside and c in "b-":
            return i + 2
        if c == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", s[i + 2 : i + 4]):
            return i + 4
        if c == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", s[i + 2 : i + 6]):
            return i + 6
        raise Bad

    def klass(i: int) -> int:
        i += 1
        if i < n and s[i] == "^":
            i += 1
        items = 0
        while True:
            if i >= n:
                raise Bad
            c = s[i]
            if c == "]":
                if not items:
                    raise Bad
                return i + 1
            if c == "\\":
                i = escape(i, inside=True)
            elif i + 2 < n and s[i + 1] == "-":
                a, b = c, s[i + 2]
                if not any(a in g and b in g and a <= b for g in REGEX_RANGE_GROUPS):
                    raise Bad
                i += 3
            elif c in REGEX_CLASS_EXCLUDED:
                raise Bad
            else:
                i += 1
            items += 1

    try:
        return disjunction(0, 0) == n
    except (Bad, IndexError, RecursionError):
        return False


sl.CFG_LANGUAGES["regex"] = regex_format_ok


def format_formula(name: str) -> sl.Formula | None:
    """The string language of a known format; None for unknown formats."""
    if name == "regex":
        return sl.f_cfg("regex")
    language = _LANGUAGES.get(name)
    return None if language is None else language()
