#!/usr/bin/env python3
"""Rounds of separate processes against duets, on this machine: is the verdict's deciding design
what each program does alone, and how far off is a duet (two runtimes in one process)?

    .venv/bin/python scripts/pairing-calibration.py OUT_DIR [--rounds 6] [--duets 6] [--min-time 0.33]

For each A/B pair (gemm, ffn and mha train step and mha forward, torch-compile against jax-jit):

* ``--rounds`` rounds, as a verdict's rounds are measured: one fresh process of each side, back to
  back, in an order drawn for the round (runner.measure_one, each in its own forked worker). Read
  two ways: paired (the geometric mean of the rounds' ratios, Student's t over rounds: the
  verdict's design) and unpaired (each side's processes apart: ``stats.compare``). Both read the
  same processes, so with every round clean they give the same ratio (the geometric mean of
  ratios is the ratio of geometric means); they part only where a busy process leaves its round
  out of the pairs but not its other side out of the unpaired figure;
* ``--duets`` duets (both programs alternating in one worker, harness/duet.py) with the
  runtimes' defaults, and as many with ``OMP_WAIT_POLICY=passive`` set before the frameworks load
  (libgomp's threads sleep rather than spin between parallel regions). XLA's CPU runtime has no
  documented switch for its thread pool's spinning, so nothing else is set.

It writes ``calibration.json`` (every process median, round ratio and duet ratio, the environment)
and ``summary.txt``, and exits 1 where a pair's paired ratio lies more than 3% from its unpaired
one (the deciding design would not be the programs alone).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stackwars import runner, stats  # noqa: E402
from stackwars.harness import env as envmod  # noqa: E402
from stackwars.records import CellSpec, MeasureConfig  # noqa: E402
from stackwars.report import gate  # noqa: E402

PAIRS = (("gemm", "train-step"), ("ffn", "train-step"), ("mha", "train-step"), ("mha", "forward"))
SIDES = ("torch-compile", "jax-jit")
PASSIVE = {"OMP_WAIT_POLICY": "passive"}
AGREE = 0.03  # the paired ratio within this of the unpaired one


def _rounds(a: CellSpec, b: CellSpec, n: int, config: MeasureConfig, probe, caches: str, seed: int) -> dict:
    order = random.Random(seed)
    procs: dict[str, list] = {"a": [], "b": []}
    for r in range(n):
        sides = [("a", a), ("b", b)]
        order.shuffle(sides)  # a round's two processes back to back, in a drawn order (RMIT)
        for side, spec in sides:
            m = runner.measure_one(CellSpec(spec.workload, spec.preset, spec.phase, spec.backend, repeat=r), config,
                                   probe, None, cache_root=caches)
            clean = m.status == "ok" and gate.busy_reason(m.to_row()) is None
            procs[side].append({"repeat": r, "status": m.status, "clean": clean,
                                "median_s": statistics.median(m.samples) if m.samples else None})
    pairs = [(x["median_s"], y["median_s"]) for x, y in zip(procs["a"], procs["b"]) if x["clean"] and y["clean"]]
    paired = stats.compare_paired([y / x for x, y in pairs]) if len(pairs) >= 2 else None
    unpaired = stats.compare([[x["median_s"]] for x in procs["a"] if x["clean"]],
                             [[y["median_s"]] for y in procs["b"] if y["clean"]])
    return {"processes": procs, "rounds_clean": len(pairs),
            "paired": None if paired is None else [paired.ratio, paired.ci_low, paired.ci_high],
            "unpaired": [unpaired.ratio, unpaired.ci_low, unpaired.ci_high]}


def _duets(a: CellSpec, b: CellSpec, n: int, config: MeasureConfig, caches: str, env: dict | None) -> dict:
    found = [runner.measure_duet(a, b, r, config, caches, env=env) for r in range(n)]
    clean = [d for d in found if d.get("status") == "ok" and gate.busy_reason(
        {"contended": ((d.get("settings") or {}).get("contention") or {}).get("contended"),
         "contention_window_s": ((d.get("settings") or {}).get("contention") or {}).get("window_s")}) is None]
    c = stats.compare_paired([d["ratio"] for d in clean]) if len(clean) >= 2 else None
    return {"env": env or {}, "ratios": [d.get("ratio") for d in found], "clean": len(clean),
            "status": [d.get("status") for d in found],
            "ratio": None if c is None else [c.ratio, c.ci_low, c.ci_high]}


def _fmt(x) -> str:
    return "—" if x is None else f"{x[0]:.3f} ({x[1]:.3f}-{x[2]:.3f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duets", type=int, default=6)
    ap.add_argument("--min-time", type=float, default=0.33, help="seconds of steady state a process (a duet: twice)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.rounds < 2 or a.duets < 0 or a.min_time <= 0:
        print("pairing-calibration: need --rounds >= 2, --duets >= 0, --min-time > 0", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    probe = runner.probe_machine()
    config = MeasureConfig(min_time_s=a.min_time, processes=a.rounds, seed=a.seed)
    caches = runner.tmp.mkdtemp("pairing-calibration")
    found, lines, off = [], [], []
    head = "pair (JAX/PyTorch) | rounds: paired (95% CI) | separate processes: unpaired | duets | duets, OMP passive"
    print(head, flush=True)
    for k, (workload, phase) in enumerate(PAIRS):
        ta, jb = (CellSpec(workload, "small", phase, s) for s in SIDES)
        row = {"pair": f"{workload} small {phase}: {SIDES[1]} / {SIDES[0]}",
               "rounds": _rounds(ta, jb, a.rounds, config, probe, caches, a.seed * 1000 + k),
               "duets": _duets(ta, jb, a.duets, config, caches, None) if a.duets else None,
               "duets_passive": _duets(ta, jb, a.duets, config, caches, PASSIVE) if a.duets else None}
        p, u = row["rounds"]["paired"], row["rounds"]["unpaired"]
        row["paired_vs_unpaired"] = None if p is None else p[0] / u[0] - 1
        if p is None or abs(row["paired_vs_unpaired"]) > AGREE:
            off.append(row["pair"])
        found.append(row)
        lines.append(f"{row['pair']} | {_fmt(p)} [{row['rounds']['rounds_clean']} clean rounds] | {_fmt(u)} | "
                     f"{_fmt((row['duets'] or {}).get('ratio'))} | {_fmt((row['duets_passive'] or {}).get('ratio'))}")
        print(lines[-1], flush=True)
    env = envmod.fingerprint(None, probe)
    (a.out / "calibration.json").write_text(json.dumps({"env": env, "config": config.to_dict(), "pairs": found},
                                                       indent=1, default=str) + "\n")
    (a.out / "summary.txt").write_text(head + "\n" + "\n".join(lines) + "\n"
                                       + (f"\npaired more than {AGREE:.0%} from unpaired: {', '.join(off)}\n" if off
                                          else f"\nevery pair's paired ratio within {AGREE:.0%} of its unpaired one\n"))
    return 1 if off else 0


if __name__ == "__main__":
    sys.exit(main())
