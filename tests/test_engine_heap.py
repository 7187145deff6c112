"""The engine's heap stays off transparent huge pages (see ``engine_rs/src/python/heap.rs``).

With THP ``always`` every fresh 2 MiB the mimalloc heap grows by would be one huge-page fault,
paid inside a mask fill (milliseconds on a lazily backed VM). The extension reserves its first
arena at import and advises it ``MADV_NOHUGEPAGE``; the engine's allocations must land there.
Checked in a fresh interpreter from ``/proc/self/smaps``: the mappings flagged ``nh`` span the
1 GiB arena, hold the engine's memory after a compile and a few hundred mask fills, and none of
it is in huge pages.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps").exists(), reason="reads Linux's /proc/self/smaps"
)

PROBE = r"""
import json, structout as so
toks = [None] + [bytes([b]) for b in range(256)] + [b'{"', b'": ', b'true', b'null']
vocab = so.Vocabulary.from_bytes(toks, eos_token_ids=[0])
rows = []
for i in range(40):  # distinct grammars, each walked a little: the heap grows
    g = so.compile_kbnf(f'start ::= "{{\\"k{i}\\": " ( "true" | #"[0-9]{{1,40}}" ) "}}" ;', vocab)
    m = g.matcher()
    mask = so.allocate_token_bitmask(1, vocab.size)
    for b in f'{{"k{i}": 12345678901234567890'.encode():
        m.fill_next_token_bitmask(mask)
        assert m.accept_token(b + 1)
    rows.append((g, m))
nh = {"size": 0, "rss": 0, "huge": 0}
cur = {}
for line in open("/proc/self/smaps"):
    fields = line.split()
    key = fields[0].rstrip(":")
    if not fields[0].endswith(":"):  # a mapping's header line ("start-end perms ...")
        cur = {}
    elif key in ("Size", "Rss", "AnonHugePages"):
        cur[key] = int(fields[1]) * 1024
    elif key == "VmFlags" and "nh" in fields[1:]:
        nh["size"] += cur["Size"]
        nh["rss"] += cur["Rss"]
        nh["huge"] += cur["AnonHugePages"]
print(json.dumps(nh))
"""


def test_engine_allocations_land_in_the_arena_kept_off_huge_pages() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    nh = json.loads(proc.stdout.splitlines()[-1])
    assert nh["size"] >= 1 << 30, nh  # the reserved arena, advised no-huge-page
    assert nh["rss"] >= 256 << 10, nh  # the engine's memory lives there
    assert nh["huge"] == 0, nh
