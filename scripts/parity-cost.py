#!/usr/bin/env python3
"""What the parity check costs a cell-process on this host: ``harness.parity.compare`` on a
GPT-2 paper forward's logits (8 x 1024 x 50257 float32, 412 million elements) against a
float32 reference read memory-mapped, as the run's reference cache gives it; one thread, then
the slices in as many threads as the process may use. The first comparison of each pays the
page faults of its fresh temporaries, as a fresh worker does.

    python scripts/parity-cost.py [--repeat 3] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

from stackwars.harness import env, parity

SHAPE = (8, 1024, 50257)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        ref = rng.standard_normal(SHAPE, dtype=np.float32)
        path = os.path.join(tmp, "ref.npy")
        np.save(path, ref)
        out = ref + np.float32(1e-3) * rng.standard_normal(SHAPE, dtype=np.float32)
        del ref
        mapped = np.load(path, mmap_mode="r")
        threads = parity._workers()
        seconds: dict[str, list[float]] = {}
        for label, workers in (("1 thread", 1), (f"{threads} threads", threads)):
            parity._workers = lambda n=workers: n  # this process only
            seconds[label] = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                result = parity.compare({"logits": out}, {"logits": mapped}, 0.1)
                seconds[label].append(time.perf_counter() - t0)
            assert result.ok, result
            print(f"{label}: " + ", ".join(f"{s:.3f} s" for s in seconds[label]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": SHAPE, "elements": int(np.prod(SHAPE)), "seconds": seconds,
                       "environment": env.fingerprint()}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
