"""Two stored runs, cell by cell (``stackwars compare RUN_A RUN_B``), decided here and drawn by
report/compare.py, in the manner of pyperf's
``compare_to`` and asv's ``compare``: for each cell both runs measured, the ratio of the
steady-state medians (B / A, > 1: B is slower) with a bootstrap confidence interval (95%: one look) on
the stored samples, and a verdict that never calls a difference the data cannot tell apart
from noise a regression.

Verdicts: ``regression`` / ``improvement`` (the interval excludes 1 and the change is larger
than the threshold), ``same`` (the interval excludes 1 but the change is within the
threshold), ``not significant`` (the interval holds 1), ``unreliable`` (every process of a
side was measured on a contended machine: its samples say how busy the machine was, not
how fast the code is; a busy process among clean ones is left out: verdict/gate.py, the rule
every claim follows), ``machine differs`` (the two runs' canaries differ by more than their
noise: the host itself ran at another speed, stackwars/canary.py; what the cell would read
is kept, never acted on), ``broke`` / ``fixed`` (the status changed from or to ``ok``),
``status`` (another status change), and ``only in A`` / ``only in B``.

A cell measured in several processes (``--processes``) is compared with the hierarchical
bootstrap of stats.compare (processes, then the samples within each), and the interval
is turned into a verdict by stats.decide, the rule the JAX-vs-PyTorch verdict uses too;
with fewer than three processes on a side, a difference is never called a regression or
an improvement (``too few processes``): one process's interval understates the spread
between launches. First calls and peak memory are single numbers per process: their
ratios are shown, never judged.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Mapping, Sequence

from stackwars import canary, stats
from stackwars.verdict import figures, gate

VERDICTS = ("regression", "improvement", "same", "not significant", "too few processes", "unreliable",
            "machine differs", "broke", "fixed", "status", "only in A", "only in B")
ENV_KEYS = ("cpu_model", "cpu_kind", "cpu_count_logical", "thread_budget", "nvidia_driver", "git_revision")
MEASURE_KEYS = ("min_time_s", "min_samples", "warmup", "matmul_precision", "threads", "cache_dir", "parity_mode")


def cell_id(row: Mapping[str, Any]) -> str:
    """The cell's identity across runs: its key without the process number."""
    return str(row["cell_key"]).split("#r")[0]


def _group(rows: Iterable[Mapping[str, Any]]) -> "OrderedDict[str, list[Mapping[str, Any]]]":
    out: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        out.setdefault(cell_id(r), []).append(r)
    return out


def _status(group: Sequence[Mapping[str, Any]]) -> str:
    bad = [r["status"] for r in group if r["status"] != "ok"]
    return bad[0] if bad else "ok"


