"""docs/architecture.md names every module of the package and the engine (it is the map a
contributor reads first; a new module without a line there fails here)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _modules() -> list[Path]:
    out = subprocess.run(
        [
            "git",
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "structout",
            "engine_rs/src",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode == 0 and out.stdout.strip():
        paths = [Path(p) for p in out.stdout.split()]
    else:  # not a git checkout: the files on disk
        paths = [p.relative_to(REPO) for p in (REPO / "structout").rglob("*")]
        paths += [p.relative_to(REPO) for p in (REPO / "engine_rs" / "src").rglob("*")]
    return sorted(p for p in paths if p.suffix in (".py", ".pyi", ".rs"))


def test_architecture_names_every_module() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = []
    for path in _modules():
        # The file's name, and the folder it is in (for `mod.rs`, `tests.rs`, `__init__.py`).
        folder = path.parent.name
        in_folder = folder in ("structout", "src") or f"{folder}/" in text
        if path.name not in text or not in_folder:
            missing.append(str(path))
    assert not missing, f"docs/architecture.md does not name: {missing}"
    assert len(text.splitlines()) <= 200, "the map stays short (history goes to CHANGELOG.md)"
