"""Cost of partial streaming (``Model.stream(..., partial=True)``) per generated token, on the
e2e benchmark's object (``e2e_bench.Character``) with SmolLM2-135M-Instruct on CPU.

    python bench/partial_bench.py                  # jump-forward on and off, prints a table
    python bench/partial_bench.py --replays 200 --json out.json

For each jump-forward setting it streams the object once with the model (checking that the last
snapshot is what ``generate`` returns), records the chunks, then **replays** them ``--replays``
times through a fresh matcher (``accept_bytes`` per chunk, as the decode loop would have
accepted them) and the production snapshot code, timing only that code:

* *finality*: reading the engine after each chunk (forced bytes, the next-token mask for an open
  number) and the JSON builder;
* *snapshot*: building the ``Partial[T]`` value (copy of the tree + Pydantic validation).

Reported: microseconds per generated token and per decode step (medians over the replays; the
grammar's mask cache is warm then, as it is for the decode loop's own fill that follows each
snapshot); the same code's time per token in the live streamed run (once: finality / snapshot,
the first fill of a mask is a cache miss); the decode loop's own mask time per sampled token in
``generate`` and in the streamed run (``Timings.mask_us_per_token``: after a snapshot filled a
state's mask, the loop's fill of the same state hits the cache); and the model's decode time per
token in the streamed run. The non-streaming
path runs none of this code (``generate`` uses ``decode``, which has no snapshot hook).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_bench import PROMPT, Character


class _Timer:
    """Wraps ``owner.name`` to add its wall time (ns) to ``self.ns``."""

    def __init__(self, owner: Any, name: str) -> None:
        self.ns = 0
        self.calls = 0
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                self.ns += time.perf_counter_ns() - t0
                self.calls += 1

        setattr(owner, name, timed)

    def reset(self) -> None:
        self.ns = self.calls = 0


def _replay(model: Any, chunks: list[bytes], result: Any) -> None:
    """Run the snapshot code over recorded chunks, as ``Model.stream`` would."""
    from structout.partial_stream import PartialStream
    from structout.results import RowOutcome, RunStats

    compiled = model.compile(Character)
    matcher = compiled.grammar.matcher()

    def gen() -> Any:
        for chunk in chunks:
            assert matcher.accept_bytes(chunk)
            yield 0, chunk
        outcome = RowOutcome(result.token_ids, b"".join(chunks), "stop", True, 0, 0)
        return [outcome], RunStats()

    stream: PartialStream[Character] = PartialStream(
        gen(), matcher, model._token_space(), compiled, 0, Character
    )
    *_, last = stream
    assert last.value == result.value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--max-new-tokens", type=int, default=300)
    ap.add_argument("--json", type=Path, default=None, help="also write results here")
    args = ap.parse_args()

    import torch

    from structout import partial_stream
    from structout.model import Model

    if args.threads:
        torch.set_num_threads(args.threads)
    model = Model.default(device="cpu")
    finality = _Timer(partial_stream._Finality, "step")
    snapshot = _Timer(partial_stream.PartialStream, "_snapshot")
    rows = []
    for jump_forward in (True, False):
        options = {"max_new_tokens": args.max_new_tokens, "jump_forward": jump_forward}
        want = model.generate(PROMPT, Character, return_result=True, **options)
        stream = model.stream(PROMPT, Character, partial=True, **options)
        chunks: list[bytes] = []
        record = stream._gen

        def recorded(gen: Any = record, chunks: list[bytes] = chunks) -> Any:
            while True:
                try:
                    row, data = next(gen)
                except StopIteration as stop:
                    return stop.value
                chunks.append(data)
                yield row, data

        stream._gen = recorded()
        finality.reset()
        snapshot.reset()
        snaps = list(stream)
        live_ns = (finality.ns, snapshot.ns)
        res = stream.result
        assert res is not None and snaps[-1].value == want.value, (res.text, want.text)
        tokens = len(res.token_ids)
        live = (live_ns[0] / 1e3 / tokens, live_ns[1] / 1e3 / tokens)
        model_us = (res.timings.total_ms - res.timings.prefill_ms) * 1e3 / tokens
        per_token: dict[str, list[float]] = {"finality": [], "snapshot": []}
        for _ in range(args.replays):
            finality.reset()
            snapshot.reset()
            _replay(model, chunks, res)
            per_token["finality"].append(finality.ns / 1e3 / tokens)
            per_token["snapshot"].append(snapshot.ns / 1e3 / tokens)
        fin = statistics.median(per_token["finality"])
        snap = statistics.median(per_token["snapshot"])
        rows.append(
            {
                "jump_forward": jump_forward,
                "tokens": tokens,
                "steps": len(chunks),
                "snapshots": len(snaps),
                "finality_us_per_token": fin,
                "snapshot_us_per_token": snap,
                "total_us_per_token": fin + snap,
                "total_us_per_step": (fin + snap) * tokens / len(chunks),
                "live_finality_us_per_token": live[0],
                "live_snapshot_us_per_token": live[1],
                "generate_mask_us_per_token": want.timings.mask_us_per_token,
                "stream_mask_us_per_token": res.timings.mask_us_per_token,
                "model_decode_us_per_token": model_us,
            }
        )
    print(
        f"SmolLM2-135M-Instruct on CPU ({torch.get_num_threads()} torch threads), object: "
        f"e2e_bench.Character, {args.replays} replays (medians)"
    )
    print(
        f"{'jump-forward':<14}{'tokens':>7}{'steps':>7}{'finality':>10}{'snapshot':>10}"
        f"{'total us/tok':>14}{'us/step':>9}{'live fin/snap':>15}{'loop mask gen/str':>19}"
        f"{'decode us/tok':>15}"
    )
    for r in rows:
        print(
            f"{'on' if r['jump_forward'] else 'off':<14}{r['tokens']:>7}{r['steps']:>7}"
            f"{r['finality_us_per_token']:>10.1f}{r['snapshot_us_per_token']:>10.1f}"
            f"{r['total_us_per_token']:>14.1f}{r['total_us_per_step']:>9.1f}"
            f"{r['live_finality_us_per_token']:>8.1f}/{r['live_snapshot_us_per_token']:<6.1f}"
            f"{r['generate_mask_us_per_token']:>12.1f}/{r['stream_mask_us_per_token']:<6.1f}"
            f"{r['model_decode_us_per_token']:>15.0f}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
