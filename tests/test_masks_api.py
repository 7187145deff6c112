"""The token-mask API: matcher operations against replay from scratch, forced bytes, batch fills,
applying bitmasks, argument validation and the compiled-grammar cache.

Property tests (hypothesis) drive matchers with random sequences of accept / accept_bytes /
rollback / fork / reset / rejected tokens / EOS over random valid JSON documents, and compare
every state with a fresh matcher that replays the same steps: same mask, ``can_finish``,
``is_finished``, ``forced_bytes``, ``num_tokens`` and ``num_bytes``.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import uuid
from collections.abc import Sequence
from typing import Any, Union

import numpy as np
import pytest
from conftest import has_module, llama3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structout as so
from structout.errors import GrammarError, StructoutError

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: A grammar with long forced runs, a shared prefix ("alpha" / "alphabet") and recursion.
RECORD = r"""start ::= '{"name": ' str ', "tags": [' [ str { ', ' str } ] '], "kind": ' kind
    ', "child": ' ( 'null' | start ) '}' ;
kind ::= '"alpha"' | '"alphabet"' | '"beta"' ;
str ::= #"\"[a-z]{0,8}\"" ;"""

JSON = so.builtin_grammar("json")

Step = Union[tuple[str, int], tuple[str, bytes]]


# ----------------------------------------------------------------------------- vocabularies
def small_vocab() -> Any:
    """All 256 single bytes (so any text can be tokenized), JSON-ish pairs and words, multi-byte
    UTF-8, duplicates, EOS (id 0), another special (id 1) and padding."""
    toks: list[bytes | None] = [None, None]
    toks += [bytes([b]) for b in range(256)]
    alpha = [c.encode() for c in '{}[]":, \nabeltnru0159-.\\']
    toks += [a + b for a in alpha for b in alpha]
    toks += [
        b"true",
        b"false",
        b"null",
        b'": "',
        b'", "',
        b'{"',
        b'"}',
        b'"name": "',
        b'"alpha"',
        b'"alphabet"',
        b"alpha",
        b"bet",
        b"hello world",
        b"\\u00e9",
        "é".encode(),
        "日本語".encode(),
        "😀".encode(),
        b"a",  # duplicate
    ]
    return so.Vocabulary.from_bytes(toks, eos_token_ids=[0], vocab_size=len(toks) + 5)


VOCABS: dict[str, Any] = {}


def get_vocab(name: str) -> Any:
    if name not in VOCABS:
        if name == "small":
            VOCABS[name] = small_vocab()
        else:
            VOCABS[name] = llama3()[1]
    return VOCABS[name]


class TokenTable:
    """Token ids by their bytes (text tokens only), to pick tokens that spell a document."""

    def __init__(self, vocab: Any) -> None:
        self.vocab = vocab
        self.by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(vocab.all_token_bytes()):
            if b and not vocab.is_special(i):
                self.by_bytes.setdefault(b, []).append(i)
        self.max_len = max(len(b) for b in self.by_bytes)

    def spelling(self, rest: bytes, limit: int = 24) -> list[int]:
        """Ids whose bytes are a non-empty prefix of ``rest``."""
        out: list[int] = []
        for n in range(1, min(len(rest), self.max_len, limit) + 1):
            out.extend(self.by_bytes.get(rest[:n], ()))
        return out


TABLES: dict[str, TokenTable] = {}


def table(name: str) -> TokenTable:
    if name not in TABLES:
        TABLES[name] = TokenTable(get_vocab(name))
    return TABLES[name]


# ----------------------------------------------------------------------------- helpers
def mask_of(m: Any, vocab_size: int) -> np.ndarray:
    bm = so.allocate_token_bitmask(1, vocab_size)
    bm[:] = -1
    m.fill_next_token_bitmask(bm)
    return bm[0].copy()


def snapshot(m: Any, vocab_size: int) -> dict[str, Any]:
    """Everything observable about a matcher's state."""
    n_bytes = m.num_bytes
    forced = m.forced_bytes()
    assert m.num_bytes == n_bytes, "forced_bytes() changed the state"
    return {
        "mask": mask_of(m, vocab_size).tobytes(),
        "can_finish": m.can_finish(),
        "is_finished": m.is_finished(),
        "forced": forced,
        "num_tokens": m.num_tokens,
        "num_bytes": m.num_bytes,
    }


