"""The constrained decode loop: masks, sampling and jump-forward over one KV cache.

The loop keeps one KV cache for the whole generation (:mod:`structout.kv_session`): after the
prompt is prefilled, each step feeds only the new tokens. Before sampling, the matcher fills a
token bitmask (bit ``i`` set ⇔ token ``i`` may come next; EOS exactly when the grammar can
finish) that is applied to the logits in place.

**Jump-forward** (on by default): when the matcher reports *forced bytes* (the longest byte string
every valid continuation starts with, e.g. ``", "age": `` between two fixed object keys), they are
appended without sampling. The freshly sampled token has not been fed to the model yet, so its bytes
and the forced bytes are **re-tokenized together** with the model's tokenizer and the natural tokens
are fed in one forward pass (e.g. a sampled ``"`` followed by forced ``,`` becomes the single token
``",``). The last re-tokenized token is held back when some longer token that extends it is also
allowed (``" "`` could continue as ``" J"``), so the model still picks natural tokens at the
boundary.
Re-tokenization is checked byte for byte; when it does not reproduce the bytes (e.g. tokenizers that
add a prefix space) the step simply samples instead.

Heavy dependencies (torch) are imported lazily; this module imports without them.

The pieces the loop uses live in their own modules: :mod:`structout.tokens` (token bytes and
extensions), :mod:`structout.kv_session` (the model and its KV cache), :mod:`structout.sampling`,
:mod:`structout.bitmask`, :mod:`structout.results` (outcomes → typed values) and
:mod:`structout.engine` (the masks).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from structout.bitmask import apply_token_bitmask_
from structout.choices import ChoiceScorer
from structout.errors import StructoutError
from structout.json_track import JsonTrack
from structout.kv_session import KVSession
from structout.loop_guard import LoopGuard, RowGuard, token_closers
from structout.results import RowOutcome, RunStats
from structout.sampling import SamplingParams, sample
from structout.tokens import TokenSpace

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from structout._engine import Matcher
    from structout.engine import Engine

__all__ = [
    "ROLLBACK_WINDOW",
    "RowRequest",
    "SectionBudget",
    "decode",
    "decode_with_matchers",
]

#: Tokens a generation's matcher can roll back. Jump-forward and the token budget roll back at
#: most one step's chunk (forced text is capped at 4 KiB, so a chunk has at most ~4k tokens);
#: a bound lets the engine release older parse history, so memory stays bounded on long outputs.
ROLLBACK_WINDOW = 1 << 14

#: Worker threads filling the next step's masks during forward passes (shared by all models).
MASK_WORKERS = 2

#: Candidates the loop guard looks one token ahead for when the looping value cannot close yet.
LOOKAHEAD = 64


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _mask_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=MASK_WORKERS, thread_name_prefix="structout-mask"
            )
        return _pool


def _overlap_helps(hf_model: Any) -> bool:
    """Whether filling masks during the forward pass can run in parallel with it: on an
    accelerator, or when torch leaves a CPU core free (otherwise the two compete for cores and
    torch's thread pool stalls)."""
    import torch

    try:
        device = next(hf_model.parameters()).device
    except (StopIteration, AttributeError):
        return False
    if device.type != "cpu":
        return True
    return torch.get_num_threads() < (os.cpu_count() or 1)


@dataclass(frozen=True)
class SectionBudget:
    """A token budget for the section the output starts with (a reasoning section), closed by
    ``end``: once ``max_tokens`` tokens are generated and ``end`` has not appeared, the loop
    appends ``end`` (re-tokenized, through the matcher) instead of waiting for the model.

    Invariant: the grammar allows ``end`` anywhere in the section and forbids it inside, so its
    first occurrence closes the section."""

    end: bytes
    max_tokens: int


@dataclass
class RowRequest:
    """One sequence to generate."""

    prompt_ids: list[int]
    #: A compiled grammar (``.matcher()``) or None for unconstrained text.
    grammar: Any
    max_new_tokens: int
    #: The budget of a leading section (``reasoning_budget``), or None.
    section: SectionBudget | None = None
    #: Called with the output so far whenever the grammar could end it there: a byte length
    #: ends the output at that length (a point where the grammar can end it too: the caller's
    #: invariant), None lets generation go on. Tool turns use it to end a repeated call.
    end_early: Callable[[bytearray], int | None] | None = None
    #: JSON output only: the loop guard's settings (None: off); see :mod:`structout.loop_guard`.
    loop_guard: LoopGuard | None = None
    #: JSON output only: option sets scored as wholes (:func:`structout.choices.choice_sets`).
    choices: tuple[tuple[bytes, ...], ...] = ()
    #: Choice scoring: more prompts whose option scores are added to ``prompt_ids``' (the
    #: instruction's options in the other order) and prompts whose scores are subtracted
    #: (content-free); each followed by the output so far.
    choice_prompts: tuple[list[int], ...] = ()
    choice_priors: tuple[list[int], ...] = ()


@dataclass
class _Row:
    req: RowRequest
    matcher: Matcher | None
    generated: list[int] = field(default_factory=list)
    feed: list[int] = field(default_factory=list)
    done: bool = False
    finish_reason: str = ""
    forced: int = 0
    sampled: int = 0
    #: The budgeted section is still open (its end has not been generated).
    in_section: bool = True
    #: The last ``len(end) - 1`` bytes generated while the section is open.
    section_tail: bytes = b""
    #: Bytes of the output kept when ``end_early`` ended it (None: all of them).
    kept: int | None = None
    #: The bytes of ``generated[:text_tokens]``, kept for ``end_early`` (extended, not rebuilt).
    text: bytearray = field(default_factory=bytearray)
    text_tokens: int = 0
    #: The JSON values open in the output (rows with a loop guard or choices).
    track: JsonTrack | None = None
    guard: RowGuard | None = None
    #: Bytes of the request's longest choice option (no value longer is a choice point).
    choice_reach: int = 0


class _Decoder:
    def __init__(
        self,
        hf_model: Any,
        tokens: TokenSpace,
        requests: Sequence[RowRequest],
        params: SamplingParams,
        pad_token_id: int,
        engine: Engine,
    ) -> None:
        self.hf_model = hf_model
        self.tokens = tokens
        self.params = params
        self.rows = [
            _Row(
                req,
                req.grammar.matcher(max_rollback_tokens=ROLLBACK_WINDOW)
                if req.grammar is not None
                else None,
            )
            for req in requests
        ]
        for row in self.rows:
            if row.matcher is not None and (row.req.loop_guard is not None or row.req.choices):
                row.track = JsonTrack()
                if row.req.loop_guard is not None:
                    row.guard = RowGuard(row.req.loop_guard, row.track, row.req.max_new_tokens)
                row.choice_reach = max((len(o) for s in row.req.choices for o in s), default=0)
        self.scorer = ChoiceScorer(hf_model, tokens, pad_token_id)
        self.pad = pad_token_id
        self.stats = RunStats()
        self.engine = engine
        self._bitmask: Any = None
        self._scratch: Any = None
        constrained = any(r.matcher is not None for r in self.rows)
        self._overlap = constrained and params.overlap and _overlap_helps(hf_model)

    # ---- masks
    def _alloc(self, n: int) -> Any:
        return self.engine.allocate_token_bitmask(n, self.tokens.vocab_size)

    def _scratch_mask(self, matcher: Any) -> Any:
        if self._scratch is None:
            self._scratch = self._alloc(1)
        matcher.fill_next_token_bitmask(self._scratch, 0)
        return self._scratch

    def _fill_masks(self, active: list[int]) -> tuple[Any, list[int], int]:
        """Fill the bitmask rows of the constrained rows among ``active``.

        Returns ``(bitmask, constrained rows, nanoseconds)``. Safe to run in a worker thread while
        the main thread runs the forward pass: nothing else touches the matchers meanwhile, and
        the native fill releases the GIL.
        """
        t0 = time.perf_counter_ns()
        constrained = [i for i in active if self.rows[i].matcher is not None]
        if not constrained:
            return None, constrained, 0
        n_rows = len(self.rows)
        if self._bitmask is None:
            self._bitmask = self._alloc(n_rows)
        bm = self._bitmask
        if n_rows == 1:
            (only,) = constrained
            self._matcher(only).fill_next_token_bitmask(bm, 0)
        else:
            # One native call fills every constrained row in parallel (GIL released); rows of
            # unconstrained requests allow everything.
            self.engine.fill_next_token_bitmasks(
                [self._matcher(i) for i in constrained], bm, rows=constrained
            )
            for i in active:
                if self.rows[i].matcher is None:
                    bm[i] = -1
        return bm, constrained, time.perf_counter_ns() - t0

    def _mask_logits(self, logits: np.ndarray, filled: tuple[Any, list[int], int]) -> None:
        """Apply filled bitmasks to ``logits`` in place (rows that are done are never sampled)."""
        bm, constrained, fill_ns = filled
        if not constrained:
            return
        t0 = time.perf_counter_ns()
        for i in constrained:
            if not bm[i].any():
                raise StructoutError(
                    f"no token can continue the output in row {i} (generated so far: "
                    f"{self.tokens.bytes_of(self.rows[i].generated)!r}); the vocabulary cannot "
                    "produce the bytes the grammar requires next"
                )
        apply_token_bitmask_(logits, bm)
        self.stats.mask_ns += fill_ns + time.perf_counter_ns() - t0
        self.stats.masked_steps += len(constrained)

    # ---- jump-forward
    def _jump(self, row: _Row, pending: list[int]) -> list[int] | None:
        """Tokens to feed instead of ``pending`` covering its bytes plus forced bytes, or None.

        On success the matcher has accepted exactly the returned tokens (``pending`` rolled back).
        """
        m = row.matcher
        if m is None:
            return None
        forced = m.forced_bytes()
        if not forced:
            return None
        tokens = self.tokens
        head = tokens.bytes_of(pending)
        data = head + bytes(forced)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start <= len(head):
                return None
            data = data[: exc.start]
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return None
        try:
            toks = [int(t) for t in tokens.encode(text)]
        except Exception:  # noqa: BLE001 - any tokenizer failure just means "sample instead"
            return None
        if not toks or tokens.bytes_of(toks) != data:
            return None
        if pending and toks[: len(pending)] == pending and len(toks) == len(pending):
            return None
        if pending:
            m.rollback(len(pending))
        accepted = 0
        for t in toks:
            if not m.accept_token(t):
                break
            accepted += 1
        if accepted < len(toks):
            self._restore(m, accepted, pending)
            return None
        # Hold back the last token when a longer token extending it is also allowed here.
        last = toks[-1]
        ext = tokens.extensions(last)
        if len(ext):
            m.rollback(1)
            mask = self._scratch_mask(m)[0]
            words = mask[ext >> 5]
            if ((words >> (ext & 31)) & 1).any():
                toks.pop()
            else:
                m.accept_token(last)
        if len(tokens.bytes_of(toks)) <= len(head):
            self._restore(m, len(toks), pending)
            return None
        return toks

    def _matcher(self, i: int) -> Matcher:
        """The matcher of constrained row ``i``."""
        m = self.rows[i].matcher
        assert m is not None, "row is constrained"
        return m

    @staticmethod
    def _restore(m: Matcher, accepted: int, pending: list[int]) -> None:
        if accepted:
            m.rollback(accepted)
        for t in pending:
            if not m.accept_token(t):
                raise StructoutError(f"matcher rejected token {t} it had accepted before rollback")

    # ---- main loop
    def run(self) -> Generator[tuple[int, bytes], None, list[RowOutcome]]:
        import numpy as np

        params = self.params
        tokens = self.tokens
        rows = self.rows
        session = KVSession(self.hf_model, self.pad, len(rows))
        rng = np.random.default_rng(params.seed)
        t_start = time.perf_counter_ns()

        # Bytes forced at the very start go into the prefill.
        first: list[list[int]] = []
        t_grammar = time.perf_counter_ns()
        for row in rows:
            chunk: list[int] = []
            if row.matcher is not None and params.jump_forward:
                chunk = self._jump(row, []) or []
            chunk = self._fit_budget(row, self._close_section(row, chunk))
            row.generated.extend(chunk)
            row.forced += len(chunk)
            self._observe(row, chunk)
            first.append(list(row.req.prompt_ids) + chunk)
            self._check_done(row)
        self.stats.grammar_ns += time.perf_counter_ns() - t_grammar
        for i, row in enumerate(rows):
            if row.generated:
                yield i, tokens.bytes_of(row.generated)
        if all(r.done for r in rows):
            return self._finish(t_start, t_start, session)
        logits = session.feed(first)
        prefilled: Future[tuple[Any, list[int], int]] | None = None
        t_prefill = time.perf_counter_ns()
        self.stats.prefill_ns = t_prefill - t_start

        while True:
            active = [i for i, r in enumerate(rows) if not r.done]
            filled = prefilled.result() if prefilled is not None else self._fill_masks(active)
            prefilled = None
            self._mask_logits(logits, filled)
            if params.ignore_eos:
                for eos in tokens.eos_token_ids:
                    if eos < logits.shape[-1]:
                        logits[:, eos] = -np.inf
            picked = self._steer(logits, active, rng)
            sampled = sample(logits, params, rng)
            deltas: list[tuple[int, bytes]] = []
            t_grammar = time.perf_counter_ns()
            for i in active:
                row = rows[i]
                row.feed = []
                chosen = picked.get(i)
                if chosen is None:
                    t = int(sampled[i])
                    if t in tokens.eos_token_ids and not params.ignore_eos:
                        row.done, row.finish_reason = True, "stop"
                        continue
                    if row.matcher is not None and not row.matcher.accept_token(t):
                        raise StructoutError(
                            f"internal error: sampled token {t} ({tokens.token_bytes[t]!r}) was "
                            "allowed by the mask but rejected by the matcher"
                        )
                    chosen = [t]
                else:
                    for t in chosen:  # checked by the scorer: the matcher accepts them here
                        if not self._matcher(i).accept_token(t):
                            raise StructoutError(f"internal error: scored option {chosen} refused")
                row.sampled += len(chosen)
                chunk = chosen
                if row.matcher is not None and params.jump_forward:
                    chunk = self._jump(row, list(chosen)) or chunk
                chunk = self._fit_budget(row, self._close_section(row, chunk))
                row.forced += max(len(chunk) - len(chosen), 0)  # appended without sampling
                row.generated.extend(chunk)
                self._observe(row, chunk)
                row.feed = chunk
                deltas.append((i, tokens.bytes_of(chunk)))
                self._check_done(row)
            self.stats.grammar_ns += time.perf_counter_ns() - t_grammar
            yield from deltas
            if all(r.done for r in rows):
                break
            if self._overlap:
                # The next masks depend only on the tokens just accepted: fill them in a worker
                # thread while the forward pass runs.
                prefilled = _mask_pool().submit(
                    self._fill_masks, [i for i, r in enumerate(rows) if not r.done]
                )
            try:
                logits = session.feed([r.feed if not r.done else [] for r in rows])
            except BaseException:
                if prefilled is not None:
                    prefilled.exception()  # wait for the worker; the forward's error wins
                raise
        return self._finish(t_start, t_prefill, session)

    # ---- content: the loop guard and choices
    def _observe(self, row: _Row, chunk: list[int]) -> None:
        """Feed ``chunk``'s bytes to the row's JSON track and let its guard look at them."""
        if row.track is None or not chunk:
            return
        row.track.feed(self.tokens.bytes_of(chunk))
        if row.guard is not None:
            row.guard.observe(row.req.max_new_tokens - len(row.generated))

    def _steer(self, logits: np.ndarray, active: list[int], rng: Any) -> dict[int, list[int]]:
        """Narrow guarded rows' logits to closing tokens; at choice points, pick the option.

        Returns the rows whose next tokens were chosen here (options, accepted by nobody yet)."""
        picked: dict[int, list[int]] = {}
        for i in active:
            row = self.rows[i]
            if row.track is None:
                continue
            if row.guard is not None and row.guard.target is not None:
                row.guard.narrow(
                    logits[i],
                    token_closers(self.tokens),
                    functools.partial(self._closable_after, i, logits[i]),
                )
                continue
            if row.req.choices:
                option = self._choose(row, logits[i], rng)
                if option is not None:
                    picked[i] = option
        return picked

    def _closable_after(self, i: int, logits: np.ndarray, closers: np.ndarray) -> np.ndarray:
        """Among row ``i``'s most likely allowed tokens (at most :data:`LOOKAHEAD`), those after
        which one of ``closers`` is allowed (the matcher is left as it was)."""
        import numpy as np

        m = self._matcher(i)
        allowed = np.flatnonzero(np.isfinite(logits))
        if len(allowed) > LOOKAHEAD:
            allowed = allowed[np.argpartition(-logits[allowed], LOOKAHEAD)[:LOOKAHEAD]]
        width = len(closers)
        out = []
        for t in allowed.tolist():
            if not m.accept_token(t):
                continue
            mask = self._scratch_mask(m)[0]
            m.rollback(1)
            bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:width].astype(bool)
            if (bits & closers).any():
                out.append(t)
        return np.asarray(out, dtype=np.int64)

    def _choose(self, row: _Row, logits: np.ndarray, rng: Any) -> list[int] | None:
        import numpy as np

        assert row.track is not None and row.matcher is not None
        prefix = row.track.value_prefix(row.choice_reach)
        if prefix is None:
            return None
        options = self.scorer.options_here(row.req.choices, prefix, logits, row.matcher)
        if options is None:
            return None
        req = row.req
        added = [list(req.prompt_ids), *req.choice_prompts]
        contexts = [list(c) + row.generated for c in (*added, *req.choice_priors)]
        table = np.asarray(self.scorer.scores(contexts, options))
        scores = table[: len(added)].sum(axis=0) - table[len(added) :].sum(axis=0)
        temperature = self.params.temperature
        if temperature == 0:
            return options[int(scores.argmax())]
        p = np.exp((scores - scores.max()) / temperature)
        return options[int(rng.choice(len(options), p=p / p.sum()))]

    def _close_section(self, row: _Row, chunk: list[int]) -> list[int]:
        """``chunk`` (accepted by the matcher), followed by the section's end marker when this
        chunk uses up the section's budget and does not close it."""
        section = row.req.section
        if section is None or not row.in_section:
            return chunk
        window = row.section_tail + self.tokens.bytes_of(chunk)
        if section.end in window:
            row.in_section = False
            return chunk
        keep = len(section.end) - 1
        row.section_tail = window[len(window) - keep :] if keep else b""
        if len(row.generated) + len(chunk) < section.max_tokens:
            return chunk
        end = self._force(row, section.end)
        if end is None:  # e.g. the last token ended inside a UTF-8 character: retry next step
            return chunk
        row.in_section = False
        after = (
            self._jump(row, []) if row.matcher is not None and self.params.jump_forward else None
        )
        return chunk + end + (after or [])

    def _force(self, row: _Row, data: bytes) -> list[int] | None:
        """Tokens spelling ``data`` (the tokenizer's own), accepted by the row's matcher; None
        (nothing accepted) when they do not fit here."""
        toks = self.tokens.spell(data)
        if toks is None:  # let the model go on
            return None
        m = row.matcher
        if m is None:
            return toks
        for k, t in enumerate(toks):
            if not m.accept_token(t):
                if k:
                    m.rollback(k)
                return None
        return toks

    def _fit_budget(self, row: _Row, chunk: list[int]) -> list[int]:
        room = row.req.max_new_tokens - len(row.generated)
        if len(chunk) <= room:
            return chunk
        extra = len(chunk) - room
        if row.matcher is not None:
            row.matcher.rollback(extra)
        return chunk[:room]

    def _check_done(self, row: _Row) -> None:
        if row.done:
            return
        m = row.matcher
        if m is not None and m.is_finished():  # complete, and nothing but EOS may follow
            row.done, row.finish_reason = True, "stop"
        elif row.req.end_early is not None and m is not None and m.can_finish():
            row.text += self.tokens.bytes_of(row.generated[row.text_tokens :])
            row.text_tokens = len(row.generated)
            kept = row.req.end_early(row.text)
            if kept is not None:
                row.done, row.finish_reason, row.kept = True, "stop", kept
        if not row.done and len(row.generated) >= row.req.max_new_tokens:
            row.done, row.finish_reason = True, "length"

    def _finish(self, t_start: int, t_prefill: int, session: KVSession) -> list[RowOutcome]:
        t_end = time.perf_counter_ns()
        self.stats.total_ns = t_end - t_start
        self.stats.forward_passes = session.forward_passes
        out = []
        for row in self.rows:
            complete = row.matcher is None or bool(row.matcher.can_finish())
            data = self.tokens.bytes_of(row.generated)
            out.append(
                RowOutcome(
                    token_ids=list(row.generated),
                    data=data if row.kept is None else data[: row.kept],
                    finish_reason=row.finish_reason or "stop",
                    complete=complete,
                    forced_tokens=row.forced,
                    sampled_tokens=row.sampled,
                )
            )
        return out


