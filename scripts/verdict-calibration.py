#!/usr/bin/env python3
"""How often the verdict names a false winner, and how often the right one, on simulated processes.

Every repetition is a run of `stackwars run` (orchestrate.Run: the first round, the choice of each
side's best, the rounds that decide, the looks that add rounds), stored and read back by the
verdict into its word; only the processes are drawn (stackwars/calibration.py says how). Each
option may be given several times: the table has a row for every combination.

    .venv/bin/python scripts/verdict-calibration.py --candidates 1,1 --candidates 4,1 \\
        --processes 3 --processes 10 --model normal --model skewed --sd 0.1 --reps 400

Exit status 1 where a configuration with no true difference (--true-ratio 1) names false winners
beyond 5% in all or 2.5% in one direction by more than two Monte-Carlo standard errors; 2 for bad
input; else 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stackwars import calibration  # noqa: E402


def _pair(text: str) -> tuple[int, int]:
    try:
        t, j = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want K_T,K_J (PyTorch's and JAX's modes), e.g. 4,1")
    if t < 1 or j < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: each side needs at least one mode")
    return t, j


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--candidates", type=_pair, action="append", help="K_T,K_J: PyTorch's and JAX's modes (1,1)")
    p.add_argument("--processes", type=int, action="append", help="run --processes (3)")
    p.add_argument("--sd", type=float, action="append", help="sd of log process medians (0.066)")
    p.add_argument("--model", choices=calibration.MODELS, action="append", help="normal, skewed or unequal")
    p.add_argument("--true-ratio", type=float, action="append", help="JAX time / PyTorch time (1: no difference)")
    p.add_argument("--reps", type=int, default=200, help="runs a configuration (200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="also write every configuration's result here")
    a = p.parse_args(argv)
    grid = itertools.product(a.candidates or [(1, 1)], a.processes or [3], a.sd or [0.066], a.model or ["normal"],
                             a.true_ratio or [1.0])
    try:
        configs = [calibration.Config(c, n, sd, m, r, a.reps, a.seed) for c, n, sd, m, r in grid]
    except ValueError as exc:
        print(f"verdict-calibration: {exc}", file=sys.stderr)
        return 2
    print("modes T:J | procs | sd    | model   | true | false JAX | false PyT | false all | same  | no diff | "
          "cannot | right | rounds | procs/run | s")
    results, bad = [], []
    for c in configs:
        t0 = time.perf_counter()
        r = calibration.simulate(c)
        r["seconds"] = time.perf_counter() - t0
        results.append(r)
        rt = r["rates"]
        right = "-" if r["right"] is None else f"{r['right']:.1%}"
        print(f"{c.candidates[0]}:{c.candidates[1]}       | {c.processes:5d} | {c.sd:.3f} | {c.model:7s} | "
              f"{c.true_ratio:.2f} | {r['false_jax']:9.1%} | {r['false_torch']:9.1%} | {r['false']:9.1%} | "
              f"{rt['same speed']:5.1%} | {rt['no difference found']:7.1%} | {rt['cannot say']:6.1%} | {right:>5} | "
              f"{r['rounds_a_row']:6.1f} | {r['processes_a_run']:9.1f} | {r['seconds']:.0f}", flush=True)
        bad += [f"{c}: {why}" for why in calibration.exceeds(r)]
    print(f"\n{len(configs)} configuration(s), {a.reps} runs each (Monte-Carlo error of a 5% rate: "
          f"±{calibration.mc_error(0.05, a.reps):.1%}); false: a winner named where none is, or the wrong one")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")
    for line in bad:
        print(f"EXCESS {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
