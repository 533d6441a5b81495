"""The evidence for the paired design (issue 55): the same pairs measured both ways, at the same
measuring time, on this machine.

    .venv/bin/python scripts/duet-evidence.py OUT_DIR [--processes N] [--min-time S]

For each pair (the same program twice, and PyTorch's against JAX's), N separate processes of each
side (as a run measures them: fresh forked workers, ``--min-time`` each) and N duets (both sides
alternating in one worker, ``harness/duet.py``: twice ``--min-time`` of rounds, the same time). It
writes ``evidence.json`` (every process median and duet ratio) and ``summary.txt``: the spread
of the log ratio either way (unpaired: of the ratio of the two sides' process medians; paired: of
the duets' ratios) and the 95% interval each design gives, A/A and A/B.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from stackwars import runner, stats
from stackwars.harness import env as envmod
from stackwars.records import CellSpec, MeasureConfig

PAIRS = (("gemm", "torch-eager", "torch-eager"), ("mha", "torch-eager", "torch-eager"),
         ("gemm", "torch-eager", "jax-jit"), ("mha", "torch-eager", "jax-jit"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--min-time", type=float, default=0.33)
    ap.add_argument("--phase", default="train-step")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe = runner.probe_machine()
    config = MeasureConfig(min_time_s=args.min_time, processes=args.processes)
    caches = runner.tmp.mkdtemp("duet-evidence")
    found, lines = [], []
    for workload, a, b in PAIRS:
        sa, sb = (CellSpec(workload, "small", args.phase, x) for x in (a, b))
        procs = {"a": [], "b": []}
        for r in range(args.processes):  # the sides' processes interleaved, as a run plans them
            for side, spec in (("a", sa), ("b", sb)):
                m = runner.measure_one(CellSpec(spec.workload, spec.preset, spec.phase, spec.backend, repeat=r),
                                       config, probe, None, cache_root=caches)
                procs[side].append(statistics.median(m.samples) if m.status == "ok" else None)
        duets = [runner.measure_duet(sa, sb, r, config, caches) for r in range(args.processes)]
        ratios = [d["ratio"] for d in duets if d.get("status") == "ok"]
        unpaired = stats.compare([[x] for x in procs["a"] if x], [[x] for x in procs["b"] if x])
        paired = stats.compare_paired(ratios)
        lsd = lambda xs: statistics.stdev([math.log(x) for x in xs if x])  # noqa: E731
        row = {"pair": f"{workload} small {args.phase}: {b} / {a}", "process_medians": procs, "duet_ratios": ratios,
               "sd_log_process_a": lsd(procs["a"]), "sd_log_process_b": lsd(procs["b"]),
               "sd_log_duet_ratio": lsd(ratios),
               "unpaired": [unpaired.ratio, unpaired.ci_low, unpaired.ci_high],
               "paired": [paired.ratio, paired.ci_low, paired.ci_high],
               "duet_window_s": statistics.median(d["window_s"] for d in duets if d.get("window_s")),
               "duet_wall_s": statistics.median(d["wall_s"] for d in duets)}
        found.append(row)
        lines.append(f"{row['pair']}: process medians spread {row['sd_log_process_a']:.1%} / "
                     f"{row['sd_log_process_b']:.1%} (sd of log), duet ratios {row['sd_log_duet_ratio']:.1%}; "
                     f"unpaired {unpaired.ratio:.3f} ({unpaired.ci_low:.3f}-{unpaired.ci_high:.3f}), "
                     f"paired {paired.ratio:.3f} ({paired.ci_low:.3f}-{paired.ci_high:.3f}), 95%, "
                     f"{args.processes} processes a side against {len(ratios)} duets")
        print(lines[-1], flush=True)
    env = envmod.fingerprint(None, probe)
    (out / "evidence.json").write_text(json.dumps({"env": env, "config": config.to_dict(), "pairs": found},
                                                  indent=1, default=str))
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
