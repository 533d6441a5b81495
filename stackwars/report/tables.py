"""The seeds' tables: one per workload x preset x phase x device x dtype, a row per backend.

| backend | First Run | Second Run | Avg Steady State | ± (IQR) | vs best | achieved | roofline |
  peak mem | parity | status |

"Avg Steady State" keeps the seeds' column name; the value is the median per-call time of
the steady-state samples (robust to the stragglers that make means lie). "vs best" is
the ratio of medians to the fastest ok backend of the table, with a bootstrap 95% CI;
"~" marks a difference that is not significant.
"""

from __future__ import annotations

import io
from collections import OrderedDict
from typing import Any, Iterable, Mapping

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from stackwars import stats
from stackwars.report import format as fmt

COLUMNS = ("backend", "First Run", "Second Run", "Avg Steady State", "± (IQR)", "vs best", "achieved",
           "roofline", "peak mem", "parity", "status")

CAPTION = ("Avg Steady State: median seconds per call over the steady-state samples (n); ± (IQR): "
           "interquartile range; vs best: ratio of medians to the fastest backend, 95% bootstrap CI, "
           "~ = not significant; roofline: time floor from measured device peaks / median; peak mem: "
           "{mem}; parity: max relative error against the float64 reference.")


def _group_key(row: Mapping[str, Any]) -> tuple:
    over = ",".join(f"{k}={v}" for k, v in sorted((row.get("overrides") or {}).items()))
    return (row["workload"], row["preset"], row["phase"], row["device"], row["dtype"], over)


def _label(row: Mapping[str, Any]) -> str:
    opts = row.get("options") or {}
    if not opts:
        return row["backend"]
    return f"{row['backend']} [{', '.join(f'{k}={v}' for k, v in sorted(opts.items()))}]"


def _status(row: Mapping[str, Any]) -> Text:
    status = row["status"]
    style = {"ok": "green", "parity_fail": "bold red", "unsupported": "dim"}.get(status, "red")
    text = Text(status, style=style)
    if status in ("ok", "parity_fail") and row.get("noisy"):
        text.append(" (noisy)", style="yellow")
    return text


def _parity(row: Mapping[str, Any]) -> str:
    err, tol = row.get("parity_max_rel_err"), row.get("parity_tolerance")
    if err is None:
        return fmt.DASH
    return f"{err:.1e} {'✓' if tol is not None and err <= tol else '✗'}"


def _vs_best(row: Mapping[str, Any], best: Mapping[str, Any] | None) -> str:
    if best is None or not row.get("steady_samples") or row["status"] != "ok":
        return fmt.DASH
    if row is best:
        return "fastest"
    c = stats.compare(best["steady_samples"], row["steady_samples"])
    return f"{c.ratio:.2f}x" + ("" if c.significant else " ~")


def _memory_counter(rows: Iterable[Mapping[str, Any]]) -> str:
    counters = sorted({r["peak_memory_counter"] for r in rows if r.get("peak_memory_counter")})
    return "; ".join(counters) if counters else "not measured"


def group_rows(rows: Iterable[Mapping[str, Any]]) -> "OrderedDict[tuple, list[Mapping[str, Any]]]":
    groups: OrderedDict[tuple, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        groups.setdefault(_group_key(r), []).append(r)
    return groups


def cell_table(key: tuple, rows: list[Mapping[str, Any]]) -> Table:
    workload, preset, phase, device, dtype, over = key
    title = f"{workload} · {preset} · {phase} · {device} · {dtype}" + (f" · {over}" if over else "")
    table = Table(title=title, title_justify="left", show_lines=False)
    for c in COLUMNS:
        table.add_column(c, justify="left" if c in ("backend", "status", "parity") else "right", no_wrap=c == "backend")
    ok = [r for r in rows if r["status"] == "ok" and r.get("steady_median_s")]
    best = min(ok, key=lambda r: r["steady_median_s"]) if ok else None
    for r in rows:
        median = r.get("steady_median_s")
        table.add_row(
            _label(r),
            fmt.seconds(r.get("first_call_s")),
            fmt.seconds(r.get("second_call_s")),
            fmt.seconds(median) + (f" (n={r['steady_n']})" if median is not None else ""),
            fmt.seconds(r.get("steady_iqr_s")),
            _vs_best(r, best),
            fmt.rate(r.get("achieved_flops_per_s"), "FLOP"),
            fmt.fraction(r.get("roofline_fraction")),
            fmt.nbytes(r.get("peak_memory_bytes")),
            _parity(r),
            _status(r),
        )
    return table


def failures(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        if r["status"] != "ok" and r.get("error"):
            first = next((line for line in r["error"].splitlines() if line.strip()), "")
            out.append(f"{r['cell_key']}: {r['status']}: {first[:300]}")
    return out


def render(rows: list[Mapping[str, Any]], env_summary: str | None = None) -> Group:
    """Everything `stackwars run` and `stackwars show` print after the progress bar."""
    parts: list[Any] = []
    for key, group in group_rows(rows).items():
        parts.append(cell_table(key, group))
    if rows:
        parts.append(Text(CAPTION.format(mem=_memory_counter(rows)), style="dim"))
    fails = failures(rows)
    if fails:
        parts.append(Text("Cells that did not finish ok:", style="bold"))
        parts.extend(Text(f"  {f}") for f in fails)
    if env_summary:
        parts.append(Text(f"Environment: {env_summary}", style="dim"))
    return Group(*parts)


def to_text(rows: list[Mapping[str, Any]], env_summary: str | None = None, width: int = 200) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(render(rows, env_summary))
    return console.export_text()
