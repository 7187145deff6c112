"""Robustness through the Python API: adversarial grammars and schemas, documented limits and their
errors, bounded time and memory, and thread safety of mask filling with the GIL released.

Each adversarial case must compile and run within the documented bounds (``docs/limits.md``) or
raise the documented error (:class:`structout.errors.LimitExceededError`, ``GrammarError``,
``SchemaError``, ``UnsupportedSchemaError``), in bounded time and memory. Cases whose cost is
unknown in advance run in a subprocess under a watchdog and report their own peak RSS, so a
regression can neither hang the test session nor hide behind other tests' memory.

No test here asserts how long something takes (a shared CI machine makes such claims flaky): the
claims are limits and errors, counted in bytes, items and megabytes. The watchdog only turns a hang
into a failure. The times of these cases are measured by ``bench/limits_bench.py``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import llama3

import structout as so
from structout.errors import (
    GrammarError,
    LimitExceededError,
    SchemaError,
    StructoutError,
    UnsupportedSchemaError,
)

REPO = Path(__file__).resolve().parents[1]
#: Watchdog for one case run in a subprocess: a hang fails the test instead of stalling the
#: session (not a performance claim; cases take well under a second to a few seconds).
WATCHDOG_S = 300.0
MIB = 1 << 20
#: Errors a schema may legitimately raise instead of translating.
SCHEMA_ERRORS = (SchemaError, UnsupportedSchemaError, LimitExceededError)


def _bounded(code: str) -> dict[str, Any]:
    """Runs ``code`` in a fresh interpreter (repo on ``sys.path``) under the watchdog.

    The code must assign a JSON-serializable ``result``; returned with ``rss_mb`` (the child's
    peak RSS growth over its start-up). Raises ``AssertionError`` when the child hangs or
    crashes.
    """
    prog = (
        "import json, resource, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "import structout\n"
        "_rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        + textwrap.dedent(code)
        + "\n_out = {'result': result,\n"
        "        'rss_mb': (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - _rss0) / 1024}\n"
        "print('@@' + json.dumps(_out))\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", prog],
            check=False,
            capture_output=True,
            text=True,
            timeout=WATCHDOG_S,
            cwd=str(REPO),
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"hung: no result within {WATCHDOG_S:.0f} s") from None
    line = next((x for x in proc.stdout.splitlines() if x.startswith("@@")), None)
    assert proc.returncode == 0 and line is not None, (
        f"child failed (rc={proc.returncode}):\n{proc.stderr[-3000:]}"
    )
    out: dict[str, Any] = json.loads(line[2:])
    return out


def _rss_mb() -> float:
    """Current resident set size in MiB (Linux ``/proc``; elsewhere the peak, a weaker bound)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / MIB
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ============================================================================ KBNF grammars
def test_exponential_regex_hits_the_dfa_limit() -> None:
    with pytest.raises(LimitExceededError, match="dfa_size_limit") as e:
        so.compile_grammar('start ::= #"(a|b)*a(a|b){25}";')
    assert "1:11" in str(e.value) and "hint" in str(e.value)
    # A smaller limit is settable; a smaller regex compiles and runs.
    with pytest.raises(LimitExceededError, match="dfa_size_limit"):
        so.compile_grammar('start ::= #"(a|b)*a(a|b){25}";', dfa_size_limit=1 << 16)
    g = so.compile_grammar('start ::= #"(a|b)*a(a|b){12}";')
    assert g.memory_usage <= 32 * MIB
    assert g.accepts(b"b" * 10_000 + b"a" + b"b" * 12)
    assert not g.accepts(b"b" * 10_000 + b"a" + b"b" * 11)