def replay(g: Any, steps: Sequence[Step], eos: int) -> Any:
    m = g.matcher()
    for kind, value in steps:
        if kind == "token":
            assert isinstance(value, int)
            assert m.accept_token(value), f"replay: token {value} rejected"
        elif kind == "bytes":
            assert isinstance(value, bytes)
            assert m.accept_bytes(value), f"replay: bytes {value!r} rejected"
        else:
            assert m.accept_token(eos), "replay: EOS rejected"
    return m


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=10,
)


def dumps(value: Any, style: int) -> bytes:
    opts: list[dict[str, Any]] = [
        {},
        {"separators": (",", ":"), "ensure_ascii": False},
        {"indent": 2, "ensure_ascii": False},
        {"indent": "\t"},
    ]
    return json.dumps(value, **opts[style % 4]).encode()


record_values = st.recursive(
    st.none(),
    lambda child: st.fixed_dictionaries(
        {
            "name": st.from_regex(r"[a-z]{0,8}", fullmatch=True),
            "tags": st.lists(st.from_regex(r"[a-z]{0,8}", fullmatch=True), max_size=3),
            "kind": st.sampled_from(["alpha", "alphabet", "beta"]),
            "child": child,
        }
    ),
    max_leaves=3,
).filter(lambda v: v is not None)


def dumps_record(v: Any) -> bytes:
    """JSON text of a record in the grammar's key order."""

    def ordered(r: Any) -> Any:
        if r is None:
            return None
        return {
            k: ordered(r[k]) if k == "child" else r[k] for k in ("name", "tags", "kind", "child")
        }

    return json.dumps(ordered(v)).encode()


# ----------------------------------------------------------------------------- replay properties
OPS = ["token", "token", "token", "bytes", "rollback", "fork", "reset", "reject", "eos"]


def _run_ops(vocab_name: str, grammar: str, text: bytes, data: Any) -> None:
    vocab = get_vocab(vocab_name)
    tab = table(vocab_name)
    eos = vocab.eos_token_ids[0]
    g = so.compile_kbnf(grammar, vocab)
    m = g.matcher()
    steps: list[Step] = []
    forks: list[tuple[Any, list[Step]]] = []

    def pos() -> int:
        return sum(
            len(v) if k == "bytes" else len(vocab.token_bytes(v)) for k, v in steps if k != "eos"
        )

    for _ in range(data.draw(st.integers(1, 25), label="n_ops")):
        op = data.draw(st.sampled_from(OPS), label="op")
        finished = bool(steps) and steps[-1][0] == "eos"
        rest = text[pos() :]
        if op == "token" and rest:
            t = data.draw(st.sampled_from(tab.spelling(rest)), label="token")
            ok = m.accept_token(t)
            assert ok == (not finished), f"accept_token({t}) after {text[: pos()]!r}"
            if ok:
                steps.append(("token", t))
        elif op == "bytes" and rest:
            n = data.draw(st.integers(1, min(len(rest), 12)), label="n_bytes")
            ok = m.accept_bytes(rest[:n])
            assert ok == (not finished), f"accept_bytes({rest[:n]!r}) after {text[: pos()]!r}"
            if ok:
                steps.append(("bytes", rest[:n]))
        elif op == "rollback":
            k = data.draw(st.integers(0, len(steps) + 2), label="rollback")
            m.rollback(k)
            del steps[max(0, len(steps) - k) :]
        elif op == "fork":
            forks.append((m, list(steps)))
            m = m.fork()
        elif op == "reset":
            m.reset()
            steps = []
        elif op == "reject":
            mask = np.unpackbits(mask_of(m, vocab.size).view(np.uint8), bitorder="little")
            banned = np.flatnonzero(mask[: vocab.size] == 0)
            if banned.size:
                t = int(banned[data.draw(st.integers(0, banned.size - 1), label="banned")])
                before = snapshot(m, vocab.size)
                assert not m.accept_token(t), f"masked-out token {t} accepted"
                assert snapshot(m, vocab.size) == before, "a rejected token changed the state"
        elif op == "eos":
            can = m.can_finish()
            assert m.accept_token(eos) == can
            if can:
                steps.append(("eos", eos))
                assert m.is_finished() and not m.can_finish()
                assert not mask_of(m, vocab.size).any()
        assert snapshot(m, vocab.size) == snapshot(replay(g, steps, eos), vocab.size), (
            f"state after {op} differs from replay of {steps!r}"
        )
    # Operations on forks never touched the matchers they were forked from.
    for old, old_steps in forks:
        assert snapshot(old, vocab.size) == snapshot(replay(g, old_steps, eos), vocab.size)


