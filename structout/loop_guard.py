"""The loop guard: when a JSON value starts repeating itself, steer the model to end it.

Small models under a grammar often loop inside a value: a string that repeats a phrase, a number
that repeats a digit, a key that keeps extending, array items that repeat (or repeat with a
counter). The grammar knows which tokens would end the value; the guard uses that.

After each step the guard looks at the output written since it last acted:

* a byte repeated ``max_run`` times in a row (zeros and whitespace aside), a unit of 2 to
  ``max_period`` bytes repeated ``min_repeats`` times, or a unit repeated ``counter_repeats``
  times with only its numbers changing;
* an array item equal to an earlier item of the same array (numbers aside);
* a number longer than ``max_number_chars`` or a string longer than ``max_string_chars``;
* ``reserve_tokens`` tokens of the budget left: then every open value is closed, so the output
  ends complete instead of cut off.

Then it picks the innermost value that holds the whole repeated part (a string, a number, a key,
the array or object whose members repeat) and, at every following step until that value is
closed, keeps among the tokens the grammar allows only those that close the innermost open value
(a quote inside a string, a delimiter after a number, ``]``/``}`` between members). Where the
grammar allows none of them (a ``minLength`` not reached, a required property still missing) it
steps aside for that step.

Invariant: the guard only removes tokens from the grammar's own mask and never empties it, so
every output it steers is still in the grammar's language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from structout.json_track import KEY, NUMBER, SCALAR_BYTES, STRING, JsonTrack

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from structout.tokens import TokenSpace

__all__ = ["LoopGuard", "RowGuard", "TokenClosers", "token_closers"]

_DIGITS = re.compile(rb"[0-9]+")
#: A unit of a counter loop has a letter or a quote: lists of bare numbers are data, not loops.
_WORDY = re.compile(rb'[A-Za-z"]')


@dataclass(frozen=True)
class LoopGuard:
    """Settings of the loop guard (``generate(..., loop_guard=LoopGuard(...))``; on by default
    for JSON outputs, ``loop_guard=False`` turns it off). See :mod:`structout.loop_guard`."""

    #: A byte repeated this many times in a row is a loop.
    max_run: int = 6
    #: A unit of 2 to ``max_period`` bytes repeated this many times in a row is a loop.
    min_repeats: int = 3
    #: Longest repeating unit looked for, in bytes.
    max_period: int = 256
    #: A unit of at least 4 bytes repeated this many times with only its numbers changing
    #: (``{"id": 1}, {"id": 2}, ...``) is a loop; 0 turns this check off.
    counter_repeats: int = 4
    #: Numbers longer than this many characters are ended (a sound choice: a shorter number is
    #: still validated by the grammar); None: no bound beyond the schema's.
    max_number_chars: int | None = 12
    #: Strings (values and keys) longer than this many characters are ended; None: no bound.
    max_string_chars: int | None = None
    #: With this many tokens of ``max_new_tokens`` left (at most a quarter of it), close every
    #: open value; 0 turns this off.
    reserve_tokens: int = 32

    def __post_init__(self) -> None:
        for name in ("max_run", "min_repeats", "max_period"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 2:
                raise ValueError(f"LoopGuard.{name} must be an integer >= 2, got {value!r}")
        for name in ("counter_repeats", "reserve_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"LoopGuard.{name} must be an integer >= 0, got {value!r}")
        for name in ("max_number_chars", "max_string_chars"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"LoopGuard.{name} must be a positive integer or None")


_CLOSING = frozenset(b"]} \t\r\n")


class TokenClosers:
    """Per-token facts of a vocabulary (boolean numpy arrays over token ids): which tokens close
    a string, end a scalar, or close a container, from the state just before them; ``*_any``
    whatever follows the closing byte in the token, ``*_clean`` only ``]``, ``}`` or
    whitespace (nothing that starts another value)."""

    def __init__(self, token_bytes: list[bytes]) -> None:
        import numpy as np

        n = len(token_bytes)
        self.string_any = np.zeros(n, dtype=bool)
        self.string_clean = np.zeros(n, dtype=bool)
        self.scalar_any = np.zeros(n, dtype=bool)
        self.scalar_clean = np.zeros(n, dtype=bool)
        self.container_any = np.zeros(n, dtype=bool)
        self.container_clean = np.zeros(n, dtype=bool)
        for t, data in enumerate(token_bytes):
            if not data:
                continue
            clean = all(b in _CLOSING for b in data)
            self.scalar_any[t] = data[0] not in SCALAR_BYTES
            self.scalar_clean[t] = clean
            stripped = data.lstrip(b" \t\r\n")
            self.container_any[t] = bool(stripped) and stripped[0] in b"]}"
            self.container_clean[t] = self.container_any[t] and clean
            quote = _closing_quote(data)
            if quote is not None:
                self.string_any[t] = True
                self.string_clean[t] = all(b in _CLOSING for b in data[quote + 1 :])
        #: Token ids by their bytes, and the longest token's length (for :meth:`prefixes`).
        self._by_bytes: dict[bytes, list[int]] = {}
        for t, data in enumerate(token_bytes):
            if data:
                self._by_bytes.setdefault(data, []).append(t)
        self.longest = max((len(b) for b in token_bytes), default=1)

    def get(self, kind: str, own: bool) -> np.ndarray:
        """The closers of a ``kind`` of value (string, scalar, container): ``*_any`` when the
        value is the guard's target (``own``), else ``*_clean``."""
        arr: np.ndarray = getattr(self, f"{kind}_{'any' if own else 'clean'}")
        return arr

    def prefixes(self, data: bytes) -> list[int]:
        """The tokens whose bytes are a prefix of ``data``."""
        out: list[int] = []
        for n in range(1, min(len(data), self.longest) + 1):
            out.extend(self._by_bytes.get(data[:n], ()))
        return out