def test_ambiguous_grammar_hits_the_item_limit() -> None:
    g = so.compile_grammar("start ::= S; S ::= S S | 'a';", max_items_per_set=300)
    r = g.recognizer()
    with pytest.raises(LimitExceededError, match="max_items_per_set"):
        for _ in range(5000):
            assert r.feed(b"a")
    n = len(r)
    assert 250 <= n <= 310 and r.is_complete(), "state unchanged by the failed byte"
    with pytest.raises(LimitExceededError):
        g.accepts(b"a" * 1000)
    # Through a matcher: the limit surfaces as an exception from accept or fill.
    vocab = so.Vocabulary.from_bytes([None, b"a", b"aaaa"], eos_token_ids=[0])
    cg = so.compile_kbnf("start ::= S; S ::= S S | 'a';", vocab, max_items_per_set=300)
    m = cg.matcher()
    bm = so.allocate_token_bitmask(1, vocab.size)
    with pytest.raises(LimitExceededError, match="max_items_per_set"):
        for _ in range(1000):
            assert m.accept_token(2)
            m.fill_next_token_bitmask(bm)
    m.rollback(20)
    m.fill_next_token_bitmask(bm)
    assert bm[0, 0] & 0b110


def test_ambiguous_grammar_with_default_limits_is_bounded() -> None:
    """The work per byte on `S ::= S S | 'a'` grows with the input (~k^2/2 completion steps at
    byte k); the default max_work_per_byte (2^18) stops it within a thousand bytes or so, long
    before it turns into a hang."""
    g = so.compile_grammar("start ::= S; S ::= S S | 'a';")
    r = g.recognizer()
    with pytest.raises(LimitExceededError, match=r"max_work_per_byte|max_items_per_set"):
        for _ in range(4_000):
            assert r.feed(b"a")
    n = len(r)
    assert r.is_complete() and 100 < n < 4_000, "state unchanged by the failed byte"
    # The bound is settable: a smaller one stops earlier.
    g = so.compile_grammar("start ::= S; S ::= S S | 'a';", max_work_per_byte=5_000)
    r = g.recognizer()
    with pytest.raises(LimitExceededError, match="max_work_per_byte"):
        for _ in range(100_000):
            assert r.feed(b"a")
    assert len(r) < n


def test_max_total_items_bounds_a_sequence() -> None:
    g = so.compile_grammar("start ::= '[' start ']' | 'a';", max_total_items=50_000)
    r = g.recognizer()
    with pytest.raises(LimitExceededError, match="max_total_items"):
        r.feed(b"[" * 1_000_000)
    assert len(r) == 0, "feed is atomic"


def test_many_alternatives_rules_and_deep_nesting() -> None:
    values = " | ".join(f"'\"value_{i}\"'" for i in range(10_000))
    g = so.compile_grammar(f"start ::= {values};")
    assert g.accepts(b'"value_9999"') and not g.accepts(b'"value_10000"')
    assert g.memory_usage < 64 * MIB
    names = " | ".join(f"p{i}" for i in range(5_000))
    rules = "\n".join(f'p{i} ::= \'"prop_{i}": \' #"[0-9]+";' for i in range(5_000))
    g = so.compile_grammar(f"start ::= '{{' ({names}) (', ' ({names}))* '}}';\n{rules}")
    assert g.accepts(b'{"prop_4999": 1, "prop_0": 22}')
    # Parenthesized nesting beyond 100 levels is a limit error; rule nesting is unbounded.
    with pytest.raises(LimitExceededError, match="nested deeper"):
        so.compile_grammar("start ::= " + "(" * 1000 + "'a'" + ")" * 1000 + ";")
    chain = "\n".join(f"r{i} ::= '[' r{i + 1} ']' | 'x';" for i in range(1000))
    g = so.compile_grammar(f"start ::= r0;\n{chain}\nr1000 ::= 'y';")
    assert g.accepts(b"[" * 1000 + b"y" + b"]" * 1000)


def test_huge_repetition_counts_and_megabyte_literals() -> None:
    with pytest.raises(LimitExceededError, match="max_repetition"):
        so.compile_grammar("start ::= 'a'{4294967295};")
    with pytest.raises(LimitExceededError, match="max_repetition"):
        so.compile_grammar("start ::= 'a'{11};", max_repetition=10)
    g = so.compile_grammar("start ::= (('a'{1000000}){1000000}){1000000};")
    assert g.memory_usage < 16 * MIB
    r = g.recognizer()
    assert r.feed(b"a" * 10_000) and not r.is_complete()
    mb = "a" * MIB
    g = so.compile_grammar(f"start ::= '{mb}';")
    assert g.accepts(mb.encode())


