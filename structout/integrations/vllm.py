"""``StructoutLogitsProcessor``: structout masks inside vLLM's V1 engine, per request.

.. code-block:: python

    from vllm import LLM, SamplingParams
    from structout.integrations.vllm import StructoutLogitsProcessor, extra_args, parse_output

    llm = LLM(model=..., logits_processors=[StructoutLogitsProcessor])
    params = SamplingParams(max_tokens=200, extra_args=extra_args(Person))
    person = parse_output(llm.generate([prompt], params)[0], Person)

A request is constrained when its ``SamplingParams.extra_args`` (over HTTP: the body's
``vllm_xargs``) carries one of

* ``"structout_json_schema"``: a JSON Schema, as JSON text or (offline) a dict;
* ``"structout_kbnf"``: the text of a KBNF grammar.

:func:`extra_args` builds them from a Pydantic model or any type, a JSON Schema or a
``structout.Grammar``. Requests without them are left untouched.

Invariants of the processor (one instance per engine worker):

* ``_rows`` maps each constrained request's batch index to its :class:`_Row`; it follows vLLM's
  batch updates (removed, then added, then moved), so a row's index is always the one its
  request has in the logits.
* ``_Row.accepted`` is a prefix of the request's output tokens that its matcher has consumed.
  :meth:`apply` brings it up to the live output list first: it rolls back to the longest common
  prefix when the output shrank or changed (preemption, discarded tokens), then accepts the rest.
* A row whose output is complete allows EOS; EOS is never allowed before (the grammar says when).
* Nothing raises inside the engine: a bad schema is rejected per request by
  :meth:`validate_params` (vLLM turns the ``ValueError`` into an HTTP 400 / an exception for that
  request only); a request the worker still cannot constrain is logged and ended with EOS.
"""

from __future__ import annotations

import functools
import json
import logging
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from vllm.v1.sample.logits_processor import (
    BatchUpdate,
    LogitsProcessor,
    MoveDirectionality,
)

from structout.bitmask import apply_token_bitmask_
from structout.cache import get_default_cache
from structout.compiling import compile_target, schema_kbnf
from structout.errors import RollbackError, SchemaError, StructoutError
from structout.generation import ROLLBACK_WINDOW
from structout.limits import Limits
from structout.targets import KBNF, Target, resolve_schema

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig

__all__ = [
    "JSON_SCHEMA_ARG",
    "KBNF_ARG",
    "StructoutLogitsProcessor",
    "extra_args",
    "parse_output",
]

#: ``extra_args`` / ``vllm_xargs`` key of a JSON Schema (JSON text, or a dict offline).
JSON_SCHEMA_ARG = "structout_json_schema"
#: ``extra_args`` / ``vllm_xargs`` key of a KBNF grammar's text.
KBNF_ARG = "structout_kbnf"

logger = logging.getLogger(__name__)

#: ``(engine config, processor)`` of the live processors: vLLM builds one per engine from the
#: entry point and one more when the class is also named in ``logits_processors``; the second
#: of an engine stays idle, so requests are not masked twice.
_live: list[tuple[weakref.ref[Any], weakref.ref[Any]]] = []


# ------------------------------------------------------------------------------------ user helpers
def extra_args(schema: Any) -> dict[str, str]:
    """The per-request arguments that constrain a request to ``schema``.

    ``schema``: a Pydantic model or any type ``pydantic.TypeAdapter`` accepts (its JSON Schema is
    sent), a JSON Schema dict, or a ``structout.Grammar``. Values are strings, so the result
    serves as ``SamplingParams(extra_args=...)`` and as an HTTP request's ``vllm_xargs`` alike.
    """
    if isinstance(schema, KBNF):
        return {KBNF_ARG: schema.text}
    target = resolve_schema(schema)
    if target.json_schema is None:
        raise TypeError(f"cannot constrain a request to {schema!r}: pass a type, dict or Grammar")
    return {JSON_SCHEMA_ARG: json.dumps(target.json_schema, separators=(",", ":"))}


def parse_output(output: Any, schema: Any) -> Any:
    """Parse a vLLM output back into a value of ``schema`` (as :func:`extra_args` took it).

    ``output``: a ``RequestOutput`` (its first completion), a ``CompletionOutput``, an OpenAI
    completion or chat-completion response or choice, or the text itself. Returns the validated
    instance for a type, the JSON value for a JSON Schema, the text for a Grammar; raises
    ``structout.SchemaValidationError`` when the text does not parse or validate (e.g. the
    request hit ``max_tokens`` before the output was complete).
    """
    return resolve_schema(schema).parse(_text_of(output))


