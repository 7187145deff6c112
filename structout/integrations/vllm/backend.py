"""structout as a vLLM structured-output backend: ``StructoutBackend`` / ``StructoutGrammar``.

vLLM's ``StructuredOutputManager`` creates one :class:`StructoutBackend` per engine (when the
engine's ``structured_outputs_config.backend`` is ``"structout"``, see
:mod:`structout.integrations.vllm.plugin`) and asks it for one :class:`StructoutGrammar` per
request; it then feeds the grammar the request's tokens, asks for masks, validates speculative
drafts and rolls back.

Invariants:

* The vocabulary is built once per backend, from the engine's tokenizer, sized to the model's
  logits (``vocab_size``); every bitmask row is ``ceil(vocab_size / 32)`` int32 words.
* A request's *stop ids* are its ``stop_token_ids`` argument (vLLM: EOS and the user's stop
  tokens), else the vocabulary's EOS ids. A stop id is allowed exactly where the grammar can
  finish; accepting one terminates the grammar. Stop ids are never fed to the matcher, so the
  matcher's state is always that after the request's text tokens.
* ``_fed`` is the list of tokens the matcher has consumed; a rollback beyond the matcher's
  window replays them (never expected: vLLM rolls back at most its speculative tokens).
* With ``STRUCTOUT_LOOP_GUARD=1`` in the server's environment, JSON requests (``json`` and
  ``json_object``) get the SDK's loop guard (:mod:`structout.loop_guard`, without the budget
  reserve: a backend does not see ``max_tokens``): a row's mask is narrowed to the tokens that
  close a value repeating itself. It only removes tokens from the grammar's mask; its state is
  rebuilt from ``_fed`` on rollback.
* Nothing here raises into the engine's step: compilation errors surface in
  :meth:`StructoutBackend.compile_grammar`, which vLLM runs per request and whose failure ends
  only that request.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
)

from structout.cache import get_default_cache
from structout.errors import RollbackError, StructoutError
from structout.integrations.vllm.specs import LIMITS, request_kbnf
from structout.json_track import JsonTrack
from structout.loop_guard import LoopGuard, RowGuard, TokenClosers
from structout.tokens import text_token_bytes

__all__ = ["StructoutBackend", "StructoutGrammar"]

logger = logging.getLogger(__name__)

#: Rollback window of every matcher beyond vLLM's speculative tokens (a margin, not a need).
_ROLLBACK_MARGIN = 8
#: Request kinds whose output is JSON (where the loop guard applies).
_JSON_KINDS = ("JSON", "JSON_OBJECT")
#: "Tokens left" the guard is told: a backend does not know the request's budget.
_UNKNOWN_BUDGET = 1 << 30

#: Structout backends alive in this process (created, not destroyed): while there is one, the
#: engine here constrains with structout, and the plugin applies the batch's bitmask to CPU
#: logits natively (see ``plugin._wrap_apply_grammar_bitmask``).
_live_backends = 0
_live_lock = threading.Lock()


def serves_this_process() -> bool:
    """Whether a structout backend is alive in this process."""
    return _live_backends > 0


def loop_guard_from_env() -> LoopGuard | None:
    """The loop guard settings of this server: ``STRUCTOUT_LOOP_GUARD`` = ``1``/``true``/``on``
    turns the defaults on (no budget reserve), anything else leaves it off."""
    value = os.environ.get("STRUCTOUT_LOOP_GUARD", "").strip().lower()
    return LoopGuard(reserve_tokens=0) if value in ("1", "true", "on", "yes") else None


class _Guarded:
    """The loop guard of one request: its settings, the vocabulary's closers and token bytes,
    and the guard state after the tokens fed so far."""

    def __init__(self, setting: LoopGuard, closers: TokenClosers, token_bytes: list[bytes]):
        self.setting = setting
        self.closers = closers
        self.token_bytes = token_bytes
        self.guard = RowGuard(setting, JsonTrack(), 0)

    def feed(self, token: int) -> None:
        data = self.token_bytes[token] if token < len(self.token_bytes) else b""
        if data:
            self.guard.track.feed(data)
            self.guard.observe(_UNKNOWN_BUDGET)

    def replay(self, tokens: list[int]) -> None:
        self.guard = RowGuard(self.setting, JsonTrack(), 0)
        for token in tokens:
            self.feed(token)

    def narrow(self, row: np.ndarray) -> None:
        self.guard.narrow_bitmask(row, self.closers)


class _Stops:
    """A request's stop ids, and how they differ from what the native mask allows."""

    __slots__ = ("clear", "ids", "where_finished")

    def __init__(self, stop_ids: Iterable[int] | None, eos_ids: Iterable[int], size: int) -> None:
        eos = {int(t) for t in eos_ids}
        stops = {int(t) for t in stop_ids or () if 0 <= int(t) < size} or eos
        #: Tokens that end the request.
        self.ids = frozenset(stops)
        #: Vocabulary EOS ids that are not stops here: never allowed.
        self.clear = tuple(sorted(eos - stops))
        #: Stops the native mask does not know: allowed exactly where the grammar can finish.
        self.where_finished = tuple(sorted(stops - eos))

    def fix_row(self, row: np.ndarray[Any, Any], can_finish: bool) -> None:
        """Adjusts one filled bitmask row (viewed as uint32) to this request's stops."""
        for t in self.clear:
            row[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)
        for t in self.where_finished:
            if can_finish:
                row[t >> 5] |= np.uint32(1 << (t & 31))
            else:
                row[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)


