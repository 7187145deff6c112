"""``schemas/json.kbnf`` through the Python binding, and grammar errors as ``GrammarError``.

A Python-side companion of ``engine_rs/tests/json_maskbench.rs``: a deterministic sample of
MaskBench's valid documents, serialized by ``json.dumps`` in several styles, must be accepted
(every prefix viable, the whole text complete); corrupted variants must be refused. Bad grammars
must raise ``GrammarError`` whose message locates the problem as ``line:col``.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from structout._engine import compile_grammar
from structout.errors import GrammarError, StructoutError

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "maskbench"
JSON_KBNF = (REPO / "schemas" / "json.kbnf").read_text(encoding="utf-8")

EVERY = 25  # every 25th valid document of every subset: about 420 documents

DUMPS_STYLES: dict[str, dict[str, Any]] = {
    "compact": {"separators": (",", ":")},
    "compact-raw": {"separators": (",", ":"), "ensure_ascii": False},
    "default": {},
    "default-raw": {"ensure_ascii": False},
    "indent2": {"indent": 2},
    "indent2-raw": {"indent": 2, "ensure_ascii": False},
    "indent2-spaced": {"indent": 2, "separators": (", ", ": ")},
    "indent-tab-raw": {"indent": "\t", "ensure_ascii": False},
}


@pytest.fixture(scope="module")
def grammar() -> Any:
    return compile_grammar(JSON_KBNF)


def _load_docs() -> list[Any]:
    docs: list[Any] = []
    for path in sorted(DATA.glob("*.jsonl.gz")):
        k = 0
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                for test in json.loads(line)["tests"]:
                    if test["valid"]:
                        if k % EVERY == 0:
                            docs.append(test["data"])
                        k += 1
    return docs


@pytest.fixture(scope="module")
def docs() -> list[Any]:
    if not DATA.is_dir():
        pytest.skip(f"MaskBench data not found at {DATA}")
    out = _load_docs()
    assert len(out) > 300
    return out


def _is_json(text: bytes) -> bool:
    """Strict RFC 8259 validity (Python's json also takes NaN/Infinity; refuse those)."""
    try:
        json.loads(text.decode("utf-8"), parse_constant=_refuse)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _refuse(name: str) -> Any:
    raise ValueError(name)


# --------------------------------------------------------------------------------------------
# Accepted documents.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("style", sorted(DUMPS_STYLES))
def test_maskbench_documents_accepted(grammar: Any, docs: list[Any], style: str) -> None:
    kwargs = DUMPS_STYLES[style]
    rejected = []
    for i, doc in enumerate(docs):
        text = json.dumps(doc, **kwargs).encode("utf-8")
        if not grammar.accepts(text):
            rejected.append(f"#{i}: {text[:200]!r}")
    assert not rejected, f"{len(rejected)} documents rejected ({style}):\n" + "\n".join(
        rejected[:10]
    )


def test_every_prefix_viable(grammar: Any, docs: list[Any]) -> None:
    for doc in docs[::10]:
        for kwargs in ({"separators": (",", ":")}, {"indent": 2, "ensure_ascii": False}):
            text = json.dumps(doc, **kwargs).encode("utf-8")
            r = grammar.recognizer()
            for k in range(len(text)):
                assert r.feed(text[k : k + 1]), f"byte {k} refused after {text[:k][-80:]!r}"
                # Only a bare top-level number can be complete before its end.
                if k + 1 < len(text) and not isinstance(doc, (int, float)):
                    assert not r.is_complete(), f"complete after {k + 1} bytes of {text[:200]!r}"
            assert r.is_complete()


def test_non_ascii_and_escapes(grammar: Any) -> None:
    doc = {"é": '😀 \u2028 \x7f \x00 \x1f \n \t " \\ /', "k": ["\ud7ff", "\ue000", "\U0010ffff"]}
    for ensure_ascii in (True, False):
        text = json.dumps(doc, ensure_ascii=ensure_ascii).encode("utf-8")
        assert grammar.accepts(text), text
    assert grammar.accepts(b'"\\ud800"')  # RFC 8259's grammar allows lone surrogate escapes
    assert grammar.accepts(b'"\\/"')


# --------------------------------------------------------------------------------------------
# Refused corruptions.
# --------------------------------------------------------------------------------------------


def _string_spans(text: bytes) -> list[tuple[int, int, bool]]:
    """``(open quote, close quote, is_key)`` for every string in a valid JSON text."""
    spans = []
    i = 0
    while i < len(text):
        if text[i] == ord('"'):
            start = i
            i += 1
            while text[i] != ord('"'):
                i += 2 if text[i] == ord("\\") else 1
            rest = text[i + 1 :].lstrip()
            spans.append((start, i, rest.startswith(b":")))
        i += 1
    return spans


def _insert(text: bytes, at: int, piece: bytes) -> bytes:
    return text[:at] + piece + text[at:]


def _corruptions(text: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    spans = _string_spans(text)
    if spans:
        # Just after an opening quote: never inside an escape or a UTF-8 sequence.
        o, c, _ = rng.choice(spans)
        for desc, piece in [
            ("bad escape \\x", b"\\x"),
            ("bad escape \\u12G4", b"\\u12G4"),
            ("raw newline", b"\n"),
            ("raw NUL", b"\x00"),
            ("raw 0x1f", b"\x1f"),
            ("invalid UTF-8", b"\xff"),
        ]:
            out.append((desc, _insert(text, o + 1, piece)))
        keys = [s for s in spans if s[2]]
        if keys:
            o, c, _ = rng.choice(keys)
            out.append(("unquoted key", text[:o] + text[o + 1 : c] + text[c + 1 :]))
    in_string = bytearray(len(text))
    for o, c, _ in spans:
        in_string[o : c + 1] = b"\x01" * (c + 1 - o)
    closers = [
        m.start() for m in re.finditer(rb"[^\[{\s]\s*[\]}]", text) if not in_string[m.start()]
    ]
    if closers:
        at = rng.choice(closers) + 1
        out.append(("trailing comma", _insert(text, at, b",")))
    numbers = [
        m.start(1)
        for m in re.finditer(rb"(?:^|[:\[,\s])-?([0-9])", text)
        if not in_string[m.start(1)]
    ]
    if numbers:
        out.append(("leading zero", _insert(text, rng.choice(numbers), b"0")))
    return out


def test_corrupted_documents_refused(grammar: Any, docs: list[Any]) -> None:
    rng = random.Random(8259)
    accepted = []
    count = 0
    for doc in docs:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=rng.random() < 0.5).encode()
        for desc, bad in _corruptions(text, rng):
            assert not _is_json(bad), (desc, bad)  # the corruption really is invalid JSON
            count += 1
            if grammar.accepts(bad):
                accepted.append(f"{desc}: {bad[:200]!r}")
    assert count > 1000
    assert not accepted, f"{len(accepted)} corrupted documents accepted:\n" + "\n".join(
        accepted[:10]
    )


def test_truncations(grammar: Any, docs: list[Any]) -> None:
    rng = random.Random(7)
    for doc in docs:
        text = json.dumps(doc, indent=2).encode()
        for k in sorted({rng.randrange(len(text)) for _ in range(3)}):
            cut = text[:k]
            r = grammar.recognizer()
            assert r.feed(cut), f"prefix refused: {cut[-80:]!r}"
            assert r.is_complete() == _is_json(cut), cut[-80:]
            assert grammar.accepts(cut) == _is_json(cut)


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"01",
        b"-",
        b"1.",
        b".5",
        b"+1",
        b"1e",
        b"[1,]",
        b'{"a":1,}',
        b"{a:1}",
        b'"\\x"',
        b'"\\u12G4"',
        b'"\x01"',
        b"[1 2]",
        b'{"a" 1}',
        b"tru",
        b"nulll",
        b"NaN",
        b"Infinity",
        b"'a'",
        b'"\xff"',
        b'"\xc0\xaf"',
        b'"\xed\xa0\x80"',
        b"[",
        b"1 2",
        b"[1,,2]",
        b'"abc',
    ],
)
def test_invalid_json_refused(grammar: Any, text: bytes) -> None:
    assert not _is_json(text)
    assert not grammar.accepts(text)