def _text_of(output: Any) -> str:
    if isinstance(output, str):
        return output
    if hasattr(output, "outputs"):  # vllm.RequestOutput
        output = output.outputs[0]
    if hasattr(output, "choices"):  # OpenAI response object
        output = output.choices[0]
    if isinstance(output, dict):  # OpenAI response as JSON
        if "choices" in output:
            output = output["choices"][0]
        message = output.get("message")
        return str(message["content"] if message is not None else output["text"])
    message = getattr(output, "message", None)
    if message is not None:
        return str(message.content)
    return str(output.text)


# ------------------------------------------------------------------------ request → grammar target
def _target_of(args: dict[str, Any] | None) -> Target[str] | None:
    """The constraint a request's extra args ask for (None: unconstrained).

    Raises ``SchemaError`` / ``TypeError`` for malformed arguments.
    """
    if not args:
        return None
    schema, kbnf = args.get(JSON_SCHEMA_ARG), args.get(KBNF_ARG)
    if schema is None and kbnf is None:
        return None
    if schema is not None and kbnf is not None:
        raise SchemaError(f"pass either {JSON_SCHEMA_ARG!r} or {KBNF_ARG!r}, not both")
    if kbnf is not None:
        if not isinstance(kbnf, str):
            raise TypeError(f"{KBNF_ARG} must be the grammar's text, not {type(kbnf).__name__}")
        return Target("grammar", None, kbnf, _no_parse, None)
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise SchemaError(f"{JSON_SCHEMA_ARG} is not valid JSON: {exc}") from exc
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(
            f"{JSON_SCHEMA_ARG} must be a JSON Schema (object or boolean), "
            f"not {type(schema).__name__}"
        )
    if isinstance(schema, bool):  # the same languages as object schemas
        schema = {} if schema else {"not": {}}
    return Target("json_schema", schema, None, _no_parse, None)


def _no_parse(text: str) -> str:
    return text


def _kbnf_of(target: Target[str], limits: Limits) -> str:
    """KBNF text of a target; schemas are translated through the compile-once cache."""
    if target.kbnf is not None:
        return target.kbnf
    return schema_kbnf(target.json_schema, limits.translator_options())


@functools.lru_cache(maxsize=256)
def _check_grammar(kbnf: str, engine_options: tuple[tuple[str, int], ...]) -> None:
    """Compile ``kbnf`` at byte level (no vocabulary): raises ``GrammarError`` or
    ``LimitExceededError``; remembered when it succeeds."""
    import structout

    structout.compile_grammar(kbnf, "start", **dict(engine_options))


# ------------------------------------------------------------------------------------ the processor
@dataclass
class _Row:
    """One constrained request of the batch."""

    matcher: Any
    #: The request's live output token list (vLLM appends to it and may shrink it).
    output: list[int]
    #: Output tokens the matcher has consumed (a prefix of ``output`` after a sync).
    accepted: list[int] = field(default_factory=list)
    #: Set when the request cannot be constrained any more (logged): only EOS is allowed.
    failed: bool = False


