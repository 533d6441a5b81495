"""Tables for the recompile and cache studies."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from stackwars.report import format as fmt


def recompile_table(rows: Sequence[Mapping[str, Any]], title: str) -> Group:
    columns: OrderedDict[tuple[str, str], list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        columns.setdefault((r["backend"], r["variant"]), []).append(r)
    table = Table(title=title, title_justify="left")
    table.add_column("call")
    table.add_column(rows[0]["key"] if rows else "value", justify="right")
    for backend, variant in columns:
        table.add_column(f"{backend}\n{variant}", justify="right")
    n = max(len(c) for c in columns.values()) if columns else 0
    for i in range(n):
        first = next(c[i] for c in columns.values() if i < len(c))
        cells = []
        for c in columns.values():
            if i >= len(c):
                cells.append("")
                continue
            r = c[i]
            text = fmt.seconds(r["call_s"])
            cells.append(Text(f"✓ {text}", style="bold yellow") if r["compiled"] else Text(text))
        table.add_row(str(i), str(first["value"]), *cells)
    table.add_row(Text("compiles", style="bold"), "",
                  *[Text(str(c[-1]["compile_count"]), style="bold") for c in columns.values()])
    parts: list[Any] = [table, Text("✓ = the call compiled (counted from the framework's own compile events); "
                                    "the time is the whole synchronised call.", style="dim")]
    for (backend, variant), c in columns.items():
        reasons = [(r["call_index"], r["reason"]) for r in c if r["compiled"] and r.get("reason")]
        if reasons:
            parts.append(Text(f"{backend} {variant}:", style="bold"))
            parts.extend(Text(f"  call {i}: {why}") for i, why in reasons)
        if not c[0].get("exact", True):
            parts.append(Text(f"  {backend} {variant}: padding changes this workload's results "
                              f"(shown for its compile behaviour only)", style="yellow"))
    return Group(*parts)


def cache_table(rows: Sequence[Mapping[str, Any]], title: str) -> Group:
    table = Table(title=title, title_justify="left")
    for c in ("backend", "first call, cold cache", "first call, warm cache", "saved", "second call (same process)",
              "cache evidence (warm run)"):
        table.add_column(c, justify="left" if c in ("backend", "cache evidence (warm run)") else "right")
    by: OrderedDict[str, dict[str, Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        by.setdefault(r["backend"], {})[r["run"]] = r
    for backend, runs in by.items():
        cold, warm = runs.get("cold", {}), runs.get("warm", {})
        if cold.get("status") not in ("ok", "parity_fail") or warm.get("status") not in ("ok", "parity_fail"):
            table.add_row(backend, *[fmt.DASH] * 4, f"{cold.get('status')} / {warm.get('status')}")
            continue
        saved = cold["first_call_s"] - warm["first_call_s"]
        evidence = ", ".join(f"{k} {v}" for k, v in (warm.get("cache_hits") or {}).items()) or "none reported"
        held = {k: v for k, v in (warm.get("cache_contents_before") or {}).items() if v}
        if held:  # what the warm run found in the directory (XLA's autotuning results on a GPU)
            evidence += "; found " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in held.items())
        table.add_row(backend, fmt.seconds(cold["first_call_s"]), fmt.seconds(warm["first_call_s"]),
                      f"{fmt.seconds(saved)} ({100 * saved / cold['first_call_s']:.0f}%)",
                      fmt.seconds(cold["second_call_s"]), evidence)
    return Group(table, Text("cold: a fresh process and an empty cache directory; warm: a fresh process reusing "
                             "the directory the cold run filled; second call: the in-memory caches of the cold "
                             "process.", style="dim"))


def autotune_table(rows: Sequence[Mapping[str, Any]], title: str, notes: Sequence[str]) -> Group:
    table = Table(title=title, title_justify="left")
    for c in ("backend", "autotuning", "matmul precision", "compile", "first call", "steady median", "status"):
        table.add_column(c, justify="right" if c in ("compile", "first call", "steady median") else "left")
    for r in rows:
        table.add_row(r["backend"], r["autotune"], r["matmul_precision"], fmt.seconds(r.get("compile_s")),
                      fmt.seconds(r.get("first_call_s")), fmt.seconds(r.get("steady_median_s")), r["status"])
    parts: list[Any] = [table, Text("compile: XLA's compile stage (jax-jit) or Dynamo + AOTAutograd + Inductor "
                                    "(torch); each row a fresh worker with cold caches.", style="dim")]
    parts.extend(Text(f"- {n}") for n in notes)
    return Group(*parts)
