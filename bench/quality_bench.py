#!/usr/bin/env python3
"""What the default model writes under a schema: finished, valid, not degenerate, right choices.

Tasks (fixed; see ``bench/quality_tasks.py``):

* **extraction** (20): a message and a schema of what to pull out of it;
* **generation** (``--schemas``, default 20): "write a realistic example" for object schemas of
  the MaskBench development share, drawn with a fixed seed among those of at most 3,000
  characters whose shortest valid test document has at most 300 characters (so the prompt stays
  short and a complete answer fits the budget);
* **classification** (16 items, each run with its labels in the given and the reversed order):
  a ``@structured`` function per item (its docstring the item's question, the text its
  argument) returning a ``Literal`` of the labels.

Every task runs with the default model (SmolLM2-135M-Instruct), greedy, ``--max-new-tokens``
(default 256), in batches of ``--batch``. Reported:

* finished-and-valid: the output completed within the budget and validated;
* degenerate: outputs with 8 equal characters in a row (whitespace aside) or a unit of 2-10
  characters repeated 5 times in a row;
* classification: accuracy in each order, and the share of items answered the same in both.

``--baseline`` turns the loop guard and choice scoring off (``loop_guard=False,
score_choices=False``, no calibration); run it with ``PYTHONPATH`` at an older checkout to
measure that code (options it does not know are not passed).

Usage::

    python bench/quality_bench.py [--baseline] [--schemas 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality_tasks import CLASSIFICATION, EXTRACTION

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_RUN = re.compile(r"(\S)\1{7}")
_UNIT = re.compile(r"(.{2,10}?)\1{4}", re.DOTALL)


def degenerate(text: str) -> bool:
    """Whether ``text`` has 8 equal non-space characters in a row or a short unit 5 times."""
    return bool(_RUN.search(text)) or any(m.group(1).strip() for m in _UNIT.finditer(text))


def generation_schemas(data_dir: Path, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` object schemas of the development share (at most 3,000 characters of JSON) whose
    shortest valid test document has at most 300 characters, drawn with ``seed``."""
    pool = []
    for path in sorted(data_dir.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                schema = row["schema"]
                valid = [t["data"] for t in row["tests"] if t["valid"]]
                if not isinstance(schema, dict) or schema.get("type") != "object" or not valid:
                    continue
                if len(json.dumps(schema)) > 3000:  # its instruction would dwarf the task
                    continue
                if min(len(json.dumps(v)) for v in valid) <= 300:
                    pool.append({"name": f"{path.name.split('.')[0]}/{row['name']}", **row})
    rng = random.Random(seed)
    rng.shuffle(pool)
    from structout.schema import to_kbnf

    def supported(schema: dict[str, Any]) -> bool:
        try:
            to_kbnf(schema)
        except Exception:  # noqa: BLE001 - schemas structout refuses are not drawn
            return False
        return True

    return [row for row in pool[: count * 4] if supported(row["schema"])][:count]


def _classifier(model: Any, question: str, labels: tuple[str, ...]) -> Any:
    """A ``@structured`` classifier of ``text`` into ``labels``, prompted with ``question``."""
    from structout import structured

    def classify(text: str) -> str:
        raise NotImplementedError  # the docstring is the prompt; the body never runs

    classify.__doc__ = question + "\n\nText: {text}"
    return structured(model=model, schema=Literal[labels])(classify)


def _field_ok(got: Any, want: Any) -> bool:
    if isinstance(want, str):
        return isinstance(got, str) and want.lower() in got.lower()
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, (int, float)):
        return isinstance(got, (int, float)) and abs(got - want) < 1e-6
    return bool(got == want)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", action="store_true", help="loop guard and choice scoring off")
    ap.add_argument("--schemas", type=int, default=20)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--data-dir", type=Path, default=REPO / "tests" / "data" / "maskbench")
    ap.add_argument("--json", type=Path, help="write every output here")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument(
        "--kinds",
        default="extraction,generation,classification",
        help="comma-separated task kinds to run (default: all three)",
    )
    args = ap.parse_args(argv)

    import structout

    model = structout.Model.default()
    options: dict[str, Any] = {"max_new_tokens": args.max_new_tokens, "return_exceptions": True}
    known = inspect.signature(model.generate_batch).parameters
    if args.baseline:
        for name, value in (("loop_guard", False), ("score_choices", False)):
            if name in known:
                options[name] = value

    runs: list[dict[str, Any]] = []
    for task in EXTRACTION:
        runs.append(
            {
                "kind": "extraction",
                "prompt": "Extract the information from this message.\n\nMessage: "
                + task["message"],
                "schema": task["schema"],
                "expect": task["expect"],
            }
        )
    for row in generation_schemas(args.data_dir, args.schemas, args.seed):
        runs.append(
            {
                "kind": "generation",
                "name": row["name"],
                "prompt": "Write a realistic example of this kind of JSON document.",
                "schema": row["schema"],
            }
        )
    for k, item in enumerate(CLASSIFICATION):
        for order, labels in (("given", item["labels"]), ("reversed", item["labels"][::-1])):
            # As a user writes it: a @structured function whose docstring is the question.
            fn = _classifier(model, item["question"], tuple(labels))
            content_free = getattr(fn, "content_free_messages", None)
            runs.append(
                {
                    "kind": "classification",
                    "item": k,
                    "order": order,
                    "prompt": fn.messages(item["text"]),
                    "calibration": content_free(item["text"]) if content_free else None,
                    "schema": fn.schema,
                    "answer": item["answer"],
                }
            )

    kinds = set(args.kinds.split(","))
    runs = [r for r in runs if r["kind"] in kinds]
    t0 = time.perf_counter()
    for start in range(0, len(runs), args.batch):
        chunk = runs[start : start + args.batch]
        extra = dict(options)
        if "calibration" in known and not args.baseline:
            extra["calibration"] = [r.get("calibration") for r in chunk]
        results = model.generate_batch(
            [r["prompt"] for r in chunk],
            [r["schema"] for r in chunk],
            return_result=True,
            **extra,
        )
        for run, res in zip(chunk, results):
            if isinstance(res, Exception):
                run["ok"] = False
                run["error"] = type(res).__name__
                run["text"] = getattr(res, "partial", None) or getattr(res, "text", "")
            else:
                run["ok"], run["text"], run["value"] = True, res.text, res.value
            run["degenerate"] = degenerate(run["text"])
            if args.verbose:
                print(f"{run['kind']:15} ok={run['ok']} {run['text'][:160]!r}", flush=True)
    elapsed = time.perf_counter() - t0

    def share(xs: list[bool]) -> str:
        return f"{sum(xs)}/{len(xs)} ({100 * sum(xs) / max(len(xs), 1):.0f} %)"

    print(f"\nquality bench: {len(runs)} runs in {elapsed:.0f} s" + (" (baseline)" * args.baseline))
    for kind in ("extraction", "generation", "classification", None):
        rs = [r for r in runs if kind is None or r["kind"] == kind]
        print(
            f"  {kind or 'all':15} finished+valid {share([r['ok'] for r in rs]):16} "
            f"degenerate {share([r['degenerate'] for r in rs])}"
        )
    fields = [
        _field_ok((r.get("value") or {}).get(k), v)
        for r in runs
        if r["kind"] == "extraction" and r["ok"]
        for k, v in r["expect"].items()
    ]
    print(f"  extraction fields stated in the message and extracted: {share(fields)}")
    cls = [r for r in runs if r["kind"] == "classification"]
    for order in ("given", "reversed"):
        right = [r["ok"] and r["value"] == r["answer"] for r in cls if r["order"] == order]
        print(f"  classification correct, labels {order:8}: {share(right)}")
    by_item: dict[int, list[Any]] = {}
    for r in cls:
        by_item.setdefault(r["item"], []).append(r.get("value"))
    same = [len(v) == 2 and v[0] == v[1] and v[0] is not None for v in by_item.values()]
    print(f"  classification same answer in both orders: {share(same)}")
    if args.json:
        args.json.write_text(
            json.dumps(
                [{k: v for k, v in r.items() if k != "schema"} for r in runs],
                default=str,
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
