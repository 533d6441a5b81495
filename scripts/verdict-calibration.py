#!/usr/bin/env python3
"""How often the verdict names a false winner, and how often the right one, on simulated processes.

Every repetition is a run of `stackwars run` (orchestrate.Run: the first round, the choice of each
side's best, the rounds of the first look, the looks that add rounds while a row is open), stored
and read back by the verdict into its words; only the processes are drawn (stackwars/calibration.py
says how). ``--rows 6`` reads six rows together, as the main job's verdict does. Each option may
be given several times: the table has a row for every combination.

    .venv/bin/python scripts/verdict-calibration.py --rows 6 --candidates 1,1 --candidates 4,1 \\
        --sd 0.066 --sd 0.12 --model normal --model skewed --reps 400

Columns: the rates of each word over the rows with the configuration's true ratio (the null rows
of ``--null-rows`` apart), ``family``: the share of runs naming any false winner among their rows
read together, ``decided``: a winner or the same speed, the rounds and simulated seconds a row
spent (its processes at ``--process-s`` each).

Exit status 1 where a configuration names false winners beyond 5% in all (for its rows read
together too) or 2.5% in one direction (no true difference) by more than two Monte-Carlo standard
errors; 2 for bad input; else 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stackwars import calibration, stats  # noqa: E402


def _pair(text: str) -> tuple[int, int]:
    try:
        t, j = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want K_T,K_J (PyTorch's and JAX's modes), e.g. 4,1")
    if t < 1 or j < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: each side needs at least one mode")
    return t, j


def _finite(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want a number")
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r}: want a finite number")
    return x


def _count(text: str) -> int:
    try:
        x = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want a whole number")
    if x < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: want a number >= 0")
    return x


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--candidates", type=_pair, action="append", help="K_T,K_J: PyTorch's and JAX's modes (1,1)")
    p.add_argument("--processes", type=_count, action="append", help=f"run --processes ({stats.FIRST_LOOK})")
    p.add_argument("--max-processes", type=_count, help=f"run --max-processes ({stats.MAX_ROUNDS})")
    p.add_argument("--sd", type=_finite, action="append", help="sd of log process medians (0.066)")
    p.add_argument("--model", choices=calibration.MODELS, action="append", help="normal, skewed or unequal")
    p.add_argument("--true-ratio", type=_finite, action="append", help="JAX time / PyTorch time (1: no difference)")
    p.add_argument("--rows", type=_count, action="append", help="rows read together (1; the main job: 6)")
    p.add_argument("--null-rows", type=_count, default=0, help="of them, rows with no true difference (0)")
    p.add_argument("--process-s", type=_finite, default=calibration.PROCESS_S,
                   help=f"seconds a simulated process is reckoned to take ({calibration.PROCESS_S})")
    p.add_argument("--reps", type=_count, default=200, help="runs a configuration (200)")
    p.add_argument("--seed", type=_count, default=0)
    p.add_argument("--json", type=Path, help="also write every configuration's result here (a new .json file)")
    a = p.parse_args(argv)
    if a.json is not None and (a.json.suffix != ".json" or a.json.is_dir()):
        print(f"verdict-calibration: --json {a.json}: want a path ending in .json (nothing else is written over)",
              file=sys.stderr)
        return 2
    grid = itertools.product(a.candidates or [(1, 1)], a.processes or [stats.FIRST_LOOK], a.sd or [0.066],
                             a.model or ["normal"], a.true_ratio or [1.0], a.rows or [1])
    try:
        configs = [calibration.Config(c, n, sd, m, r, a.reps, a.seed, rows, min(a.null_rows, rows), a.max_processes,
                                      a.process_s) for c, n, sd, m, r, rows in grid]
    except ValueError as exc:
        print(f"verdict-calibration: {exc}", file=sys.stderr)
        return 2
    print("rows | modes T:J | procs | sd    | model   | true | false JAX | false PyT | family | same  | no diff | "
          "cannot | right | decided | rounds | s/row | s")
    results, bad = [], []
    for c in configs:
        t0 = time.perf_counter()
        r = calibration.simulate(c)
        r["seconds"] = time.perf_counter() - t0
        results.append(r)
        rt = r["rates"]
        right = "-" if r["right"] is None else f"{r['right']:.1%}"
        print(f"{c.rows:4d} | {c.candidates[0]}:{c.candidates[1]}       | {c.processes:5d} | {c.sd:.3f} | "
              f"{c.model:7s} | {c.true_ratio:.2f} | {r['false_jax']:9.1%} | {r['false_torch']:9.1%} | "
              f"{r['family_false']:6.1%} | {rt['same speed']:5.1%} | {rt['no difference found']:7.1%} | "
              f"{rt['cannot say']:6.1%} | {right:>5} | {r['decided']:7.1%} | {r['rounds_a_row']:6.1f} | "
              f"{r['seconds_a_row']:5.0f} | {r['seconds']:.0f}", flush=True)
        bad += [f"{c}: {why}" for why in calibration.exceeds(r)]
    print(f"\n{len(configs)} configuration(s), {a.reps} runs each (Monte-Carlo error of a 5% rate: "
          f"±{calibration.mc_error(0.05, a.reps):.1%}); false: a winner named where none is, or the wrong one; "
          f"family: runs naming any false winner among their rows read together")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")
    for line in bad:
        print(f"EXCESS {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
