"""Integrations with other libraries (each imported on demand).

* :mod:`structout.integrations.transformers` — ``StructuredLogitsProcessor`` for
  ``transformers``' ``model.generate(...)``.
* :mod:`structout.integrations.vllm` — ``StructoutLogitsProcessor`` for vLLM's V1 engine
  (per-request schemas in ``SamplingParams.extra_args`` / ``vllm_xargs``).
"""

__all__: list[str] = []