@SETTINGS
@given(value=json_values, style=st.integers(0, 3), data=st.data())
def test_ops_match_replay_small_vocab(value: Any, style: int, data: Any) -> None:
    _run_ops("small", JSON, dumps(value, style), data)


@settings(SETTINGS, max_examples=10)
@given(value=json_values, style=st.integers(0, 3), data=st.data())
def test_ops_match_replay_llama3(value: Any, style: int, data: Any) -> None:
    _run_ops("llama3", JSON, dumps(value, style), data)


@SETTINGS
@given(value=record_values, data=st.data())
def test_ops_match_replay_record_grammar(value: Any, data: Any) -> None:
    _run_ops("small", RECORD, dumps_record(value), data)


def test_rollback_and_reset_edge_cases() -> None:
    vocab = get_vocab("small")
    g = so.compile_kbnf(JSON, vocab)
    m = g.matcher()
    fresh = snapshot(g.matcher(), vocab.size)
    m.rollback(0)
    m.rollback(5)  # more than accepted: back to the start
    assert snapshot(m, vocab.size) == fresh
    assert m.accept_bytes(b"[1") and m.accept_bytes(b"]")
    assert m.num_tokens == 2 and m.num_bytes == 3 and m.can_finish()
    assert m.accept_token(0) and m.is_finished()
    assert not m.accept_bytes(b" ") and not m.accept_token(0)
    m.rollback(1)  # un-finish
    assert not m.is_finished() and m.can_finish() and m.accept_bytes(b" ")
    m.reset()
    assert snapshot(m, vocab.size) == fresh
    # A rejected step leaves the state unchanged.
    assert not m.accept_bytes(b"[}") and m.num_bytes == 0 and m.num_tokens == 0


def test_rollback_zero_after_eos_keeps_finished() -> None:
    vocab = get_vocab("small")
    m = so.compile_kbnf("start ::= 'a' ;", vocab).matcher()
    assert m.accept_bytes(b"a") and m.accept_token(0)
    before = snapshot(m, vocab.size)
    assert before["is_finished"] and not before["can_finish"]
    m.rollback(0)
    assert snapshot(m, vocab.size) == before


# ----------------------------------------------------------------------------- forced bytes
def _feedable(rec: Any, n: int) -> list[int]:
    """Bytes the byte-level recognizer accepts next, by trying all 256 (not allowed_bytes())."""
    out = []
    for b in range(256):
        if rec.feed(bytes([b])):
            out.append(b)
            rec.rollback_to(n)
    return out


def _check_forced(grammar: str, text: bytes, positions: Sequence[int]) -> None:
    vocab = get_vocab("small")
    g = so.compile_kbnf(grammar, vocab)
    byte_grammar = so.compile_grammar(grammar)
    assert byte_grammar.accepts(text)
    for p in positions:
        m = g.matcher()
        assert m.accept_bytes(text[:p])
        forced = m.forced_bytes()
        assert text[p:].startswith(forced), f"forced {forced!r} is not a prefix of {text[p:]!r}"
        rec = byte_grammar.recognizer()
        assert rec.feed(text[:p])
        for j, b in enumerate(forced):
            n = p + j
            assert not rec.is_complete(), f"EOS possible inside forced bytes at {text[:n]!r}"
            assert _feedable(rec, n) == [b], f"several continuations inside forced at {text[:n]!r}"
            assert rec.feed(bytes([b]))
        # Maximal: afterwards the grammar may end or branch.
        end = p + len(forced)
        assert rec.is_complete() or len(_feedable(rec, end)) != 1, (
            f"forced bytes {forced!r} after {text[:p]!r} stop early"
        )
        # Jump-forward: accepting the forced bytes lands where the text goes.
        assert m.accept_bytes(forced) and m.num_bytes == end


@SETTINGS
@given(value=record_values, data=st.data())
def test_forced_bytes_record(value: Any, data: Any) -> None:
    text = dumps_record(value)
    positions = data.draw(st.lists(st.integers(0, len(text)), min_size=1, max_size=6))
    _check_forced(RECORD, text, positions)


@SETTINGS
@given(value=json_values, style=st.integers(0, 3), data=st.data())
def test_forced_bytes_json(value: Any, style: int, data: Any) -> None:
    text = dumps(value, style)
    positions = data.draw(st.lists(st.integers(0, len(text)), min_size=1, max_size=6))
    _check_forced(JSON, text, positions)


