"""Where each reproduce step's time went: the steps' wall time (state file) against the cell-processes'
measured windows (first call = cold compile on a first process, second call, warm-up, steady window),
their float64 references, and the harness's overhead (process start, imports, parity), from the DB."""
import json, sys
from collections import defaultdict
from stackwars.store.results import Store, rows
out = sys.argv[1]
state = json.load(open(f"{out}/reproduce-state.json"))
with Store(f"{out}/results.db", create=False) as store:
    runs = store.runs()
    allrows = rows(store)
by_run = defaultdict(list)
for r in allrows:
    by_run[r["run_id"]].append(r)
def step_of(cmd):
    for name, s in state.items():
        a = " ".join(s["args"])
        if cmd and a in cmd:
            return name
    return None
agg = defaultdict(lambda: defaultdict(float))
for run in runs:
    name = step_of(run.get("command") or "") or run.get("command", "?")[:40]
    rs = by_run.get(run["run_id"], [])
    a = agg[name]
    for r in rs:
        a["procs"] += 1
        a["wall"] += r.get("wall_s") or 0
        a["measured"] += r.get("measured_s") or 0
        a["first"] += r.get("first_call_s") or 0
        a["reference"] += (r.get("reference_computed_s") or 0) + (r.get("reference_worker_s") or 0)
        a["overhead"] += r.get("overhead_s") or 0
total = defaultdict(float)
print(f"{'step':18} {'step s':>7} {'procs':>5} {'worker s':>8} {'measured':>8} {'1st call':>8} {'ref':>6} {'overhead':>8}")
for name, s in state.items():
    a = agg.get(name, {})
    print(f"{name:18} {s['seconds']:7.0f} {int(a.get('procs',0)):5d} {a.get('wall',0):8.0f} {a.get('measured',0):8.0f} {a.get('first',0):8.0f} {a.get('reference',0):6.0f} {a.get('overhead',0):8.0f}")
    total["step"] += s["seconds"]
    for k in ("procs", "wall", "measured", "first", "reference", "overhead"):
        total[k] += a.get(k, 0)
print(f"{'all':18} {total['step']:7.0f} {int(total['procs']):5d} {total['wall']:8.0f} {total['measured']:8.0f} {total['first']:8.0f} {total['reference']:6.0f} {total['overhead']:8.0f}")
