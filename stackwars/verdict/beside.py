"""What stands beside a verdict row: compile break-even, memory, energy, what the device bound, why.

Each is a judgement with its own rule (a saving that clears the noise, a memory difference beyond
both sides' spread and a size that matters, an energy ratio with its interval) and is made here,
beside the deciding rooms; the report draws what these return.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from stackwars import stats
from stackwars.records import parity_ok
from stackwars.report import format as fmt
from stackwars.verdict import figures
from stackwars.verdict.figures import compared
from stackwars.verdict.words import FRAMEWORKS, REPLAY_KINDS, word

BUSY_PAYS = "cannot say (busy machine): {which} backend has no process measured on a quiet machine"


def pays_after(compiled: Mapping[str, Any], eager: Mapping[str, Any]) -> dict[str, Any]:
    """When a compiled backend's first call (trace + compile) has paid for itself against its
    eager counterpart: the extra first-call cost over the per-call saving, or never where
    its steady state is not (significantly) faster. Both rows combined over processes; a
    row with no clean process (``busy``) cannot say."""
    if compiled.get("busy") or eager.get("busy") or not compared(compiled) or not compared(eager):
        which = " and ".join(tables_label for tables_label, r in (("the compiled", compiled), ("the eager", eager))
                             if r.get("busy") or not compared(r))
        return {"calls": None, "verdict": BUSY_PAYS.format(which=which), "extra_first_s": None,
                "saving_per_call_s": None}
    cmp = stats.compare(compared(eager), compared(compiled))
    saving = eager["steady_median_s"] - compiled["steady_median_s"]
    extra = compiled["first_call_s"] - eager["first_call_s"]
    if saving <= 0 or not cmp.significant:
        calls, verdict = None, ("never pays: its steady state is not faster" if saving <= 0 else
                                "cannot say: the steady states differ by less than the noise")
    elif extra <= 0:
        calls, verdict = 1, "from the first call"
    else:
        calls = math.ceil(extra / saving) + 1
        verdict = f"after {calls:,} calls"
    return {"calls": calls, "verdict": verdict, "extra_first_s": extra, "saving_per_call_s": saving}


def parity(row: Mapping[str, Any]) -> dict[str, Any]:
    err, tol = row.get("parity_max_rel_err"), row.get("parity_tolerance")
    return {"max_rel_err": err, "tolerance": tol, "ok": parity_ok(err, tol), "reference": row.get("parity_reference")}


def parity_text(p: Mapping[str, Any] | None) -> str:
    if not p or p.get("max_rel_err") is None:
        return "unchecked"
    who = f"{p['backend']} " if p.get("backend") else ""  # a side with no best: what failed, named
    return who + f"{p['max_rel_err']:.1e} " + ("✓" if p["ok"] else f"✗ (tol {p['tolerance']:.0e})")


def pays(side: list[Mapping[str, Any]], by_backend: Mapping[tuple, Mapping[str, Any]]) -> dict[str, Any]:
    """The framework's fastest compiled mode against its eager mode (same implementation variant)."""
    compiled = [r for r in side if r["backend"] in figures.EAGER_OF and r["status"] == "ok"]
    if not side:
        return {"verdict": "not measured"}
    if not compiled:
        return {"verdict": "eager only"}
    clean = [r for r in compiled if r.get("steady_median_s") is not None]
    if any(r.get("busy") for r in compiled):  # a compiled mode measured only while busy might be the fastest
        busy = [figures.backend_variant(r) for r in compiled if r.get("busy")]
        return {"compiled": ", ".join(busy), "verdict": BUSY_PAYS.format(which="the compiled")}
    if not clean:
        return {"verdict": "eager only"}
    c = min(clean, key=lambda r: r["steady_median_s"])
    e = next(iter(eager_of(c, by_backend)), None)
    eager = figures.EAGER_OF[c["backend"]]
    if e is not None and e["status"] == "ok" and e.get("busy"):
        return {"compiled": figures.backend_variant(c), "eager": figures.backend_variant(e), **pays_after(c, e)}
    if e is None or c.get("first_call_s") is None or e.get("first_call_s") is None:
        return {"compiled": figures.backend_variant(c),
                "verdict": f"cannot say: {eager}, the eager mode its first call pays back against, was not measured"}
    if e["status"] != "ok":
        return {"compiled": figures.backend_variant(c), "verdict": f"{eager} {e['status']}"}
    return {"compiled": figures.backend_variant(c), "eager": figures.backend_variant(e), **pays_after(c, e)}


