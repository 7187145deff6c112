"""Registers structout as vLLM's structured-output backend ``"structout"``.

vLLM runs every ``vllm.general_plugins`` entry point in each of its processes (the API server
before it parses ``--structured-outputs-config``, the engine core, the workers);
:func:`register` is structout's. It changes five things of vLLM at run time, nothing else:

1. ``StructuredOutputsConfig.backend`` accepts ``"structout"`` (its ``Literal`` is extended and
   the pydantic dataclass rebuilt: this covers ``--structured-outputs-config`` JSON and
   ``LLM(structured_outputs_config=...)``).
2. ``SamplingParams._validate_structured_outputs``, for that backend only, runs vLLM's generic
   request checks and then structout's own (translation and a byte-level compile): a request
   structout cannot enforce gets ``VLLMValidationError`` (HTTP 400) with structout's message. It
   never falls through to vLLM's ``"auto"`` choice of another backend.
3. ``StructuredOutputManager.grammar_init`` creates a :class:`StructoutBackend` when the
   request's backend is ``"structout"``; other backends are created by vLLM as before.
4. ``StructuredOutputManager.grammar_bitmask``, with a structout backend and no speculative
   tokens, fills the batch's rows in one native call.
5. The model runner's ``apply_grammar_bitmask``, while a structout backend lives in the process
   and the logits are float32 on the CPU, applies the mask with structout's native kernel
   (vLLM's CPU path calls XGrammar's, about 1.2 ms for 8 rows of a 49,152-token vocabulary with
   few tokens allowed, against 40 us); on an accelerator, and for other backends, vLLM's own.

Invariants: :func:`register` is idempotent and never raises (vLLM runs it for every user, who
may not want structout); on a vLLM outside :data:`SUPPORTED_VLLM` it patches nothing but the
backend's name, whose selection then fails at start-up with one message naming the range.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from typing import Any, Callable, Literal, get_args

from structout.errors import StructoutError

__all__ = ["BACKEND", "SUPPORTED_VLLM", "register"]

#: The backend's name in ``structured_outputs_config``.
BACKEND = "structout"
#: The vLLM versions this registration is written for (pyproject's ``vllm`` extra says the same).
SUPPORTED_VLLM = ">=0.32,<0.33"
_SUPPORTED = ((0, 32), (0, 33))  # [low, high) of (major, minor)

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_registered = False
#: Marks the functions this module installed (so a second registration wraps nothing twice).
_MARK = "_structout_wrapped"


def register() -> None:
    """Makes ``"structout"`` a structured-output backend of the running vLLM (idempotent).

    vLLM calls it through the ``vllm.general_plugins`` entry point. Offline, call it before
    ``LLM(..., structured_outputs_config={"backend": "structout"})``: ``LLM`` validates that
    dict before it loads plugins."""
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
        try:
            version = _vllm_version()
            supported = _is_supported(version)
            if supported:
                _wrap_validation()
                _wrap_grammar_init()
                _wrap_grammar_bitmask()
                _wrap_apply_grammar_bitmask()
            # Last: the name is accepted only once the backend works (or refuses clearly).
            _accept_backend_name(None if supported else version)
        except Exception:  # never break vLLM for users of other backends
            logger.exception("structout: cannot register its vLLM backend; it is unavailable")


def _install(owner: Any, name: str, wrap: Callable[[Any], Callable[..., Any]]) -> None:
    """Sets ``owner.<name>`` to ``wrap(original)`` (carrying the original's name and docs), once:
    a second registration finds the mark and wraps nothing twice."""
    original = getattr(owner, name)
    if getattr(original, _MARK, False):
        return
    wrapper = functools.update_wrapper(wrap(original), original)
    setattr(wrapper, _MARK, True)
    setattr(owner, name, wrapper)


# ------------------------------------------------------------------------------------- versions
def _vllm_version() -> str:
    import vllm

    return str(getattr(vllm, "__version__", "unknown"))


def _is_supported(version: str) -> bool:
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        return False
    release = (int(found.group(1)), int(found.group(2)))
    return _SUPPORTED[0] <= release < _SUPPORTED[1]


def _unsupported_message(version: str) -> str:
    return (
        f"structured-output backend {BACKEND!r} supports vLLM {SUPPORTED_VLLM}, and this is vLLM "
        f"{version}: install a supported vLLM (pip install 'structout[vllm]') or choose another "
        "backend"
    )


# ---------------------------------------------------------------------------- 1. the name
def _accept_backend_name(unsupported_version: str | None) -> None:
    """Adds ``"structout"`` to ``StructuredOutputsConfig.backend``'s ``Literal``; on an
    unsupported vLLM, selecting it then fails validation with :func:`_unsupported_message`."""
    from pydantic.dataclasses import rebuild_dataclass
    from vllm.config.structured_outputs import StructuredOutputsConfig

    annotation = StructuredOutputsConfig.__annotations__["backend"]
    names = get_args(annotation)
    if BACKEND in names:
        return
    extended: Any = Literal[names + (BACKEND,)]
    if unsupported_version is not None:
        from typing import Annotated

        from pydantic import AfterValidator

        extended = Annotated[extended, AfterValidator(_refuse(unsupported_version))]
    # pydantic rebuilds a dataclass's validator from its annotations.
    StructuredOutputsConfig.__annotations__["backend"] = extended
    StructuredOutputsConfig.__dataclass_fields__["backend"].type = extended
    rebuild_dataclass(StructuredOutputsConfig, force=True)


def _refuse(version: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value == BACKEND:
            raise ValueError(_unsupported_message(version))
        return value

    return check


# ---------------------------------------------------------------------- 2. request validation
def _wrap_validation() -> None:
    from vllm.sampling_params import SamplingParams

    def wrap(original: Any) -> Callable[..., Any]:
        def _validate_structured_outputs(
            self: Any, model_config: Any, structured_outputs_config: Any, tokenizer: Any
        ) -> None:
            if getattr(structured_outputs_config, "backend", None) != BACKEND:
                original(self, model_config, structured_outputs_config, tokenizer)
                return
            validate_request(self, model_config, tokenizer)

        return _validate_structured_outputs

    _install(SamplingParams, "_validate_structured_outputs", wrap)


def validate_request(params: Any, model_config: Any, tokenizer: Any) -> None:
    """vLLM 0.32's generic checks of ``params.structured_outputs`` (those of
    ``SamplingParams._validate_structured_outputs`` before it picks a backend), then structout's:
    raises ``VLLMValidationError``; sets the request's backend to ``"structout"``."""
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import check_json_nesting
    from vllm.v1.structured_output.request import get_structured_output_key

    from structout.integrations.vllm.specs import LIMITS, check_request

    so = params.structured_outputs
    if so is None:
        return
    if getattr(model_config, "is_diffusion", False):
        raise VLLMValidationError(
            "Structured outputs are not yet supported for diffusion language models."
        )
    if tokenizer is None:
        raise VLLMValidationError(
            "Structured outputs requires a tokenizer so it can't be used with 'skip_tokenizer_init'"
        )
    if so._backend and so._backend != BACKEND:
        raise VLLMValidationError(
            "Request-level structured output backend selection is not supported. The request "
            f"specified '{so._backend}', but vLLM was initialised with '{BACKEND}'."
        )
    if isinstance(so.choice, list) and not so.choice:
        raise VLLMValidationError(f"Choice '{so.choice}' cannot be an empty list")
    for name in ("grammar", "json", "structural_tag"):
        value = getattr(so, name)
        if isinstance(value, str) and value.strip() == "":
            raise VLLMValidationError(f"structured_outputs.{name} cannot be an empty string")
    check_json_nesting(so.json)
    check_json_nesting(so.structural_tag, structural_tag=True)
    if so.json_object is False:
        raise VLLMValidationError(
            "structured_outputs.json_object must be True if set; omit structured_outputs to "
            "disable structured outputs"
        )
    if so.regex and "\x00" in so.regex:
        raise VLLMValidationError(
            "structured_outputs.regex must not contain a NUL character ('\\x00')"
        )
    kind, spec = get_structured_output_key(so)
    try:
        check_request(kind.name, spec, LIMITS)
    except (StructoutError, ValueError, TypeError, RecursionError) as exc:
        raise VLLMValidationError(f"structout: {type(exc).__name__}: {exc}") from None
    so._backend = BACKEND
    so.__post_init__()