def test_forced_bytes_examples() -> None:
    vocab = get_vocab("small")
    g = so.compile_kbnf(RECORD, vocab)
    m = g.matcher()
    assert m.forced_bytes() == b'{"name": "'
    assert m.accept_bytes(b'{"name": "x", "tags": []')
    assert m.forced_bytes() == b', "kind": "'
    assert m.accept_bytes(b', "kind": "alpha')
    assert m.forced_bytes() == b""  # '"' or 'bet'
    assert m.accept_bytes(b"b")
    assert m.forced_bytes() == b'et", "child": '
    j = so.compile_kbnf(JSON, vocab).matcher()
    assert j.accept_bytes(b"[tr") and j.forced_bytes() == b"ue"
    assert j.accept_bytes(b"ue]") and j.forced_bytes() == b""  # complete: EOS or whitespace


# ----------------------------------------------------------------------------- batch fills
def _matchers_at_states(data: Any, n: int) -> list[Any]:
    vocab = get_vocab("small")
    gs = [so.compile_kbnf(JSON, vocab), so.compile_kbnf(RECORD, vocab)]
    out = []
    for _ in range(n):
        which = data.draw(st.integers(0, 1), label="grammar")
        if which == 0:
            text = dumps(data.draw(json_values, label="json"), data.draw(st.integers(0, 3)))
        else:
            text = dumps_record(data.draw(record_values, label="record"))
        m = gs[which].matcher()
        cut = data.draw(st.integers(0, len(text)), label="cut")
        assert m.accept_bytes(text[:cut])
        if cut == len(text) and data.draw(st.booleans(), label="eos"):
            assert m.accept_token(vocab.eos_token_ids[0])
        out.append(m)
    return out


@SETTINGS
@given(data=st.data())
def test_batch_fill_equals_single_fills(data: Any) -> None:
    vocab = get_vocab("small")
    n = data.draw(st.integers(1, 6), label="n")
    extra = data.draw(st.integers(0, 3), label="extra rows")
    matchers = _matchers_at_states(data, n)
    rows_total = n + extra
    perm = data.draw(st.permutations(range(rows_total)), label="rows")[:n]
    threads = data.draw(st.sampled_from([None, 1, 2, 3, 8]), label="threads")
    words = (vocab.size + 31) // 32
    sentinel = np.arange(rows_total * words, dtype=np.int32).reshape(rows_total, words)
    batch = sentinel.copy()
    use_rows = data.draw(st.booleans(), label="pass rows") or perm != list(range(n))
    so.fill_next_token_bitmasks(
        matchers, batch, rows=perm if use_rows else None, num_threads=threads
    )
    expect = sentinel.copy()
    for m, r in zip(matchers, perm):
        m.fill_next_token_bitmask(expect, row=r)
    np.testing.assert_array_equal(batch, expect)


def test_batch_fill_threads_and_torch() -> None:
    vocab = get_vocab("small")
    g = so.compile_kbnf(JSON, vocab)
    texts = [b'{"a": [1, 2', b"[", b'"x', b"", b"tr", b"-0.5e", b'{"k": "v"}', b"[[[[[[[[["]
    matchers = []
    for t in texts * 4:
        m = g.matcher()
        assert m.accept_bytes(t)
        matchers.append(m)
    expect = so.allocate_token_bitmask(len(matchers), vocab.size)
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(expect, row=i)
    for threads in (1, 2, 4, None):
        bm = so.allocate_token_bitmask(len(matchers), vocab.size)
        so.fill_next_token_bitmasks(matchers, bm, num_threads=threads)
        np.testing.assert_array_equal(bm, expect)
    if has_module("torch"):
        import torch

        t = torch.zeros(tuple(expect.shape), dtype=torch.int32)
        so.fill_next_token_bitmasks(matchers, t)
        np.testing.assert_array_equal(t.numpy(), expect)


def _json_matchers_and_masks(n: int) -> tuple[list[Any], np.ndarray]:
    """``n`` matchers of the JSON grammar at varied states, and their masks filled one by one."""
    vocab = get_vocab("small")
    g = so.compile_kbnf(JSON, vocab)
    texts = [b'{"a": [1, 2', b"[", b'"x', b"", b"tr", b"-0.5e", b'{"k": "v"}', b"[[[[[[[[["]
    matchers = []
    for i in range(n):
        m = g.matcher()
        assert m.accept_bytes(texts[i % len(texts)])
        matchers.append(m)
    expect = so.allocate_token_bitmask(n, vocab.size)
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(expect, row=i)
    return matchers, expect