def _closing_quote(data: bytes) -> int | None:
    """Offset of the first unescaped quote of ``data`` read inside a string, or None."""
    escaped = False
    for i, b in enumerate(data):
        if escaped:
            escaped = False
        elif b == 0x5C:
            escaped = True
        elif b == 0x22:
            return i
    return None


def token_closers(tokens: TokenSpace) -> TokenClosers:
    """The closer facts of ``tokens``' vocabulary, computed once per token space."""
    closers: TokenClosers | None = getattr(tokens, "_closers", None)
    if closers is None:
        closers = TokenClosers(tokens.token_bytes)
        tokens._closers = closers  # type: ignore[attr-defined]
    return closers


def periodic_suffix(s: bytes, guard: LoopGuard, in_number: bool = False) -> tuple[int, int] | None:
    """``(length, period)`` of the shortest repeated suffix of ``s`` the guard calls a loop, or
    None. Runs of whitespace (layouts indent) are not loops, nor, in a number (``in_number``),
    runs of zeros (``1000000``): long numbers are bounded by ``max_number_chars`` instead."""
    run = guard.max_run
    last = s[-1:]
    round_number = in_number and last == b"0"
    if len(s) >= run and s[-run:] == last * run and not last.isspace() and not round_number:
        return run, 1

    # A unit of one byte repeated is the rule above's.
    def loop(unit: bytes) -> bool:
        return unit != unit[:1] * len(unit) and not unit.isspace()

    span = _repeated_suffix(s, 2, guard.max_period, guard.min_repeats, loop)
    return None if span is None else (span, span // guard.min_repeats)


def counter_suffix(s: bytes, guard: LoopGuard) -> int | None:
    """Length (in ``s``) of a suffix made of a unit (with a letter or a quote) repeated with
    only its numbers changing."""
    if not guard.counter_repeats:
        return None
    norm = _DIGITS.sub(b"0", s)

    def loop(unit: bytes) -> bool:
        return b"0" in unit and _WORDY.search(unit) is not None

    span = _repeated_suffix(norm, 4, guard.max_period, guard.counter_repeats, loop)
    return None if span is None else len(s) - _original_offset(s, len(norm) - span)


def _repeated_suffix(
    s: bytes, shortest: int, longest: int, reps: int, loop: Callable[[bytes], bool]
) -> int | None:
    """Length of the shortest suffix of ``s`` made of a unit of ``shortest`` to ``longest``
    bytes repeated ``reps`` times, for which ``loop(unit)`` holds; None when there is none."""
    n = len(s)
    last = s[-1] if n else 0
    for p in range(shortest, min(longest, n // reps) + 1):
        if s[n - 1 - p] != last:  # cheap filter: the last byte must repeat at distance p
            continue
        span = p * reps
        if s[n - span : n - p] == s[n - span + p :] and loop(s[n - p :]):
            return span
    return None


def _original_offset(s: bytes, norm_index: int) -> int:
    """The offset in ``s`` of the byte at ``norm_index`` of ``s`` with digit runs collapsed."""
    i = j = 0
    while j < norm_index and i < len(s):
        if 0x30 <= s[i] <= 0x39:
            while i < len(s) and 0x30 <= s[i] <= 0x39:
                i += 1
        else:
            i += 1
        j += 1
    return i


class RowGuard:
    """The guard of one generated row: its JSON track and, when active, the value to close."""

    def __init__(self, guard: LoopGuard, track: JsonTrack, budget: int) -> None:
        self.guard = guard
        self.track = track
        track.record_items = True
        #: Output offset before which nothing counts as part of a loop (moved when it acts).
        self.floor = 0
        #: Depth (index in ``track.frames``) of the value being closed; None when inactive.
        self.target: int | None = None
        #: The repeating unit that activated the guard (exact repeats only), else None.
        self.unit: bytes | None = None
        #: Times the guard acted (for results and tests).
        self.interventions = 0
        #: Tokens left at which everything is closed.
        self.reserve = min(guard.reserve_tokens, budget // 4)
        #: Items seen per open array (by the array's start offset), numbers aside.
        self._items: dict[int, set[bytes]] = {}

    def observe(self, tokens_left: int) -> None:
        """Look at the output after the track was fed; activate or finish closing."""
        track, guard = self.track, self.guard
        frames = track.frames
        repeated = self._repeated_item()
        if self.target is not None:
            if len(frames) <= self.target:
                self.target = None
                self.floor = len(track.data)
            elif tokens_left <= self.reserve and self.target > 0:
                self.target = 0
            return
        if not frames:
            return
        if tokens_left <= self.reserve:
            self._activate(0)
            return
        if repeated is not None:
            self._activate(repeated)
            return
        top = frames[-1]
        size = len(track.data) - top.start
        number_cap, string_cap = guard.max_number_chars, guard.max_string_chars
        if (top.kind == NUMBER and number_cap is not None and size >= number_cap) or (
            top.kind in (STRING, KEY) and string_cap is not None and size - 1 >= string_cap
        ):
            self._activate(len(frames) - 1)
            return
        window = max(guard.max_period * max(guard.min_repeats, guard.counter_repeats), 64)
        lo = max(self.floor, len(track.data) - window)
        tail = bytes(track.data[lo:])
        periodic = periodic_suffix(tail, guard, top.kind == NUMBER)
        unit = None
        if periodic is not None:
            span, period = periodic
            unit = tail[-period:]
        else:
            counted = counter_suffix(tail, guard)
            if counted is None:
                return
            span = counted
        start = len(track.data) - span
        # The innermost open value that began before the repeated part holds all of it.
        for depth in range(len(frames) - 1, -1, -1):
            if frames[depth].start < start:
                self._activate(depth, unit)
                return

    def _repeated_item(self) -> int | None:
        """The depth of an open array whose newest item repeats an earlier one, if any (and
        forget the items of arrays that closed)."""
        track = self.track
        found = None
        for array, item in track.items_closed:
            seen = self._items.setdefault(array.start, set())
            key = _DIGITS.sub(b"0", item)
            if key in seen and array.start >= self.floor:
                for depth, frame in enumerate(track.frames):
                    if frame is array:
                        found = depth
            seen.add(key)
        track.items_closed.clear()
        if len(self._items) > 64:
            open_starts = {f.start for f in track.frames}
            self._items = {k: v for k, v in self._items.items() if k in open_starts}
        return found

    def _activate(self, depth: int, unit: bytes | None = None) -> None:
        self.target = depth
        self.unit = unit
        self.interventions += 1

    def closing_tokens(self, closers: TokenClosers) -> np.ndarray | None:
        """The tokens that would close the innermost open value now (a boolean array over token
        ids), when the guard is active; None otherwise."""
        if self.target is None:
            return None
        top = self.track.top()
        if top is None or (top.kind in (STRING, KEY) and self.track.escaped):
            return None
        # Closing the target itself may go on into what follows it (``",``); closing a value
        # inside it must not start another value there.
        kind = (
            "string"
            if top.kind in (STRING, KEY)
            else "scalar"
            if top.kind == NUMBER
            else ("container")
        )
        own = len(self.track.frames) - 1 == self.target
        return closers.get(kind, own)

    def keep(
        self,
        allowed: np.ndarray,
        closers: TokenClosers,
        progress: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> np.ndarray | None:
        """Which of the ``allowed`` tokens (a boolean array) the guard keeps now, or None to keep
        them all. In order of preference: the tokens that close the innermost open value; the
        tokens ``progress`` returns (given the closers, the allowed tokens after which one of
        them is allowed: the decoder looks one token ahead with the matcher); all but those
        that would repeat the looping unit further. So a loop the grammar does not let close
        yet (digits before a required time zone) is steered to where it can close, or broken."""
        import numpy as np

        cls = self.closing_tokens(closers)
        if cls is None:
            return None
        width = min(len(cls), len(allowed))
        kept = np.zeros(len(allowed), dtype=bool)
        kept[:width] = allowed[:width] & cls[:width]
        if kept.any():
            return kept
        if progress is not None:
            ahead = progress(cls)
            if len(ahead):
                kept[ahead] = True
                return kept
        unit = self.unit
        if unit is None or not self.track.data.endswith(unit):
            return None
        kept[:] = allowed
        reps = closers.longest // len(unit) + 1
        for t in closers.prefixes(unit * reps):
            if t < len(kept):
                kept[t] = False
        return kept if kept.any() and not (kept == allowed).all() else None

    def narrow(
        self,
        logits: np.ndarray,
        closers: TokenClosers,
        progress: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> bool:
        """Leave only the tokens :meth:`keep` keeps in ``logits`` (one row, disallowed at
        -inf). Returns whether it narrowed."""
        import numpy as np

        if self.target is None:
            return False
        kept = self.keep(np.isfinite(logits), closers, progress)
        if kept is None:
            return False
        logits[~kept] = -np.inf
        return True

    def narrow_bitmask(self, row: np.ndarray, closers: TokenClosers) -> bool:
        """:meth:`narrow` on one row of a token bitmask (32-bit words, bit ``i % 32`` of word
        ``i // 32`` set when token ``i`` is allowed), without looking ahead."""
        import numpy as np

        if self.target is None:  # the common case: nothing to unpack
            return False
        bits = np.unpackbits(row.view(np.uint8), bitorder="little").astype(bool)
        kept = self.keep(bits, closers)
        if kept is None:
            return False
        row.view(np.uint8)[:] = np.packbits(kept, bitorder="little")
        return True