def test_nul_bytes_and_odd_text() -> None:
    for text in ["start ::= 'a\0b';", "start ::= 'a\\x00b';", 'start ::= #"a\0b";']:
        assert so.compile_grammar(text).accepts(b"a\0b")
    with pytest.raises(GrammarError, match="1:15"):
        so.compile_grammar("start ::= 'a' \0 'b';")
    with pytest.raises(GrammarError):
        so.compile_grammar("\0" * 1000)
    with pytest.raises(GrammarError):
        so.compile_grammar("")
    with pytest.raises(GrammarError, match="start"):
        so.compile_grammar("(* only a comment *)")


def test_trailing_backslash_is_a_grammar_error() -> None:
    # Fuzz finding (fixed in b983bc8): error recovery sliced past the end of the text; the panic
    # surfaced as StructoutError("internal engine error").
    for text in ["'''\\", 'r::=#"\\']:
        with pytest.raises(GrammarError):
            so.compile_grammar(text)


def test_item_limit_below_the_initial_set_is_not_a_panic() -> None:
    # Fuzz finding (fixed in b983bc8): Recognizer::reset expected the initial set to fit the item
    # limits and raised pyo3's PanicException (a BaseException) from recognizer()/matcher().
    # Either step may refuse with the limit's error; what it accepts it recognizes correctly.
    text = "start ::= A | B 'x'; A ::= 'a' | C; C ::= 'c' 'd'; B ::= 'b' | 'bb' start;"
    try:
        r = so.compile_grammar(text, max_items_per_set=1).recognizer()
        fed = r.feed(b"cd")
    except LimitExceededError as e:
        assert "max_items_per_set" in str(e)
    else:
        assert fed and r.is_complete()


def test_megabyte_regex_is_a_limit_error() -> None:
    # Fixed in b983bc8: the NFA budget error used to be a GrammarError ("invalid regex terminal").
    try:
        g = so.compile_grammar('start ::= #"' + "a" * MIB + '";')
    except LimitExceededError as e:
        assert "dfa_size_limit" in str(e)
    else:
        assert g.accepts(b"a" * MIB)


# ============================================================================ JSON Schemas
def _translate_and_compile(schema_code: str) -> dict[str, Any]:
    """In a subprocess: translate the schema built by ``schema_code`` (assigning ``schema``)
    and compile it; result = ``["ok", kbnf_chars, memory]`` or ``["error", class, message]``."""
    code = (
        textwrap.dedent(schema_code)
        + """
from structout.schema import to_kbnf
from structout.errors import StructoutError
try:
    k = to_kbnf(schema)
    g = structout.compile_grammar(k)
    result = ["ok", len(k), g.memory_usage]
except StructoutError as e:
    result = ["error", type(e).__name__, str(e)[:300]]
except Exception as e:
    result = ["undocumented", type(e).__name__, str(e)[:300]]
"""
    )
    return _bounded(code)


def _documented(out: dict[str, Any]) -> None:
    kind = out["result"][0]
    assert kind in ("ok", "error"), f"undocumented exception: {out['result']}"
    if kind == "error":
        assert out["result"][1] in (
            "SchemaError",
            "UnsupportedSchemaError",
            "LimitExceededError",
        ), out["result"]
    assert out["rss_mb"] < 2048, f"peak RSS grew by {out['rss_mb']:.0f} MB"


def test_schema_ten_thousand_enum_values() -> None:
    # Fixed: unions and alternations deduplicate with hash sets (was ~24 s, ~n^2.2).
    out = _translate_and_compile("schema = {'enum': [f'value_{i}' for i in range(10_000)]}")
    _documented(out)
    assert out["result"][0] == "ok", out["result"]


