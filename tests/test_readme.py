"""The README's commands are the ones CI and users run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)]


def test_readme_has_exactly_the_two_setup_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Quick start (fresh machine)")[1].split("\n## ")[0]
    blocks = _bash_blocks(setup)
    assert len(blocks) == 2, blocks
    demo, test = blocks
    assert "python3 -m structout demo" in demo and "pip install" in demo
    assert test == "bash .ci/test.sh"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash .ci/test.sh" in ci
    script = (ROOT / ".ci" / "test.sh").read_text()
    assert "cargo test" in script and "pytest" in script and "pip install" in script