# --------------------------------------------------------------------------- 3. the backend
def _wrap_grammar_init() -> None:
    from vllm.v1.structured_output import StructuredOutputManager

    def wrap(original: Any) -> Callable[..., Any]:
        def grammar_init(self: Any, request: Any) -> None:
            if self.backend is None and _requests_structout(request):
                from structout.integrations.vllm.backend import StructoutBackend

                # vLLM keeps one backend per engine and creates it only while it has none.
                self.backend = StructoutBackend(
                    self.vllm_config,
                    tokenizer=self.tokenizer,
                    vocab_size=self.vllm_config.model_config.get_vocab_size(),
                )
            original(self, request)

        return grammar_init

    _install(StructuredOutputManager, "grammar_init", wrap)


def _requests_structout(request: Any) -> bool:
    if request.structured_output_request is None or request.sampling_params is None:
        return False
    so = request.sampling_params.structured_outputs
    return so is not None and so._backend == BACKEND


# ------------------------------------------------------------------ 4. the batch's bitmask
def _wrap_grammar_bitmask() -> None:
    """``StructuredOutputManager.grammar_bitmask`` with a structout backend and no speculative
    tokens: every row of the batch in one native call (vLLM's own loop asks the backend row by
    row, in Python). Otherwise, and for other backends, vLLM's method runs as it is."""
    from vllm.v1.structured_output import StructuredOutputManager

    def wrap(original: Any) -> Callable[..., Any]:
        def grammar_bitmask(
            self: Any,
            requests: Any,
            structured_output_request_ids: list[str],
            scheduled_spec_decode_tokens: Any,
        ) -> Any:
            from structout.integrations.vllm.backend import StructoutBackend

            if (
                not structured_output_request_ids
                or not isinstance(self.backend, StructoutBackend)
                or self.vllm_config.num_speculative_tokens
            ):
                return original(
                    self, requests, structured_output_request_ids, scheduled_spec_decode_tokens
                )
            if self._grammar_bitmask is None:
                max_rows = self.vllm_config.scheduler_config.max_num_seqs
                self._grammar_bitmask = self.backend.allocate_token_bitmask(max_rows)
            bitmask = self._grammar_bitmask
            live = []
            for index, req_id in enumerate(structured_output_request_ids):
                request = requests[req_id]
                grammar = request.structured_output_request.grammar
                # As vLLM's loop: masked once the grammar applies (not while reasoning) and until
                # it terminated; other rows allow every token.
                if (
                    self._get_constraint_bounds(request, ()).constraint_start == 0
                    and not grammar.is_terminated()
                ):
                    live.append((grammar, index))
                else:
                    bitmask[index].fill_(self._full_mask)
            StructoutBackend.fill_rows(bitmask, live, mask_threads(self.vllm_config))
            return bitmask[: len(structured_output_request_ids)].numpy()

        return grammar_bitmask

    _install(StructuredOutputManager, "grammar_bitmask", wrap)


