"""Two stored runs, cell by cell, as a reader sees them: the table, the Markdown, the summary line.

Every row is decided by ``stackwars.verdict.runs`` (``compare_cells``: regression, improvement,
same, not significant, ...); this module only draws them.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import math
from collections import OrderedDict
from typing import Iterable

from stackwars import stats
from stackwars.verdict.runs import VERDICTS

def geometric_mean(values: Iterable[float]) -> float | None:
    vs = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vs) / len(vs)) if vs else None


def counts(rows: Iterable[Mapping[str, Any]]) -> "OrderedDict[str, int]":
    out: OrderedDict[str, int] = OrderedDict((v, 0) for v in VERDICTS)
    for r in rows:
        out[r["verdict"]] += 1
    return OrderedDict((k, v) for k, v in out.items() if v)


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
