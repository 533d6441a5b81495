#!/usr/bin/env python3
"""Where a run's cell-processes spent their time: per backend, the median of each timeline
stage, the worker's wall time and the harness's overhead (wall minus the measured windows and
the reference; first call excluded), from one or more results databases; and the fork
servers started ahead of their cells (between cells: in no worker's wall time).

    python scripts/harness-cost.py LABEL=PATH.db [LABEL=PATH.db ...] [--json OUT.json]

Each record's ``timeline`` comes from harness/measure.py; ``overhead_s`` from records.py.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections import defaultdict
from datetime import datetime

from stackwars.store.results import Store

STAGES = ("startup_s", "canary_s", "workload_s", "import_s", "device_init_s", "prepare_s", "first_call_s",
          "second_call_s", "settle_s", "warmup_s", "steady_s", "digest_s", "parity_copy_s", "stats_s", "observe_s",
          "anatomy_s", "counts_s", "reference_s", "parity_s")


def summarise(path: str) -> dict:
    per: dict[str, list] = defaultdict(list)
    ahead: dict[str, float] = {}  # fork-server batches started between cells: in no worker's wall time
    overlapped: dict[str, float] = {}  # of those, batches started while the machine probe ran: before the session
    references = 0.0  # CUDA cells' reference workers (runner.reference_first): in no cell's worker time
    computed: list[dict] = []
    with Store(path) as store:
        for _, m in store.cells():
            if m.wall_s is None:
                continue
            t = dict(m.timeline or {})
            t["wall_s"], t["overhead_s"] = m.wall_s, m.overhead_s
            t["forked"] = ((m.settings or {}).get("process") or {}).get("origin", {}).get("how", "spawned")
            t["cache"] = ((m.settings or {}).get("cache") or {}).get("mode")
            row = m.to_row()  # the same figures the run's `Time:` line reads (records.py)
            for who in ("", "reference_"):
                if row.get(f"{who}server_ahead_batch"):
                    ahead[row[f"{who}server_ahead_batch"]] = row[f"{who}server_ahead_s"]
                    if row.get(f"{who}server_ahead_during"):
                        overlapped[row[f"{who}server_ahead_batch"]] = row[f"{who}server_ahead_s"]
            references += row.get("reference_worker_extra_s") or 0.0  # beyond the servers' start it overlapped
            worker = (m.settings or {}).get("reference_worker") or {}
            if worker.get("source") == "computed":  # where a reference worker's seconds went
                computed.append({"cell": m.spec.key, "wall_s": worker.get("wall_s"), "init_s": worker.get("init_s"),
                                 "after_servers_s": worker.get("after_servers_s"), **(worker.get("stages") or {})})
            per[m.spec.backend].append(t)
        # each session (a run, or a resume of it), from its start to the last cell it stored: the
        # probe before it and the tables after it are outside
        measuring = sum((datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()
                        for first, last in store.conn.execute(
                            "SELECT s.started_at, MAX(c.created_at) FROM sessions s JOIN cells c "
                            "ON c.session_id = s.session_id GROUP BY s.session_id"))
    out = {"backends": {}, "all": {}, "servers_ahead_s": sum(ahead.values()), "server_batches": len(ahead),
           "servers_during_probe_s": sum(overlapped.values()),
           "references_s": references, "measuring_s": measuring, "reference_workers": computed}
    every = [t for ts in per.values() for t in ts]
    for name, ts in [*per.items(), ("all", every)]:
        med = {k: statistics.median([t.get(k) or 0.0 for t in ts]) for k in (*STAGES, "wall_s", "overhead_s")}
        med["n"] = len(ts)
        med["wall_sum_s"] = sum(t["wall_s"] for t in ts)
        med["overhead_sum_s"] = sum(t["overhead_s"] or 0.0 for t in ts)
        (out["all"] if name == "all" else out["backends"].setdefault(name, {})).update(med)
    return out


def main(argv: list[str]) -> int:
    out_path = None
    if "--json" in argv:
        i = argv.index("--json")
        out_path = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    missing = [a.split("=", 1)[-1] for a in argv if not os.path.isfile(a.split("=", 1)[-1])]
    if missing or not argv:
        print(f"harness-cost.py: no results database at {', '.join(missing)}" if missing else __doc__, file=sys.stderr)
        return 2
    result = {}
    cols = ("startup_s", "canary_s", "workload_s", "import_s", "device_init_s", "prepare_s", "first_call_s",
            "stats_s", "observe_s", "counts_s", "parity_s", "wall_s", "overhead_s")
    print(f"{'':28}" + "".join(f"{c[:-2]:>12}" for c in cols) + f"{'n':>4}")
    for arg in argv:
        label, path = arg.split("=", 1)
        result[label] = s = summarise(path)
        for name, med in [*s["backends"].items(), ("all", s["all"])]:
            print(f"{label + ' ' + name:28}" + "".join(f"{med[c]:12.3f}" for c in cols) + f"{med['n']:4d}")
        a = s["all"]
        print(f"{label}: {a['n']} cell-processes, wall {a['wall_sum_s']:.1f} s in workers, "
              f"overhead {a['overhead_sum_s']:.1f} s (median {a['overhead_s']:.2f} s a process)"
              + (f"; fork servers started ahead of their cells {s['servers_ahead_s']:.1f} s in "
                 f"{s['server_batches']} batches" if s["server_batches"] else "")
              + (f" ({s['servers_during_probe_s']:.1f} s of it while the machine probe ran, before the session)"
                 if s["servers_during_probe_s"] else "")
              + (f"; reference workers {s['references_s']:.1f} s that no server start overlapped" if s["references_s"] else ""))
        for w in s["reference_workers"]:
            print(f"{label}: reference worker for {w['cell']}: " + ", ".join(
                f"{k[:-2] if k.endswith('_s') else k} {w[k]:.2f} s" if k.endswith("_s") else f"{k} {w[k]:,}"
                for k in ("wall_s", "after_servers_s", "init_s", "float64_run_s", "float32_run_s", "to_float32_s", "store_s",
                          "stored_bytes") if w.get(k) is not None)
                + "".join(f"; float64 run's {k[:-2]} {v:.2f} s" for k, v in (w.get("float64_parts") or {}).items()))
        between = (s["measuring_s"] - a["wall_sum_s"] - (s["servers_ahead_s"] - s["servers_during_probe_s"])
                   - s["references_s"])
        print(f"{label}: sessions' start to their last cell {s['measuring_s']:.1f} s, of which between cells "
              f"(none of the above: the runner's own work) {between:.1f} s")
    if out_path:
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
