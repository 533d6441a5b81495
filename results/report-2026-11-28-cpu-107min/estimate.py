"""The models steps under a leaner CPU plan, estimated from this run's own processes: each process's
first and second call as measured, then WARMUP + SAMPLES calls at its steady median (instead of the
3 + 10 it ran, or more where --min-time asked), its reference and overhead as measured; processes
past the first three of a cell (the top-ups) left out."""
import json, sys
from collections import defaultdict
from stackwars.store.results import Store, rows
out, warm, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with Store(f"{out}/results.db", create=False) as s:
    rs = rows(s)
    runs = {r["run_id"]: r for r in s.runs()}
by = defaultdict(lambda: [0.0, 0.0, 0])
for r in rs:
    cmd = runs[r["run_id"]].get("command") or ""
    if " run " not in f" {cmd} " or not any(m in cmd for m in ("resnet50", "llama3-8b")):
        continue
    step = "models-llama3-8b" if "n_layers" in cmd else "models"
    w = r.get("wall_s") or 0
    med = r.get("steady_median_s") or 0
    lean = ((r.get("first_call_s") or 0) + (r.get("second_call_s") or 0) + (warm + samples) * med
            + (r.get("reference_computed_s") or 0) + (r.get("overhead_s") or 0))
    by[step][0] += w
    if (r.get("repeat") or 0) < 3:
        by[step][1] += min(w, lean)
        by[step][2] += 1
for k, (w, lean, n) in by.items():
    print(f"{k}: worker {w:.0f} s as run; {lean:.0f} s for {n} processes at warm-up {warm}, {samples} samples, no top-ups")