def test_allowed_bytes_inside_document(grammar: Any) -> None:
    r = grammar.recognizer()
    assert r.feed(b'{"k"')
    assert set(r.allowed_bytes()) == set(b" \t\n\r:")
    assert r.feed(b": 1")
    assert set(r.allowed_bytes()) == set(b" \t\n\r,}.eE0123456789")
    r.rollback_to(1)
    assert set(r.allowed_bytes()) == set(b' \t\n\r"}')


# --------------------------------------------------------------------------------------------
# Grammar errors.
# --------------------------------------------------------------------------------------------


def _line_col(text: str, needle: str, occurrence: int = 0) -> str:
    """1-based ``line:col`` of the start of ``needle`` in ``text``."""
    at = -1
    for _ in range(occurrence + 1):
        at = text.index(needle, at + 1)
    line = text.count("\n", 0, at) + 1
    col = at - (text.rfind("\n", 0, at) + 1) + 1
    return f"{line}:{col}"


@pytest.mark.parametrize(
    ("text", "needle", "words"),
    [
        ("start ::= 'a' foo;", "foo", ["undefined", "foo"]),
        ("start ::= x;\nx ::= 'a' | #\"[a\";", '#"[a"', ["regex"]),
        ("start ::= except!(x);\nx ::= 'a' y;\ny ::= 'b';", "x)", ["except"]),
        ("start ::= except!(x);\nx ::= 'a'*;", "x)", ["except"]),
        ("start ::= 'a';\nx ::= 'abc;\n", "'abc", ["unterminated"]),
        ('start ::= "abc;', '"abc', ["unterminated"]),
        ("start ::= 'a'\n  'b'", None, [";"]),
        ("start ::= 'a' | ;", ";", ["expression"]),
        pytest.param(
            "start ::= except!('a', 0);",
            "0)",
            ["except"],
        ),
        ("start ::= except!('a', 0);", None, ["except", "at least 1"]),
        ("start ::= start 'a';", "start", ["empty"]),
        ("start ::= 'a' x;\nx ::= 'b' x;", None, ["empty"]),
        ("start ::= '\\q';", "\\q", ["escape"]),
        ("start ::= 'a'{3,2};", "{3,2}", ["minimum"]),
    ],
)
def test_grammar_errors_have_line_col(text: str, needle: str | None, words: list[str]) -> None:
    with pytest.raises(GrammarError) as info:
        compile_grammar(text)
    msg = str(info.value)
    assert isinstance(info.value, StructoutError)
    assert re.search(r"\b\d+:\d+\b", msg), msg
    assert "^" in msg, f"no caret excerpt: {msg}"
    if needle is not None:
        assert _line_col(text, needle) in msg, f"expected {_line_col(text, needle)} in: {msg}"
    for w in words:
        assert w in msg.lower(), f"{w!r} not in: {msg}"


def test_several_errors_reported_at_once() -> None:
    text = "start ::= a b;\nx ::= 'q';\ny ::= c;\n"
    with pytest.raises(GrammarError) as info:
        compile_grammar(text)
    msg = str(info.value)
    for name in ("a", "b", "c"):
        pos = _line_col(text, f" {name}").split(":")
        line, col = int(pos[0]), int(pos[1]) + 1
        assert f"{line}:{col}" in msg, f"{name} at {line}:{col} not reported: {msg}"


def test_garbage_never_crashes() -> None:
    rng = random.Random(1)
    pieces = [
        "start",
        "::=",
        "'a'",
        '"b"',
        '#"[a-z]+"',
        "except!(",
        ")",
        "(",
        "[",
        "]",
        "{",
        "}",
        "|",
        ";",
        "*",
        "+",
        "?",
        "{2,3}",
        "(*",
        "*)",
        "\\",
        ",",
        " ",
        "\n",
        "é",
        "x",
    ]
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12)))
        try:
            compile_grammar(text)
        except GrammarError as e:
            assert re.search(r"\d+:\d+", str(e)), (text, str(e))
