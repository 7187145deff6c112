"""The three output layouts (compact, flexible, indent) and KBNF string literals."""

from __future__ import annotations

import json
import re
from typing import Any

from .rules import Alt, Sym

#: ``json.dumps(x, ensure_ascii=False)`` without building an encoder per call.
_JSON_TEXT = json.JSONEncoder(ensure_ascii=False)


#: Texts a KBNF literal holds as they are: printable ASCII but ``'`` and ``\``.
_VERBATIM = re.compile(r"[ -&(-\[\]-~]*")


#: Keys a JSON text and a KBNF literal hold as they are: printable ASCII but ``"``, ``'``, ``\``.
_PLAIN_KEY = re.compile(r"[ !#-&(-\[\]-~]*")


def kbnf_literal(text: str) -> str:
    """Quote ``text`` as a KBNF single-quoted literal."""
    if _VERBATIM.fullmatch(text):
        return "'" + text + "'"
    out = []
    for ch in text:
        cp = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "'":
            out.append("\\'")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        elif cp > 0x7F:
            out.append(f"\\u{{{cp:04x}}}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


#: The punctuation literals of the compact and flexible layouts (indent's depend on the depth).
_PUNCTUATION = {t: kbnf_literal(t) for t in ("{", "}", "[", "]", "{}", "[]", ", ", ",", ": ", ":")}


class Layout:
    def __init__(self, whitespace: str, indent: int | None, max_ws: int) -> None:
        if indent is not None:
            self.mode = "indent"
        elif whitespace == "flexible":
            self.mode = "flexible"
        elif whitespace == "compact":
            self.mode = "compact"
        else:
            raise ValueError(f"whitespace must be 'compact' or 'flexible', got {whitespace!r}")
        self.indent = indent or 0
        self.max_ws = max_ws
        self.depth_dependent = self.mode == "indent"
        # kbnf_literal of the punctuation texts (those of every layout but indent's computed once)
        self._literals: dict[str, Sym] = dict(_PUNCTUATION)

    def _lit(self, text: str) -> Sym:
        got = self._literals.get(text)
        if got is None:
            got = self._literals[text] = kbnf_literal(text)
        return got

    def _nl(self, depth: int) -> str:
        return "\n" + " " * (self.indent * depth)

    def open(self, bracket: str, depth: int) -> Alt:
        if self.mode == "compact":
            return [self._lit(bracket)]
        if self.mode == "flexible":
            return [self._lit(bracket), "ws"]
        return [self._lit(bracket + self._nl(depth + 1))]

    def close(self, bracket: str, depth: int) -> Alt:
        if self.mode == "compact":
            return [self._lit(bracket)]
        if self.mode == "flexible":
            return ["ws", self._lit(bracket)]
        return [self._lit(self._nl(depth) + bracket)]

    def empty(self, pair: str) -> Alt:
        if self.mode == "flexible":
            return [self._lit(pair[0]), "ws", self._lit(pair[1])]
        return [self._lit(pair)]

    def comma(self, depth: int) -> Alt:
        if self.mode == "compact":
            return [self._lit(", ")]
        if self.mode == "flexible":
            return ["ws", self._lit(","), "ws"]
        return [self._lit("," + self._nl(depth + 1))]

    def colon(self) -> Alt:
        if self.mode == "flexible":
            return ["ws", self._lit(":"), "ws"]
        return [self._lit(": ")]

    def key_literal(self, name: str) -> Sym:
        if _PLAIN_KEY.fullmatch(name):
            return "'\"" + name + "\"'"  # (the JSON text and the literal hold it as it is)
        return kbnf_literal(_JSON_TEXT.encode(name))

    def dumps(self, value: Any) -> str:
        """Serialize a value the way this layout prints it (flexible: like compact)."""
        if self.mode == "indent":
            return json.dumps(value, indent=self.indent, ensure_ascii=False)
        return json.dumps(value, ensure_ascii=False)