class StructoutGrammar(StructuredOutputGrammar):
    """One request's parse state (``StructuredOutputGrammar`` of vLLM)."""

    def __init__(self, matcher: Any, stops: _Stops, guarded: _Guarded | None = None) -> None:
        self._matcher = matcher
        self._stops = stops
        self._guarded = guarded
        self._fix = bool(stops.clear or stops.where_finished)
        self._fed: list[int] = []
        #: A stop id was accepted (counted as one step by vLLM's rollbacks).
        self._terminated = False

    # ------------------------------------------------------------------------ state changes
    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advances over ``tokens``; False (the request is then ended by vLLM) when one is not
        allowed. Tokens after an accepted stop id are ignored."""
        for token in tokens:
            if self._terminated:
                return True
            if not self._accept(token):
                logger.error(
                    "structout: token %d is not allowed by the grammar of request %s",
                    token,
                    request_id,
                )
                return False
        return True

    def _accept(self, token: int) -> bool:
        if token in self._stops.ids:
            if not self._matcher.can_finish():
                return False
            self._terminated = True
            return True
        if token in self._stops.clear or not self._matcher.accept_token(token):
            return False
        self._fed.append(token)
        if self._guarded is not None:
            self._guarded.feed(token)
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` the grammar allows from here; the state is unchanged."""
        accepted: list[int] = []
        for token in tokens:
            if self._terminated or token < 0:
                break
            if token in self._stops.ids:
                if self._matcher.can_finish():
                    accepted.append(token)
                break
            if token in self._stops.clear or not self._matcher.accept_token(token):
                break
            accepted.append(token)
        fed = len(accepted) - (1 if accepted and accepted[-1] in self._stops.ids else 0)
        if fed:
            self._matcher.rollback(fed)
        return accepted

    def rollback(self, num_tokens: int) -> None:
        """Undoes the last ``num_tokens`` accepted tokens (a stop id counts as one)."""
        if num_tokens <= 0:
            return
        if self._terminated:
            self._terminated = False
            num_tokens -= 1
        num_tokens = min(num_tokens, len(self._fed))
        if num_tokens == 0:
            return
        keep = len(self._fed) - num_tokens
        try:
            self._matcher.rollback(num_tokens)
        except RollbackError:  # beyond the window: replay from the start
            self._matcher.reset()
            for token in self._fed[:keep]:
                self._matcher.accept_token(token)
        del self._fed[keep:]
        if self._guarded is not None:
            self._guarded.replay(self._fed)

    def reset(self) -> None:
        self._matcher.reset()
        self._fed.clear()
        self._terminated = False
        if self._guarded is not None:
            self._guarded.replay([])

    # ---------------------------------------------------------------------------- queries
    def fill_bitmask(self, bitmask: torch.Tensor, idx: int) -> None:
        """Writes the allowed tokens into row ``idx`` of vLLM's CPU int32 bitmask (natively,
        GIL released)."""
        array = bitmask.numpy()
        self._matcher.fill_next_token_bitmask(array, idx)
        self._finish_row(array[idx])

    def _finish_row(self, row: np.ndarray) -> None:
        """After the native fill of ``row``: the request's stop ids, then the loop guard."""
        if self._fix:
            self._stops.fix_row(row.view(np.uint32), self._matcher.can_finish())
        if self._guarded is not None:
            self._guarded.narrow(row)

    def is_terminated(self) -> bool:
        return self._terminated

    @property
    def matcher(self) -> Any:
        """The structout matcher (for inspection)."""
        return self._matcher


