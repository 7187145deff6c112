"""Integrations with other libraries (each imported on demand).

* :mod:`structout.integrations.transformers` — ``StructuredLogitsProcessor`` for
  ``transformers``' ``model.generate(...)``.
* :mod:`structout.integrations.vllm` — structout as a structured-output backend of vLLM
  (``--structured-outputs-config '{"backend": "structout"}'``).
"""

__all__: list[str] = []