def eager_of(row: Mapping[str, Any], by_backend: Mapping[tuple, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A compiled backend's eager counterpart in the same table (same implementation variant), if measured."""
    e = by_backend.get((figures.EAGER_OF.get(row["backend"]), figures.variant(row)[1]))
    return [e] if e is not None else []


def why(best: Mapping[str, Mapping[str, Any] | None], profiles: Mapping[str, Mapping[str, Any]],
         anatomy: Mapping[str, Mapping[str, Any]]) -> str | None:
    """One line from the profiles (busy share, the top kernel, the largest named region) or,
    failing that, the train steps' memory anatomy of the two best cells."""
    parts = []
    for fw, name in FRAMEWORKS:
        r = best.get(fw)
        if r is None:
            continue
        p = profiles.get(_cell_id(r))
        if p and p.get("wall_s"):
            bits = [f"step {fmt.seconds(p['wall_s'])}, busy {fmt.fraction(p.get('busy_fraction'))}"]
            if p.get("top_kernels"):
                k = p["top_kernels"][0]
                bits.append(f"top {k['name'][:40]} {fmt.fraction(k.get('share'))}")
            if p.get("regions"):
                g = p["regions"][0]
                bits.append(f"{g['name'][:30]} {fmt.seconds(g['time_per_step_s'])}")
            parts.append(f"{name} {r['backend']}: " + ", ".join(bits))
            continue
        a = anatomy.get(_cell_id(r))
        if a and a.get("sum_bytes") and not a.get("error"):
            k, v = max(((k, v["bytes"]) for k, v in a["parts"].items() if v.get("bytes")), key=lambda kv: kv[1])
            parts.append(f"{name} step memory {fmt.nbytes(a['sum_bytes'])}, most in {k.replace('_', ' ')} "
                         f"{fmt.nbytes(v)}")
    return "; ".join(parts) or None


def bound(best: Mapping[str, Mapping[str, Any]], replay: str | None) -> dict[str, Any]:
    """What a CUDA row measured, side by side: each best's host share of a call (its issue time over
    its wall time, from the same timed calls) read as device-bound (under stats.DEVICE_BOUND_SHARE:
    the device's work set the pace), host-bound (from stats.HOST_BOUND_SHARE: the device waited for
    the host's launches) or partly host-bound. Host-bound on both sides without graph replay: the
    ratio measures how fast this host launches kernels through each framework, and ``measured``
    says so. None on a CPU (the host is the device)."""
    out: dict[str, Any] = {}
    for fw, name in FRAMEWORKS:
        share = best[fw].get("issue_share")
        out[f"{fw}_bound"] = (None if share is None else "device-bound" if share < stats.DEVICE_BOUND_SHARE
                              else "host-bound" if share >= stats.HOST_BOUND_SHARE else "partly host-bound")
        out[f"{fw}_issue_share"] = share
    t, j = out["torch_bound"], out["jax_bound"]
    if t is None or j is None:
        out["measured"] = None
    elif t == j == "host-bound" and replay != REPLAY_KINDS[True]:
        out["measured"] = ("host-bound on both sides, without graph replay: the ratio measures how fast this host "
                           "launches the kernels through each framework, as much as the kernels")
    else:
        out["measured"] = (f"PyTorch {t} ({best['torch']['issue_share']:.0%} of a call spent issuing it), JAX {j} "
                           f"({best['jax']['issue_share']:.0%})")
    return out


def memory(torch_best: Mapping[str, Any] | None, jax_best: Mapping[str, Any] | None) -> dict[str, Any]:
    """The memory the two bests added (the memory phase's peak over the baseline, median over
    clean processes), their ratio JAX/PyTorch, and whether the difference clears the processes'
    spread at a size that matters (stats.memory_difference); where it does not, the row and
    every claim drawn from it say "no difference here"."""
    if torch_best is None or jax_best is None:
        return {"memory_ratio": None, "memory_differs": None}
    mt, mj = torch_best.get("memory_added_bytes"), jax_best.get("memory_added_bytes")
    d = stats.memory_difference(torch_best.get("process_memory_bytes") or ([mt] if mt is not None else []),
                                jax_best.get("process_memory_bytes") or ([mj] if mj is not None else []))
    # the bytes too: a side that added nothing measurable (a tiny cell within the host's page-level
    # RSS) has no ratio, but its figures are measured and shown (cells), never a bare dash
    return {"memory_ratio": mj / mt if mt and mj is not None else None, "memory_differs": d["differs"],
            "memory_why": d.get("why"), "torch_memory_added_bytes": mt, "jax_memory_added_bytes": mj}


def energy(torch_best: Mapping[str, Any], jax_best: Mapping[str, Any], confidence: float,
           min_processes: int = stats.MIN_PROCESSES) -> dict[str, Any]:
    """The two bests' energy per call (joules, each process's window on its device's counter)
    and the ratio JAX/PyTorch with its CI over processes, as the time ratio's: each process
    one figure, resampled by the same bootstrap. None, with why, where a side has fewer
    processes with a figure than a verdict needs (no counter, a voided window)."""
    et, ej = list(torch_best.get("process_energy_j") or ()), list(jax_best.get("process_energy_j") or ())
    out: dict[str, Any] = {"torch_energy_j": torch_best.get("energy_j"), "jax_energy_j": jax_best.get("energy_j"),
                           "torch_power_w": torch_best.get("energy_power_w"),
                           "jax_power_w": jax_best.get("energy_power_w"),
                           "energy_ratio": None, "energy_ci_low": None, "energy_ci_high": None}
    if min(len(et), len(ej)) < min_processes:
        why = {fw: b.get("energy_why") for fw, b in (("PyTorch", torch_best), ("JAX", jax_best))}
        out["energy_why"] = (f"{len(et)} PyTorch / {len(ej)} JAX process(es) with an energy figure; the ratio needs "
                             f"{min_processes} a side"
                             + "".join(f"; {fw}: {w}" for fw, w in why.items() if w))
        return out
    c = stats.compare([[e] for e in et], [[e] for e in ej], confidence)
    out.update(energy_ratio=c.ratio, energy_ci_low=c.ci_low, energy_ci_high=c.ci_high,
               energy_verdict=word(stats.decide(c), c, energy=True))
    return out


def _cell_id(row: Mapping[str, Any]) -> str:
    return str(row["cell_key"]).split("#r")[0]