class StructoutLogitsProcessor(LogitsProcessor):
    """vLLM V1 logits processor enforcing each request's structout schema or grammar.

    Register it with ``LLM(logits_processors=[StructoutLogitsProcessor])``, the server's
    ``--logits-processors structout.integrations.vllm:StructoutLogitsProcessor``, or by
    installing ``structout[vllm]`` (entry point ``vllm.logits_processors``).
    """

    #: Limits applied to every request (the defaults of ``structout.Limits``).
    limits = Limits()

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Reject a request whose schema or grammar structout cannot enforce (a ``ValueError``
        with structout's message: what, where, hint). Runs in the frontend process; the
        translation it does lands in the compile-once cache the workers read."""
        try:
            target = _target_of(sampling_params.extra_args)
            if target is None:
                return
            kbnf = _kbnf_of(target, cls.limits)
            _check_grammar(kbnf, tuple(sorted(cls.limits.engine_options().items())))
        except (StructoutError, TypeError) as exc:
            raise ValueError(f"structout: {type(exc).__name__}: {exc}") from exc

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        self._rows: dict[int, _Row] = {}
        _live[:] = [(c, p) for c, p in _live if c() is not None and p() is not None]
        self._idle = any(c() is vllm_config for c, _ in _live)
        if self._idle:
            logger.info("structout: processor registered twice for one engine; this one is idle")
            return
        _live.append((weakref.ref(vllm_config), weakref.ref(self)))
        self._vocab = _vocabulary_for(vllm_config)
        self._eos = sorted(int(t) for t in self._vocab.eos_token_ids)
        max_rows = int(vllm_config.scheduler_config.max_num_seqs)
        words = (int(self._vocab.size) + 31) // 32
        #: One bitmask row per batch slot; filled on the CPU, shared with ``_bitmask_t``.
        self._bitmask = np.zeros((max_rows, words), dtype=np.int32)
        self._bitmask_t = torch.from_numpy(self._bitmask)
        self._eos_row = np.zeros(words, dtype=np.int32)
        for t in self._eos:
            self._eos_row.view(np.uint32)[t // 32] |= np.uint32(1 << (t % 32))

    def is_argmax_invariant(self) -> bool:
        """False: masks change the argmax, so greedy requests must see them too."""
        return False

    # ------------------------------------------------------------------ batch bookkeeping
    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None or self._idle:
            return
        for index in batch_update.removed:
            self._rows.pop(index, None)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            row = self._new_row(params, output_ids)
            if row is None:
                self._rows.pop(index, None)
            else:
                self._rows[index] = row
        for a, b, direction in batch_update.moved:
            row_a, row_b = self._rows.pop(a, None), self._rows.pop(b, None)
            if row_a is not None:
                self._rows[b] = row_a
            if row_b is not None and direction == MoveDirectionality.SWAP:
                self._rows[a] = row_b

    def _new_row(self, params: SamplingParams, output_ids: list[int]) -> _Row | None:
        try:
            target = _target_of(params.extra_args)
            if target is None:
                return None
            _, grammar = compile_target(get_default_cache(), target, self._vocab, self.limits)
            matcher = grammar.matcher(max_rollback_tokens=ROLLBACK_WINDOW)
        except Exception as exc:  # noqa: BLE001 - never fail the engine: end this request
            logger.error("structout: cannot constrain a request, ending it: %s", exc)
            return _Row(None, output_ids, failed=True)
        return _Row(matcher, output_ids)

    def _sync(self, row: _Row) -> None:
        """Bring ``row.matcher`` to the state after the request's current output tokens."""
        if row.failed:
            return
        output, accepted = row.output, row.accepted
        n = len(accepted)
        if len(output) < n or output[:n] != accepted:  # shrank or changed: roll back
            common = 0
            limit = min(n, len(output))
            while common < limit and accepted[common] == output[common]:
                common += 1
            try:
                row.matcher.rollback(n - common)
            except RollbackError:  # beyond the window: replay from the start
                row.matcher.reset()
                common = 0
            del accepted[common:]
        for token in output[len(accepted) :]:
            if token < 0:  # a placeholder of async scheduling, not yet sampled
                break
            if row.matcher.is_finished():
                break  # EOS accepted (ignore_eos): nothing more to constrain
            if not row.matcher.accept_token(token):
                logger.error(
                    "structout: output token %d at position %d is not allowed by the request's "
                    "grammar (was it generated without this processor?); ending the request",
                    token,
                    len(accepted),
                )
                row.failed = True
                return
            accepted.append(token)

    # ------------------------------------------------------------------------- masking
    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._rows:
            return logits
        batch = int(logits.shape[0])
        indices = sorted(i for i in self._rows if i < batch)
        live: list[Any] = []
        live_rows: list[int] = []
        for i in indices:
            row = self._rows[i]
            self._sync(row)
            if row.failed or row.matcher.is_finished():
                self._bitmask[i] = self._eos_row
            else:
                live.append(row.matcher)
                live_rows.append(i)
        if live:
            import structout

            # One thread: the forward pass owns the cores, and masks for a batch take a fraction
            # of a millisecond; threads spawned next to torch's spinning OpenMP pool cost more
            # (measured: 1.7 ms per step with 2 threads, 0.23 ms with one).
            structout.fill_next_token_bitmasks(live, self._bitmask, live_rows, num_threads=1)
        if not indices:
            return logits
        if (
            logits.device.type == "cpu"
            and logits.dtype == torch.float32
            and logits.is_contiguous()
            and not logits.requires_grad
        ):
            array = logits.numpy()
            if indices == list(range(batch)):
                apply_token_bitmask_(array, self._bitmask[:batch])
            else:
                for i in indices:
                    apply_token_bitmask_(array[i : i + 1], self._bitmask[i : i + 1])
            return logits
        import structout

        index = torch.tensor(indices, dtype=torch.long)
        masks = self._bitmask_t.index_select(0, index)
        on_device = index.to(logits.device)
        rows = logits.index_select(0, on_device)
        structout.apply_token_bitmask_(rows, masks)
        logits.index_copy_(0, on_device, rows)
        return logits


def _vocabulary_for(vllm_config: VllmConfig) -> Any:
    """The structout vocabulary of the engine's tokenizer, sized to the model's logits; its EOS
    ids are the ones vLLM stops on (the tokenizer's and the generation config's)."""
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
    size = int(model_config.get_vocab_size())
    if not eos:
        raise StructoutError(
            f"the tokenizer of {model_config.model} names no EOS token; structout cannot tell "
            "where a constrained output may end"
        )
    return structout.Vocabulary.from_hf(
        tokenizer, vocab_size=size, eos_token_ids=sorted(t for t in eos if 0 <= t < size)
    )