def test_batch_fills_from_several_python_threads_at_once() -> None:
    """Batch calls that overlap (the worker pool serves one; the others run on their callers)
    each fill exactly their own rows."""
    jobs = [_json_matchers_and_masks(12 + k) for k in range(4)]
    errors: list[str] = []

    def work(k: int) -> None:
        matchers, expect = jobs[k]
        for _ in range(30):
            bm = np.zeros_like(expect)
            so.fill_next_token_bitmasks(matchers, bm, num_threads=3)
            if not np.array_equal(bm, expect):
                errors.append(f"thread {k}: rows differ")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a batch call hung"
    assert errors == []


def _fill_in_child(conn: Any) -> None:
    matchers, expect = _json_matchers_and_masks(16)
    bm = np.zeros_like(expect)
    so.fill_next_token_bitmasks(matchers, bm, num_threads=4)
    conn.send(bool(np.array_equal(bm, expect)))


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform"
)
def test_batch_fill_in_a_forked_child() -> None:
    """The pool's helper threads do not survive a fork: a child process gets its own pool."""
    matchers, expect = _json_matchers_and_masks(16)
    bm = np.zeros_like(expect)
    so.fill_next_token_bitmasks(matchers, bm, num_threads=4)  # the parent's helpers exist now
    np.testing.assert_array_equal(bm, expect)
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_fill_in_child, args=(child,))
    proc.start()
    proc.join(timeout=120)
    if proc.is_alive():
        proc.kill()
        pytest.fail("the batch call hung in the forked child")
    assert proc.exitcode == 0
    assert parent.recv() is True