# ------------------------------------------------------------- 5. applying it to the logits
def _wrap_apply_grammar_bitmask() -> None:
    """The model runner's ``apply_grammar_bitmask`` (a name its module imported) with structout's
    kernel for CPU float32 logits while a structout backend lives here (see the module docs)."""
    import vllm.v1.worker.gpu_model_runner as runner

    def wrap(original: Any) -> Callable[..., Any]:
        def apply_grammar_bitmask(
            scheduler_output: Any, grammar_output: Any, input_batch: Any, logits: Any
        ) -> None:
            import torch

            from structout.integrations.vllm.backend import serves_this_process

            bitmask = grammar_output.grammar_bitmask
            if (
                serves_this_process()
                and logits.is_cpu
                and logits.dtype == torch.float32
                and logits.dim() == 2
                and logits.shape[1] <= bitmask.shape[1] * 32  # no columns the bitmask leaves out
            ):
                apply_rows_natively(scheduler_output, grammar_output, input_batch, logits)
            else:
                original(scheduler_output, grammar_output, input_batch, logits)

        return apply_grammar_bitmask

    _install(runner, "apply_grammar_bitmask", wrap)


def apply_rows_natively(
    scheduler_output: Any, grammar_output: Any, input_batch: Any, logits: Any
) -> None:
    """vLLM's row mapping (the bitmask holds the structured requests in the scheduler's order,
    each followed by its speculative positions; the logits follow the runner's batch, each
    request's positions shifted by the speculative tokens before it), then one native pass:
    every logit whose bit is clear becomes ``-inf``; rows of other requests stay as they are."""
    import numpy as np

    from structout.bitmask import apply_token_bitmask_

    bitmask = grammar_output.grammar_bitmask
    spec = scheduler_output.scheduled_spec_decode_tokens
    wanted = set(grammar_output.structured_output_request_ids)
    logit_row: dict[str, int] = {}
    offset = 0
    for batch_index, req_id in enumerate(input_batch.req_ids):
        if req_id in wanted:
            logit_row[req_id] = batch_index + offset
        offset += len(spec.get(req_id, ()))
    ordered = np.full((logits.shape[0], bitmask.shape[1]), -1, dtype=np.int32)
    source = 0
    for req_id in grammar_output.structured_output_request_ids:
        positions = 1 + len(spec.get(req_id, ()))
        row = logit_row.get(req_id)
        if row is not None:
            ordered[row : row + positions] = bitmask[source : source + positions]
        source += positions
    apply_token_bitmask_(logits, ordered)


def mask_threads(vllm_config: Any) -> int:
    """Threads of the batch's mask call. One on a CPU build, where the forward pass owns the cores
    (measured with the earlier processor: 2 threads next to torch's pool cost 1.7 ms a step);
    elsewhere the scheduler's cores are free while the accelerator runs the forward pass: up to
    8 (a step of 256 rows takes a few of them; more would only wait)."""
    device = getattr(getattr(vllm_config, "device_config", None), "device_type", "cpu")
    if device == "cpu":
        return 1
    return max(1, min(8, os.cpu_count() or 1))
