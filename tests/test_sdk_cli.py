"""``python -m structout check GRAMMAR_FILE INPUT_FILE``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from structout.__main__ import main

REPO = Path(__file__).resolve().parents[1]
GRAMMAR = "start ::= 'id-' #\"[0-9]+\" ( '!' | '?' ) ;"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "g.kbnf").write_text(GRAMMAR)
    return tmp_path


def _check(files: Path, data: bytes, *extra: str) -> int:
    (files / "in.txt").write_bytes(data)
    return main(["check", str(files / "g.kbnf"), str(files / "in.txt"), *extra])


def test_match(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _check(files, b"id-42!") == 0
    assert capsys.readouterr().out.startswith("match:")


def test_rejected_byte_is_located(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _check(files, b"id-4x!") == 1
    out = capsys.readouterr().out
    assert "in.txt:1:5 (byte 4): 'x' cannot come here" in out
    assert "'0', '1'" in out and "'!'" in out and "'?'" in out


def test_incomplete_input(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _check(files, b"id-42") == 1
    out = capsys.readouterr().out
    assert "ends too early at 1:6" in out and "'!'" in out


def test_trailing_newline_needs_strip(files: Path) -> None:
    assert _check(files, b"id-42!\n") == 1
    assert _check(files, b"id-42!\n", "--strip") == 0


def test_bad_grammar_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.kbnf").write_text("start ::= 'a' | ;;")
    (tmp_path / "in.txt").write_text("a")
    assert main(["check", str(tmp_path / "bad.kbnf"), str(tmp_path / "in.txt")]) == 2
    assert "cannot load grammar" in capsys.readouterr().err


def test_json_schema_file(tmp_path: Path) -> None:
    pytest.importorskip("structout.schema")
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["n"],
        "additionalProperties": False,
    }
    (tmp_path / "s.json").write_text(json.dumps(schema))
    (tmp_path / "ok.json").write_text('{"n": 7}')
    (tmp_path / "bad.json").write_text('{"n": 12}')
    assert main(["check", str(tmp_path / "s.json"), str(tmp_path / "ok.json")]) == 0
    assert main(["check", str(tmp_path / "s.json"), str(tmp_path / "bad.json")]) == 1


def test_json_documents_in_any_layout(tmp_path: Path) -> None:
    """A checker of files accepts every JSON spelling of a valid document's whitespace."""
    pytest.importorskip("structout.schema")
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "object"}},
            "n": {"type": "integer"},
        },
        "required": ["n"],
    }
    (tmp_path / "s.json").write_text(json.dumps(schema))
    value = {"tags": [{"deep": {"er": [1, {"x": None}]}}], "n": 7}
    spellings = {
        "pretty.json": json.dumps(value, indent=4) + "\n",
        "minified.json": json.dumps(value, separators=(",", ":")),
        "crlf.json": json.dumps(value, indent="\t").replace("\n", "\r\n") + "\r\n",
        "compact.json": json.dumps(value),
    }
    for name, text in spellings.items():
        (tmp_path / name).write_text(text, newline="")
        assert main(["check", str(tmp_path / "s.json"), str(tmp_path / name)]) == 0, name
    # The generation layout is still checkable on request, and it refuses the others.
    compact = ["check", "--layout", "compact", str(tmp_path / "s.json")]
    assert main([*compact, str(tmp_path / "compact.json")]) == 0
    assert main([*compact, str(tmp_path / "pretty.json")]) == 1
    # Whitespace does not make an invalid document valid.
    (tmp_path / "bad.json").write_text(json.dumps({"n": "7"}, indent=2) + "\n")
    assert main(["check", str(tmp_path / "s.json"), str(tmp_path / "bad.json")]) == 1


def test_module_entry_point(files: Path) -> None:
    (files / "in.txt").write_bytes(b"id-7?")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "structout", "check", str(files / "g.kbnf"), str(files / "in.txt")],
        capture_output=True,
        text=True,
        env=env,
        cwd=files,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("match:")
