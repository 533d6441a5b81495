"""IR summaries and the StableHLO / optimized-HLO comparison of the two frameworks."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Group
from rich.table import Table
from rich.text import Text

from stackwars.ir import stats


def _top(ops: Mapping[str, int], n: int = 6) -> str:
    return ", ".join(f"{k.replace('stablehlo.', '').replace('torch.ops.aten.', 'aten.')} {v}"
                     for k, v in list(ops.items())[:n])


def _notes(stage: str, s: Mapping[str, Any]) -> str:
    parts = []
    if "arguments" in s:
        parts.append(f"{s['arguments']} arguments, {s.get('baked_constants', 0)} baked constant tensors")
    if stage == "stablehlo":
        parts.append(f"{s['converts']} converts" + (", f64 present" if s["has_f64"] else ""))
        if s.get("custom_calls"):
            parts.append("custom calls: " + ", ".join(s["custom_calls"]))
    if stage == "hlo":
        parts.append(f"{s['fusions']} fusions ({', '.join(f'{k} {v}' for k, v in s['fusion_kinds'].items())}), "
                     f"{sum(s['fused_ops'].values())} ops inside fusions")
    if stage == "fx":
        parts.append(f"{s['graphs']} graph(s), {s['graph_breaks']} graph break(s), "
                     f"{s['placeholders']} inputs lifted, {s['get_attr']} attributes baked")
        parts.extend(f"break: {r}" for r in s.get("break_reasons", []))
    if stage == "aot":
        parts.append("graphs: " + ", ".join(s["graphs"]))
    if stage == "inductor":
        parts.append(f"{s['kernels']} generated {s['language']} kernel(s); extern calls: "
                     + (", ".join(f"{k} {v}" for k, v in s["extern_calls"].items()) or "none"))
    return "; ".join(parts)


def stage_table(framework: str, summaries: Mapping[str, Mapping[str, Any]], directory: str) -> Table:
    table = Table(title=f"{framework}: intermediate forms (files in {directory})", title_justify="left")
    for c in ("stage", "ops", "most frequent", "notes"):
        table.add_column(c, overflow="fold")
    for stage, s in summaries.items():
        table.add_row(stage, str(s.get("n_ops", "")), _top(s.get("ops", {})), _notes(stage, s))
    return table


def compare(jax_side: Mapping[str, Any], torch_side: Mapping[str, Any], title: str) -> Group:
    """Op-by-op StableHLO histogram (and, when present, XLA's optimized HLO), differences first."""
    parts: list[Any] = []
    for stage, label in (("stablehlo", "StableHLO handed to XLA"), ("hlo", "after XLA's passes (optimized HLO)")):
        j, t = jax_side.get(stage), torch_side.get(stage)
        if not j or not t:
            continue
        table = Table(title=f"{title}: {label}", title_justify="left")
        for c in ("op", "jax", "torch", "Δ (torch − jax)"):
            table.add_column(c, justify="left" if c == "op" else "right")
        for op, a, b in stats.compare(j["ops"], t["ops"]):
            style = "" if a == b else "bold yellow"
            table.add_row(Text(op, style=style), str(a), str(b), Text(f"{b - a:+d}" if a != b else "", style=style))
        total_style = "bold"
        table.add_row(Text("total", style=total_style), str(j["n_ops"]), str(t["n_ops"]),
                      f"{t['n_ops'] - j['n_ops']:+d}")
        parts.append(table)
        parts.append(Text(f"jax:   {_notes(stage, j)}\ntorch: {_notes(stage, t)}", style="dim"))
    if jax_side.get("stablehlo") and torch_side.get("stablehlo"):
        parts.extend(Text(f"• {o}") for o in observations(jax_side, torch_side))
    return Group(*parts)


def observations(jax_side: Mapping[str, Any], torch_side: Mapping[str, Any]) -> list[str]:
    """Plain statements of the largest structural differences, read off the summaries."""
    j, t = jax_side["stablehlo"], torch_side["stablehlo"]
    out = []
    if j["has_f64"] != t["has_f64"] or j["converts"] != t["converts"]:
        who = [n for n, s in (("jax", j), ("torch", t)) if s["has_f64"]]
        out.append(f"dtype conversions: {j['converts']} converts in jax, {t['converts']} in torch"
                   + (f"; f64 tensors in {', '.join(who)}'s program" if who else ""))
    for op in ("stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim"):
        a, b = j["ops"].get(op, 0), t["ops"].get(op, 0)
        if max(a, b) >= 2 * max(min(a, b), 1):
            out.append(f"{op.split('.')[1]}: {a} in jax vs {b} in torch — layout work the other program does not ask for")
    a, b = j["ops"].get("stablehlo.dot_general", 0), t["ops"].get("stablehlo.dot_general", 0)
    out.append(f"matrix products: {a} dot_general in jax, {b} in torch" + (" (the same work)" if a == b else ""))
    if j["arguments"] != t["arguments"] or j["baked_constants"] or t["baked_constants"]:
        out.append(f"inputs: jax passes {j['arguments']} arguments ({j['baked_constants']} baked constants), "
                   f"torch {t['arguments']} ({t['baked_constants']} baked); jax.jit drops arguments the "
                   f"function does not use, make_fx keeps them")
    jh, th = jax_side.get("hlo"), torch_side.get("hlo")
    if jh and th:
        out.append(f"after XLA: {jh['fusions']} fusions for jax, {th['fusions']} for torch; "
                   f"{jh['n_ops']} vs {th['n_ops']} top-level instructions")
    return out
