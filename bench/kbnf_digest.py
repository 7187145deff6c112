#!/usr/bin/env python3
"""A digest of the Python translator's KBNF for every schema in tests/data, to diff before and
after a translator change.

A refactoring or speedup of the translator must leave every grammar byte for byte as it was;
a change of the grammars must bump ``_TRANSLATOR_REVISION`` (see CONTRIBUTING.md). This script
prints one line per schema: its name and the SHA-256 of the text ``structout.schema.translate``
prints for it (the Python translator itself, not the engine's fast path), or of the error it
raises. Run it on the base commit and on the change, then ``diff`` the two outputs::

    python bench/kbnf_digest.py > /tmp/before.txt    # on the base commit
    python bench/kbnf_digest.py > /tmp/after.txt     # with the change
    diff /tmp/before.txt /tmp/after.txt && echo identical

Options: ``--every N`` (every N-th schema, for a quick look), ``--layout`` (compact, flexible or
indent2), ``--max-number-length N`` (the translator option ``structout.Limits`` sets by default).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
sys.path.insert(0, str(REPO))

# This checkout's structout, not an installed copy.
from structout.schema import translate

LAYOUTS: dict[str, dict[str, Any]] = {
    "compact": {},
    "flexible": {"whitespace": "flexible"},
    "indent2": {"indent": 2},
}


def schemas() -> Iterator[tuple[str, Any]]:
    """Every MaskBench development schema, then every JSON Schema Test Suite schema."""
    for path in sorted((DATA / "maskbench").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                yield f"{path.name.split('.')[0]}/{row['name']}", row["schema"]
    suite = DATA / "json-schema-test-suite" / "draft2020-12"
    for path in sorted(suite.rglob("*.json")):
        for i, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            yield f"jsts/{path.relative_to(suite)}#{i}", group["schema"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=int, default=1, help="take every N-th schema")
    ap.add_argument("--layout", choices=sorted(LAYOUTS), default="compact")
    ap.add_argument("--max-number-length", type=int, default=None)
    args = ap.parse_args()
    options = {**LAYOUTS[args.layout], "max_number_length": args.max_number_length}
    warnings.simplefilter("ignore")
    for k, (name, schema) in enumerate(schemas()):
        if k % args.every:
            continue
        try:
            text = translate(copy.deepcopy(schema), **options).kbnf
        except Exception as e:  # noqa: BLE001 - any refusal is part of the output
            text = f"{type(e).__name__}: {e}"
        print(name, hashlib.sha256(text.encode("utf-8")).hexdigest()[:32])
    return 0


if __name__ == "__main__":
    sys.exit(main())
