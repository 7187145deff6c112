"""structout as a structured-output backend of vLLM.

Installed into vLLM's environment, structout registers the backend ``"structout"`` (entry point
``vllm.general_plugins``); select it the standard way::

    python -m vllm.entrypoints.openai.api_server --model M \\
        --structured-outputs-config '{"backend": "structout"}'

    LLM(model=M, structured_outputs_config={"backend": "structout"})   # after register()

Every request kind of vLLM is enforced (JSON Schema, JSON object, regex, choice, grammar in
KBNF/GBNF/Lark, structural tags such as tool calls). Names are imported lazily, so importing this
package does not import vLLM:

* :func:`register` (module ``plugin``): registers the backend (idempotent; vLLM calls it);
* :class:`StructoutBackend`, :class:`StructoutGrammar` (module ``backend``);
* :func:`structured_outputs`, :func:`parse_output` (module ``outputs``): a request's
  ``structured_outputs`` fields from a type, and the typed value back from an output.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structout.integrations.vllm.backend import StructoutBackend, StructoutGrammar
    from structout.integrations.vllm.outputs import parse_output, structured_outputs
    from structout.integrations.vllm.plugin import BACKEND, SUPPORTED_VLLM, register

__all__ = [
    "BACKEND",
    "SUPPORTED_VLLM",
    "StructoutBackend",
    "StructoutGrammar",
    "parse_output",
    "register",
    "structured_outputs",
]

_MODULES = {
    "BACKEND": "plugin",
    "SUPPORTED_VLLM": "plugin",
    "register": "plugin",
    "StructoutBackend": "backend",
    "StructoutGrammar": "backend",
    "parse_output": "outputs",
    "structured_outputs": "outputs",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