def decode(
    hf_model: Any,
    tokens: TokenSpace,
    requests: Sequence[RowRequest],
    params: SamplingParams,
    pad_token_id: int,
    engine: Engine,
) -> Generator[tuple[int, bytes], None, tuple[list[RowOutcome], RunStats]]:
    """Run the decode loop; yields ``(row, appended bytes)`` and returns outcomes and stats."""
    run, _ = decode_with_matchers(hf_model, tokens, requests, params, pad_token_id, engine)
    return run


def decode_with_matchers(
    hf_model: Any,
    tokens: TokenSpace,
    requests: Sequence[RowRequest],
    params: SamplingParams,
    pad_token_id: int,
    engine: Engine,
) -> tuple[
    Generator[tuple[int, bytes], None, tuple[list[RowOutcome], RunStats]], list[Matcher | None]
]:
    """:func:`decode`, plus each row's matcher (None: unconstrained), for callers that look at
    the grammar's state after each chunk (partial streaming).

    Invariant: when the generator yields ``(row, bytes)``, that row's matcher has accepted exactly
    the output so far and nothing touches it until the caller resumes the generator; the caller
    must only read it (``forced_bytes``, ``fill_next_token_bitmask``, ``fork``), never advance it.
    """
    dec = _Decoder(hf_model, tokens, requests, params, pad_token_id, engine)

    def run() -> Generator[tuple[int, bytes], None, tuple[list[RowOutcome], RunStats]]:
        outcomes = yield from dec.run()
        return outcomes, dec.stats

    return run(), [row.matcher for row in dec.rows]