def _clean(group: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The processes that may decide (verdict/gate.py): ok, timed, measured on a quiet machine."""
    return gate.split([r for r in group if r["status"] == "ok"])[0]


def _processes(group: Sequence[Mapping[str, Any]]) -> list[list[float]]:
    """Samples per clean process; a busy one is never used, even when none is clean."""
    return [[float(x) for x in r["steady_samples"]] for r in _clean(group)]


def machine_state(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The two runs' canaries (stackwars/canary.py) and whether they differ by more than their noise."""
    a, b = canary.run_canary(rows_a), canary.run_canary(rows_b)
    return {"canary_a": a, "canary_b": b, "differs": canary.differ(a, b)}


def _median(values: Iterable[float | None]) -> float | None:
    vs = sorted(float(v) for v in values if v is not None)
    if not vs:
        return None
    return stats.summarize(vs).median


def _mean(values: Iterable[float | None]) -> float | None:
    vs = [float(v) for v in values if v is not None]
    return sum(vs) / len(vs) if vs else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None and a > 0 else None


def compare_cells(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]],
                  threshold: float = 0.05, confidence: float = 0.95) -> list[dict[str, Any]]:
    """One comparison row per cell in either run, in A's order then B's new cells."""
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold {threshold} must be in [0, 1)")
    ga, gb = _group(rows_a), _group(rows_b)
    differs = machine_state(rows_a, rows_b)["differs"]
    out = []
    for cid in list(ga) + [c for c in gb if c not in ga]:
        a, b = ga.get(cid), gb.get(cid)
        first = (a or b)[0]
        row: dict[str, Any] = {"cell": cid, "workload": first["workload"], "preset": first["preset"],
                               "phase": first["phase"], "backend": first["backend"], "device": first["device"],
                               "dtype": first["dtype"], "overrides": first.get("overrides") or {},
                               "status_a": _status(a) if a else None, "status_b": _status(b) if b else None,
                               "processes_a": len(a or ()), "processes_b": len(b or ())}
        if a is None or b is None:
            row["verdict"] = "only in B" if a is None else "only in A"
            out.append(row)
            continue
        # the steady-state estimate the ratio is taken of: the mean of the per-process medians
        ca, cb = _clean(a), _clean(b)  # every figure from the clean processes (the verdict's definitions)
        row.update(median_a_s=_mean(r.get("steady_median_s") for r in ca),
                   median_b_s=_mean(r.get("steady_median_s") for r in cb),
                   first_call_a_s=_median(r.get("first_call_s") for r in ca),
                   first_call_b_s=_median(r.get("first_call_s") for r in cb),
                   memory_a_bytes=_median(figures.added_memory(r) for r in ca),
                   memory_b_bytes=_median(figures.added_memory(r) for r in cb),
                   # busy: no process of the side was measured on a quiet machine
                   busy_a=bool(gate.timed(a)) and not ca, busy_b=bool(gate.timed(b)) and not cb,
                   noisy_a=any(r.get("noisy") for r in ca), noisy_b=any(r.get("noisy") for r in cb))
        row["first_call_ratio"] = _ratio(row["first_call_a_s"], row["first_call_b_s"])
        row["memory_ratio"] = _ratio(row["memory_a_bytes"], row["memory_b_bytes"])
        sa, sb = row["status_a"], row["status_b"]
        if sa != "ok" or sb != "ok":
            row["verdict"] = "broke" if sa == "ok" else "fixed" if sb == "ok" else "status"
            out.append(row)
            continue
        xa, xb = _processes(a), _processes(b)
        row["basis"] = f"{len(xa)} / {len(xb)} processes"
        row["n_a"], row["n_b"] = len(xa), len(xb)
        if row["busy_a"] or row["busy_b"]:  # every process of a side measured on a busy machine
            row["verdict"] = "unreliable"
            out.append(row)
            continue
        if not xa or not xb:
            row["verdict"] = "not significant"
            out.append(row)
            continue
        c = stats.compare(xa, xb, confidence=confidence)
        row.update(ratio=c.ratio, ci_low=c.ci_low, ci_high=c.ci_high, significant=c.significant, confidence=confidence)
        decision = stats.decide(c, threshold)
        if differs is not None:  # the host ran at another speed: no difference is the code's to claim
            row["verdict"] = "machine differs"
            row["reading"] = {"tie": "not significant", "noisy": "not significant", "higher": "regression",
                              "lower": "improvement"}[decision]
        elif decision == "tie":
            row["verdict"] = "not significant" if c.ci_low <= 1 <= c.ci_high else "same"
        elif decision == "noisy":
            row["verdict"] = "not significant"
        elif min(len(xa), len(xb)) < stats.MIN_PROCESSES:
            row["verdict"] = "too few processes"  # what it would read with enough: kept, never acted on
            row["reading"] = "regression" if decision == "higher" else "improvement"
        else:
            row["verdict"] = "regression" if decision == "higher" else "improvement"
        out.append(row)
    return out


def environment_differences(env_a: Mapping[str, Any], env_b: Mapping[str, Any],
                            config_a: Mapping[str, Any], config_b: Mapping[str, Any]) -> list[str]:
    """What differs between the two runs' machines, libraries and measurement settings: a
    ratio across a difference measures the difference as much as the code."""
    diffs = []
    for k in ENV_KEYS:
        if env_a.get(k) != env_b.get(k):
            diffs.append(f"{k}: {env_a.get(k)} -> {env_b.get(k)}")
    va, vb = env_a.get("versions") or {}, env_b.get("versions") or {}
    for k in sorted(set(va) | set(vb)):
        if va.get(k) != vb.get(k):
            diffs.append(f"{k}: {va.get(k)} -> {vb.get(k)}")
    ga = [g.get("name") for g in env_a.get("gpus") or ()]
    gb = [g.get("name") for g in env_b.get("gpus") or ()]
    if ga != gb:
        diffs.append(f"GPUs: {', '.join(ga) or 'none'} -> {', '.join(gb) or 'none'}")
    ma, mb = config_a.get("measure") or {}, config_b.get("measure") or {}
    for k in MEASURE_KEYS:
        if ma.get(k) != mb.get(k):
            diffs.append(f"measurement {k}: {ma.get(k)} -> {mb.get(k)}")
    return diffs