class StructoutBackend(StructuredOutputBackend):
    """vLLM's ``StructuredOutputBackend`` for structout (one per engine)."""

    #: Limits applied to every request (the plugin validates requests under the same).
    limits = LIMITS

    def __init__(self, vllm_config: Any, tokenizer: Any, vocab_size: int) -> None:
        self.vllm_config = vllm_config
        self.tokenizer = tokenizer
        self.vocab_size = int(vocab_size)
        spec = int(getattr(vllm_config, "num_speculative_tokens", 0) or 0)
        #: Matchers can undo vLLM's speculative steps (and validate drafts by accept + rollback).
        self.max_rollback_tokens = spec + _ROLLBACK_MARGIN
        self._vocab: Any = None
        self._vocab_lock = threading.Lock()
        #: The loop guard for JSON requests (``STRUCTOUT_LOOP_GUARD``), and what it needs.
        self.loop_guard = loop_guard_from_env()
        self._closers: tuple[TokenClosers, list[bytes]] | None = None
        global _live_backends
        with _live_lock:
            _live_backends += 1
        self._alive = True

    def vocabulary(self) -> Any:
        """The structout vocabulary of the engine's tokenizer (built on first use)."""
        with self._vocab_lock:
            if self._vocab is None:
                self._vocab = _vocabulary_for(self.vllm_config, self.vocab_size)
            return self._vocab

    def compile_grammar(
        self, request_type: Any, grammar_spec: str, stop_token_ids: set[int] | None = None
    ) -> StructoutGrammar:
        """The grammar of one request (vLLM runs this per request, off the engine's step; an
        exception fails that request alone)."""
        vocab = self.vocabulary()
        kbnf = request_kbnf(str(request_type.name), grammar_spec, self.limits)
        compiled = get_default_cache().compiled_grammar(kbnf, vocab, self.limits.engine_options())
        matcher = compiled.matcher(max_rollback_tokens=self.max_rollback_tokens)
        guarded = None
        if self.loop_guard is not None and str(request_type.name) in _JSON_KINDS:
            closers, token_bytes = self._token_closers(vocab)
            guarded = _Guarded(self.loop_guard, closers, token_bytes)
        return StructoutGrammar(
            matcher, _Stops(stop_token_ids, vocab.eos_token_ids, self.vocab_size), guarded
        )

    def _token_closers(self, vocab: Any) -> tuple[TokenClosers, list[bytes]]:
        with self._vocab_lock:
            if self._closers is None:
                token_bytes = text_token_bytes(vocab, self.vocab_size)
                self._closers = (TokenClosers(token_bytes), token_bytes)
            return self._closers

    @staticmethod
    def fill_rows(
        bitmask: torch.Tensor, rows: list[tuple[StructoutGrammar, int]], num_threads: int
    ) -> None:
        """Fills row ``index`` of vLLM's CPU int32 bitmask for each ``(grammar, index)``: all
        masks in one native call (GIL released, ``num_threads`` threads), then each request's
        stop ids — the same rows :meth:`StructoutGrammar.fill_bitmask` writes one by one."""
        if not rows:
            return
        import structout

        array = bitmask.numpy()
        structout.fill_next_token_bitmasks(
            [g.matcher for g, _ in rows], array, [i for _, i in rows], num_threads=num_threads
        )
        for grammar, index in rows:
            grammar._finish_row(array[index])

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        return torch.full((max_num_seqs, (self.vocab_size + 31) // 32), -1, dtype=torch.int32)

    def destroy(self) -> None:
        self._vocab = None
        global _live_backends
        with _live_lock:
            if self._alive:
                self._alive = False
                _live_backends -= 1


def _vocabulary_for(vllm_config: Any, size: int) -> Any:
    """The structout vocabulary of the engine's tokenizer, ``size`` ids wide; its EOS ids are
    the tokenizer's and the generation config's (the ones vLLM stops on)."""
    from transformers import AutoTokenizer

    import structout

    model_config = vllm_config.model_config
    tokenizer = AutoTokenizer.from_pretrained(
        model_config.tokenizer,
        revision=model_config.tokenizer_revision,
        trust_remote_code=model_config.trust_remote_code,
    )
    eos: set[int] = set()
    if isinstance(tokenizer.eos_token_id, int):
        eos.add(tokenizer.eos_token_id)
    configured = model_config.try_get_generation_config().get("eos_token_id")
    if isinstance(configured, int):
        eos.add(configured)
    elif isinstance(configured, (list, tuple)):
        eos.update(int(t) for t in configured)
    if not eos:
        raise StructoutError(
            f"the tokenizer of {model_config.model} names no EOS token; structout cannot tell "
            "where a constrained output may end"
        )
    return structout.Vocabulary.from_hf(
        tokenizer, vocab_size=size, eos_token_ids=sorted(t for t in eos if 0 <= t < size)
    )