def test_schema_two_thousand_enum_values() -> None:
    out = _translate_and_compile("schema = {'enum': [f'value_{i}' for i in range(2_000)]}")
    _documented(out)
    assert out["result"][0] == "ok"


def test_schema_five_thousand_properties() -> None:
    out = _translate_and_compile(
        "schema = {'type': 'object', 'properties': "
        "{f'prop_{i}': {'type': 'integer'} for i in range(5_000)}}"
    )
    _documented(out)


def test_schema_nesting_200() -> None:
    out = _translate_and_compile(
        """
        schema = {'type': 'integer'}
        for _ in range(200):
            schema = {'type': 'object', 'properties': {'a': schema}, 'required': ['a']}
        """
    )
    _documented(out)


@pytest.mark.parametrize("kind", ["array", "object"])
def test_schema_nesting_1000(kind: str) -> None:
    # Fixed: registry indexing is iterative; compilation and emission stop at max_schema_depth.
    wrap = (
        "{'type': 'array', 'items': schema}"
        if kind == "array"
        else "{'type': 'object', 'properties': {'a': schema}, 'required': ['a']}"
    )
    out = _translate_and_compile(
        f"""
        schema = {{'type': 'integer'}}
        for _ in range(1000):
            schema = {wrap}
        """
    )
    _documented(out)
    status, cls, message = out["result"]
    assert (status, cls) == ("error", "LimitExceededError"), out["result"]
    step = "/items" if kind == "array" else "/properties/a"
    assert "max_schema_depth = 256" in message and f"at {step}{step}" in message, message
    assert "hint: raise it" in message
    # Raising the documented option translates it, and the engine compiles the grammar.
    out = _bounded(
        f"""
        from structout.schema import to_kbnf
        schema = {{'type': 'integer'}}
        for _ in range(1000):
            schema = {wrap}
        k = to_kbnf(schema, max_schema_depth=1001)
        g = structout.compile_grammar(k)
        doc = ('[' * 1000 + '1' + ']' * 1000) if {kind!r} == 'array' else (
            '{{"a": ' * 1000 + '1' + '}}' * 1000
        )
        result = [g.accepts(doc.encode()), g.accepts(doc.replace('1', '1.5').encode())]
        """
    )
    assert out["result"] == [True, False], out["result"]


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"$ref": "#"},
        {"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["x"]},
        {"type": "array", "items": {"$ref": "#"}, "minItems": 1},
        {"allOf": [{"$ref": "#"}]},
        {"anyOf": [{"$ref": "#/anyOf/0"}]},
    ],
    ids=["a-b-cycle", "self", "required-self", "nonempty-array-self", "allof-self", "anyof-self"],
)
def test_ref_cycles_without_base_case(schema: dict[str, Any]) -> None:
    out = _translate_and_compile(f"schema = {schema!r}")
    _documented(out)
    assert out["result"][0] == "error", "a schema with no finite instance cannot translate"


def test_ref_cycle_with_base_case_translates() -> None:
    from structout.schema import to_kbnf

    k = to_kbnf({"type": "object", "properties": {"x": {"$ref": "#"}}})
    g = so.compile_grammar(k)
    assert g.accepts(b'{"x": {"x": {}}}') and g.accepts(b"{}")


def test_schema_megabyte_pattern() -> None:
    # Fixed: patterns longer than max_pattern_length (default 16,384) fail fast; shorter ones
    # translate in linear time (terminal chunking was quadratic: 1 MiB took ~430 s).
    out = _translate_and_compile("schema = {'type': 'string', 'pattern': 'a' * (1 << 20)}")
    _documented(out)
    status, cls, message = out["result"]
    assert (status, cls) == ("error", "LimitExceededError"), out["result"]
    assert "max_pattern_length = 16384" in message and "at /pattern" in message, message
    assert out["rss_mb"] < 256, out
    # Raising the option translates longer patterns (linear time: 256 KiB in ~2 s).
    out = _bounded(
        """
        from structout.schema import to_kbnf
        k = to_kbnf({'type': 'string', 'pattern': 'a' * (1 << 18)}, max_pattern_length=1 << 18)
        result = len(k)
        """
    )
    assert out["result"] > 1 << 18


