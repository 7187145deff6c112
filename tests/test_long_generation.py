"""Long generations keep memory bounded: with ``max_rollback_tokens`` the engine releases Earley
sets that no live item refers to (compaction), so a matcher's memory depends on the live parse and
the rollback window, not on the length of the output. Rollback inside the window still works;
beyond it raises ``RollbackError`` and changes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

import structout as so
from structout.errors import RollbackError

#: (grammar, first token, repeated token): open-ended grammars of different shapes.
CASES = {
    "except-nul": ("start ::= except!('\\x00');", None, b"word "),
    "number-list": (
        "start ::= '[' (num (', ' num)*)? ']'; num ::= #\"-?[0-9]{1,6}\";",
        b"[",
        b"123456, ",
    ),
    "nested-lists": (
        "start ::= list; list ::= '[' (item (', ' item)*)? ']'; item ::= list | #\"[0-9]{1,6}\";",
        b"[",
        b"[1, 2], ",
    ),
    "right-recursive": ("start ::= 'a' start | 'a';", None, b"aaaa"),
}


def _setup(case: str, window: int | None) -> tuple[object, int]:
    grammar, first, piece = CASES[case]
    toks: list[bytes | None] = [None, b"[", piece]
    vocab = so.Vocabulary.from_bytes(toks, eos_token_ids=[0])
    m = so.compile_kbnf(grammar, vocab).matcher(max_rollback_tokens=window)
    if first is not None:
        assert m.accept_token(1)
    return m, vocab.size


@pytest.mark.parametrize("case", sorted(CASES))
def test_memory_is_bounded_with_a_rollback_window(case: str) -> None:
    m, _ = _setup(case, window=32)
    samples = []
    for step in range(1, 200_001):
        assert m.accept_token(2)
        if step % 20_000 == 0:
            samples.append(m.memory_usage)
    # Flat: the last sample is no larger than the largest early one (amortized compaction
    # makes memory oscillate below a fixed ceiling).
    assert max(samples[5:]) <= max(samples[:5]), samples
    assert max(samples) < 1 << 20, samples
    # Without a window memory grows with the output (one Earley set per byte).
    unbounded, _ = _setup(case, window=None)
    for _ in range(20_000):
        assert unbounded.accept_token(2)
    assert unbounded.memory_usage > 4 * max(samples), (unbounded.memory_usage, samples)


@pytest.mark.parametrize("case", sorted(CASES))
def test_window_rollback_matches_replay(case: str) -> None:
    """Masks, completeness and forced bytes after rollbacks inside the window equal those of a
    matcher that never released anything."""
    m, size = _setup(case, window=8)
    ref, _ = _setup(case, window=None)
    rng = np.random.default_rng(7)
    a = so.allocate_token_bitmask(1, size)
    b = so.allocate_token_bitmask(1, size)
    for _ in range(3_000):
        if rng.random() < 0.2 and m.rollback_window:
            n = int(rng.integers(1, m.rollback_window + 1))
            m.rollback(n)
            ref.rollback(n)
        else:
            assert m.accept_token(2) and ref.accept_token(2)
        m.fill_next_token_bitmask(a)
        ref.fill_next_token_bitmask(b)
        assert np.array_equal(a, b)
        assert (m.num_bytes, m.num_tokens, m.can_finish()) == (
            ref.num_bytes,
            ref.num_tokens,
            ref.can_finish(),
        )
        assert m.forced_bytes() == ref.forced_bytes()


def test_rollback_beyond_the_window_raises_and_changes_nothing() -> None:
    m, _ = _setup("number-list", window=4)
    for _ in range(1_000):
        assert m.accept_token(2)
    assert m.max_rollback_tokens == 4 and m.rollback_window == 4
    before = (m.num_tokens, m.num_bytes)
    with pytest.raises(RollbackError, match="max_rollback_tokens"):
        m.rollback(5)
    assert (m.num_tokens, m.num_bytes) == before
    m.rollback(4)
    assert m.num_tokens == before[0] - 4 and m.rollback_window == 0
    with pytest.raises(RollbackError):
        m.rollback(1)
    # Accepting again reopens the window.
    assert m.accept_token(2) and m.rollback_window == 1


def test_unbounded_matcher_rolls_back_everything() -> None:
    m, _ = _setup("number-list", window=None)
    for _ in range(100):
        assert m.accept_token(2)
    assert m.max_rollback_tokens is None and m.rollback_window == 101
    m.rollback(1_000)
    assert m.num_tokens == 0 and m.num_bytes == 0


def test_long_json_generation_through_a_schema_stays_bounded() -> None:
    """A schema grammar (array of objects) driven for 50k tokens with the SDK's window."""
    from structout.generation import ROLLBACK_WINDOW
    from structout.schema import to_kbnf

    schema = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "tags": {"type": "array"}},
            "required": ["id", "tags"],
        },
    }
    item = json.dumps({"id": 12, "tags": [1, "x"]}, separators=(", ", ": ")).encode()
    toks: list[bytes | None] = [None, b"[", item, b", "]
    vocab = so.Vocabulary.from_bytes(toks, eos_token_ids=[0])
    cg = so.compile_kbnf(to_kbnf(schema), vocab)
    m = cg.matcher(max_rollback_tokens=ROLLBACK_WINDOW)
    ref = cg.matcher()
    for mt in (m, ref):
        assert mt.accept_token(1) and mt.accept_token(2)
    bm = so.allocate_token_bitmask(1, vocab.size)
    for step in range(25_000):
        assert m.accept_token(3) and m.accept_token(2)
        if step < 1_000:
            assert ref.accept_token(3) and ref.accept_token(2)
        if step % 5_000 == 0:
            m.fill_next_token_bitmask(bm)
            assert bm[0, 0] & 0b1000, "', ' stays allowed"
    ref_per_token = ref.memory_usage / ref.num_tokens
    # The windowed matcher holds about a window's worth of history, not 50k tokens' worth.
    assert m.memory_usage < 3 * ROLLBACK_WINDOW * ref_per_token + (1 << 16), (
        m.memory_usage,
        ref_per_token,
    )
