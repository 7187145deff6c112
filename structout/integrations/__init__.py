"""Integrations with other libraries (each imported on demand).

* :mod:`structout.integrations.transformers` — ``StructuredLogitsProcessor`` for
  ``transformers``' ``model.generate(...)``.
"""

__all__: list[str] = []
