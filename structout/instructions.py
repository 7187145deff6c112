"""The instruction appended to the prompt so the model sees a schema's fields and descriptions.

Small models follow a plain-language field list much better than raw JSON Schema, so object
schemas are described in words (nested objects up to :data:`MAX_NESTED_FIELD_LISTS` levels,
other values up to :data:`MAX_DESCRIBED_DEPTH`); anything that cannot be described falls back to
the schema's JSON without ``title`` keywords. The instruction only guides the model: the grammar
enforces the schema whether or not it is shown.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["schema_instruction", "without_titles"]

#: Object fields are listed as nested bullet lists down to this depth, then described inline.
MAX_NESTED_FIELD_LISTS = 3
#: Deeper values are described as "a JSON value".
MAX_DESCRIBED_DEPTH = 6
#: ``$ref`` chains longer than this are not followed (a cycle of references).
MAX_REF_CHAIN = 32

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def without_titles(node: Any) -> Any:
    """A copy of a schema without ``title`` keywords (Pydantic repeats every field name)."""
    if isinstance(node, list):
        return [without_titles(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k == "title" and isinstance(v, str):
            continue
        if k in _SCHEMA_MAPS and isinstance(v, dict):
            out[k] = {name: without_titles(sub) for name, sub in v.items()}
        elif k in ("enum", "const", "default", "examples"):
            out[k] = v
        else:
            out[k] = without_titles(v)
    return out


def schema_instruction(schema: Any, descending: bool = False) -> str:
    """What the model is told about the expected output: a plain-language field list for object
    schemas (small models follow it much better than raw JSON Schema), else the JSON Schema.
    Enum options are listed sorted (``descending``: in reverse), whatever the schema's order."""
    try:
        text = _describe_root(schema, descending)
    except (KeyError, TypeError, ValueError, RecursionError):
        text = None
    if text is not None:
        return text
    try:
        shown = json.dumps(without_titles(schema), ensure_ascii=False)
    except RecursionError:  # deeper than Python can print (only with raised depth limits)
        return "Respond only with JSON that matches the required JSON Schema."
    return "Respond only with JSON that matches this JSON Schema:\n" + shown


def _describe_root(schema: Any, descending: bool) -> str | None:
    if not isinstance(schema, dict):
        return None
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    node = _resolve(schema, defs)
    if node.get("type") == "object" and isinstance(node.get("properties"), dict):
        lines = _describe_fields(node, defs, 0, set(), descending)
        head = "Respond only with a JSON object with these fields:"
        if node.get("description"):
            head = f"{node['description'].strip()}\n{head}"
        return head + "\n" + "\n".join(lines)
    phrase = _describe(node, defs, 0, set(), descending)
    return f"Respond only with JSON: {phrase}."


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < MAX_REF_CHAIN:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith(("#/$defs/", "#/definitions/")):
            raise ValueError("non-local $ref")
        target = defs[ref.rsplit("/", 1)[1]]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **extra}
        seen += 1
    return node


def _describe_fields(
    node: dict[str, Any], defs: dict[str, Any], depth: int, stack: set[str], descending: bool
) -> list[str]:
    required = set(node.get("required", []))
    pad = "  " * depth
    lines = []
    for name, sub in node["properties"].items():
        sub_r = _resolve(sub, defs) if isinstance(sub, dict) else {}
        opt = "" if name in required else " (optional)"
        desc = sub_r.get("description") if isinstance(sub_r, dict) else None
        is_obj = sub_r.get("type") == "object" and isinstance(sub_r.get("properties"), dict)
        ref = sub.get("$ref") if isinstance(sub, dict) else None
        if is_obj and depth < MAX_NESTED_FIELD_LISTS and ref not in stack:
            line = f"{pad}- {json.dumps(name)}{opt}: an object"
            if desc:
                line += f" ({desc.strip()})"
            lines.append(line + " with these fields:")
            inner = stack | {ref} if ref else stack
            lines.extend(_describe_fields(sub_r, defs, depth + 1, inner, descending))
            continue
        line = f"{pad}- {json.dumps(name)}{opt}: {_describe(sub_r, defs, depth, stack, descending)}"
        if desc:
            line += f" — {desc.strip()}"
        lines.append(line)
    return lines


def _describe(
    node: Any, defs: dict[str, Any], depth: int, stack: set[str], descending: bool
) -> str:
    if node is True or node == {}:
        return "any JSON value"
    if not isinstance(node, dict):
        raise TypeError("schema node")
    node = _resolve(node, defs)
    if depth > MAX_DESCRIBED_DEPTH:
        return "a JSON value"
    if "const" in node:
        return json.dumps(node["const"], ensure_ascii=False)
    if "enum" in node:
        # Sorted: the order a schema lists its options in must not bias which one is chosen.
        words = sorted(
            {json.dumps(v, ensure_ascii=False) for v in node["enum"]}, reverse=descending
        )
        return "one of " + ", ".join(words)
    for key in ("anyOf", "oneOf"):
        if key in node:
            parts = [_describe(v, defs, depth + 1, stack, descending) for v in node[key]]
            return " or ".join(parts)
    t = node.get("type")
    if isinstance(t, list):
        return " or ".join(
            _describe({**node, "type": x}, defs, depth, stack, descending) for x in t
        )
    if t == "null":
        return "null"
    if t == "boolean":
        return "true or false"
    if t == "string":
        bits = []
        if "maxLength" in node:
            bits.append(f"at most {node['maxLength']} characters")
        if node.get("minLength", 0) > 1:
            bits.append(f"at least {node['minLength']} characters")
        if "format" in node:
            bits.append(f"format {node['format']}")
        if "pattern" in node:
            bits.append(f"matching {node['pattern']}")
        return "a string" + (f" ({', '.join(bits)})" if bits else "")
    if t in ("integer", "number"):
        word = "an integer" if t == "integer" else "a number"
        lo = node.get("minimum", node.get("exclusiveMinimum"))
        hi = node.get("maximum", node.get("exclusiveMaximum"))
        if lo is not None and hi is not None:
            return f"{word} from {lo} to {hi}"
        if lo is not None:
            return f"{word}, at least {lo}"
        if hi is not None:
            return f"{word}, at most {hi}"
        return word
    if t == "array":
        items = node.get("items", True)
        inner = (
            _describe(items, defs, depth + 1, stack, descending)
            if items is not False
            else "nothing"
        )
        bits = []
        if "minItems" in node and node["minItems"] > 0:
            bits.append(f"at least {node['minItems']}")
        if "maxItems" in node:
            bits.append(f"at most {node['maxItems']}")
        count = f" ({' and '.join(bits)} items)" if bits else ""
        return f"a list{count}, each {inner}"
    if t == "object":
        props = node.get("properties")
        if isinstance(props, dict) and props:
            fields = ", ".join(
                f"{json.dumps(k)}: {_describe(v, defs, depth + 1, stack, descending)}"
                for k, v in props.items()
            )
            return "an object {" + fields + "}"
        extra = node.get("additionalProperties", True)
        if isinstance(extra, dict):
            values = _describe(extra, defs, depth + 1, stack, descending)
            return f"an object mapping strings to {values}"
        return "a JSON object"
    raise ValueError("cannot describe this schema in words")