@pytest.mark.parametrize(
    "schema, error",
    [
        ({"type": "string", "pattern": "^(a|b)*a(a|b){25}$"}, LimitExceededError),
        ({"type": "string", "maxLength": 10**12}, LimitExceededError),
        ({"type": "array", "minItems": 10**9}, LimitExceededError),
    ],
    ids=["exponential-pattern", "huge-maxLength", "huge-minItems"],
)
def test_schema_limits(schema: dict[str, Any], error: type) -> None:
    from structout.schema import to_kbnf

    with pytest.raises(error):
        so.compile_grammar(to_kbnf(schema))


@pytest.mark.parametrize("bad", [3, 2.5, [1, 2], "not json {", b"{}", object()])
def test_schema_that_is_not_a_schema(bad: Any) -> None:
    from structout.schema import to_kbnf

    with pytest.raises((SchemaError, UnsupportedSchemaError, TypeError)) as e:
        to_kbnf(bad)
    assert isinstance(e.value, (StructoutError, TypeError))
    assert str(e.value)


# ============================================================================ threads
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
        },
    },
    "required": ["name", "age"],
}
DOCS = [
    {"name": "Ada", "age": 36, "tags": ["math", "engines"]},
    {"name": "Grace Hopper", "age": 85, "address": {"city": "Arlington", "zip": "22201"}},
    {"name": "é 日本 😀", "age": 0, "tags": []},
    {"name": "", "age": 123456, "tags": ["a", "b", "c"], "address": {}},
]


def _masks_along(cg: Any, ids: list[int], vocab_size: int) -> np.ndarray:
    m = cg.matcher()
    out = np.zeros((len(ids) + 1, cg.mask_words), dtype=np.int32)
    for k, t in enumerate(ids):
        m.fill_next_token_bitmask(out, k)
        assert m.accept_token(t), f"token {t} refused at {k}"
    m.fill_next_token_bitmask(out, len(ids))
    return out


def test_eight_python_threads_fill_masks_identically() -> None:
    """One compiled grammar (Llama 3 vocabulary), 8 threads with their own matchers filling masks
    along real documents concurrently: every mask equals the single-threaded one."""
    tok, vocab = llama3()
    from structout.schema import translate

    tr = translate(SCHEMA)
    cg = so.compile_kbnf(tr.kbnf, vocab)
    seqs = [tok.encode(tr.dumps(d), add_special_tokens=False).ids for d in DOCS]
    expected = [_masks_along(cg, ids, vocab.size) for ids in seqs]
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(k: int) -> None:
        try:
            barrier.wait()
            for rep in range(3):
                s = (k + rep) % len(seqs)
                got = _masks_along(cg, seqs[s], vocab.size)
                np.testing.assert_array_equal(got, expected[s], err_msg=f"thread {k} doc {s}")
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    assert not errors, errors[0]
    # The batch call (native threads) gives the same rows.
    ms = []
    for ids in seqs:
        m = cg.matcher()
        for t in ids[:5]:
            assert m.accept_token(t)
        ms.append(m)
    bm = so.allocate_token_bitmask(len(ms), vocab.size)
    so.fill_next_token_bitmasks(ms, bm, num_threads=8)
    for i in range(len(seqs)):
        np.testing.assert_array_equal(bm[i], expected[i][5])


def _python_progress_during(call: Any) -> tuple[int, float]:
    """Runs ``call()`` while a Python thread counts loop iterations; returns how many iterations
    happened strictly inside the call's time window (excluding 10 % margins) and its duration."""
    stamps: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            stamps.append(time.perf_counter())

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    call()
    t1 = time.perf_counter()
    stop.set()
    t.join()
    lo, hi = t0 + 0.1 * (t1 - t0), t1 - 0.1 * (t1 - t0)
    return sum(1 for s in stamps if lo <= s <= hi), t1 - t0


