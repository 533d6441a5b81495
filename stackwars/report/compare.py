"""Two stored runs, cell by cell (``stackwars compare RUN_A RUN_B``), in the manner of pyperf's
``compare_to`` and asv's ``compare``: for each cell both runs measured, the ratio of the
steady-state medians (B / A, > 1: B is slower) with a bootstrap confidence interval (95%: one look) on
the stored samples, and a verdict that never calls a difference the data cannot tell apart
from noise a regression.

Verdicts: ``regression`` / ``improvement`` (the interval excludes 1 and the change is larger
than the threshold), ``same`` (the interval excludes 1 but the change is within the
threshold), ``not significant`` (the interval holds 1), ``unreliable`` (every process of a
side was measured on a contended machine: its samples say how busy the machine was, not
how fast the code is; a busy process among clean ones is left out: report/gate.py, the rule
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

import math
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Sequence

from stackwars import canary, stats
from stackwars.report import gate, tables

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
    """The processes that may decide (report/gate.py): ok, timed, measured on a quiet machine."""
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
                   memory_a_bytes=_median(tables.added_memory(r) for r in ca),
                   memory_b_bytes=_median(tables.added_memory(r) for r in cb),
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


def geometric_mean(values: Iterable[float]) -> float | None:
    vs = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vs) / len(vs)) if vs else None


def counts(rows: Iterable[Mapping[str, Any]]) -> "OrderedDict[str, int]":
    out: OrderedDict[str, int] = OrderedDict((v, 0) for v in VERDICTS)
    for r in rows:
        out[r["verdict"]] += 1
    return OrderedDict((k, v) for k, v in out.items() if v)


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


# ---- presentation ------------------------------------------------------------------------
COLUMNS = ("cell", "A", "B", "B/A (CI, level)", "verdict", "first call B/A", "memory B/A")
STYLE = {"regression": "bold red", "broke": "bold red", "improvement": "green", "fixed": "green",
         "unreliable": "yellow", "not significant": "dim"}


def _label(r: Mapping[str, Any]) -> str:
    extra = ",".join(f"{k}={v}" for k, v in sorted((r.get("overrides") or {}).items()))
    head = f"{r['workload']} {r['preset']} {r['phase']} · {r['backend']}"
    tail = "" if (r["device"], r["dtype"]) == ("cpu", "float32") else f" · {r['device']} {r['dtype']}"
    return head + tail + (f" [{extra}]" if extra else "")


def _cells(r: Mapping[str, Any]) -> list[str]:
    from stackwars.report.format import interval, seconds

    def side(s: str) -> str:
        status = r.get(f"status_{s}")
        if status is None:
            return "—"
        if status != "ok":
            return status
        text = seconds(r.get(f"median_{s}_s"))
        return text + (" †" if r.get(f"busy_{s}") else " ~" if r.get(f"noisy_{s}") else "")

    def ratio(x: float | None) -> str:
        return f"{x:.2f}x" if x else "—"

    ci = interval(r.get("ratio"), r.get("ci_low"), r.get("ci_high"), r.get("confidence"))
    verdict = r["verdict"] + (f" (reads {r['reading']})" if r.get("reading") else "")
    return [_label(r), side("a"), side("b"), ci, verdict, ratio(r.get("first_call_ratio")),
            ratio(r.get("memory_ratio"))]


def machine_line(state: Mapping[str, Any]) -> str | None:
    """What the canaries say about the two runs' host, where they differ or one has none."""
    d = state.get("differs")
    if d is not None:
        way = "slower" if d["ratio"] > 1 else "faster"
        return (f"the machine's canary ran {max(d['ratio'], 1 / d['ratio']):.2f}x {way} in B than in A "
                f"({d['a_s'] * 1e3:.3f} ms -> {d['b_s'] * 1e3:.3f} ms; noise ±{d['bound']:.0%}): the host itself ran "
                f"at another speed, so no cell is called a regression or an improvement (each row keeps what it "
                f"would read); compare runs measured in the same state of the machine")
    missing = [w for w, k in (("A", "canary_a"), ("B", "canary_b")) if not state.get(k)]
    if missing:
        return (f"run {' and '.join(missing)} recorded no canary (measured before stackwars had one): a slower host "
                f"would read as a regression")
    return None


def summary_line(rows: Sequence[Mapping[str, Any]]) -> str:
    judged = [r["ratio"] for r in rows if r.get("ratio") and r["verdict"] not in ("unreliable", "machine differs")]
    gm = geometric_mean(judged)
    parts = [f"{n} {v}" for v, n in counts(rows).items()]
    text = f"{len(rows)} cells: " + ", ".join(parts)
    if gm:
        text += f"; geometric mean of B/A over the {len(judged)} cells timed cleanly in both: {gm:.3f}x"
    return text


LEGEND = ("B/A: ratio of the steady-state estimates (mean of per-process medians; > 1: B slower), 95% CI from a "
          "hierarchical bootstrap (processes, then samples); regression / improvement: the CI excludes 1 and reaches "
          "beyond the threshold, with 3+ processes a side (else: too few processes); same: the CI lies within the "
          "threshold; not significant: the CI holds 1; †: no process of the side was measured on a quiet machine "
          "(verdict unreliable); machine differs: the two runs' canaries differ, so the host ran at another speed; "
          f"~: noisy (IQR > {stats.NOISE_THRESHOLD:.0%} of the median); first call and memory: one number a process, ratios shown, never "
          "judged.")


def table(rows: Sequence[Mapping[str, Any]], title: str):
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title, title_justify="left", caption=LEGEND, caption_justify="left")
    for c in COLUMNS:
        t.add_column(c, justify="left" if c in ("cell", "verdict") else "right", overflow="fold")
    for r in rows:
        cells = _cells(r)
        cells[4] = Text(cells[4], style=STYLE.get(r["verdict"], ""))
        t.add_row(*cells)
    return t


NARROW = 110  # below this many columns, one cell per two lines instead of the table


def stacked(rows: Sequence[Mapping[str, Any]], title: str):
    """The table for a narrow terminal: the cell on one line, its figures indented below."""
    from rich.console import Group
    from rich.text import Text

    parts = [Text(title, style="bold")]
    for r in rows:
        label, a, b, ci, verdict, first, memory = _cells(r)
        line = Text(f"  {a} -> {b}  {ci}  ")
        line.append(verdict, style=STYLE.get(r["verdict"], ""))
        parts += [Text(label), line]
        if first != "—" or memory != "—":
            parts.append(Text(f"  first call B/A {first}, memory B/A {memory}", style="dim"))
    parts.append(Text(LEGEND, style="dim"))
    return Group(*parts)


def render(rows: Sequence[Mapping[str, Any]], title: str, width: int):
    return table(rows, title) if width >= NARROW else stacked(rows, title)


def markdown(rows: Sequence[Mapping[str, Any]], title: str) -> str:
    lines = [f"**{title}**", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |")
    lines += ["", summary_line(rows), "", LEGEND]
    return "\n".join(lines) + "\n"
