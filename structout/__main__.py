"""Command line: ``python -m structout demo`` and ``python -m structout check GRAMMAR INPUT``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]


# ----------------------------------------------------------------------------------- check
def _describe_bytes(allowed: bytes, limit: int = 16) -> str:
    if not allowed:
        return "nothing (the input must end here)"
    shown = []
    for b in allowed[:limit]:
        ch = chr(b)
        shown.append(repr(ch) if 0x20 <= b < 0x7F else f"0x{b:02x}")
    more = f" and {len(allowed) - limit} more" if len(allowed) > limit else ""
    return ", ".join(shown) + more


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    return line, len(data[start:offset].decode("utf-8", errors="replace")) + 1


#: Whitespace runs a checked document may have between JSON tokens with the "any" layout: deep
#: indentation of pretty-printed files fits; the automaton grows with it only logarithmically.
CHECK_MAX_WHITESPACE = 1024

#: JSON layouts of ``check`` for JSON Schemas: "any" is every whitespace JSON allows (files as
#: people and tools write them: pretty-printed, minified, with a final newline); "compact" is
#: exactly the layout structout generates (``{"a": 1, "b": [1, 2]}``).
CHECK_LAYOUTS: dict[str, dict[str, Any]] = {
    "any": {"whitespace": "flexible", "max_whitespace": CHECK_MAX_WHITESPACE},
    "compact": {"whitespace": "compact"},
}


def _load_grammar_text(path: Path, layout: str = "any", property_order: str = "any") -> str:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        from structout.schema import to_kbnf

        schema = json.loads(text)
        return str(to_kbnf(schema, property_order=property_order, **CHECK_LAYOUTS[layout]))
    return text


def check(
    grammar_file: str,
    input_file: str,
    start: str = "start",
    strip: bool = False,
    layout: str = "any",
    property_order: str = "any",
) -> int:
    """Print whether the input matches the grammar; 0 = match, 1 = no match, 2 = bad grammar.

    A JSON Schema (``.json``) accepts its documents in any JSON whitespace by default
    (``layout="any"``); ``layout="compact"`` checks the layout structout generates. Its objects
    take their properties in any order by default (``property_order="schema"``: the schema's
    order, as structout generates them by default). A KBNF grammar defines its own whitespace.
    """
    from structout._engine import compile_grammar
    from structout.errors import StructoutError

    gpath, ipath = Path(grammar_file), Path(input_file)
    try:
        text = _load_grammar_text(gpath, layout, property_order)
        grammar = compile_grammar(text, start)
    except (StructoutError, ValueError, OSError) as exc:
        print(f"error: cannot load grammar {gpath}: {exc}", file=sys.stderr)
        return 2
    try:
        data = ipath.read_bytes()
    except OSError as exc:
        print(f"error: cannot read input {ipath}: {exc}", file=sys.stderr)
        return 2
    if strip:
        data = data.rstrip(b"\r\n")
    rec = grammar.recognizer()
    for offset, byte in enumerate(data):
        if not rec.feed_byte(byte):
            line, col = _line_col(data, offset)
            print(
                f"no match: {ipath}:{line}:{col} (byte {offset}): {chr(byte)!r} cannot come here; "
                f"expected {_describe_bytes(rec.allowed_bytes())}"
            )
            context = data[max(0, offset - 40) : offset].decode("utf-8", errors="replace")
            print(f"  after: ...{context!r}")
            return 1
    if not rec.is_complete():
        line, col = _line_col(data, len(data))
        print(
            f"no match: {ipath} ends too early at {line}:{col} (byte {len(data)}); expected "
            f"{_describe_bytes(rec.allowed_bytes())}"
        )
        return 1
    print(f"match: {ipath} ({len(data)} bytes) is a sentence of {gpath}")
    return 0


# ------------------------------------------------------------------------------------ demo
DEMO_MESSAGE = (
    "Hi, I'm Maria Lopez, a nurse from Madrid. I'm 34 and speak Spanish and English. "
    "Call me at +34 600 123 456."
)


def _demo_types() -> Any:
    from typing import Literal, Optional

    from pydantic import BaseModel, Field

    class Contact(BaseModel):
        """A person's contact card."""

        name: str = Field(max_length=40)
        job: str = Field(max_length=30)
        city: str = Field(max_length=30)
        age: int = Field(ge=0, le=120)
        phone: Optional[str] = Field(default=None, pattern=r"^\+[0-9 ]{8,16}$")  # noqa: UP045
        languages: list[Literal["English", "Spanish", "French", "German", "Italian"]] = Field(
            max_length=3
        )

    return Contact


def demo(message: str, max_new_tokens: int, jump_forward: bool, seed: int | None) -> int:
    from structout.errors import StructoutError
    from structout.model import Model

    contact_type = _demo_types()
    t0 = time.perf_counter()
    model = Model.default()
    load_s = time.perf_counter() - t0
    print(f"model: SmolLM2-135M-Instruct on {model.device} (loaded in {load_s:.1f} s)")
    print(f"message: {message}")
    try:
        res = model.generate(
            f"Extract the contact card from this message:\n{message}",
            contact_type,
            max_new_tokens=max_new_tokens,
            jump_forward=jump_forward,
            seed=seed,
            temperature=0.0 if seed is None else 0.7,
            return_result=True,
        )
    except StructoutError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    t = res.timings
    print()
    print(f"{type(res.value).__name__}(")
    for name, value in res.value:
        print(f"    {name}={value!r},")
    print(")")
    print()
    print(
        f"tokens: {len(res.token_ids)} generated, {res.forced_tokens} of them by jump-forward; "
        f"{res.forward_passes} forward passes; finish: {res.finish_reason}"
    )
    print(
        f"timings: compile {t.compile_ms:.1f} ms | prefill {t.prefill_ms:.0f} ms | "
        f"total {t.total_ms:.0f} ms | {t.tokens_per_s:.1f} tokens/s | "
        f"mask {t.mask_us_per_token:.0f} us/token | grammar total {t.grammar_ms:.1f} ms"
    )
    return 0


# ------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m structout", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p_demo = sub.add_parser("demo", help="generate a typed object with SmolLM2 and show timings")
    p_demo.add_argument(
        "--message",
        default=DEMO_MESSAGE,
        help="text to extract a Contact (Pydantic model) from",
    )
    p_demo.add_argument("--max-new-tokens", type=int, default=150)
    p_demo.add_argument("--no-jump-forward", action="store_true")
    p_demo.add_argument("--seed", type=int, default=None, help="sample (T=0.7) with this seed")

    p_check = sub.add_parser("check", help="does INPUT_FILE match GRAMMAR_FILE?")
    p_check.add_argument("grammar_file", help="KBNF grammar (.kbnf) or JSON Schema (.json)")
    p_check.add_argument("input_file")
    p_check.add_argument("--start", default="start", help="start symbol (default: start)")
    p_check.add_argument(
        "--strip", action="store_true", help="ignore trailing newlines of the input file"
    )
    p_check.add_argument(
        "--layout",
        choices=sorted(CHECK_LAYOUTS),
        default="any",
        help="for a JSON Schema: 'any' JSON whitespace (default) or the 'compact' layout "
        "structout generates",
    )
    p_check.add_argument(
        "--property-order",
        choices=["any", "schema"],
        default="any",
        help="for a JSON Schema: object properties in 'any' order (default) or the schema's",
    )

    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo(args.message, args.max_new_tokens, not args.no_jump_forward, args.seed)
    return check(
        args.grammar_file,
        args.input_file,
        args.start,
        args.strip,
        args.layout,
        args.property_order,
    )


if __name__ == "__main__":
    sys.exit(main())
