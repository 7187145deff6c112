"""End-to-end generation speed with SmolLM2-135M-Instruct on CPU: constrained vs unconstrained,
with and without jump-forward.

    python bench/e2e_bench.py                 # 5 interleaved rounds, prints a table
    python bench/e2e_bench.py --rounds 3 --threads 1 --json out.json

Modes (all greedy, same prompt, same structout decode loop and KV cache handling):

* ``unconstrained``: free text, EOS ignored, exactly as many tokens as the constrained output has;
* ``constrained``: the schema's token mask applied every step, jump-forward off;
* ``constrained+jf``: the mask plus jump-forward (forced bytes re-tokenized and fed in one pass);
* ``hf.generate``: transformers' own greedy ``generate`` for the same number of tokens (reference).

Metrics: *decode tokens/s* = generated tokens / decode time after the prefill (what the mask costs
per token), and *end-to-end* = wall time to produce the object (prefill + decode, what
jump-forward saves). Rounds are interleaved so machine load affects every mode alike; medians
are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class Abilities(BaseModel):
    strength: int = Field(ge=1, le=20)
    dexterity: int = Field(ge=1, le=20)
    constitution: int = Field(ge=1, le=20)
    intelligence: int = Field(ge=1, le=20)
    wisdom: int = Field(ge=1, le=20)
    charisma: int = Field(ge=1, le=20)


class Item(BaseModel):
    name: str = Field(max_length=24)
    kind: Literal["weapon", "armor", "potion", "scroll", "tool"]
    quantity: int = Field(ge=1, le=99)


class Character(BaseModel):
    """A role-playing game character sheet (schema-heavy: many fixed keys and enums)."""

    name: str = Field(max_length=24)
    species: Literal["human", "elf", "dwarf", "halfling", "orc", "gnome"]
    character_class: Literal["fighter", "wizard", "rogue", "cleric", "ranger", "bard"]
    level: int = Field(ge=1, le=20)
    alignment: Literal[
        "lawful good",
        "neutral good",
        "chaotic good",
        "lawful neutral",
        "true neutral",
        "chaotic neutral",
        "lawful evil",
        "neutral evil",
        "chaotic evil",
    ]
    abilities: Abilities
    inventory: list[Item] = Field(min_length=2, max_length=3)
    is_player_character: bool


PROMPT = "Create a character sheet for a brave dwarf warrior in a fantasy game."


def _run(model: Any, mode: str, n_tokens: int, max_new: int) -> dict[str, Any]:
    import torch

    if mode == "hf.generate":
        ids = model.tokenizer(
            model.render_prompt(PROMPT, Character), add_special_tokens=False, return_tensors="pt"
        )
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.hf_model.generate(
                **ids,
                max_new_tokens=n_tokens,
                min_new_tokens=n_tokens,
                do_sample=False,
                pad_token_id=model.tokenizer.eos_token_id,
            )
        wall = time.perf_counter() - t0
        return {
            "tokens": n_tokens,
            "grammar_ms": 0.0,
            "decode_tps": float("nan"),
            "e2e_ms": wall * 1e3,
            "passes": n_tokens,
            "forced": 0,
            "mask_us": 0.0,
        }
    if mode == "unconstrained":
        # Same prompt text as the constrained runs (schema instruction included).
        res = model.generate(
            model.render_prompt(PROMPT, Character),
            None,
            max_new_tokens=n_tokens,
            ignore_eos=True,
            chat_template=False,
            return_result=True,
        )
    else:
        res = model.generate(
            PROMPT,
            Character,
            max_new_tokens=max_new,
            jump_forward=(mode == "constrained+jf"),
            return_result=True,
        )
    t = res.timings
    return {
        "tokens": len(res.token_ids),
        "decode_tps": t.tokens_per_s,
        "e2e_ms": t.total_ms,
        "passes": res.forward_passes,
        "forced": res.forced_tokens,
        "mask_us": t.mask_us_per_token,
        "grammar_ms": t.grammar_ms,
        "text": res.text if mode != "unconstrained" else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--max-new-tokens", type=int, default=300)
    ap.add_argument("--json", type=Path, default=None, help="also write results here")
    ap.add_argument("--no-hf", action="store_true", help="skip the transformers generate reference")
    args = ap.parse_args()

    import torch

    import structout
    from structout.model import Model

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model = Model.default(device="cpu")
    load_s = time.perf_counter() - t0

    # Warm-up: compile (cache), first-call overheads, and the output length to match.
    first = model.generate(
        PROMPT,
        Character,
        max_new_tokens=args.max_new_tokens,
        jump_forward=False,
        return_result=True,
    )
    n_tokens = len(first.token_ids)
    from structout.generation import _overlap_helps

    print(
        f"SmolLM2-135M-Instruct on CPU ({torch.get_num_threads()} torch threads, "
        f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}), "
        f"model load {load_s:.1f} s, structout {getattr(structout, '__version__', '?')}, "
        f"masks overlapped with the forward pass: {_overlap_helps(model.hf_model)}"
    )
    print(f"output: {n_tokens} tokens, compile {first.timings.compile_ms:.1f} ms (cold)")
    print(f"  {first.text}")
    modes = ["unconstrained", "constrained", "constrained+jf"] + (
        [] if args.no_hf else ["hf.generate"]
    )
    _run(model, "unconstrained", 8, args.max_new_tokens)
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for r in range(args.rounds):
        order = modes[r % len(modes) :] + modes[: r % len(modes)]  # rotate to spread drift
        for mode in order:
            rows[mode].append(_run(model, mode, n_tokens, args.max_new_tokens))
        print(
            f"round {r + 1}/{args.rounds}: "
            + ", ".join(f"{m} {rows[m][-1]['e2e_ms']:.0f} ms" for m in modes),
            flush=True,
        )

    def med(mode: str, key: str) -> float:
        return statistics.median(x[key] for x in rows[mode])

    print()
    print(
        f"{'mode':<16}{'tokens':>8}{'passes':>8}{'forced':>8}{'decode tok/s':>14}"
        f"{'end-to-end ms':>15}{'mask us/tok':>13}{'grammar ms':>12}"
    )
    for mode in modes:
        tps = med(mode, "decode_tps")
        print(
            f"{mode:<16}{med(mode, 'tokens'):>8.0f}{med(mode, 'passes'):>8.0f}"
            f"{med(mode, 'forced'):>8.0f}{tps:>14.2f}{med(mode, 'e2e_ms'):>15.0f}"
            f"{med(mode, 'mask_us'):>13.1f}{med(mode, 'grammar_ms'):>12.1f}"
        )

    def paired(a: str, b: str, key: str, invert: bool = False) -> tuple[float, float, float]:
        """Median, min and max over rounds of a/b (runs of one round are back to back, so the
        machine's load drifts less within a pair than across rounds)."""
        rs = [(y[key] / x[key]) if invert else (x[key] / y[key]) for x, y in zip(rows[a], rows[b])]
        return statistics.median(rs), min(rs), max(rs)

    ratio_c = paired("constrained", "unconstrained", "decode_tps")
    ratio_jf_tps = paired("constrained+jf", "constrained", "decode_tps")
    ratio_jf = paired("constrained+jf", "constrained", "e2e_ms", invert=True)
    share = med("constrained", "grammar_ms") / med("constrained", "e2e_ms")

    def fmt(r: tuple[float, float, float]) -> str:
        return f"{r[0]:.3f}x (rounds: {r[1]:.3f} to {r[2]:.3f})"

    print()
    print(f"constrained / unconstrained decode tokens/s: {fmt(ratio_c)}  (aim >= 0.98)")
    print(
        f"  time in the grammar engine (masks, accepts): {share * 100:.2f}% of the constrained "
        f"run -> overhead-bound ratio {1 - share:.4f}x"
    )
    print(f"jump-forward speed-up, end-to-end time:      {fmt(ratio_jf)}  (aim >= 1.3)")
    print(f"jump-forward speed-up, decode tokens/s:      {fmt(ratio_jf_tps)}")
    if not args.no_hf:
        ours = med("unconstrained", "e2e_ms")
        print(
            f"unconstrained structout loop vs hf.generate, end-to-end: "
            f"{med('hf.generate', 'e2e_ms') / ours:.2f}x"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "n_tokens": n_tokens,
                    "threads": torch.get_num_threads(),
                    "rounds": rows,
                    "ratios": {
                        "constrained_vs_unconstrained_tps": ratio_c,
                        "grammar_time_share": share,
                        "jump_forward_e2e_speedup": ratio_jf,
                        "jump_forward_tps_speedup": ratio_jf_tps,
                    },
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
