"""User helpers around vLLM's structured outputs: the request side (:func:`structured_outputs`)
and the typed value back (:func:`parse_output`). No vLLM import."""

from __future__ import annotations

from typing import Any

from structout.targets import KBNF, resolve_schema

__all__ = ["parse_output", "structured_outputs"]


def structured_outputs(schema: Any) -> dict[str, Any]:
    """vLLM's ``structured_outputs`` fields that constrain a request to ``schema``.

    ``schema``: a Pydantic model or any type ``pydantic.TypeAdapter`` accepts, a JSON Schema
    dict, or a ``structout.KBNF`` grammar. The result serves as
    ``StructuredOutputsParams(**structured_outputs(T))`` offline and as
    ``extra_body={"structured_outputs": structured_outputs(T)}`` with the ``openai`` client.
    """
    if isinstance(schema, KBNF):
        return {"grammar": schema.text}
    target = resolve_schema(schema)
    if target.json_schema is None:
        raise TypeError(
            f"cannot constrain a request to {schema!r}: pass a type, dict or structout.KBNF"
        )
    return {"json": target.json_schema}


def parse_output(output: Any, schema: Any) -> Any:
    """Parse a vLLM output back into a value of ``schema`` (as :func:`structured_outputs` took
    it).

    ``output``: a ``RequestOutput`` (its first completion), a ``CompletionOutput``, an OpenAI
    completion or chat-completion response or choice (object or JSON), or the text itself.
    Returns the validated instance for a type, the JSON value for a JSON Schema, the text for
    KBNF; raises ``structout.SchemaValidationError`` when the text does not parse or validate
    (e.g. the request hit ``max_tokens`` before the output was complete).
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
