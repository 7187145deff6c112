"""Writing KBNF text from Python: quoted literals, regex terminals, and grammars embedded in
larger ones under their own rule names.

Invariants:

* :func:`literal` and :func:`regex_terminal` return KBNF items whose language is exactly the
  given string / the given regex's language (full match);
* :func:`prefixed` renames every rule of a grammar, definitions and references alike, and
  nothing else: literals, regex bodies, comments and the special nonterminals (``except!`` …)
  are copied byte for byte, so the renamed grammar has the same language under its new start
  rule.
"""

from __future__ import annotations

from structout.errors import GrammarError

__all__ = ["literal", "prefixed", "regex_terminal"]

_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def literal(text: str) -> str:
    """A KBNF literal for ``text`` (single-quoted; control characters escaped)."""
    out = []
    for ch in text:
        escaped = _ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def regex_terminal(pattern: str) -> str:
    """A KBNF regex terminal matching exactly the strings ``pattern`` matches in full (Rust
    ``regex`` syntax). A bare ``"`` is written ``\\"``; escaped pairs are copied as they are."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        out.append('\\"' if ch == '"' else ch)
        i += 1
    return '#"' + "".join(out) + '"'


def prefixed(text: str, prefix: str) -> str:
    """``text`` with every rule name ``n`` renamed to ``prefix + n`` (so its start rule
    ``start`` becomes ``prefix + "start"``). ``prefix`` must itself start an identifier.

    Raises ``GrammarError`` for an unterminated literal, regex or comment (the engine would
    reject the grammar anyway; renaming past such a point would be unsafe)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":
            j = _skip_quoted(text, i, ch)
            out.append(text[i:j])
            i = j
        elif ch == "#" and i + 1 < n and text[i + 1] == '"':
            j = _skip_quoted(text, i + 1, '"')
            out.append(text[i:j])
            i = j
        elif ch == "(" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*)", i + 2)
            if j < 0:
                raise _unterminated(text, i, "comment")
            out.append(text[i : j + 2])
            i = j + 2
        elif ch.isascii() and (ch.isalpha() or ch == "_"):
            j = i + 1
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            name = text[i:j]
            special = j < n and text[j] == "!"
            out.append(name if special else prefix + name)
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _skip_quoted(text: str, open_at: int, quote: str) -> int:
    """Index just past the quoted item opening at ``open_at`` (escaped pairs skipped)."""
    i = open_at + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
        elif ch == quote:
            return i + 1
        else:
            i += 1
    raise _unterminated(text, open_at, "literal or regex")


def _unterminated(text: str, at: int, what: str) -> GrammarError:
    line = text.count("\n", 0, at) + 1
    col = at - (text.rfind("\n", 0, at) + 1) + 1
    return GrammarError(f"unterminated {what} at {line}:{col} of an embedded grammar")
