"""Importing structout from a source folder that has no compiled engine (structout/_bootstrap.py).

The positive case (a wheel built from this very checkout, Python started from the checkout's root)
is exercised end to end by .ci/newcomer.sh; here: a source copy that no installed wheel was built
from must fail with an ImportError that says what to do, not a bare ModuleNotFoundError.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_unbuilt_source_copy_says_how_to_build(tmp_path: Path) -> None:
    copy = tmp_path / "checkout"
    shutil.copytree(
        REPO / "structout",
        copy / "structout",
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"),
    )
    proc = subprocess.run(
        [sys.executable, "-c", "import structout"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()
    assert any(line.startswith("ImportError: structout's compiled engine") for line in last)
    assert "pip install -e ." in proc.stderr
    assert str(copy) in proc.stderr


def test_engine_loads_in_this_checkout() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import structout, structout._engine as e; print(e.__name__)"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "structout._engine"
