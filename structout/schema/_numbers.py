"""Exact regular languages for constrained JSON numbers.

A number constraint is a boolean formula over value predicates (tuples, hashable):

* ``("iv", lo, lo_incl, hi, hi_incl)``: ``lo <(=) v <(=) hi`` (``None`` bounds are infinite),
* ``("int",)``: ``v`` is an integer (JSON Schema: a zero fractional part, so ``1.0`` counts),
* ``("intlex",)``: ``v`` is written as an integer literal (draft-04 ``integer``: ``1.0`` is not),
* ``("intplain",)``: ``v`` is an integer written as an integer literal: ``type: integer`` in
  later drafts, where ``1.0`` is an integer too but the grammar admits only the plain spelling
  (what ``json.loads`` reads as an ``int``). A subset of ``int``; its complement is the
  complement of ``int`` (values that are not integers), so negations stay exact and a formula
  never admits a value its schema rejects,
* ``("mult", m)``: ``v / m`` is an integer,
* ``("and", ...)``, ``("or", ...)``, ``("not", f)``, ``NUM_ALL``, ``NUM_NONE``.

Values are exact :class:`fractions.Fraction` s (a JSON number is a decimal numeral).

Spellings: a *spelling set* S fixes which numerals the grammar may produce. ``PLAIN`` is
``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``; ``EXP`` adds ``-?[1-9](\\.[0-9]+)?[eE][+-]?[0-9]+`` (a
mantissa in [1, 10), what ``json.dumps`` writes for very small or large floats). Every
predicate's language is *spelling-closed* in S (a value's spellings are all in or all out), so
complement inside S is exact. Formulas made only of intervals use PLAIN+EXP; formulas with
``int``/``mult`` use PLAIN only (every finite decimal still has a plain spelling).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Optional

from . import _automata as am
from . import _charset as cs
from . import _regex as rx

NumFormula = tuple[Any, ...]
NUM_ALL: NumFormula = ("all",)
NUM_NONE: NumFormula = ("none",)

DIGIT = rx.cset(cs.DIGIT)
NZDIGIT = rx.cset(((0x31, 0x39),))
DIGITS0 = rx.rep(DIGIT, 0, None)
DIGITS1 = rx.rep(DIGIT, 1, None)
MINUS = rx.lit("-")
DOT = rx.lit(".")
EXP_MARK = rx.cset(cs.of_chars("eE"))

INT_PART = rx.alt(rx.lit("0"), rx.cat(NZDIGIT, DIGITS0))
FRAC_OPT = rx.opt(rx.cat(DOT, DIGITS1))
EXPONENT = rx.cat(EXP_MARK, rx.opt(rx.cset(cs.of_chars("+-"))), DIGITS1)
GENERIC_NUMBER = rx.cat(rx.opt(MINUS), INT_PART, FRAC_OPT, rx.opt(EXPONENT))
PLAIN_NUMBER = rx.cat(rx.opt(MINUS), INT_PART, FRAC_OPT)
GENERIC_INTEGER = rx.cat(rx.opt(MINUS), INT_PART)


# --- formula constructors -----------------------------------------------------------------------


def n_iv(lo: Fraction | None, lo_incl: bool, hi: Fraction | None, hi_incl: bool) -> NumFormula:
    if lo is None and hi is None:
        return NUM_ALL
    if lo is not None and hi is not None and (lo > hi or (lo == hi and not (lo_incl and hi_incl))):
        return NUM_NONE
    return (
        "iv",
        lo,
        lo_incl if lo is not None else False,
        hi,
        hi_incl if hi is not None else False,
    )


def n_and(*items: NumFormula) -> NumFormula:
    out: list[NumFormula] = []
    ivs: list[NumFormula] = []
    for it in items:
        if it == NUM_NONE:
            return NUM_NONE
        if it == NUM_ALL:
            continue
        for p in it[1] if it[0] == "and" else (it,):
            if p[0] == "iv":
                ivs.append(p)
            elif p not in out:
                out.append(p)
    if ivs:
        lo, lo_incl, hi, hi_incl = None, False, None, False
        for _, a, ai, b, bi in ivs:
            if a is not None and (lo is None or a > lo or (a == lo and not ai)):
                lo, lo_incl = a, ai
            if b is not None and (hi is None or b < hi or (b == hi and not bi)):
                hi, hi_incl = b, bi
        iv = n_iv(lo, lo_incl, hi, hi_incl)
        if iv == NUM_NONE:
            return NUM_NONE
        if iv != NUM_ALL:
            out.insert(0, iv)
    # drop multipleOf constraints implied by others (m | q means mult(q) implies mult(m))
    mults = [p for p in out if p[0] == "mult"]
    implied = [p for p in mults if any(q != p and (q[1] / p[1]).denominator == 1 for q in mults)]
    if ("int",) in out and any(p[1].denominator == 1 for p in mults):
        implied.append(("int",))
    if ("intlex",) in out or ("intplain",) in out:
        implied.append(("int",))
    if ("int",) in out or ("intplain",) in out:
        implied.extend(p for p in mults if (1 / p[1]).denominator == 1 and p[1] <= 1)
    out = [p for p in out if p not in implied]
    if not out:
        return NUM_ALL
    if len(out) == 1:
        return out[0]
    return ("and", tuple(out))


def n_or(*items: NumFormula) -> NumFormula:
    if len(items) == 1 and items[0][0] != "or":
        return items[0]  # (what the merge below gives for it)
    out: list[NumFormula] = []
    seen: set[NumFormula] = set()
    for it in items:
        if it == NUM_ALL:
            return NUM_ALL
        if it == NUM_NONE:
            continue
        for p in it[1] if it[0] == "or" else (it,):
            if p not in seen:
                seen.add(p)
                out.append(p)
    if not out:
        return NUM_NONE
    if len(out) == 1:
        return out[0]
    return ("or", tuple(out))


def n_not(f: NumFormula) -> NumFormula:
    t = f[0]
    if t == "all":
        return NUM_NONE
    if t == "none":
        return NUM_ALL
    if t == "not":
        return f[1]  # type: ignore[no-any-return]
    if t == "intplain":
        # not an integer value (a plain-spelled subset is only taken where it is asserted)
        return ("not", ("int",))
    if t == "iv":
        _, lo, li, hi, hi_i = f
        parts = []
        if lo is not None:
            parts.append(n_iv(None, False, lo, not li))
        if hi is not None:
            parts.append(n_iv(hi, not hi_i, None, False))
        return n_or(*parts)
    if t == "and":
        return n_or(*(n_not(x) for x in f[1]))
    if t == "or":
        return n_and(*(n_not(x) for x in f[1]))
    return ("not", f)


def n_matches(f: NumFormula, v: Fraction, written_int: bool = True) -> bool:
    """Whether value ``v`` satisfies ``f`` (``written_int``: the numeral had no fraction)."""
    t = f[0]
    if t == "all":
        return True
    if t == "none":
        return False
    if t == "iv":
        _, lo, li, hi, hi_i = f
        if lo is not None and (v < lo or (v == lo and not li)):
            return False
        return not (hi is not None and (v > hi or (v == hi and not hi_i)))
    if t == "int":
        return v.denominator == 1
    if t in ("intlex", "intplain"):
        return v.denominator == 1 and written_int
    if t == "mult":
        return bool((v / f[1]).denominator == 1)
    if t == "and":
        return all(n_matches(x, v, written_int) for x in f[1])
    if t == "or":
        return any(n_matches(x, v, written_int) for x in f[1])
    if t == "not":
        return not n_matches(f[1], v, written_int)
    raise AssertionError(t)


def _leaf_kinds(f: NumFormula, out: set) -> None:  # type: ignore[type-arg]
    if f[0] in ("and", "or"):
        for x in f[1]:
            _leaf_kinds(x, out)
    elif f[0] == "not":
        _leaf_kinds(f[1], out)
    else:
        out.add(f[0])


# --- interval sets ------------------------------------------------------------------------------

# An interval set is a sorted list of disjoint intervals (lo, lo_incl, hi, hi_incl).
Iv = tuple[Optional[Fraction], bool, Optional[Fraction], bool]


def _iv_set(f: NumFormula) -> list[Iv]:
    """Evaluate an interval-only formula to a normalized list of disjoint intervals."""
    t = f[0]
    if t == "all":
        return [(None, False, None, False)]
    if t == "none":
        return []
    if t == "iv":
        return [(f[1], f[2], f[3], f[4])]
    if t == "not":
        return _iv_complement(_iv_set(f[1]))
    if t == "or":
        # one sort over all parts (n log n), not a merge per part
        items: list[Iv] = []
        for x in f[1]:
            items.extend(_iv_set(x))
        return _iv_union(items, [])
    if t == "and":
        acc: list[Iv] = [(None, False, None, False)]
        for x in f[1]:
            acc = _iv_intersect(acc, _iv_set(x))
        return acc
    raise AssertionError(t)


def _lo_key(lo: Fraction | None, incl: bool) -> tuple[int, Fraction, int]:
    if lo is None:
        return (0, Fraction(0), 0)
    return (1, lo, 0 if incl else 1)


def _iv_union(a: list[Iv], b: list[Iv]) -> list[Iv]:
    items = sorted(a + b, key=lambda iv: _lo_key(iv[0], iv[1]))
    out: list[Iv] = []
    for iv in items:
        if out:
            plo, pli, phi, phi_i = out[-1]
            lo, li, hi, hi_i = iv
            touches = phi is None or lo is None or lo < phi or (lo == phi and (phi_i or li))
            if touches:
                if phi is None or (hi is not None and (hi < phi or (hi == phi and phi_i))):
                    continue
                out[-1] = (plo, pli, hi, hi_i)
                continue
        out.append(iv)
    return out


def _as_iv(f: NumFormula) -> Iv | None:
    if f == NUM_NONE:
        return None
    if f == NUM_ALL:
        return (None, False, None, False)
    return (f[1], f[2], f[3], f[4])


def _iv_complement(a: list[Iv]) -> list[Iv]:
    out: list[Iv] = []
    cur_lo: Fraction | None = None
    cur_incl = False
    for lo, li, hi, hi_i in a:
        if lo is not None:
            gap = _as_iv(n_iv(cur_lo, cur_incl, lo, not li))
            if gap is not None:
                out.append(gap)
        if hi is None:
            return out
        cur_lo, cur_incl = hi, not hi_i
    gap = _as_iv(n_iv(cur_lo, cur_incl, None, False))
    if gap is not None:
        out.append(gap)
    return out


def _iv_intersect(a: list[Iv], b: list[Iv]) -> list[Iv]:
    out: list[Iv] = []
    for x in a:
        for y in b:
            iv = _as_iv(n_and(_iv_formula(x), _iv_formula(y)))
            if iv is not None:
                out.append(iv)
    return _iv_union([], out)


def _iv_formula(iv: Iv) -> NumFormula:
    return n_iv(*iv)


# --- numeral construction ----------------------------------------------------------------------


def _dec_parts(v: Fraction) -> tuple[int, str]:
    """Integer part and fractional digits (no trailing zeros) of a non-negative finite decimal."""
    assert v >= 0
    ip = v.numerator // v.denominator
    rem = v - ip
    digits = []
    den = rem.denominator
    # only finite decimals are valid bounds here
    k = 0
    while den % 2 == 0 or den % 5 == 0:
        den //= 2 if den % 2 == 0 else 5
        k += 1
    if den != 1:
        raise ValueError("not a finite decimal")
    num = rem
    for _ in range(k):
        num *= 10
        d = num.numerator // num.denominator
        digits.append(str(d))
        num -= d
    return ip, "".join(digits).rstrip("0")


def _digit_set(a: int, b: int) -> rx.Node:
    return rx.cset(((0x30 + a, 0x30 + b),)) if a <= b else rx.NONE


def int_range(lo: int, hi: int | None) -> rx.Node:
    """Decimal numerals without leading zeros with value in [lo, hi] (lo >= 0)."""
    if hi is not None and hi < lo:
        return rx.NONE
    parts = []
    if lo == 0:
        parts.append(rx.lit("0"))
        lo = 1
        if hi is not None and hi < 1:
            return rx.alt(*parts)
    # split by number of digits
    nd = len(str(lo))
    while True:
        top = 10**nd - 1
        if hi is not None and hi < 10 ** (nd - 1):
            break
        a = max(lo, 10 ** (nd - 1))
        b = top if hi is None else min(top, hi)
        if a <= b:
            parts.append(_same_len_range(str(a), str(b)))
        if hi is not None and hi <= top:
            break
        if hi is None:
            # all longer numerals
            parts.append(rx.cat(NZDIGIT, rx.rep(DIGIT, nd, None)))
            break
        nd += 1
    return rx.alt(*parts)


def _same_len_range(a: str, b: str) -> rx.Node:
    if not a:
        return rx.EPS
    if a[0] == b[0]:
        return rx.cat(rx.lit(a[0]), _same_len_range(a[1:], b[1:]))
    rest = len(a) - 1
    parts = []
    first = int(a[0])
    if any(c != "0" for c in a[1:]):
        parts.append(rx.cat(rx.lit(a[0]), _same_len_range(a[1:], "9" * rest)))
        first += 1
    last = int(b[0])
    tail = None
    if any(c != "9" for c in b[1:]):
        tail = rx.cat(rx.lit(b[0]), _same_len_range("0" * rest, b[1:]))
        last -= 1
    if first <= last:
        parts.append(rx.cat(_digit_set(first, last), rx.rep(DIGIT, rest, rest)))
    if tail is not None:
        parts.append(tail)
    return rx.alt(*parts)


def _digits_ge(d: str, strict: bool) -> rx.Node:
    """Non-empty digit strings g with 0.g >= 0.d (> if strict); d has no trailing zeros."""
    if not d:
        return DIGITS1 if not strict else rx.cat(DIGITS0, NZDIGIT, DIGITS0)
    d0 = int(d[0])
    parts = [rx.cat(_digit_set(d0 + 1, 9), DIGITS0)]
    if len(d) == 1:
        rest = DIGITS0 if not strict else rx.cat(DIGITS0, NZDIGIT, DIGITS0)
        parts.append(rx.cat(rx.lit(d[0]), rest))
    else:
        parts.append(rx.cat(rx.lit(d[0]), _digits_ge(d[1:], strict)))
    return rx.alt(*parts)


def _digits_le(d: str, strict: bool) -> rx.Node:
    """Non-empty digit strings g with 0.g <= 0.d (< if strict); d has no trailing zeros."""
    if not d:
        return rx.NONE if strict else rx.rep(rx.lit("0"), 1, None)
    d0 = int(d[0])
    parts = [rx.cat(_digit_set(0, d0 - 1), DIGITS0)]
    # g starts with d0: the rest (possibly empty) compared with d[1:]
    rest_d = d[1:]
    if rest_d:
        parts.append(rx.cat(rx.lit(d[0]), rx.opt(_digits_le(rest_d, strict))))
    else:
        # equal prefix: g = d0 followed by zeros is equal
        parts.append(rx.cat(rx.lit(d[0]), rx.rep(rx.lit("0"), 0, None)) if not strict else rx.NONE)
    return rx.alt(*parts)


def _digits_between(a: str, a_strict: bool, b: str, b_strict: bool) -> rx.Node:
    """Non-empty digit strings g with 0.a <(=) 0.g <(=) 0.b (a < b as decimals)."""
    if not a:
        if not a_strict:
            return _digits_le(b, b_strict)
        # g > 0 and g <(=) b
        return _and_nonzero(b, b_strict)
    a0, b0 = int(a[0]), int(b[0]) if b else 0
    if b and a0 == b0:
        return rx.cat(rx.lit(a[0]), _rest_between(a[1:], a_strict, b[1:], b_strict))
    parts = []
    # first digit a0
    if len(a) == 1:
        rest = DIGITS0 if not a_strict else rx.cat(DIGITS0, NZDIGIT, DIGITS0)
        parts.append(rx.cat(rx.lit(a[0]), rest))
    else:
        parts.append(rx.cat(rx.lit(a[0]), _digits_ge(a[1:], a_strict)))
    parts.append(rx.cat(_digit_set(a0 + 1, b0 - 1), DIGITS0))
    if b:
        if b[1:]:
            parts.append(rx.cat(rx.lit(b[0]), rx.opt(_digits_le(b[1:], b_strict))))
        elif not b_strict:
            parts.append(rx.cat(rx.lit(b[0]), rx.rep(rx.lit("0"), 0, None)))
    return rx.alt(*parts)


def _rest_between(a: str, a_strict: bool, b: str, b_strict: bool) -> rx.Node:
    """Possibly empty digit strings r with 0.a <(=) 0.r <(=) 0.b (same-prefix recursion)."""
    empty_ok = (not a) and not a_strict  # r empty means 0; need 0 >= a (a empty) and 0 <= b
    if b == "" and b_strict:
        empty_ok = False
    nonempty = _digits_between(a, a_strict, b, b_strict) if b or not b_strict else rx.NONE
    if b == "":
        # upper bound 0: only zero strings, and only if a allows 0
        nonempty = (
            rx.rep(rx.lit("0"), 1, None) if (not a and not a_strict and not b_strict) else rx.NONE
        )
    return rx.alt(rx.EPS, nonempty) if empty_ok else nonempty


def _and_nonzero(b: str, strict: bool) -> rx.Node:
    """Non-empty g with 0 < 0.g <(=) 0.b."""
    if not b:
        return rx.NONE
    b0 = int(b[0])
    parts = [rx.cat(rx.lit("0"), rx.cat(DIGITS0, NZDIGIT, DIGITS0))] if b0 > 0 else []
    if b0 > 1:
        parts.append(rx.cat(_digit_set(1, b0 - 1), DIGITS0))
    if b0 >= 1:
        if b[1:]:
            parts.append(rx.cat(rx.lit(b[0]), rx.opt(_digits_le(b[1:], strict))))
        elif not strict:
            parts.append(rx.cat(rx.lit(b[0]), rx.rep(rx.lit("0"), 0, None)))
    else:
        # b starts with 0: g must start with 0 and the rest is in (0, 0.b[1:]]
        parts.append(rx.cat(rx.lit("0"), _and_nonzero(b[1:], strict)))
    return rx.alt(*parts)


def _frac_suffix(node: rx.Node, empty_ok: bool) -> rx.Node:
    """The numeral suffix: '' (when allowed) or '.' followed by digits of ``node``."""
    dotted = rx.cat(DOT, node) if node != rx.NONE else rx.NONE
    return rx.alt(rx.EPS, dotted) if empty_ok else dotted


def plain_positive(
    a: Fraction,
    a_incl: bool,
    b: Fraction | None,
    b_incl: bool,
    integer: bool = False,
    lexical: bool = False,
) -> rx.Node:
    """Plain numerals (no sign, no exponent) with value in the interval, 0 <= a.

    ``integer``: integer values (``lexical``: written without a fraction).
    """
    ai, af = _dec_parts(a)
    if b is None:
        bi: int | None = None
        bf = ""
    else:
        bi, bf = _dec_parts(b)
    zeros = rx.rep(rx.lit("0"), 1, None)
    if integer:
        lo = ai if (af == "" and a_incl) else ai + 1
        if b is None:
            hi: int | None = None
        else:
            assert bi is not None  # b is not None
            hi = bi if (bf != "" or b_incl) else bi - 1
        if lexical:
            return int_range(lo, hi)
        return rx.cat(int_range(lo, hi), rx.opt(rx.cat(DOT, zeros)))
    parts = []
    if bi is not None and ai == bi:
        # same integer part: fraction in range
        if af == bf and not (a_incl and b_incl):
            return rx.NONE
        frac = _digits_between(af, not a_incl, bf, not b_incl)
        empty_ok = af == "" and a_incl
        parts.append(rx.cat(int_range(ai, ai), _frac_suffix(frac, empty_ok)))
        return rx.alt(*parts)
    # integer part == ai
    empty_ok = af == "" and a_incl
    parts.append(rx.cat(int_range(ai, ai), _frac_suffix(_digits_ge(af, not a_incl), empty_ok)))
    # strictly between
    mid_hi = None if bi is None else bi - 1
    if mid_hi is None or mid_hi >= ai + 1:
        parts.append(rx.cat(int_range(ai + 1, mid_hi), FRAC_OPT))
    if bi is not None:
        # integer part == bi: fraction <= bf
        if bf == "":
            if b_incl:
                parts.append(rx.cat(int_range(bi, bi), rx.opt(rx.cat(DOT, zeros))))
        else:
            parts.append(rx.cat(int_range(bi, bi), _frac_suffix(_digits_le(bf, not b_incl), True)))
    return rx.alt(*parts)


def _exponent_range(lo: int | None, hi: int | None) -> rx.Node:
    """Exponent suffixes ``[eE][+-]?digits`` whose value lies in [lo, hi]."""
    zeros = rx.rep(rx.lit("0"), 0, None)
    parts = []
    # non-negative exponents
    nlo = 0 if lo is None else max(lo, 0)
    if hi is None or hi >= nlo:
        body = int_range(nlo, hi)
        nonneg = rx.cat(zeros, body)
        parts.append(rx.cat(rx.opt(rx.lit("+")), nonneg))
        if nlo == 0:
            parts.append(rx.cat(rx.lit("-"), rx.rep(rx.lit("0"), 1, None)))
    # negative exponents: magnitude in [max(1, -hi), -lo]
    if lo is None or lo < 0:
        mlo = 1 if hi is None or hi >= -1 else -hi
        mhi = None if lo is None else -lo
        if mhi is None or mhi >= mlo:
            parts.append(rx.cat(rx.lit("-"), zeros, int_range(mlo, mhi)))
    if not parts:
        return rx.NONE
    return rx.cat(EXP_MARK, rx.alt(*parts))


def _floor_log10(v: Fraction) -> int:
    """The e with 10**e <= v < 10**(e+1) (v > 0)."""
    e = len(str(v.numerator)) - len(str(v.denominator))
    while Fraction(10) ** e > v:
        e -= 1
    while Fraction(10) ** (e + 1) <= v:
        e += 1
    return e


def exp_positive(a: Fraction, a_incl: bool, b: Fraction | None, b_incl: bool) -> rx.Node:
    """Exponent-form numerals ``m e x`` with m in [1,10), value in the interval, 0 <= a."""
    parts = []
    # exponents whose whole decade [10^e, 10^(e+1)) lies inside the interval
    if a == 0:
        e_lo: int | None = None
    else:
        ea = _floor_log10(a)
        e_lo = ea + 1 if (a != Fraction(10) ** ea or not a_incl) else ea
    if b is None:
        e_hi: int | None = None
    else:
        eb = _floor_log10(b)
        e_hi = eb - 1
    mant_any = rx.cat(NZDIGIT, FRAC_OPT)
    if e_lo is None or e_hi is None or e_lo <= e_hi:
        parts.append(rx.cat(mant_any, _exponent_range(e_lo, e_hi)))
    # boundary decades
    edges = set()
    if a != 0 and (e_lo is None or _floor_log10(a) < e_lo):
        edges.add(_floor_log10(a))
    if b is not None and (e_hi is None or _floor_log10(b) > e_hi):
        edges.add(_floor_log10(b))
    for e in sorted(edges):
        scale = Fraction(10) ** e
        lo, lo_i = max((a / scale, a_incl), (Fraction(1), True), key=lambda t: (t[0], not t[1]))
        if b is None:
            hi, hi_i = Fraction(10), False
        else:
            hi, hi_i = min((b / scale, b_incl), (Fraction(10), False), key=lambda t: (t[0], t[1]))
        if lo > hi or (lo == hi and not (lo_i and hi_i)):
            continue
        mant = plain_positive(lo, lo_i, hi, hi_i)
        parts.append(rx.cat(mant, _exponent_range(e, e)))
    return rx.alt(*parts)


def interval_regex(
    lo: Fraction | None,
    lo_incl: bool,
    hi: Fraction | None,
    hi_incl: bool,
    exp_forms: bool = True,
    integer: bool = False,
    lexical: bool = False,
) -> rx.Node:
    """All accepted numerals (PLAIN, plus EXP when ``exp_forms``) of values in the interval."""
    parts = []
    zero_in = (lo is None or lo < 0 or (lo == 0 and lo_incl)) and (
        hi is None or hi > 0 or (hi == 0 and hi_incl)
    )
    if zero_in:
        frac = rx.EPS if lexical else rx.opt(rx.cat(DOT, rx.rep(rx.lit("0"), 1, None)))
        parts.append(rx.cat(rx.opt(MINUS), rx.lit("0"), frac))
    # positive values: interval ∩ (0, ∞)
    if hi is None or hi > 0:
        if lo is None or lo < 0 or (lo == 0):
            a, ai = Fraction(0), False
        else:
            a, ai = lo, lo_incl
        parts.append(plain_positive(a, ai, hi, hi_incl, integer, lexical))
        if exp_forms and not integer:
            parts.append(exp_positive(a, ai, hi, hi_incl))
    # negative values: mirror
    if lo is None or lo < 0:
        if hi is None or hi > 0 or hi == 0:
            a, ai = Fraction(0), False
        else:
            a, ai = -hi, hi_incl
        b = None if lo is None else -lo
        bi = lo_incl
        neg = [plain_positive(a, ai, b, bi, integer, lexical)]
        if exp_forms and not integer:
            neg.append(exp_positive(a, ai, b, bi))
        parts.append(rx.cat(MINUS, rx.alt(*neg)))
    return rx.alt(*parts)


# --- multiples ----------------------------------------------------------------------------------


def _mult_parts(m: Fraction) -> tuple[int, int]:
    """m = c / 10**k with integer c; raises ValueError when m is not a finite decimal."""
    k = 0
    x = m
    while x.denominator != 1:
        x *= 10
        k += 1
        if k > 40:
            raise ValueError("multipleOf is not a finite decimal")
    return int(x), k


NUMBER_ALPHABET_SETS = [cs.single(c) for c in b"0123456789-.eE+"]


def number_alphabet(extra: list[rx.Node]) -> am.Alphabet:
    sets = list(NUMBER_ALPHABET_SETS)
    for n in extra:
        am.collect_sets(n, sets)
    return am.Alphabet(am.make_atoms(sets))


#: Most (remainder, trailing zeros) pairs a multipleOf automaton may track before minimizing: its
#: construction and minimization cost grow with them (about 0.25 s at 4096 here), while the
#: minimized automaton is often much smaller (multipleOf 4096: ~35 KB compiled).
MULT_MAX_RESIDUES = 8192


def mult_dfa(m: Fraction, alpha: am.Alphabet) -> am.DFA:
    """PLAIN numerals whose value is a multiple of m.

    m = c / 10**k. An integer m = c * 10**t (c not a multiple of 10) is tracked as the remainder
    mod c of the digits before the last (at most t) trailing zeros plus the number of those zeros:
    x is a multiple of c * 10**t exactly when it ends with t zeros and the digits before them are
    a multiple of c. That keeps 10**30 or 7 * 10**6 to c * (t + 1) states where the remainder of
    x mod m would need m.
    """
    c, k = _mult_parts(m)
    t = 0
    while k == 0 and c % 10 == 0:
        c //= 10
        t += 1
    if c * (t + 1) > MULT_MAX_RESIDUES or k > 30 or t > 30:
        raise am.AutomatonTooLarge("multipleOf too fine-grained")

    def int_step(r: int, z: int, d: int) -> tuple[str, int, int]:
        if d == 0:
            # a trailing zero; beyond t of them, the oldest joins the digits before them
            return ("int", r, z + 1) if z < t else ("int", (r * 10) % c, z)
        return ("int", (r * 10 ** (z + 1) + d) % c, 0)

    natoms = len(alpha.atoms)
    digit_atom = [alpha.atom_of(0x30 + d) for d in range(10)]
    minus_atom = alpha.atom_of(ord("-"))
    dot_atom = alpha.atom_of(ord("."))
    # states: 0 start, 1 after '-', dead, int states (r, leading-zero flag), frac states (r, pos)
    index: dict[Any, int] = {}
    trans: list[list[int]] = []
    accept: list[bool] = []

    def st(key: Any) -> int:
        if key not in index:
            index[key] = len(trans)
            trans.append([])
            accept.append(False)
            pending.append(key)
        return index[key]

    pending: list[Any] = []
    st("start")
    dead = st("dead")
    while pending:
        key = pending.pop()
        q = index[key]
        row = [dead] * natoms
        if key == "dead":
            trans[q] = row
            continue
        if key in ("start", "minus"):
            if key == "start":
                row[minus_atom] = st("minus")
            row[digit_atom[0]] = st(("zero",))
            for d in range(1, 10):
                row[digit_atom[d]] = st(int_step(0, 0, d))
        elif key[0] in ("zero", "int"):
            r, z = (0, t) if key[0] == "zero" else (key[1], key[2])
            accept[q] = z == t and (r * 10**k) % c == 0
            if key[0] == "int":
                for d in range(10):
                    row[digit_atom[d]] = st(int_step(r, z, d))
            # with t > 0 (so k == 0) only zeros follow the dot: the value is the integer's
            row[dot_atom] = st(("dot", r, 0) if t == 0 else ("dotz", accept[q]))
        elif key[0] in ("dotz", "fracz"):
            accept[q] = key[0] == "fracz" and key[1]
            row[digit_atom[0]] = st(("fracz", key[1]))
        elif key[0] == "dot":
            _, r, pos = key
            for d in range(10):
                if pos < k:
                    row[digit_atom[d]] = st(("frac", (r * 10 + d) % c, pos + 1))
                elif d == 0:
                    row[digit_atom[d]] = st(("frac", r, pos))
        elif key[0] == "frac":
            _, r, pos = key
            accept[q] = (r * 10 ** (k - pos)) % c == 0
            for d in range(10):
                if pos < k:
                    row[digit_atom[d]] = st(("frac", (r * 10 + d) % c, pos + 1))
                elif d == 0:
                    row[digit_atom[d]] = st(("frac", r, pos))
        trans[q] = row
        if len(trans) > am.MAX_DFA_STATES:
            raise am.AutomatonTooLarge("multipleOf automaton too large")
    return am.DFA(alpha, trans, accept, index["start"]).minimize()


# --- realization ---------------------------------------------------------------------------------


def realize(f: NumFormula, max_regex_size: int = 3000) -> rx.Node | am.DFA:
    """Regex (or DFA) over numerals for the formula; raises AutomatonTooLarge/ValueError."""
    if f == NUM_ALL:
        return GENERIC_NUMBER
    if f == NUM_NONE:
        return rx.NONE
    kinds: set = set()  # type: ignore[type-arg]
    _leaf_kinds(f, kinds)
    if kinds <= {"iv"}:
        ivs = _iv_set(f)
        return rx.alt(*(interval_regex(*iv) for iv in ivs))
    # fast path: int ∧ interval
    if f == ("int",):
        return rx.cat(rx.opt(MINUS), INT_PART, rx.opt(rx.cat(DOT, rx.rep(rx.lit("0"), 1, None))))
    if f in (("intlex",), ("intplain",)):
        return GENERIC_INTEGER
    if (
        f[0] == "and"
        and len(f[1]) == 2
        and f[1][0][0] == "iv"
        and f[1][1] in (("int",), ("intlex",), ("intplain",))
    ):
        _, lo, li, hi, hi_i = f[1][0]
        lexical = f[1][1] != ("int",)
        return interval_regex(lo, li, hi, hi_i, exp_forms=False, integer=True, lexical=lexical)
    # general case: automata over PLAIN numerals
    leaves: list[rx.Node] = [PLAIN_NUMBER]
    alpha = number_alphabet(leaves + [GENERIC_NUMBER])
    universe = am.DFA.from_regex(PLAIN_NUMBER, alpha)
    dfa = universe.product(_num_dfa(f, alpha), "and")
    node = dfa.to_regex(max_regex_size)
    return node if node is not None else dfa


def _num_dfa(f: NumFormula, alpha: am.Alphabet) -> am.DFA:
    t = f[0]
    if t == "all":
        return am.DFA.from_regex(PLAIN_NUMBER, alpha)
    if t == "none":
        return am.DFA.from_regex(rx.NONE, alpha)
    if t == "iv":
        return am.DFA.from_regex(interval_regex(f[1], f[2], f[3], f[4], exp_forms=False), alpha)
    if t == "int":
        return am.DFA.from_regex(
            rx.cat(rx.opt(MINUS), INT_PART, rx.opt(rx.cat(DOT, rx.rep(rx.lit("0"), 1, None)))),
            alpha,
        )
    if t in ("intlex", "intplain"):
        return am.DFA.from_regex(GENERIC_INTEGER, alpha)
    if t == "mult":
        return mult_dfa(f[1], alpha)
    if t == "not":
        return _num_dfa(f[1], alpha).complement()
    parts = [_num_dfa(x, alpha) for x in f[1]]
    acc = parts[0]
    for p in parts[1:]:
        acc = acc.product(p, t)
    return acc