def test_gil_is_released_during_mask_filling() -> None:
    """While native code fills masks, another Python thread keeps running (it could not if the
    GIL were held for the whole call)."""
    _, vocab = llama3()
    cg = so.compile_kbnf(so.builtin_grammar("json"), vocab)
    # Inside a JSON string almost every token is allowed: the most expensive masks.
    ms = []
    for _ in range(64):
        m = cg.matcher()
        assert m.accept_bytes(b'{"key": "some text')
        ms.append(m)
    bm = so.allocate_token_bitmask(len(ms), vocab.size)
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        # Repeat the batch until one call lasts long enough to observe (masks here take well
        # under a microsecond each when cached: a short call gives the other thread no slot on a
        # busy machine).
        reps = 1
        while True:

            def batch(reps: int = reps) -> None:
                for _ in range(reps):
                    so.fill_next_token_bitmasks(ms, bm, num_threads=1)

            inside, dt = _python_progress_during(batch)
            if dt > 0.2 or reps >= 4**9:
                break
            reps *= 4
        assert inside > 0, f"no Python progress during a {dt * 1000:.0f} ms native call"

        def singles(reps: int = reps) -> None:
            for _ in range(reps):
                for m in ms:
                    m.fill_next_token_bitmask(bm, 0)

        # Single fills release the GIL too, but re-acquire it between calls: only check that the
        # other thread made progress overall.
        inside, dt = _python_progress_during(singles)
        assert inside > 0
    finally:
        sys.setswitchinterval(old)


# ============================================================================ long generations
@pytest.mark.parametrize(
    "grammar, piece",
    [
        ("start ::= except!('\\x00');", b"word "),
        ("start ::= '[' (num (', ' num)*)? ']'; num ::= #\"-?[0-9]{1,6}\";", b"123456, "),
    ],
    ids=["except-nul", "json-number-array"],
)
def test_long_generation_memory(grammar: str, piece: bytes) -> None:
    """100,000 accepted steps into an open-ended grammar with an *unbounded* rollback window: the
    matcher's memory grows linearly with the bytes accepted (one Earley set per byte, see
    docs/limits.md); measured and bounded. With ``max_rollback_tokens`` memory stays flat
    (tests/test_long_generation.py)."""
    toks: list[bytes | None] = [None, b"[", piece, b"1", b" "]
    vocab = so.Vocabulary.from_bytes(toks, eos_token_ids=[0])
    cg = so.compile_kbnf(grammar, vocab)
    m = cg.matcher()
    if grammar.startswith("start ::= '['"):
        assert m.accept_token(1)
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    bm = so.allocate_token_bitmask(1, vocab.size)
    for step in range(100_000):
        if step % 10_000 == 0:
            m.fill_next_token_bitmask(bm)
            assert bm[0, 0] & 0b100, "the piece stays allowed"
        assert m.accept_token(2)
    dt = time.perf_counter() - t0
    n_bytes = m.num_bytes
    grew = _rss_mb() - rss0
    print(
        f"\n{grammar[:30]}: 100k tokens, {n_bytes} bytes in {dt:.1f} s; "
        f"peak RSS +{grew:.0f} MB ({grew * MIB / n_bytes:.0f} B per byte)"
    )
    assert n_bytes == 100_000 * len(piece) + (1 if grammar.startswith("start ::= '['") else 0)
    # Linear, about 44 bytes of recognizer state per byte today; bound it generously.
    assert grew < 256, f"peak RSS grew {grew:.0f} MB for {n_bytes} bytes"
    m.rollback(100_000)
    assert m.num_bytes <= 1


def test_docs_limits_lists_every_option() -> None:
    doc = (REPO / "docs" / "limits.md").read_text(encoding="utf-8")
    from structout.limits import Limits

    # Every field of structout.Limits, plus the options that live elsewhere.
    others = ["max_rollback_tokens", "MAX_NESTING", "MAX_PATTERN_NESTING"]
    for name in [*Limits.__dataclass_fields__, *others]:
        assert f"`{name}`" in doc, name
    assert os.path.exists(REPO / ".ci" / "fuzz.sh")
