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

import re
from typing import Any

from structout.errors import GrammarError

__all__ = ["literal", "prefixed", "regex_terminal"]

_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Per character that a literal writes otherwise: its escape (``str.translate``'s table).
_LITERAL_TABLE = {
    **{c: f"\\u{{{c:x}}}" for c in [*range(0x20), 0x7F]},
    **{ord(k): v for k, v in _ESCAPES.items()},
}


# The characters :func:`literal` escapes with ``\\u{..}`` (``_LITERAL_TABLE``'s keys but the
# short escapes): rare, so most texts take the chain of ``str.replace`` (several times cheaper
# than ``translate`` with a table).
_RARE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def literal(text: str) -> str:
    """A KBNF literal for ``text`` (single-quoted; control characters escaped)."""
    if _RARE.search(text) is None:
        for raw, escaped in _ESCAPES.items():  # (backslash first: escapes are not re-escaped)
            if raw in text:
                text = text.replace(raw, escaped)
        return "'" + text + "'"
    return "'" + text.translate(_LITERAL_TABLE) + "'"


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


# One lexical item of KBNF, in the order tried: a quoted literal, a regex terminal, a comment,
# an identifier (with the `!` of a special nonterminal when present), any other character.
# Unterminated items fall through to the last three alternatives and are caught below.
_ITEM = re.compile(
    r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|#"(?:[^"\\]|\\.)*"|\(\*.*?\*\)"""
    r"|([A-Za-z_][A-Za-z0-9_]*)(!?)|(['\"]|#\"|\(\*)",
    re.DOTALL,
)


def prefixed(text: str, prefix: str) -> str:
    """``text`` with every rule name ``n`` renamed to ``prefix + n`` (so its start rule
    ``start`` becomes ``prefix + "start"``). ``prefix`` must itself start an identifier.

    Raises ``GrammarError`` for an unterminated literal, regex or comment (the engine would
    reject the grammar anyway; renaming past such a point would be unsafe)."""

    def rename(m: re.Match[str]) -> str:
        name, bang, broken = m.group(1), m.group(2), m.group(3)
        if broken is not None:
            what = "comment" if broken == "(*" else "literal or regex"
            raise _unterminated(text, m.start(), what)
        if name is None or bang:
            return m.group(0)
        return prefix + name

    return _ITEM.sub(rename, text)


def _unterminated(text: str, at: int, what: str) -> GrammarError:
    line = text.count("\n", 0, at) + 1
    col = at - (text.rfind("\n", 0, at) + 1) + 1
    return GrammarError(f"unterminated {what} at {line}:{col} of an embedded grammar")


class SharedRules:
    """Grammars embedded in one larger grammar, each under its own rule-name prefix, with every
    rule written once up to renaming.

    Grammars of JSON Schemas repeat the same rules (the generic JSON value, string and number
    rules, ``boolean``, equal objects and enums); two rules whose bodies are equal once rule
    names are abstracted, and whose names at each position are rules that are (recursively) such
    twins, derive the same language, so the second is dropped and uses of it go to the first
    (hash-consing over the strongly connected components of the rule graph, in the engine:
    ``engine_rs/src/kbnf/share.rs``).

    Invariants: the lines :meth:`add` returns for a grammar, with those returned before, hold
    the grammar's language under the start rule name it returns; a grammar that is not one rule
    per line (``name ::= body;``, each name defined once, every name it uses defined in it) is
    only renamed (:func:`prefixed`), its rules shared with none.
    """

    def __init__(self) -> None:
        from structout._engine import SharedRules as _Engine

        self._engine = _Engine()

    def add(self, kbnf: str, prefix: str) -> tuple[list[str], str]:
        """The rule lines to write for ``kbnf`` (every rule ``n`` named ``prefix + n`` unless an
        equal rule was written before) and the name of its start rule."""
        got = self._engine.add(kbnf, prefix)
        if got is None:
            return [prefixed(kbnf, prefix).strip()], prefix + "start"
        return got

    def add_common_schema(
        self, schema: dict[str, Any], prefix: str, max_number_length: int | None
    ) -> tuple[list[str], str] | None:
        """:meth:`add` of the schema's common-shape KBNF (``translate_common_schema``), in one
        engine call; ``None`` outside the common shape (or when ``add`` would only rename it)."""
        return self._engine.add_common_schema(schema, prefix, max_number_length)
