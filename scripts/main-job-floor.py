#!/usr/bin/env python3
"""Where a run's wall time went, part by part, from its own records (issue 87's "the floor, part by part").

    .venv/bin/python scripts/main-job-floor.py RESULTS.db [RUN_ID] [--started ISO --ended ISO] [--json OUT]

``--started`` / ``--ended``: when the `stackwars run` command started and ended (UTC, ISO 8601), as a
wrapper measured them; without them the time before the run's creation and after its last cell is
not counted. The parts:

- **before the run**: the command's start to the run's creation (the CLI, the machine probe, the
  first round's fork servers started meanwhile, float64 references computed meanwhile);
- **first round**: every cell's first process (the choice), its processes' wall time and the gaps
  between them (fork servers started for a later process, the store);
- **rounds**: the later processes (each row's two chosen cells, a round at a time), their wall time
  split into the measured windows (first call, warm-up, steady state, memory phase) and the
  harness's share (``overhead_s``: the worker's wall time less the windows and a reference it
  computed), and the gaps between processes (the next rounds' fork servers, each look's verdict
  read, the store);
- **after the last cell**: the verdict, the tables, the JSON.

Each row of the verdict: its words, its rounds, what a round of it cost (its two cells' median
process wall time), and the rounds and seconds it took after the choice.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stackwars import verdict as vd  # noqa: E402
from stackwars.store.results import Store, rows  # noqa: E402


def _t(text: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def parts(db: Path, run_id: str | None, started: str | None, ended: str | None) -> dict:
    with Store(db, create=False) as store:
        run_id = run_id or store.run_ids()[-1]
        created = _t(store.conn.execute("SELECT created_at FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])
        stored = [(_t(c), key, json.loads(rec)) for c, key, rec in store.conn.execute(
            "SELECT created_at, cell_key, record_json FROM cells WHERE run_id = ? ORDER BY id", (run_id,))]
        found = rows(store, run_id)
    out = {"run": run_id, "processes": len(stored)}
    if started:
        out["before_run_s"] = (created - _t(started)).total_seconds()
    first = [s for s in stored if "#r" not in s[1]]
    later = [s for s in stored if "#r" in s[1]]
    prev = created
    gaps = {"first round": 0.0, "rounds": 0.0}
    walls = {"first round": 0.0, "rounds": 0.0}
    windows = {"first round": 0.0, "rounds": 0.0}
    harness = {"first round": 0.0, "rounds": 0.0}
    for t, key, rec in stored:
        part = "rounds" if "#r" in key else "first round"
        wall = float(rec.get("wall_s") or 0.0)
        gaps[part] += max(0.0, (t - prev).total_seconds() - wall)
        walls[part] += wall
        tl = rec.get("timeline") or {}
        windows[part] += sum(float(tl.get(k) or 0.0) for k in ("first_call_s", "second_call_s", "warmup_s", "steady_s",
                                                                 "memory_s"))
        harness[part] += max(0.0, wall - sum(float(tl.get(k) or 0.0) for k in (
            "first_call_s", "second_call_s", "warmup_s", "steady_s", "memory_s", "reference_s")))
        prev = t
    for part, items in (("first round", first), ("rounds", later)):
        out[part] = {"processes": len(items), "span_s": ((items[-1][0] - (created if part == "first round" else
                                                                          first[-1][0])).total_seconds()
                                                         if items and first else 0.0),
                     "process_wall_s": walls[part], "measured_windows_s": windows[part],
                     "harness_s": harness[part], "gaps_s": gaps[part]}
    if ended and stored:
        out["after_last_cell_s"] = (_t(ended) - stored[-1][0]).total_seconds()
    if started and ended:
        out["command_s"] = (_t(ended) - _t(started)).total_seconds()
    out["rows"] = []
    for v in vd.verdicts(found):
        seq = v.get("sequence") or {}
        out["rows"].append({"row": vd.title(v), "verdict": v["verdict"], "ratio": v.get("ratio"),
                            "ci": [v.get("ci_low"), v.get("ci_high")], "confidence": v.get("confidence"),
                            "rounds_read": seq.get("rounds"), "rounds_measured": seq.get("rounds_measured"),
                            "state": seq.get("state"), "round_s": v.get("round_s"),
                            "best": [v.get("best_torch"), v.get("best_jax")]})
    decided = [r for r in out["rows"] if r["verdict"] in vd.DECIDED]
    out["decided"] = len(decided)
    out["round_s_median"] = statistics.median([r["round_s"] for r in out["rows"] if r["round_s"]] or [0.0])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("db", type=Path)
    p.add_argument("run", nargs="?")
    p.add_argument("--started")
    p.add_argument("--ended")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    if not a.db.is_file():
        print(f"main-job-floor: no results database at {a.db}", file=sys.stderr)
        return 2
    out = parts(a.db, a.run, a.started, a.ended)
    for key in ("command_s", "before_run_s", "after_last_cell_s"):
        if key in out:
            print(f"{key:>20}: {out[key]:7.1f} s")
    for part in ("first round", "rounds"):
        d = out[part]
        print(f"{part:>20}: {d['processes']:3d} processes over {d['span_s']:6.1f} s: their wall {d['process_wall_s']:6.1f} s "
              f"(measured windows {d['measured_windows_s']:6.1f} s, harness {d['harness_s']:5.1f} s), gaps {d['gaps_s']:5.1f} s")
    print(f"{'decided':>20}: {out['decided']} of {len(out['rows'])} rows")
    for r in out["rows"]:
        ci = f"{r['ratio']:.3f} ({r['ci'][0]:.3f}-{r['ci'][1]:.3f}, {r['confidence']:.2%})" if r["ratio"] else "-"
        print(f"  {r['row']:<48} {r['verdict']:<20} {ci:<32} rounds {r['rounds_read']}/{r['rounds_measured']} "
              f"({r['state']}), a round {r['round_s'] or 0:.2f} s")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