def test_concurrent_fills_from_python_threads() -> None:
    """One compiled grammar, many matchers filled from Python threads at once (GIL released):
    results equal sequential fills."""
    vocab = get_vocab("small")
    g = so.compile_kbnf(JSON, vocab)
    prefixes = [b'{"a": [1, 2', b'"x', b"[tr", b'{"k": {"j": [', b"12", b" "]
    expect = []
    for p in prefixes:
        m = g.matcher()
        assert m.accept_bytes(p)
        expect.append(mask_of(m, vocab.size))
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(50):
                m = g.matcher()
                assert m.accept_bytes(prefixes[k])
                np.testing.assert_array_equal(mask_of(m, vocab.size), expect[k])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(prefixes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# ----------------------------------------------------------------------------- apply bitmask
def _bits(bm: np.ndarray, n: int) -> np.ndarray:
    bm2 = np.atleast_2d(bm)
    bits = np.unpackbits(np.ascontiguousarray(bm2).view(np.uint8), axis=-1, bitorder="little")
    out = np.zeros((bm2.shape[0], n), dtype=bool)
    w = min(n, bits.shape[1])
    out[:, :w] = bits[:, :w].astype(bool)
    return out


@SETTINGS
@given(
    batch=st.integers(1, 4),
    vocab=st.integers(1, 200),
    wider=st.integers(0, 40),
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from([np.float32, np.float64, np.float16]),
)
def test_apply_numpy(batch: int, vocab: int, wider: int, seed: int, dtype: Any) -> None:
    rng = np.random.default_rng(seed)
    bm = rng.integers(-(2**31), 2**31, size=(batch, (vocab + 31) // 32), dtype=np.int64)
    bm = bm.astype(np.int32)
    n = vocab + wider  # logits wider than the bitmask: the extra columns are disallowed
    logits = rng.standard_normal((batch, n)).astype(dtype)
    before = logits.copy()
    out = so.apply_token_bitmask_(logits, bm)
    assert out is logits
    allowed = _bits(bm, n)  # columns past 32 * words are disallowed
    np.testing.assert_array_equal(np.isneginf(logits), ~allowed)
    np.testing.assert_array_equal(logits[allowed], before[allowed])
    # One row: 1-D logits with a 1-D or a [1, words] bitmask.
    for row_mask in (bm[0], bm[:1]):
        one = before[0].copy()
        so.apply_token_bitmask_(one, row_mask)
        np.testing.assert_array_equal(np.isneginf(one), ~allowed[0])


@pytest.mark.skipif(not has_module("torch"), reason="torch not installed")
@SETTINGS
@given(
    batch=st.integers(1, 4),
    vocab=st.integers(1, 200),
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from(["float32", "bfloat16", "float16"]),
)
def test_apply_torch(batch: int, vocab: int, seed: int, dtype: str) -> None:
    import torch

    rng = np.random.default_rng(seed)
    bm = rng.integers(-(2**31), 2**31, size=(batch, (vocab + 31) // 32), dtype=np.int64)
    bm = bm.astype(np.int32)
    allowed = torch.from_numpy(_bits(bm, vocab))
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        logits = torch.randn(batch, vocab, dtype=getattr(torch, dtype), device=device)
        before = logits.clone()
        for mask in (bm, torch.from_numpy(bm)):
            logits = before.clone()
            assert so.apply_token_bitmask_(logits, mask) is logits
            got = torch.isneginf(logits.float()).cpu()
            assert torch.equal(got, ~allowed)
            assert torch.equal(logits[allowed.to(device)], before[allowed.to(device)])
        one = before[0].clone()
        so.apply_token_bitmask_(one, bm[0])
        assert torch.equal(torch.isneginf(one.float()).cpu(), ~allowed[0])


def test_apply_with_a_real_mask() -> None:
    vocab = get_vocab("small")
    m = so.compile_kbnf(JSON, vocab).matcher()
    assert m.accept_bytes(b'{"a": tr')
    bm = so.allocate_token_bitmask(1, vocab.size)
    m.fill_next_token_bitmask(bm)
    logits = np.zeros((1, vocab.size), dtype=np.float32)
    so.apply_token_bitmask_(logits, bm)
    ok = np.flatnonzero(np.isfinite(logits[0]))
    assert {vocab.token_bytes(int(i)) for i in ok} == {b"u", b"ue"}


# ----------------------------------------------------------------------------- invalid arguments
@pytest.fixture(scope="module")
def json_matcher() -> tuple[Any, Any, Any]:
    vocab = get_vocab("small")
    g = so.compile_kbnf(JSON, vocab)
    return vocab, g, g.matcher()


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((1, 20), np.int64),
        np.zeros((1, 20), np.uint32),
        np.zeros((1, 20), np.float32),
        np.zeros(20, np.int32),
        np.zeros((1, 1, 20), np.int32),
        [[0] * 20],
    ],
    ids=["int64", "uint32", "float32", "1-D", "3-D", "list"],
)
def test_fill_rejects_wrong_arrays(json_matcher: tuple[Any, Any, Any], bad: Any) -> None:
    m = json_matcher[2]
    with pytest.raises((TypeError, ValueError)):
        m.fill_next_token_bitmask(bad)
    if isinstance(bad, np.ndarray):
        with pytest.raises((TypeError, ValueError), match="int32"):
            so.fill_next_token_bitmasks([m], bad)


def test_fill_wrong_dtype_message_is_clear(json_matcher: tuple[Any, Any, Any]) -> None:
    _, _, m = json_matcher
    with pytest.raises((TypeError, ValueError), match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, 20), np.int64))


def test_fill_rejects_narrow_and_strided(json_matcher: tuple[Any, Any, Any]) -> None:
    _, g, m = json_matcher
    words = g.mask_words
    with pytest.raises(ValueError, match="allocate_token_bitmask"):
        m.fill_next_token_bitmask(np.zeros((1, words - 1), np.int32))
    with pytest.raises(ValueError, match="C-contiguous"):
        m.fill_next_token_bitmask(np.zeros((2, 2 * words), np.int32)[:, ::2])
    with pytest.raises(ValueError, match="C-contiguous"):
        so.fill_next_token_bitmasks([m], np.zeros((2, 2 * words), np.int32)[:, ::2])
    with pytest.raises(ValueError):
        so.fill_next_token_bitmasks([m], np.zeros((1, words - 1), np.int32))


def test_fill_rejects_fortran_order(json_matcher: tuple[Any, Any, Any]) -> None:
    vocab, g, m = json_matcher
    f = np.asfortranarray(np.zeros((2, g.mask_words), np.int32))
    try:
        m.fill_next_token_bitmask(f, row=1)
    except ValueError:
        return
    c = so.allocate_token_bitmask(2, vocab.size)
    m.fill_next_token_bitmask(c, row=1)
    np.testing.assert_array_equal(f, c)  # either rejected or correct


def test_fill_rejects_read_only(json_matcher: tuple[Any, Any, Any]) -> None:
    vocab, _, m = json_matcher
    ro = so.allocate_token_bitmask(1, vocab.size)
    ro.flags.writeable = False
    with pytest.raises((ValueError, TypeError)):
        m.fill_next_token_bitmask(ro)
    with pytest.raises((ValueError, TypeError)):
        so.fill_next_token_bitmasks([m], ro)
    assert not ro.any(), "nothing was written"


def test_rows_and_token_ids_out_of_range(json_matcher: tuple[Any, Any, Any]) -> None:
    vocab, _, m = json_matcher
    bm = so.allocate_token_bitmask(2, vocab.size)
    with pytest.raises(IndexError, match="row 2"):
        m.fill_next_token_bitmask(bm, row=2)
    with pytest.raises((IndexError, OverflowError)):
        m.fill_next_token_bitmask(bm, row=-1)
    for bad in (vocab.size, vocab.size + 100, -1, -(2**40)):
        with pytest.raises(IndexError, match="out of range"):
            m.accept_token(bad)
    with pytest.raises(OverflowError):
        m.accept_token(2**70)
    with pytest.raises(TypeError):
        m.accept_token("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        m.accept_token(1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        m.accept_bytes("[1]")  # type: ignore[arg-type]
    assert m.num_tokens == 0  # nothing was accepted by the failed calls


def test_batch_argument_errors(json_matcher: tuple[Any, Any, Any]) -> None:
    vocab, g, m = json_matcher
    m2 = g.matcher()
    bm = so.allocate_token_bitmask(2, vocab.size)
    with pytest.raises(ValueError, match="2 matchers but 1 rows"):
        so.fill_next_token_bitmasks([m, m2], bm, rows=[0])
    with pytest.raises(IndexError, match="used twice"):
        so.fill_next_token_bitmasks([m, m2], bm, rows=[1, 1])
    with pytest.raises(IndexError, match="out of range"):
        so.fill_next_token_bitmasks([m, m2], bm, rows=[0, 2])
    with pytest.raises(IndexError):
        so.fill_next_token_bitmasks([m, m2, g.matcher()], bm)
    with pytest.raises(ValueError, match="listed twice"):
        so.fill_next_token_bitmasks([m, m], bm)
    with pytest.raises(TypeError):
        so.fill_next_token_bitmasks([m, "matcher"], bm)
    with pytest.raises(TypeError):
        so.fill_next_token_bitmasks([m], [[0] * g.mask_words])
    so.fill_next_token_bitmasks([], bm)  # nothing to do is fine
    with pytest.raises(ValueError, match="positive"):
        so.allocate_token_bitmask(0, vocab.size)
    with pytest.raises(ValueError, match="positive"):
        so.allocate_token_bitmask(1, 0)


def test_grammar_and_vocab_argument_errors() -> None:
    vocab = get_vocab("small")
    with pytest.raises(TypeError, match="must be str"):
        so.compile_kbnf(b"start ::= 'a';", vocab)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        so.compile_kbnf(None, vocab)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        so.compile_grammar(b"start ::= 'a';")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        so.compile_grammar(3)  # type: ignore[arg-type]
    # A str that has no UTF-8 form (lone surrogate) cannot be grammar text.
    with pytest.raises(UnicodeEncodeError):
        so.compile_kbnf("start ::= '\ud800';", vocab)
    with pytest.raises(UnicodeEncodeError):
        so.compile_grammar("start ::= '\udcff';")
    for bad_vocab in ("vocab", None, 3, so._engine):
        with pytest.raises(TypeError, match=r"structout\.Vocabulary"):
            so.compile_kbnf("start ::= 'a';", bad_vocab)
    with pytest.raises(TypeError):
        so.compile_kbnf("start ::= 'a';", vocab, no_such_limit=1)
    with pytest.raises(TypeError, match=r"Vocabulary\.from_hf"):
        so.Vocabulary(3)
    with pytest.raises(KeyError, match="nope"):
        so.builtin_grammar("nope")
    with pytest.raises(GrammarError, match="1:17") as e:
        so.compile_kbnf("start ::= 'a' | ;", vocab)
    assert isinstance(e.value, StructoutError) and "hint" in str(e.value)
    with pytest.raises(GrammarError, match="start"):
        so.compile_kbnf("x ::= 'a';", vocab)
    assert so.compile_kbnf("x ::= 'a';", vocab, start="x").matcher().accept_bytes(b"a")


def test_native_vocabulary_accepted_too() -> None:
    """compile_kbnf takes the public Vocabulary or its native object; both share the cache key."""
    vocab = get_vocab("small")
    text = f"start ::= 'a' 'b' ; (* {uuid.uuid4().hex} *)"
    g1 = so.compile_kbnf(text, vocab)
    before = so.grammar_cache_stats()
    g2 = so.compile_kbnf(text, vocab._native)
    assert so.grammar_cache_stats()["hits"] == before["hits"] + 1
    assert g1.vocab_size == g2.vocab_size == vocab.size


def test_apply_rejects_unsupported_logits() -> None:
    with pytest.raises(TypeError):
        so.apply_token_bitmask_([0.0] * 64, np.zeros((1, 2), np.int32))


# ----------------------------------------------------------------------------- compiled grammar
def test_compiled_grammar_properties() -> None:
    vocab = get_vocab("small")
    g = so.compile_kbnf(JSON, vocab)
    assert g.vocab_size == vocab.size
    assert g.mask_words == (vocab.size + 31) // 32
    assert list(g.eos_token_ids) == vocab.eos_token_ids
    assert "start" in g.lnf()
    assert so.allocate_token_bitmask(3, g.vocab_size).shape == (3, g.mask_words)
    assert isinstance(so.__version__, str) and isinstance(so._engine.__version__, str)


def test_compile_cache_hits_and_eviction() -> None:
    vocab = get_vocab("small")
    other = so.Vocabulary.from_bytes([None, b"a", b"b"], eos_token_ids=[0])
    capacity = so.grammar_cache_stats()["capacity"]
    tag = uuid.uuid4().hex
    text = f"start ::= 'a' | 'b' ; x ::= 'a' ; (* {tag} *)"
    try:
        s0 = so.grammar_cache_stats()
        so.compile_kbnf(text, vocab)
        s1 = so.grammar_cache_stats()
        assert s1["misses"] == s0["misses"] + 1 and s1["hits"] == s0["hits"]
        g2 = so.compile_kbnf(text, vocab)
        s2 = so.grammar_cache_stats()
        assert s2["hits"] == s1["hits"] + 1 and s2["misses"] == s1["misses"]
        assert g2.matcher().accept_bytes(b"a")
        # Other vocabulary, start symbol or limits: separate entries.
        so.compile_kbnf(text, other)
        so.compile_kbnf(text, vocab, start="x")
        so.compile_kbnf(text, vocab, max_repetition=1000)
        s3 = so.grammar_cache_stats()
        assert s3["misses"] == s2["misses"] + 3 and s3["hits"] == s2["hits"]
        # Errors are not cached: the second attempt fails the same way.
        for _ in range(2):
            with pytest.raises(GrammarError, match="1:11"):
                so.compile_kbnf(f"start ::= ; (* {tag} *)", vocab)
        # Capacity and clearing.
        so.configure_cache(2, clear=True)
        s4 = so.grammar_cache_stats()
        assert (s4["hits"], s4["misses"], s4["entries"], s4["capacity"]) == (0, 0, 0, 2)
        texts = [f"start ::= 'a' ; (* {tag} {k} *)" for k in range(3)]
        for t in texts:
            so.compile_kbnf(t, vocab)
        assert so.grammar_cache_stats()["entries"] == 2
        so.compile_kbnf(texts[0], vocab)  # the oldest was evicted
        s5 = so.grammar_cache_stats()
        assert s5["misses"] == 4 and s5["hits"] == 0
        so.compile_kbnf(texts[0], vocab)
        assert so.grammar_cache_stats()["hits"] == 1
    finally:
        so.configure_cache(capacity)
    assert so.grammar_cache_stats()["capacity"] == capacity


def test_every_mask_overwrites_the_whole_row() -> None:
    """A row full of garbage gets the same mask as a zeroed one, on every path: free text (slice
    copy), walks (cache off, and a cache miss), cached masks (repeated states), a complete
    document (EOS) and a stopped matcher. Each path writes every word itself, so a dirty buffer
    must not leak through."""
    vocab = small_vocab()
    schema = {
        "type": "array",
        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    uncached = so.compile_json_schema(schema, vocab, mask_cache_bytes=0).matcher()
    cached = so.compile_json_schema(schema, vocab).matcher()
    doc = b'[{"name": "ab"}, {"name": "ab"}, {"name": "a\\n"}]'

    def fill(m: Any, value: int) -> Any:
        row = so.allocate_token_bitmask(1, vocab.size)
        row[:] = value
        m.fill_next_token_bitmask(row)
        return row

    for k in range(len(doc) + 2):
        reference = fill(uncached, 0)
        # Dirty rows: walked without a cache, walked on a cache miss, then restored on hits.
        for m in (uncached, cached, cached):
            for value in (-1, 0x5A5A5A5A):
                assert (fill(m, value) == reference).all(), (k, value)
        for m in (uncached, cached):
            if k < len(doc):
                assert m.accept_bytes(doc[k : k + 1])
            elif k == len(doc):
                assert m.can_finish()
                assert m.accept_token(vocab.eos_token_ids[0])  # stopped from here on
