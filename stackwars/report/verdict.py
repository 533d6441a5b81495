"""The verdict: JAX or PyTorch, for each workload x preset x phase x dtype x device, on one machine.

For every such group of stored cells, measured on one machine (the run's environment
fingerprint: CPU, GPUs, framework versions), the verdict sets the best PyTorch backend
against the best JAX backend, which is the question a user asks, rather than a
framework's two modes against each other. Each row is read in three rooms:

* **choose** (``_framework_side``): each side's best is the fastest candidate (any mode, option
  or implementation variant whose cells ran ``ok``, parity included) on *one* process a
  candidate, its first clean one (a run's first round). A faster backend that failed parity is
  named with its error against the tolerance and kept out. A side with one candidate chooses
  nothing. The choice is final: the fastest of k equally fast candidates is fast by luck, so a
  best chosen and compared on the same processes favours the side with more modes (the winner's
  curse: x1.06 with 4:1 modes at an sd of 0.10); the processes that chose never decide;
* **decide** (``_deciding``, ``_read_together``): the ratio JAX / PyTorch from the two chosen
  cells' other processes, paired by round (a round: one fresh process of each, adjacent in
  time, in random order: RMIT, Abedi & Brecht), the geometric mean of the rounds' ratios with
  Student's t over rounds; the unpaired figure of the same processes (geometric means,
  hierarchical bootstrap, Welch's width) stands beside it. The rows of one machine are read
  together (Holm's step-down on each row's group-sequential boundary, stats.step_down), so that
  naming any false winner among them, over all their looks, stays within 5%;
* **word** (``word``, ``_gates``): ``JAX faster`` / ``PyTorch faster`` (the CI excludes 1 and
  reaches beyond the ±5% band), ``same speed`` (the CI lies within the band, the direction said
  where it excludes 1), ``no difference found`` (the CI holds 1 and reaches past the band; a run
  measures such a row again while its budget lasts), or ``cannot say``: fewer than three clean
  rounds, a CI too wide, a side with no backend that ran and passed parity. The reason is in
  the row; beside it the calls each compiled mode needs to pay for its first call, the memory
  ratio, parity of both bests, and a one-line why where a profile or anatomy was recorded.

    stackwars verdict                     # the latest run of cells
    stackwars verdict RUN_A RUN_B -f json # these runs; the latest processes of each cell
"""

from __future__ import annotations

import io
import re
import math
import statistics
import textwrap
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Sequence

from stackwars import commands, stats
from stackwars.records import parity_ok
from stackwars.report import format as fmt
from stackwars.report import gate, tables

FRAMEWORKS = (("torch", "PyTorch"), ("jax", "JAX"))
# stats.decide's "tie" is two findings, never one word: the CI lies within the tie band (the two
# run at the same speed, within ±5%), or it only holds 1 (no difference was found, and the CI
# still allows one of up to ±20%); a reader takes "tie" for the first
SAME, NO_DIFFERENCE = "same speed", "no difference found"
VERDICTS = ("JAX faster", "PyTorch faster", SAME, NO_DIFFERENCE, "cannot say")
DECISION = {"lower": "JAX faster", "higher": "PyTorch faster", "noisy": "cannot say"}
ENERGY_DECISION = {"lower": "JAX uses less", "higher": "PyTorch uses less", "noisy": "cannot say"}
SAME_ENERGY = "same energy"


def word(decision: str, c: stats.Comparison, threshold: float = stats.TIE_THRESHOLD, energy: bool = False) -> str:
    """The verdict a decision reads as: "same speed" only where the CI lies within the tie band,
    "no difference found" where it holds 1 and reaches past it (the one rule: stats.decide)."""
    if decision == "tie":
        if stats.within_band(c, threshold):
            return SAME_ENERGY if energy else SAME
        return NO_DIFFERENCE
    return (ENERGY_DECISION if energy else DECISION)[decision]


def tied(verdict: str | None) -> bool:
    """Whether a verdict says the two sides do not differ (either finding of stats.decide's tie)."""
    return verdict in (SAME, NO_DIFFERENCE, SAME_ENERGY)


def cell_id(row: Mapping[str, Any]) -> str:
    """A cell's identity across runs and processes: its key without the process number."""
    return str(row["cell_key"]).split("#r")[0]


def latest_processes(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """For every cell and machine, the processes of the latest run that measured it (rows in
    the store's order, oldest first): a later run replaces an earlier one, never mixes with it."""
    latest: OrderedDict[tuple[str, str], list[Mapping[str, Any]]] = OrderedDict()
    run_of: dict[tuple[str, str], str] = {}
    for r in rows:
        key = (str(r.get("machine")), cell_id(r))
        if run_of.get(key) != r.get("run_id"):
            latest.pop(key, None)
            run_of[key] = r.get("run_id")
        latest.setdefault(key, []).append(r)
    return [r for group in latest.values() for r in group]


def _group_key(row: Mapping[str, Any]) -> tuple:
    return (*tables._group_key(row, machine=True), row.get("matmul_precision"))


def _parity(row: Mapping[str, Any]) -> dict[str, Any]:
    err, tol = row.get("parity_max_rel_err"), row.get("parity_tolerance")
    return {"max_rel_err": err, "tolerance": tol, "ok": parity_ok(err, tol), "reference": row.get("parity_reference")}


def _parity_text(p: Mapping[str, Any] | None) -> str:
    if not p or p.get("max_rel_err") is None:
        return "unchecked"
    who = f"{p['backend']} " if p.get("backend") else ""  # a side with no best: what failed, named
    return who + f"{p['max_rel_err']:.1e} " + ("✓" if p["ok"] else f"✗ (tol {p['tolerance']:.0e})")


def analysis(backend: str) -> bool:
    """An analysis path rather than a way the framework's users run code (registry flag)."""
    from stackwars import registry
    from stackwars.errors import SpecError
    try:
        return bool(getattr(registry.backend(backend), "analysis", False))
    except SpecError:  # a plugin backend not importable here
        return False


def _pays(side: list[Mapping[str, Any]], by_backend: Mapping[tuple, Mapping[str, Any]]) -> dict[str, Any]:
    """The framework's fastest compiled mode against its eager mode (same implementation variant)."""
    compiled = [r for r in side if r["backend"] in tables.EAGER_OF and r["status"] == "ok"]
    if not side:
        return {"verdict": "not measured"}
    if not compiled:
        return {"verdict": "eager only"}
    clean = [r for r in compiled if r.get("steady_median_s") is not None]
    if any(r.get("busy") for r in compiled):  # a compiled mode measured only while busy might be the fastest
        busy = [tables.backend_variant(r) for r in compiled if r.get("busy")]
        return {"compiled": ", ".join(busy), "verdict": tables.BUSY_PAYS.format(which="the compiled")}
    if not clean:
        return {"verdict": "eager only"}
    c = min(clean, key=lambda r: r["steady_median_s"])
    e = next(iter(_eager_of(c, by_backend)), None)
    eager = tables.EAGER_OF[c["backend"]]
    if e is not None and e["status"] == "ok" and e.get("busy"):
        return {"compiled": tables.backend_variant(c), "eager": tables.backend_variant(e), **tables.pays_after(c, e)}
    if e is None or c.get("first_call_s") is None or e.get("first_call_s") is None:
        return {"compiled": tables.backend_variant(c),
                "verdict": f"cannot say: {eager}, the eager mode its first call pays back against, was not measured"}
    if e["status"] != "ok":
        return {"compiled": tables.backend_variant(c), "verdict": f"{eager} {e['status']}"}
    return {"compiled": tables.backend_variant(c), "eager": tables.backend_variant(e), **tables.pays_after(c, e)}


def _eager_of(row: Mapping[str, Any], by_backend: Mapping[tuple, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A compiled backend's eager counterpart in the same table (same implementation variant), if measured."""
    e = by_backend.get((tables.EAGER_OF.get(row["backend"]), tables.variant(row)[1]))
    return [e] if e is not None else []


def _why(best: Mapping[str, Mapping[str, Any] | None], profiles: Mapping[str, Mapping[str, Any]],
         anatomy: Mapping[str, Mapping[str, Any]]) -> str | None:
    """One line from the profiles (busy share, the top kernel, the largest named region) or,
    failing that, the train steps' memory anatomy of the two best cells."""
    parts = []
    for fw, name in FRAMEWORKS:
        r = best.get(fw)
        if r is None:
            continue
        p = profiles.get(cell_id(r))
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
        a = anatomy.get(cell_id(r))
        if a and a.get("sum_bytes") and not a.get("error"):
            k, v = max(((k, v["bytes"]) for k, v in a["parts"].items() if v.get("bytes")), key=lambda kv: kv[1])
            parts.append(f"{name} step memory {fmt.nbytes(a['sum_bytes'])}, most in {k.replace('_', ' ')} "
                         f"{fmt.nbytes(v)}")
    return "; ".join(parts) or None


def _one_sided(workload: str | None, framework: str) -> str | None:
    """Why a side is empty by design: the workload (a user's model) is written in the other
    framework only, so there is nothing to compare."""
    from stackwars import registry

    try:
        twins = registry.workload(workload).twin_modules
    except Exception:  # noqa: BLE001 - a stored run's workload this process does not know
        return None
    if framework in twins:
        return None
    other = {"torch": "PyTorch", "jax": "JAX"}[next(iter(twins))] if twins else "one framework"
    return f"{workload} is written in {other} only: there is no other side to compare"


REPLAY_KINDS = {True: "graph replay", False: "no graph replay"}
# the programs of each kind a side lacks, by framework: what the "not best against best" row names
REPLAY_PROGRAMS = {("torch", True): "torch-cudagraphs (or torch-compile --compile-mode reduce-overhead)",
                   ("torch", False): "torch-compile (or torch-eager)",
                   ("jax", True): "jax-jit (XLA's command buffers, its default on CUDA)",
                   ("jax", False): "jax-jit-no-graphs (jax-jit with --xla-command-buffers off)"}


def replay_kinds(combined: Sequence[Mapping[str, Any]], device: str) -> list[tuple[bool | None, list]]:
    """The comparisons a table holds: on CUDA, the programs that replay CUDA graphs (PyTorch's
    CUDA graphs, XLA's command buffers: ``replays_graphs`` in the row) set against each other, and
    those that launch every kernel themselves against each other, a row each; on a host device,
    where nothing replays graphs, one comparison of everything. A ratio of a program that replays
    graphs to one that does not measures the launch path as much as the two frameworks."""
    if device != "cuda":
        return [(None, list(combined))]
    kinds = []
    for kind in (True, False):
        mine = [r for r in combined if bool(r.get("replays_graphs")) is kind]
        if mine:
            kinds.append((kind, mine))
    return kinds or [(False, list(combined))]


def verdicts(rows: Iterable[Mapping[str, Any]], profiles: Sequence[Mapping[str, Any]] = (),
             anatomy: Sequence[Mapping[str, Any]] = (), threshold: float = stats.TIE_THRESHOLD,
             min_processes: int = stats.MIN_PROCESSES) -> list[dict[str, Any]]:
    """One verdict per machine x workload x preset x phase x device x dtype (x overrides that
    change the computation, x matmul precision; on CUDA x graph replay, ``replay_kinds``), from
    flat cell rows (``store.results.rows``), one row per process. ``profiles`` / ``anatomy``:
    rows of report/profiles.py, for the why. Each row is built in named steps: its sides (each
    framework's best, chosen on one process a candidate), the command that measures it again, its
    deciding rounds (the chosen cells' other processes); then every machine's rows are read
    together (``_read_together``), and each row's decision, the gates that may withhold it and
    what stands beside it follow."""
    rows = latest_processes(rows)
    prof = {str(p["cell"]).split("#r")[0]: p for p in profiles}
    anat = {str(a["cell"]).split("#r")[0]: a for a in anatomy}
    groups: OrderedDict[tuple, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        groups.setdefault(_group_key(r), []).append(r)
    built: list[tuple[dict[str, Any], dict]] = []
    for key, group in groups.items():
        combined = tables.combine_repeats(group)
        by_backend = {(r["backend"], tables.variant(r)[1]): r for r in combined}
        for kind, cells in replay_kinds(combined, key[3]):
            row = _base_row(key, group, kind)
            best, sides, shadowed, missing = _sides(row, cells, by_backend, kind)
            _command(row, best, sides, shadowed, by_backend, min_processes)
            _beside_always(row, best, cells, prof, anat)
            if missing:
                _cannot_say(row, missing, combined, kind)
            else:
                row["_deciding"] = _deciding(row, best, min_processes)
            built.append((row, best))
    _read_together([row for row, _ in built], min_processes)
    for row, best in built:
        if "_deciding" in row:
            _decided(row, best, threshold, min_processes)
        _said_no_top_up(row)
    return [row for row, _ in built]


def _cannot_say(row: dict[str, Any], missing: Sequence[str], combined: Sequence[Mapping[str, Any]],
                kind: bool | None) -> None:
    """A row with a side that has no best: no ratio, and the reason's tag says which gap it is."""
    busy_side = any(row[f"{fw}_busy_candidates"] for fw, _ in FRAMEWORKS if row.get(f"best_{fw}") is None)
    kind_gap = kind is not None and not busy_side and any(
        row.get(f"best_{fw}") is None and any(r.get("framework") == fw for r in combined) for fw, _ in FRAMEWORKS)
    row.update(ratio=None, ci_low=None, ci_high=None, verdict="cannot say", reason="; ".join(missing),
               reason_tag="busy machine" if busy_side else "not best against best" if kind_gap else "one side missing")


def _deciding(row: dict[str, Any], best: Mapping[str, Mapping[str, Any]], min_processes: int) -> dict[str, Any]:
    """What decides a row with a best on each side: each chosen cell's clean processes that did not
    choose, paired by round (the same process number of one run: one fresh process of each, adjacent
    in time) where both cells come from one run; the look those rounds make (a look is --processes
    rounds, stats.look_alpha), and both figures' comparisons at any confidence (``compare_at``)."""
    deciding = {fw: _deciding_processes(best[fw], row.get(f"{fw}_chosen_on")) for fw, _ in FRAMEWORKS}
    same_run = best["torch"].get("run_id") == best["jax"].get("run_id")
    rounds = sorted(set(deciding["torch"]) & set(deciding["jax"])) if same_run else []
    ratios = [statistics.median(deciding["jax"][k]) / statistics.median(deciding["torch"][k]) for k in rounds]
    design = "rounds" if same_run else "separate runs"
    n = len(rounds) if same_run else min(len(deciding["torch"]), len(deciding["jax"]))
    planned = max(1, int(best["torch"].get("processes_planned") or best["jax"].get("processes_planned")
                         or min_processes))
    looks = max(best["torch"].get("looks") or 1, best["jax"].get("looks") or 1)
    look = min(max(0, math.ceil(n / planned) - 1), looks - 1)
    torch_p, jax_p = (list(deciding[fw].values()) for fw, _ in FRAMEWORKS)
    for fw, _ in FRAMEWORKS:  # the side's figure: what decided it, not the choice
        h = stats.hierarchical(list(deciding[fw].values())) if deciding[fw] else None
        row.update({f"{fw}_s": h.estimate if h else None, f"{fw}_ci_low_s": h.ci_low if h else None,
                    f"{fw}_ci_high_s": h.ci_high if h else None, f"{fw}_processes": len(deciding[fw]),
                    f"{fw}_decided_on": sorted(deciding[fw])})
    row["processes"] = row["processes_used"] = n
    row["chosen_on"] = {"design": "choose on one process a candidate (its first clean one), decide on the chosen "
                                  "cells' other processes",
                        **{fw: row.get(f"{fw}_chosen_on") for fw, _ in FRAMEWORKS},
                        "decided_on": {"rounds": rounds if same_run else None,
                                       **{fw: sorted(deciding[fw]) for fw, _ in FRAMEWORKS}}}

    def unpaired(confidence: float) -> stats.Comparison | None:
        return stats.compare(torch_p, jax_p, confidence) if torch_p and jax_p else None

    def paired(confidence: float) -> stats.Comparison | None:
        return stats.compare_paired(ratios, confidence) if ratios else None

    return {"design": design, "rounds": rounds, "ratios": ratios, "n": n, "look": look, "looks": looks,
            # the boundary's statistic: Student's t over this many rounds a look (paired), or normal (unpaired)
            "rounds_a_look": planned if same_run and planned >= 2 else 0,
            "testable": n >= min_processes, "unpaired": unpaired, "paired": paired,
            "compare_at": paired if same_run else unpaired}


def _deciding_processes(cell: Mapping[str, Any], chosen_on: Mapping[str, Any] | None) -> dict[int, list[float]]:
    """A chosen cell's clean processes that decide, by process number: all of them where its side
    chose nothing (one candidate), else all but the one that chose it."""
    chose = (chosen_on or {}).get("process")
    return {int(k if k is not None else i): list(s)
            for i, (k, s) in enumerate(zip(cell.get("process_repeats") or [], cell.get("process_samples") or []))
            if chose is None or k != chose}


def _read_together(rows: Sequence[dict[str, Any]], min_processes: int) -> None:
    """Every machine's rows that can be tested read together (stats.step_down: Holm's step-down,
    each row on its own group-sequential boundary), so that naming any false winner among a table's
    rows, over all their looks, stays within 5%; each row keeps the level it was read at. A row with
    too few rounds is no test: it is read at its look's level alone, for "it would read"."""
    for machine in dict.fromkeys(r["machine"] for r in rows):
        mine = [r for r in rows if r["machine"] == machine and "_deciding" in r]
        family = [r for r in mine if r["_deciding"]["testable"]]
        found = stats.step_down([(r["_deciding"]["look"], r["_deciding"]["looks"], r["_deciding"]["rounds_a_look"])
                                 for r in family],
                                lambda i, confidence: family[i]["_deciding"]["compare_at"](confidence))
        for r, (confidence, c, step) in zip(family, found):
            r["_read"] = {"confidence": confidence, "c": c, "step": step, "family": len(family)}
        for r in mine:
            if r not in family:
                d = r["_deciding"]
                confidence = 1.0 - stats.look_alpha(d["look"], d["looks"], rounds=d["rounds_a_look"])
                r["_read"] = {"confidence": confidence, "c": d["compare_at"](confidence), "step": None,
                              "family": len(family)}


def _decided(row: dict[str, Any], best: Mapping[str, Any], threshold: float, min_processes: int) -> None:
    """A row with a best on each side: the decision at the level it was read at, the gates that
    may withhold it, and what stands beside it."""
    c, decision, verdict, reason, tag = _decide(row, best, threshold)
    verdict, reason, tag = _gates(row, c, decision, verdict, reason, tag, min_processes, threshold)
    if tied(verdict):
        row["tie_within"], row["tie_threshold"] = stats.tie_bound(c), threshold
    if c is not None:
        _beside_decided(row, best, c, threshold, min_processes)
    row.update(verdict=verdict, reason=reason, reason_tag=tag)


def _base_row(key: tuple, group: Sequence[Mapping[str, Any]], kind: bool | None) -> dict[str, Any]:
    workload, preset, phase, device, dtype, over, machine, precision = key
    return {"machine": machine, "workload": workload, "preset": preset, "phase": phase, "device": device,
            "dtype": dtype, "overrides": over, "matmul_precision": precision,
            "replay": REPLAY_KINDS.get(kind) if kind is not None else None,
            "runs": sorted({str(r.get("run_id")) for r in group})}


def _sides(row: dict[str, Any], combined: Sequence[Mapping[str, Any]], by_backend: Mapping[tuple, Mapping[str, Any]],
           kind: bool | None) -> tuple[dict, dict, dict, list[str]]:
    """Each framework's best (its fastest backend whose cells ran ok and passed parity, from
    clean processes), the candidates measured only while busy that might beat it, what failed
    parity faster, and why a side has no best."""
    best: dict[str, Mapping[str, Any] | None] = {}
    sides: dict[str, list[Mapping[str, Any]]] = {}
    shadowed: dict[str, list[Mapping[str, Any]]] = {}  # measured only while busy, possibly the best
    missing = []
    for fw, name in FRAMEWORKS:
        best[fw], sides[fw], shadowed[fw], why = _framework_side(row, fw, name, combined, by_backend, kind)
        if why:
            missing.append(why)
    # clean processes on the thinner side (a row that decides counts its deciding rounds: _deciding)
    row["processes"] = row["processes_used"] = min(row["torch_processes"], row["jax_processes"])
    row["processes_busy"] = row["torch_processes_busy"] + row["jax_processes_busy"]
    return best, sides, shadowed, missing


def choose(passed: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any] | None, dict[str, Any] | None]:
    """A side's best among its candidates that ran ok and passed parity, and what chose it: each
    candidate's first clean process (its lowest process number; a run's first round), the fastest
    median there. One candidate: nothing to choose (None), every process of it decides. A candidate
    with no clean process takes no part (``_framework_side`` says whether it might beat the best, and
    then the row waits for a clean process of it, which makes it a candidate)."""
    eligible = [r for r in passed if r.get("process_samples")]
    if len(eligible) <= 1:  # one candidate with a clean process (a busy one may block it: _framework_side)
        return (eligible[0] if eligible else None), None
    first = {}
    for r in eligible:
        repeats = [k if k is not None else 0 for k in r.get("process_repeats") or [0] * len(r["process_samples"])]
        k = min(range(len(repeats)), key=lambda i: repeats[i])
        first[cell_id(r)] = (repeats[k], statistics.median(r["process_samples"][k]))
    b = min(eligible, key=lambda r: first[cell_id(r)][1])
    return b, {"process": first[cell_id(b)][0], "median_s": first[cell_id(b)][1],
               "candidates": [{"backend": tables.backend_variant(r), "cell": cell_id(r),
                               "process": first[cell_id(r)][0], "median_s": first[cell_id(r)][1]}
                              for r in sorted(eligible, key=lambda r: first[cell_id(r)][1])]}


def _framework_side(row: dict[str, Any], fw: str, name: str, combined: Sequence[Mapping[str, Any]],
                    by_backend: Mapping[tuple, Mapping[str, Any]], kind: bool | None
                    ) -> tuple[Mapping[str, Any] | None, list[Mapping[str, Any]], list[Mapping[str, Any]], str | None]:
    """One framework's side of the row: its candidates, its best, the busy candidates that might
    beat it, what failed parity faster; the row's ``{fw}_...`` keys, and why it has no best (None
    where it has one)."""
    workload = row["workload"]
    everything = [r for r in combined if r.get("framework") == fw]
    # the framework's own modes; an analysis path (PyTorch's program on XLA) only where none ran
    native = [r for r in everything if not analysis(r["backend"])]
    side = native if any(r["status"] == "ok" for r in native) else everything
    passed = [r for r in side if r["status"] == "ok" and _parity(r)["ok"] is not False]
    b, chosen_on = choose(passed)
    # what the choice read of the best: its choosing process, or (one candidate) all its processes
    b_s = chosen_on["median_s"] if chosen_on else b["steady_median_s"] if b is not None else None
    row[f"{fw}_chosen_on"] = chosen_on
    # a candidate measured only while the machine was busy might be the side's best: the side
    # cannot decide while its fastest busy process beats the clean best (busy slows, never speeds)
    shadow = [r for r in passed if r.get("busy") and (b is None or _fastest_busy(r) < b_s)]
    row[f"{fw}_busy_candidates"] = [{"backend": tables.backend_variant(r), "cell": cell_id(r),
                                     "processes_busy": r.get("processes_busy", 0),
                                     "why": r.get("busy_reasons"),
                                     "fastest_busy_s": _fastest_busy(r)} for r in shadow]
    # the cells whose latest look came out all busy: the machine stayed busy through it, and a
    # top-up would measure the same machine again (more_processes gives them none)
    row[f"{fw}_stayed_busy"] = {cell_id(r): {"backend": tables.backend_variant(r), "look": r.get("latest_look", 0),
                                             "processes": r.get("latest_look_processes", 0)}
                                for r in ([b] if b is not None else []) + shadow
                                if r.get("latest_look_processes") and not r.get("latest_look_clean")}
    failed = [r for r in side if r["status"] == "parity_fail" and r.get("steady_median_s")
              and (b is None or r["steady_median_s"] < b_s)]
    row[f"{fw}_aside"] = [{"backend": tables.backend_variant(r), "seconds": r["steady_median_s"]}
                          for r in everything if r not in side and r["status"] == "ok"
                          and r.get("steady_median_s") and b is not None
                          and r["steady_median_s"] < b_s]
    row[f"{fw}_candidates"] = len(passed)
    row[f"{fw}_excluded"] = [{"backend": tables.backend_variant(r), "seconds": r["steady_median_s"],
                              "why": f"failed parity: {_parity_text(_parity(r))}"} for r in failed]
    row[f"{fw}_pays"] = _pays(side, by_backend)
    if b is None:
        if shadow:
            why = (", ".join(f"{x['backend']} ({x['processes_busy']} process(es), {x['why']})"
                             for x in row[f"{fw}_busy_candidates"]) + " measured only while the machine "
                   "was busy")
        elif not side and kind is not None:
            why = (f"no {REPLAY_KINDS[kind]} program of {name} was measured ({REPLAY_PROGRAMS[(fw, kind)]}): "
                   f"not best against best")
        else:
            why = ((_one_sided(workload, fw) or "none measured") if not side else
                   "none ran ok with parity (" + ", ".join(f"{tables.backend_variant(r)} {r['status']}"
                                                           for r in side) + ")")
        missing = f"no {name} backend: {why}"
        # its parity where everything it ran failed it: the smallest error, not "unchecked"
        errs = [(r["parity_max_rel_err"], r) for r in side if r["status"] == "parity_fail"
                and r.get("parity_max_rel_err") is not None]
        if errs:
            err, r = min(errs, key=lambda x: x[0])
            row[f"{fw}_parity"] = {**_parity(r), "backend": tables.backend_variant(r)}
        elif shadow:  # measured while busy, in parity: the fastest one's, named, not "unchecked"
            r = min(shadow, key=_fastest_busy)
            row[f"{fw}_parity"] = {**_parity(r), "backend": tables.backend_variant(r)}
        row.update({f"best_{fw}": None, f"{fw}_s": None, f"{fw}_processes": 0,
                    f"{fw}_processes_busy": sum(x["processes_busy"] for x in row[f"{fw}_busy_candidates"]),
                    f"{fw}_one_sided": bool(not side and _one_sided(workload, fw))})
        return b, side, shadow, missing
    row.update({f"best_{fw}": tables.backend_variant(b), f"{fw}_label": tables._label(b),
                f"{fw}_cell": cell_id(b), f"{fw}_analysis_path": analysis(b["backend"]),
                f"{fw}_s": b["steady_median_s"], f"{fw}_first_call_s": b.get("first_call_s"),
                f"{fw}_ci_low_s": b.get("steady_ci_low_s"), f"{fw}_ci_high_s": b.get("steady_ci_high_s"),
                f"{fw}_processes": len(b["process_samples"]),
                f"{fw}_processes_busy": b.get("processes_busy", 0),
                f"{fw}_parity": _parity(b), f"{fw}_memory_bytes": b.get("memory_added_bytes"),
                f"{fw}_process_memory_bytes": b.get("process_memory_bytes"),
                f"{fw}_optimizer_impl": b.get("optimizer_impl"), f"{fw}_attention": b.get("attention"),
                f"{fw}_processes_kept": b.get("processes_kept", 0), f"{fw}_kept_why": b.get("kept_why")})
    return b, side, shadow, None


def _command(row: dict[str, Any], best: Mapping[str, Any], sides: Mapping[str, list], shadowed: Mapping[str, list],
             by_backend: Mapping[tuple, Mapping[str, Any]], min_processes: int) -> None:
    """The command that measures this row again, on this machine: the backends that decided it
    (or, where a side has no best, every one that side measured), with their options (the eager
    counterpart of a compiled best too: the row's compile break-even is drawn against it), and
    the levels a fresh run of it reads its verdict at."""
    deciding = [r for fw, _ in FRAMEWORKS
                for r in ([best[fw], *shadowed[fw], *_eager_of(best[fw], by_backend)] if best[fw] is not None
                          else sides[fw])]
    # the rounds the run that measured it planned after its choice (a stored row without them: its processes)
    planned = max((r.get("processes_planned") or 0 for r in deciding), default=0)
    n = max(min_processes, planned or max((r.get("processes") or 1 for r in deciding), default=1))
    row["command"] = commands.run_command(deciding, n) if deciding else None
    # the levels that command's own verdicts would read at: a fresh run starts its looks again
    row["command_levels"] = stats.fresh_levels(n) if deciding else None


def _beside_always(row: dict[str, Any], best: Mapping[str, Any], combined: Sequence[Mapping[str, Any]],
                   prof: Mapping[str, Any], anat: Mapping[str, Any]) -> None:
    """What stands beside a row whether or not it decides: the why from profiles or the memory
    anatomy, and the memory ratio (with whether it clears the noise: ``memory``)."""
    row["why"] = _why(best, prof, anat)
    row.update(memory(best.get("torch"), best.get("jax")))
    row["memory_counter"] = next((r.get("peak_memory_counter") for r in combined if r.get("peak_memory_counter")),
                                 None)


def _decide(row: dict[str, Any], best: Mapping[str, Any], threshold: float
            ) -> tuple[stats.Comparison | None, str, str, str, str | None]:
    """The row's ratio and CI at the level it was read at (``_read_together``), and the decision
    (stats.decide): from its rounds (paired: each round's ratio of the two chosen cells' process
    medians, Student's t over rounds) where both cells come from one run, else from the two sets of
    processes (unpaired); the other figure beside it, at the same level."""
    d, read = row.pop("_deciding"), row.pop("_read")
    confidence, c = read["confidence"], read["c"]
    # both sides timed in one mode (harness/timer.py): a ratio of a latency to a throughput figure
    # compares two ways of timing, not two programs
    modes_of = {fw: best[fw].get("timing_modes") or ["throughput"] for fw, _ in FRAMEWORKS}
    modes = sorted(set(modes_of["torch"]) | set(modes_of["jax"]))
    row["timing"] = modes[0] if len(modes) == 1 else "unlike: " + " / ".join(
        "+".join(modes_of[fw]) for fw, _ in FRAMEWORKS)
    row["_modes"] = modes_of
    u, p = d["unpaired"](confidence), d["paired"](confidence) if d["design"] == "rounds" else None
    row["unpaired"] = (None if u is None else
                       {"ratio": u.ratio, "ci_low": u.ci_low, "ci_high": u.ci_high, "confidence": confidence,
                        "processes": [row["torch_processes"], row["jax_processes"]]})
    row["paired"] = (None if p is None else
                     {"design": "rounds", "rounds": len(d["rounds"]), "ratio": p.ratio, "ci_low": p.ci_low,
                      "ci_high": p.ci_high, "confidence": confidence})
    # the look counted from 1, as the text says it ("look 2 of at most 2")
    row.update(confidence=confidence, look=d["look"] + 1, looks=d["looks"],
               design="paired (rounds)" if d["design"] == "rounds" else "unpaired (separate runs)",
               read_with={"rows": read["family"], "step": read["step"]})
    if c is None:
        row.update(ratio=None, ci_low=None, ci_high=None)
        return None, "noisy", "cannot say", "no process of a chosen cell is left to decide on", None
    row.update(ratio=c.ratio, ci_low=c.ci_low, ci_high=c.ci_high)
    decision = stats.decide(c, threshold)
    reason = _reason(decision, c, threshold, confidence)
    how = (f" (paired: {len(d['rounds'])} rounds of separate processes, one of each chosen cell adjacent in "
           f"time" if d["design"] == "rounds" else
           f" (unpaired: the two cells come from different runs, so their processes pair no rounds")
    how += (f"; read with {read['family']} row(s) of this machine, Holm's step-down" if read["family"] > 1
            and read["step"] is not None else "")
    how += (f"; look {d['look'] + 1} of at most {d['looks']}: a run that adds rounds until its verdict decides "
            f"spends {stats.VERDICT_ALPHA:.0%} over its looks" if d["looks"] > 1 else "") + ")"
    return c, decision, word(decision, c, threshold), reason + how, "noisy" if decision == "noisy" else None


def _gates(row: dict[str, Any], c: stats.Comparison, decision: str, verdict: str, reason: str, tag: str | None,
           min_processes: int,
           threshold: float = stats.TIE_THRESHOLD) -> tuple[str, str, str | None]:
    """What withholds a decision the ratio alone would make: a candidate measured only while busy
    that might be a side's best (the side's best is not known yet), too few clean rounds (processes
    a side, unpaired), the two sides timed unlike."""
    modes_of = row.pop("_modes")
    shadows = [x for fw, _ in FRAMEWORKS for x in row[f"{fw}_busy_candidates"]]
    if shadows:
        return "cannot say", (
            "; ".join(f"{x['backend']} was measured only while the machine was busy ({x['why']}) and its "
                      f"fastest process, {fmt.seconds(x['fastest_busy_s'])}, beat the side's best"
                      for x in shadows)
            + f"; it would read without it: {word(decision, c, threshold)} ({reason})"), "busy machine"
    if row["processes"] < min_processes:
        excluded = row["processes_busy"]
        paired = row.get("design", "").startswith("paired")
        return "cannot say", (
            (f"{row['processes']} clean round(s) of the two chosen cells" if paired else
             f"{row['torch_processes']} PyTorch / {row['jax_processes']} JAX clean process(es)")
            + (" after the processes that chose them" if row.get("torch_chosen_on") or row.get("jax_chosen_on")
               else "")
            + (f" ({excluded} measured while the machine was busy, left out)" if excluded else "")
            + f"; a verdict needs {min_processes} clean {'rounds' if paired else 'ones a side'} (run --processes "
              f"{max(min_processes, row['processes'] + excluded + 1)}): fewer understate the spread "
              f"between launches"
            + (f"; it would read: {word(decision, c, threshold)} ({reason})" if c is not None and decision != "noisy"
               else "")), \
            "busy machine" if excluded else "too few processes"
    if row["timing"].startswith("unlike"):
        return "cannot say", (
            f"the two sides were not timed alike: PyTorch's processes in {' and '.join(modes_of['torch'])}, "
            f"JAX's in {' and '.join(modes_of['jax'])} mode (latency: one call a sync; throughput: blocks "
            f"of back-to-back calls); measure them again in one run (its --timing applies to every cell)"
            f"; it would read: {word(decision, c, threshold)} ({reason})"), "unlike timing"
    return verdict, reason, tag


def _beside_decided(row: dict[str, Any], best: Mapping[str, Any], c: stats.Comparison, threshold: float,
                    min_processes: int) -> None:
    """Beside a row with a ratio: on CUDA the device's own clock where both sides have one
    (where it disagrees with the wall clock, host time is part of the verdict, and the row says
    so), why a best cell's processes disagree (report/spread.py), and the energy ratio."""
    dt, dj = best["torch"].get("device_time_s"), best["jax"].get("device_time_s")
    if dt and dj:
        row["device_ratio"] = dj / dt
        if abs(math.log(row["device_ratio"]) - math.log(c.ratio)) > math.log1p(threshold):
            row["why"] = "; ".join(filter(None, (
                f"device time JAX/PyTorch {row['device_ratio']:.3f} ({fmt.seconds(dj)} / {fmt.seconds(dt)}) "
                f"against {c.ratio:.3f} on the wall clock: host time (launches, Python) differs",
                row.get("why"))))
    for fw, _ in FRAMEWORKS:  # where a best cell's processes disagree, why (report/spread.py)
        row[f"{fw}_spread_why"] = best[fw].get("spread_why")
    row.update(bound(best, row.get("replay")))
    row.update(energy(best["torch"], best["jax"], row["confidence"], min_processes))


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


def _fastest_busy(row: Mapping[str, Any]) -> float:
    """The lowest per-process median of a cell's busy processes: busy slows a program, never
    speeds it, so a clean measurement of it would be at most about this."""
    medians = [statistics.median(s) for s in row.get("busy_samples") or () if s]
    return min(medians) if medians else (row.get("busy_figures") or {}).get("steady_median_s") or float("inf")


def more_processes(found: Sequence[Mapping[str, Any]], max_processes: int, step: int = stats.MIN_PROCESSES
                   ) -> dict[str, int]:
    """The processes for the next look, per cell id, of every verdict that could not decide (a CI
    too wide, a busy machine) or found no difference (a CI that holds 1 but reaches past the tie
    band is no answer while the run may look again): more rounds of its two chosen cells, as many
    for each (a round is one process of each): ``step`` (the run's --processes: a look is as many
    rounds again, stats.looks_allowed), or for a busy machine as many as its clean rounds still
    need, where the cap lets them reach it; one process, to be judged, to each candidate measured
    only while busy that might be a side's best. Never beyond ``max_processes`` rounds after the
    choice; never for a row more processes cannot decide (``no_top_up``). Each look spends its
    share of the verdict's error (stats.look_alpha). The pairs' cells come one after the other
    (``pairs``: runner.more_rounds keeps each round's two adjacent)."""
    out: dict[str, int] = {}
    for v in found:
        tag = v.get("reason_tag")
        if not (tag in ("busy machine", "noisy") or v.get("verdict") == NO_DIFFERENCE) or no_top_up(v):
            continue
        cells = [(fw, v.get(f"{fw}_cell")) for fw, _ in FRAMEWORKS]
        if all(c for _, c in cells) and not any(c in (v.get(f"{fw}_stayed_busy") or {}) for fw, c in cells):
            rounds = v.get("processes") or 0  # clean rounds after the choice
            want = max(0, stats.MIN_PROCESSES - rounds) if tag == "busy machine" else step
            # the cap counts the rounds after the choice, clean or busy (the choosing process apart)
            add = min(want, max_processes - rounds - max(v.get(f"{fw}_processes_busy", 0) for fw, _ in cells))
            if add > 0 and (tag != "busy machine" or rounds + add >= stats.MIN_PROCESSES):
                for _, c in cells:
                    out[c] = max(out.get(c, 0), add)
        for fw, _ in FRAMEWORKS:
            stayed = v.get(f"{fw}_stayed_busy") or {}
            for x in v.get(f"{fw}_busy_candidates") or ():  # measured only while busy: one clean process judges it
                if x["cell"] not in stayed and x["processes_busy"] < max_processes + 1:
                    out[x["cell"]] = max(out.get(x["cell"], 0), 1)
    return out


def pairs(found: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The (PyTorch, JAX) chosen cells of every row with both: the pairs whose processes a round
    puts next to each other, in random order (runner.more_rounds)."""
    return [(v["torch_cell"], v["jax_cell"]) for v in found if v.get("torch_cell") and v.get("jax_cell")
            and v.get("best_torch") is not None and v.get("best_jax") is not None]


def _said_no_top_up(row: dict[str, Any]) -> None:
    """An undecided row that a run would not measure further says why (``no_top_up``)."""
    why = no_top_up(row) if row["verdict"] == "cannot say" else None
    if why:
        row["no_top_up"] = why
        row["reason"] += "; " + why


def no_top_up(v: Mapping[str, Any]) -> str | None:
    """Why more processes cannot decide this row, or None: a side's fastest candidate failed
    parity (more processes would not make it pass, nor the row's best the fastest program), or
    every cell a look would add to stayed busy through its latest look (the machine it would
    measure again is the one that left them all out)."""
    failed = [f"{name}'s {x['backend']}" for fw, name in FRAMEWORKS for x in v.get(f"{fw}_excluded") or ()]
    if failed:
        return (f"no more processes: {' and '.join(failed)}, faster than the side's best, failed parity, which more "
                f"processes would not change")
    if v.get("reason_tag") != "busy machine":
        return None
    stuck = []
    for fw, name in FRAMEWORKS:
        # what the side needs clean processes of to decide: its best, where it has too few; every
        # candidate measured only while busy (it has no best, or they might beat it)
        best = v.get(f"{fw}_cell")
        need = [x["cell"] for x in v.get(f"{fw}_busy_candidates") or ()]
        if best and v.get(f"{fw}_processes", 0) < stats.MIN_PROCESSES:
            need.append(best)
        stayed = v.get(f"{fw}_stayed_busy") or {}
        if need and all(c in stayed for c in need):
            stuck.append((name, ", ".join(f"{stayed[c]['backend']} (its last {stayed[c]['processes']} process(es), "
                                          f"none clean)" for c in need)))
    if not stuck:
        return None
    sides = " and ".join(f"{name}'s" for name, _ in stuck)  # every side that is stuck, not the first found
    return (f"no more processes: {sides} side{'s' if len(stuck) > 1 else ''} cannot get the clean ones "
            f"{'they need' if len(stuck) > 1 else 'it needs'} here, the machine having stayed busy through the latest "
            f"look of " + ", ".join(what for _, what in stuck)
            + "; more would be measured on the same busy machine: run it again when the machine is quiet")


def screen(rows: Iterable[Mapping[str, Any]], processes: int, factor: float = stats.SCREEN_FACTOR
           ) -> dict[str, dict[str, Any]]:
    """After a run's first round (one process a cell): which cells are measured in more processes,
    and how many (``rounds``), per cell id with ``keep`` and why. Where a table (and, on CUDA, a
    kind of program: graph replay or none) has a candidate on both sides, each side's best is
    chosen on that round (``choose``) and only the two chosen get more: ``processes`` rounds that
    decide (one fewer where neither side chose: a side of one candidate decides on its first
    process too); a candidate whose process was busy and might be the best gets one more, to be
    judged. Where a side has none (a workload of one framework, a side that failed), the table
    compares modes, not frameworks: every backend not clearly slower (its fastest sample over
    ``factor`` times its framework's best median) gets the rest of ``processes``. Failed cells, and
    an analysis path beside a native mode of its framework, are measured no more."""
    out: dict[str, dict[str, Any]] = {}
    for key, group in tables.group_rows(latest_processes(rows), by_machine=True).items():
        combined = tables.combine_repeats(group)
        for kind, cells in replay_kinds(combined, key[3]):
            chosen = {}
            for fw, name in FRAMEWORKS:
                side = [r for r in cells if r.get("framework") == fw]
                passed = [r for r in side if r["status"] == "ok" and _parity(r)["ok"] is not False]
                native = [r for r in passed if not analysis(r["backend"])]
                chosen[fw] = (side, passed, native, *choose(native or passed))
            two_sided = all(c[3] is not None or any(r.get("busy") for r in c[1]) for c in chosen.values())
            choosing = any(c[4] is not None for c in chosen.values())
            for fw, name in FRAMEWORKS:
                side, passed, native, best, chosen_on = chosen[fw]
                for r in side:
                    out[cell_id(r)] = _screened(r, name, passed, native, best, chosen_on, two_sided, choosing,
                                                processes, factor)
    return out


def _screened(r: Mapping[str, Any], name: str, passed: Sequence[Mapping[str, Any]],
              native: Sequence[Mapping[str, Any]], best: Mapping[str, Any] | None,
              chosen_on: Mapping[str, Any] | None, two_sided: bool, choosing: bool, processes: int,
              factor: float) -> dict[str, Any]:
    """One cell's screening decision (``screen``)."""
    rest = max(0, processes - 1)
    if r not in passed:
        return {"keep": False, "rounds": 0,
                "why": f"{r['status']}{'' if r['status'] != 'ok' else ' but failed parity'}"}
    if analysis(r["backend"]) and native:
        return {"keep": False, "rounds": 0, "why": f"an analysis path beside {name}'s own modes: it decides no verdict"}
    if r is best:
        if not two_sided:
            return {"keep": True, "rounds": rest, "why": f"{name}'s best"}
        return {"keep": True, "rounds": processes if choosing else rest,
                "why": f"{name}'s best, chosen on its first process" if chosen_on else f"{name}'s only candidate"}
    first = None if best is None else (chosen_on or {}).get("median_s") or best["steady_median_s"]
    if not r.get("steady_median_s") or best is None:
        if best is not None and _fastest_busy(r) >= first:  # busy slows a program, never speeds it
            return {"keep": False, "rounds": 0,
                    "why": f"its busy process, {fmt.seconds(_fastest_busy(r))}, was already slower than "
                           f"{tables.backend_variant(best)}'s {fmt.seconds(first)}"}
        # beside a best, one process judges it (it may become the best, then _complete_first_look gives it its
        # rounds); a side with no clean process at all measures on as planned, its choice made later
        return {"keep": True, "rounds": 1 if two_sided and best is not None else rest,
                "why": "its process was not measured cleanly: not judged"}
    if two_sided:
        mine = min(statistics.median(s) for s in r["process_samples"])
        return {"keep": False, "rounds": 0,
                "why": f"not chosen: {fmt.seconds(mine)} against {tables.backend_variant(best)}'s "
                       f"{fmt.seconds(first)}, one process each; the verdict decides on the chosen two"}
    fastest = min(min(s) for s in r["process_samples"])
    if fastest > factor * best["steady_median_s"]:
        return {"keep": False, "rounds": 0,
                "why": (f"clearly slower: its fastest sample {fmt.seconds(fastest)} is over {factor:g}x "
                        f"{tables.backend_variant(best)}'s {fmt.seconds(best['steady_median_s'])}")}
    return {"keep": True, "rounds": rest, "why": f"within {factor:g}x of {tables.backend_variant(best)}"}


def first_look(found: Sequence[Mapping[str, Any]], processes: int) -> dict[str, int]:
    """The rounds each row's two chosen cells still lack of the ``processes`` a run plans after
    its choice (a candidate judged after the first round became a best; a run that did not
    screen planned every cell in ``processes``, one of which chose): as many for each, counting
    every process measured after the choice, clean or busy (a busy one is the looks' to replace)."""
    out: dict[str, int] = {}
    for v in found:
        if v.get("best_torch") is None or v.get("best_jax") is None or v.get("no_top_up"):
            continue
        measured = (v.get("processes") or 0) + max(v.get(f"{fw}_processes_busy") or 0 for fw, _ in FRAMEWORKS)
        if measured < processes:
            for fw, _ in FRAMEWORKS:
                out[v[f"{fw}_cell"]] = max(out.get(v[f"{fw}_cell"], 0), processes - measured)
    return out


def self_check(rows: Iterable[Mapping[str, Any]], threshold: float = stats.TIE_THRESHOLD) -> list[dict[str, Any]]:
    """An A/A check of the verdict's deciding design on this machine's own data, the same program on
    both sides: each cell's clean processes after its first (the one a verdict's choice reads), in
    pairs of neighbours in time (2 and 3, 4 and 5, ...: ``run --aa`` measures them back to back, as a
    verdict's round measures its two cells), each pair's ratio one round, read as a verdict reads its
    rounds at its first look (stats.compare_paired at that look's level, alone: no other row shares
    its error, so the check is not made easier by Holm's step-down). Cells with fewer than 3 pairs
    are left out. Anything but the same speed is a false verdict, no difference found, or (noisy) no
    verdict."""
    out = []
    by_run: OrderedDict[Any, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:  # each run on its own: its processes were interleaved with each other
        by_run.setdefault(r.get("run_id"), []).append(r)
    for run_rows in by_run.values():
        for group in tables.group_rows(run_rows, by_machine=True).values():
            by: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
            for r in group:
                by.setdefault(tables._label(r), []).append(r)
            for label, procs in by.items():
                clean = sorted((r for r in gate.split(procs)[0] if r["status"] == "ok"),
                               key=lambda r: r.get("repeat") or 0)[1:]
                pairs_ = [(a, b) for a, b in zip(clean[0::2], clean[1::2])
                          if (b.get("repeat") or 0) == (a.get("repeat") or 0) + 1]
                if len(pairs_) < stats.MIN_PROCESSES:
                    continue
                looks = max(r.get("looks") or 1 for r in procs)
                confidence = 1.0 - stats.look_alpha(0, looks)
                ratios = [statistics.median(b["steady_samples"]) / statistics.median(a["steady_samples"])
                          for a, b in pairs_]
                c = stats.compare_paired(ratios, confidence)
                out.append({"run": group[0].get("run_id"), "machine": group[0].get("machine"),
                            "design": "paired (rounds)",
                            "table": title({**group[0], "matmul_precision": None, "overrides": ""}),
                            "backend": label, "processes": [len(pairs_), len(pairs_)], "ratio": c.ratio,
                            "ci_low": c.ci_low, "ci_high": c.ci_high, "confidence": confidence,
                            "decision": stats.decide(c, threshold),
                            "word": word(stats.decide(c, threshold), c, threshold)})
    return out


def _reason(decision: str, c: stats.Comparison, threshold: float, confidence: float = 0.95) -> str:
    ci = f"{fmt.level(confidence)} CI {c.ci_low:.3f}-{c.ci_high:.3f}"
    if decision == "noisy":
        return (f"{ci} holds 1 but allows a difference of {stats.tie_bound(c):.0%} (more than "
                f"{stats.NOISY_BOUND:.0%}): too wide to decide (noisy); measure more processes")
    if decision == "tie":
        if stats.within_band(c, threshold):
            return f"{ci} lies within the ±{threshold:.0%} tie band: " + (
                f"{inside_band(c)}: the same speed within ±{threshold:.0%}" if inside_band(c) else "the same speed")
        return (f"{ci} holds 1 but reaches past the ±{threshold:.0%} tie band: no difference found, and none "
                f"larger than {stats.tie_bound(c):.0%} either way")
    faster = 1 / c.ratio if decision == "lower" else c.ratio
    return f"{ci}; {faster:.2f}x"


# ---- presentation ----------------------------------------------------------------------------
COLUMNS = ("workload", "best PyTorch", "best JAX", "JAX/PyTorch (CI)", "verdict", "procs · timing", "compile pays "
           "(PyTorch / JAX)", "memory JAX/PyTorch", "parity (PyTorch / JAX)", "why", "energy JAX/PyTorch (CI)")
OPTIONAL = {  # columns that only some runs fill: where every row of a table is a dash, left out with why
    "why": lambda rows: "why: no profile or memory anatomy of the best cells (`stackwars run ... --profile N` adds "
                        "them)",
    "energy JAX/PyTorch (CI)": lambda rows: "energy: not measured (" + (next(
        (str(r["energy_why"]) for r in rows if r.get("energy_why")), "no energy figure in the records")) + ")",
}


def shown(rows: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[str]]:
    """The columns (indices into COLUMNS, as ``cells`` gives them) a table of ``rows`` shows, and a
    line for each optional column left out because it is a dash on every row: a column empty on
    every row says nothing, and its absence is said once instead."""
    keep, absent = [], []
    texts = [cells(r) for r in rows]
    for i, col in enumerate(COLUMNS):
        if col in OPTIONAL and texts and all(t[i] == fmt.DASH for t in texts):
            absent.append(OPTIONAL[col](rows))
        else:
            keep.append(i)
    return keep, absent


STYLE = {"JAX faster": "bold cyan", "PyTorch faster": "bold magenta", SAME: "green", NO_DIFFERENCE: "green",
         "cannot say": "yellow"}
LEGEND = ("every figure from clean processes only: a process is busy, and decides nothing, when others took over "
          "{c:.0%} of its CPUs or the machine's canary read off its run's by more than its noise (at least {f:.0%}); "
          "best: the fastest backend of the framework whose cells ran ok and passed parity, chosen on one process "
          "a candidate (its first clean one), the row decided on the chosen cells' other processes (time: geometric "
          "mean of their medians); JAX/PyTorch < 1: JAX faster; ratio and CI from rounds (one fresh process of each "
          "chosen cell, back to back): the geometric mean of the rounds' ratios, Student's t over rounds, at the "
          "level its look may spend ({a:.0%} over all looks and all rows of the machine: {a0:.0%} at the planned "
          "rounds, the rest spent by the top-ups on a group-sequential boundary, the rows read together by Holm's "
          "step-down); same speed: the CI lies within ±{t:.0%}; no difference found (±x: the largest difference "
          "the CI allows): the CI holds 1 and reaches past ±{t:.0%}, within ±{n:.0%}; cannot say: fewer than {p} "
          "clean rounds (busy machine: busy ones left too few, or a backend measured only while busy might be a "
          "side's best), a CI too wide, a side with nothing that ran and passed, two sides timed unlike, or (on CUDA) "
          "no program of the row's kind on a side: not best against best; on CUDA each table has a row for the "
          "programs that replay CUDA graphs (PyTorch's CUDA graphs, XLA's command buffers) and one for those that "
          "do not, so that each ratio sets like against like; compile pays: calls until the "
          "framework's fastest compiled mode has paid for its first call against its eager mode (never: not faster; "
          "within noise: not significantly faster); memory: what each best added, the peak of one call after the "
          "steady window over the worker's baseline before its first call (compile, autotuning and the harness's "
          "copies behind it), median over clean processes (device allocator on a GPU; {mem}; XLA's from its memory "
          "analysis, its allocator's peak having no reset); no difference here: the two sides' processes overlap, "
          "or the difference is under {mb} MiB or {mf:.0%}; "
          "timing: how both sides' steady states were timed, one mode for the pair (throughput: blocks of 2+ "
          "back-to-back calls, one sync a block; latency: one call a sync); "
          "again: the command that measures a row again on this machine.")


def title(r: Mapping[str, Any]) -> str:
    over = f" · {r['overrides']}" if r.get("overrides") else ""
    prec = "" if r.get("matmul_precision") in (None, "float32") else f" · {r['matmul_precision']} matmuls"
    replay = f" · {r['replay']}" if r.get("replay") else ""
    return f"{r['workload']} · {r['preset']} · {r['phase']} · {r['device']} · {r['dtype']}{over}{prec}{replay}"


def _side(r: Mapping[str, Any], fw: str) -> str:
    if r.get(f"best_{fw}") is None:
        return fmt.DASH
    text = f"{r[f'{fw}_label']} {fmt.seconds(r[f'{fw}_s'])}"
    for x in r.get(f"{fw}_excluded") or ():
        text += f" (faster but out: {x['backend']} {fmt.seconds(x['seconds'])}, {x['why']})"
    return text


SHORT_PAYS = {"never pays: its steady state is not faster": "never",
              **{tables.BUSY_PAYS.format(which=w): "cannot say (busy machine)" for w in ("the compiled", "the eager",
                                                                                         "the compiled and the eager")},
              "cannot say: the steady states differ by less than the noise": "within noise",
              "from the first call": "from call 1"}


def _pays_text(p: Mapping[str, Any]) -> str:
    if not p.get("compiled"):
        return p.get("verdict", fmt.DASH)
    verdict = p["verdict"]
    short = f"{p['calls']:,} calls" if p.get("calls") and p["calls"] > 1 else SHORT_PAYS.get(verdict, verdict)
    if verdict.endswith("was not measured"):  # "jax-jit cannot say (jax-eager not measured)"
        short = f"cannot say ({verdict.split(': ', 1)[1].split(',')[0]} not measured)"
    return f"{p['compiled']} {short}"


def cells(r: Mapping[str, Any]) -> list[str]:
    """The row's table cells as text (terminal, Markdown and the report page show these)."""
    ratio = fmt.interval(r.get("ratio"), r.get("ci_low"), r.get("ci_high"), r.get("confidence"))
    differs = ("" if r.get("memory_differs") else " (no difference here)" if r.get("memory_differs") is False
               else " (?)")
    mt, mj = r.get("torch_memory_added_bytes"), r.get("jax_memory_added_bytes")
    if r.get("memory_ratio") is not None:
        mem = f"{r['memory_ratio']:.2f}x" + differs
    elif mt is not None and mj is not None:  # no ratio (PyTorch's side added 0 B): the two figures, JAX's first
        mem = f"+{fmt.nbytes(mj)} / +{fmt.nbytes(mt)}" + differs
    else:
        mem = fmt.DASH
    parity = " / ".join(fmt.DASH if r.get(f"{fw}_one_sided") else _parity_text(r.get(f"{fw}_parity"))
                        for fw, _ in FRAMEWORKS)
    verdict = r["verdict"] + (f" ({r['reason_tag']})" if r.get("reason_tag") else tie_text(r))
    procs = (str(r["processes"]) + (f" ({r['processes_busy']} busy left out)" if r.get("processes_busy") else "")
             + (f" · {r['timing']}" if r.get("timing") else "")
             + (" · paired rounds" if r.get("design") == "paired (rounds)" else ""))
    return [title(r), _side(r, "torch"), _side(r, "jax"), ratio, verdict, procs,
            " / ".join(fmt.DASH if r.get(f"{fw}_one_sided") else _pays_text(r[f"{fw}_pays"]) for fw, _ in FRAMEWORKS),
            mem, parity, r.get("why") or fmt.DASH, energy_text(r)]


def inside_band(c: stats.Comparison) -> str | None:
    """A difference the CI shows but the tie band holds, in words ("PyTorch 1-4% faster"), or None
    where the CI holds 1."""
    if c.ci_high < 1.0:  # JAX's time lower: JAX faster by 1/ci_high - 1 to 1/ci_low - 1
        lo, hi = 1.0 / c.ci_high - 1.0, 1.0 / c.ci_low - 1.0
        who = "JAX"
    elif c.ci_low > 1.0:
        lo, hi, who = c.ci_low - 1.0, c.ci_high - 1.0, "PyTorch"
    else:
        return None
    return f"{who} {lo * 100:.0f}-{hi * 100:.0f}% faster" if round(lo * 100) != round(hi * 100) else \
        f"{who} {lo * 100:.0f}% faster"


def tie_text(r: Mapping[str, Any]) -> str:
    """" (within ±5%)" beside "same speed" (" (PyTorch 1-4% faster: within ±5%)" where the CI
    excludes 1); " (the CI allows ±8%)" beside "no difference found"."""
    if r.get("verdict") == SAME:
        shown = (inside_band(stats.Comparison(r["ratio"], r["ci_low"], r["ci_high"], True))
                 if r.get("ci_low") is not None else None)
        return f" ({shown + ': ' if shown else ''}within ±{r.get('tie_threshold', stats.TIE_THRESHOLD):.0%})"
    if r.get("verdict") == NO_DIFFERENCE and r.get("tie_within") is not None:
        return f" (the CI allows ±{r['tie_within']:.0%})"
    return ""


def energy_text(r: Mapping[str, Any]) -> str:
    """'0.912 (0.880-0.945, 96%): 1.21 mJ / 1.10 mJ a call', or a dash (the JSON says why)."""
    if r.get("energy_ratio") is None:
        return fmt.DASH
    joules = " / ".join(fmt.joules(r.get(f"{fw}_energy_j")) for fw, _ in FRAMEWORKS)
    return (f"{fmt.interval(r['energy_ratio'], r['energy_ci_low'], r['energy_ci_high'], r.get('confidence'))}: "
            f"{joules} a call")


def notes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the table cells abbreviate: why a row cannot decide, what was kept aside, and the
    processes a busy host would have left out that decided because it could not touch them."""
    out = []
    for r in rows:
        if r["verdict"] == "cannot say" or r.get("reason_tag") == "noisy":
            out.append(f"{title(r)}: {r['verdict']}: {r['reason']}")
        if r.get("measured"):
            out.append(f"{title(r)}: {r['measured']}")
        for fw, name in FRAMEWORKS:
            if r.get(f"{fw}_processes_kept"):
                out.append(f"{title(r)}: {r[f'{fw}_processes_kept']} of {name}'s processes {r[f'{fw}_kept_why']}")
    for fw, name in FRAMEWORKS:
        aside = [(r, x) for r in rows for x in r.get(f"{fw}_aside") or ()]
        if aside:
            which = "; ".join(f"{title(r)} {x['backend']} {fmt.seconds(x['seconds'])}" for r, x in aside)
            out.append(f"ran faster than {name}'s best own mode, but an analysis path ({name}'s program compiled by "
                       f"XLA: it compares programs, not frameworks), so not in the verdict: {which}")
        stand_in = [title(r) for r in rows if r.get(f"{fw}_analysis_path")]
        if stand_in:
            out.append(f"no own mode of {name} was measured, so its analysis path stands in (two programs on one "
                       f"compiler): {'; '.join(stand_in)}")
    return out


def fresh_levels_text(levels: Sequence[float] | None) -> str:
    """What level a row's "again" command reads its verdict at: a fresh run starts its error
    budget again, whatever look this row was read at."""
    if not levels:
        return ""
    if len(levels) == 1:
        return f"a fresh run of it reads its verdict at {fmt.level(levels[0])}"
    looks = ", ".join(f"{fmt.level(c)} at look {i + 1}" for i, c in enumerate(levels))
    return (f"a fresh run of it reads its verdict at {looks} (it adds processes while undecided and spends "
            f"{stats.VERDICT_ALPHA:.0%} over its looks)")


def shared_levels(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The level sentence of the rows' commands where it is the same for all of them (said once
    under the table, not on every row), else None."""
    texts = {fresh_levels_text(r.get("command_levels")) for r in rows if r.get("command")}
    return next(iter(texts)) if len(texts) == 1 and None not in texts else None


def command_cell(r: Mapping[str, Any], shared: str | None = None) -> str:
    """The row's command, as a table cell shows it, with the level a fresh run of it reads at
    (left out where it is ``shared``, said once for the table)."""
    if not r.get("command"):
        return fmt.DASH
    levels = fresh_levels_text(r.get("command_levels"))
    return f"`{r['command']}`" + (f" ({levels})" if levels and levels != shared else "")


def again(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Each row's command, under its title: what measures it again on this machine, and the
    level a fresh run of it reads its verdict at (once, after them, where every row's is one):
    (the title and the command, the words after it)."""
    out = []
    shared = shared_levels(rows)
    for r in rows:
        if r.get("command"):
            levels = fresh_levels_text(r.get("command_levels"))
            out.append((f"{title(r)}: {r['command']}", f"({levels})" if levels and levels != shared else ""))
    if out and shared:
        out.append(("", f"each command above: {shared}"))
    return out


def mixed_machines(cell_rows: Sequence[Mapping[str, Any]]) -> str | None:
    """A warning for each run whose cells ran on more than one kind of machine (an executor
    placed them on nodes of different CPUs or GPUs): its verdicts are kept apart, one per kind."""
    kinds: dict[str, set[str]] = {}
    for r in cell_rows:
        if r.get("machine"):
            kinds.setdefault(str(r.get("run_id")), set()).add(r["machine"])
    mixed = {run: sorted(k) for run, k in kinds.items() if len(k) > 1}
    if not mixed:
        return None
    return "; ".join(f"run {run}'s cells ran on {len(k)} kinds of machine ({' | '.join(k)}): their figures are "
                     f"not comparable, so each kind has its own tables and verdicts" for run, k in mixed.items())


def by_machine(rows: Sequence[Mapping[str, Any]]) -> "OrderedDict[str, list[Mapping[str, Any]]]":
    out: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        out.setdefault(r["machine"], []).append(r)
    return out


def legend(rows: Sequence[Mapping[str, Any]], threshold: float = stats.TIE_THRESHOLD) -> str:
    counters = sorted({r["memory_counter"] for r in rows if r.get("memory_counter")})
    from stackwars.rules import RULES

    return LEGEND.format(t=threshold, n=stats.NOISY_BOUND, p=stats.MIN_PROCESSES, a=stats.VERDICT_ALPHA,
                         mb=stats.MEMORY_MIN_BYTES >> 20, mf=stats.MEMORY_MIN_FRACTION,
                         a0=stats.FIRST_LOOK_ALPHA, c=RULES["contention_threshold"].value, f=RULES["canary_floor"].value,
                         mem="; ".join(counters) or "not measured")


def summary(rows: Sequence[Mapping[str, Any]]) -> str:
    counts = OrderedDict((v, sum(r["verdict"] == v for r in rows)) for v in VERDICTS)
    return f"{len(rows)} verdict(s): " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)


NARROW = 160  # below this many columns, a block of lines per verdict instead of the table
BRIEF_WIDTH = 100  # the brief verdict's lines are at most this wide, whatever the terminal
BRIEF_HEADER = ("workload", "best PyTorch", "best JAX", "JAX/PyTorch (CI)", "verdict")


def _brief_workload(r: Mapping[str, Any]) -> str:
    """The row's workload in words, without what the machine heading says (device)."""
    extra = [r["dtype"]] if r.get("dtype") not in (None, "float32") else []
    extra += [str(r["overrides"])] if r.get("overrides") else []
    extra += [f"{r['matmul_precision']} matmuls"] if r.get("matmul_precision") not in (None, "float32") else []
    extra += [str(r["replay"])] if r.get("replay") else []
    return " ".join([str(r["workload"]), str(r["preset"]), str(r["phase"]), *extra])


def _brief_side(r: Mapping[str, Any], fw: str) -> str:
    """'compile 22.84 ms': the side's best mode (its column names the framework) and its time."""
    best = r.get(f"best_{fw}")
    if best is None:
        return fmt.DASH
    mode = best.split("-", 1)[1] if best.startswith(("torch-", "jax-")) else best
    return f"{mode} {fmt.seconds(r[f'{fw}_s'])}"


def _brief_note(r: Mapping[str, Any]) -> str | None:
    """A row's short note: why it cannot decide, what a tie allows, a faster mode kept out; None
    where the verdict's words say it all."""
    parts = []
    reason = str(r.get("reason") or "")
    by_design = re.search(r"\S+ is written in \w+ only: there is no other side to compare", reason)
    if by_design and (r.get("torch_one_sided") or r.get("jax_one_sided")):  # the structural reason first
        parts.append(f"{r['verdict']} (one side missing): {by_design.group(0)}")
    elif r["verdict"] == "cannot say" or r.get("reason_tag"):
        first = reason.split("; ")[0].rstrip(".")
        # the glance states no rule's bound: --explain and the docs do (words the tag repeats, cut)
        first = re.sub(r" \(more than [^)]*\)| \((noisy|busy machine)\)$", "", first)
        first = first.replace(" holds 1 but allows a difference of ", " spans 1 and a difference of ")
        parts.append(r["verdict"] + (f" ({r['reason_tag']})" if r.get("reason_tag") else "") + f": {first}")
    elif tie_text(r):
        parts.append(r["verdict"] + tie_text(r))
    out = [f"{x['backend']} ({x['why']})" for fw, _ in FRAMEWORKS for x in r.get(f"{fw}_excluded") or ()]
    if out:
        parts.append("faster but out: " + ", ".join(out))
    return "; ".join(parts) or None


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def brief(rows: Sequence[Mapping[str, Any]], run_ids: Sequence[str] = (), width: int = BRIEF_WIDTH,
          threshold: float = stats.TIE_THRESHOLD) -> list[str]:
    """The verdict at a glance, as hyperfine or pyperf's compare_to end: for each machine a heading,
    one line a row (its workload, each side's best with its time, JAX/PyTorch with its CI, the
    verdict in words), short notes marked a, b, ... below, and a legend of at most five lines that
    names the page explaining every word and ends with the command of the details. No line is wider
    than ``width`` (at most 100) but that command, never broken (pasted, its first line would run
    alone). Every row's details (compile pays, memory, parity, why, its command again) are
    ``verdict --explain``'s."""
    width = max(40, min(width, BRIEF_WIDTH))
    out: list[str] = []
    marks = iter("abcdefghijklmnopqrstuvwxyz")
    for machine, group in by_machine(rows).items():
        out.append(_fit(f"Verdict · {machine}", width))
        out.append(_fit(f"  {summary(group)}", width))
        table = [BRIEF_HEADER]
        noted = []
        for r in group:
            note = _brief_note(r)
            mark = next(marks, "+") if note else ""
            if note:
                noted.append((mark, note))
            if r.get("ratio") is None or r.get("ci_low") is None:
                ratio = fmt.DASH
            elif r["ci_low"] == r["ci_high"]:  # one round: a ratio, no spread to make an interval of
                ratio = f"{r['ratio']:.2f} (one round)"
            else:
                ratio = f"{r['ratio']:.2f} ({r['ci_low']:.2f}-{r['ci_high']:.2f}, {fmt.level(r['confidence'])})"
            table.append((_brief_workload(r), _brief_side(r, "torch"), _brief_side(r, "jax"), ratio,
                          r["verdict"] + (f" ({mark})" if mark else "")))
        widths = [max(len(row[i]) for row in table) for i in range(5)]
        # the workload and the sides give way, widest first; the CI and the verdict's words never
        while 2 + sum(widths) + 4 > width and max(widths[:3]) > 8:
            widest = max(range(3), key=lambda i: widths[i])
            widths[widest] -= 1
        sep = "  " if 2 + sum(widths) + 8 <= width else " "
        for row in table:
            line = "  " + sep.join(_fit(c, w).ljust(w) for c, w in zip(row, widths))
            out.append(_fit(line.rstrip(), width))
        for mark, note in noted:
            out += _wrap(f"  ({mark}) {note}", width, subsequent_indent="      ", max_lines=2)
    if rows:
        levels = ", ".join(dict.fromkeys(fmt.level(r["confidence"]) for r in rows if r.get("confidence")))
        explain = f"stackwars verdict {' '.join(run_ids)} --explain".replace("  ", " ") if run_ids else \
            "stackwars verdict --explain"
        at = levels + "; " if levels else ""
        legend_text = (f"JAX/PyTorch < 1: JAX faster; best mode of each side, rounds of fresh processes, CI at the "
                       f"row's level ({at}{stats.VERDICT_ALPHA:.0%} shared by a machine's rows). same "
                       f"speed: CI within ±{threshold:.0%}; no difference found: CI holds 1; busy processes decide "
                       f"nothing.")
        words, details = "Words: docs/getting-started/verdict.md", f"details: {explain}"
        # the page and the command end the legend, never cut (a narrow terminal cuts the words above);
        # the command on a line of its own, whole however narrow (copied, pasted)
        if len(f"{words}; {details}") <= width:
            out += _wrap(legend_text, width, max_lines=4) + [f"{words}; {details}"]
        elif len(_wrap(f"{legend_text} {words}", width)) <= 4:
            out += _wrap(f"{legend_text} {words}", width) + [details]
        else:
            out += _wrap(legend_text, width, max_lines=3) + [words, details]
    return out


def _wrap(text: str, width: int, **kwargs) -> list[str]:
    """Prose at ``width``, never breaking a word: a path, a flag, a run id (its hyphens) stay whole."""
    return textwrap.wrap(text, width, placeholder=" …", break_long_words=False, break_on_hyphens=False, **kwargs)


def render(rows: Sequence[Mapping[str, Any]], width: int | None = None, threshold: float = stats.TIE_THRESHOLD):
    """One table per machine (or stacked blocks on a narrow terminal), then the legend. Print it
    with ``crop=False``: its commands are lines longer than the width, whole."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = []
    for machine, group in by_machine(rows).items():
        heading = f"Verdict · {machine} · {summary(group)}"
        if width is not None and width < NARROW:
            parts.append(Text(heading, style="bold"))
            for r in group:
                c = cells(r)
                line = Text(f"  {c[0]}: ")
                line.append(c[4], style=STYLE[r["verdict"]])  # with its reason's tag, as the table and Markdown
                parts.append(line)
                parts.append(Text(f"      PyTorch {c[1]} | JAX {c[2]} | JAX/PyTorch {c[3]} | procs {c[5]}"))
                parts.append(Text(f"      {r.get('reason') or ''}", style="dim"))
                parts.append(Text(f"      compile pays {c[6]} | memory {c[7]} | parity {c[8]}"
                                  + (f" | energy {c[10]}" if r.get("energy_ratio") is not None else ""), style="dim"))
                if r.get("why"):
                    parts.append(Text(f"      why: {r['why']}", style="dim"))
                if r.get("command"):
                    levels = fresh_levels_text(r.get("command_levels"))
                    parts.append(_whole(Text(f"      again: {r['command']}", style="dim")))
                    if levels:
                        parts.append(Text(f"        ({levels})", style="dim"))
            continue
        table = Table(title=heading, title_justify="left")
        keep, absent = shown(group)
        for i in keep:
            table.add_column(COLUMNS[i], overflow="fold", justify="right" if COLUMNS[i] == "procs · timing" else "left")
        for r in group:
            c = cells(r)
            c[4] = Text(c[4], style=STYLE[r["verdict"]])
            table.add_row(*[c[i] if isinstance(c[i], Text) else Text(c[i]) for i in keep])
        parts.append(table)
        parts += [Text(f"  {n}", style="dim") for n in absent]
        parts += [Text(f"  {n}", style="yellow") for n in notes(group)]
        for command, words in again(group):
            if command:
                parts.append(_whole(Text(f"  again: {command}", style="dim")))
            if words:
                parts.append(Text(f"    {words}" if command else f"  again: {words}", style="dim"))
    if rows:
        parts.append(Text(legend(rows, threshold), style="dim"))
    return Group(*parts)


def _whole(line):
    """A line that holds a command: never broken nor cut at the width, so that it is copied whole (a
    terminal wraps it for the eye). Printed with ``crop=False``, as ``render``'s printers do."""
    line.no_wrap, line.overflow = True, "ignore"
    return line


def markdown(rows: Sequence[Mapping[str, Any]], threshold: float = stats.TIE_THRESHOLD) -> str:
    lines = []
    for machine, group in by_machine(rows).items():
        keep, absent = shown(group)
        lines += [f"**Verdict · {machine}** ({summary(group)})", "",
                  "| " + " | ".join(COLUMNS[i] for i in keep) + " | command |", "|" + "---|" * (len(keep) + 1)]
        shared = shared_levels(group)
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in [*(cells(r)[i] for i in keep),
                                                                    command_cell(r, shared)])
                  + " |" for r in group]
        lines.append("")
        if shared:
            lines += [f"Each command: {shared}.", ""]
        lines += [f"- {n}" for n in absent] + ([""] if absent else [])
        lines += [f"- {n}" for n in notes(group)] + ([""] if notes(group) else [])
    if rows:
        lines.append(legend(rows, threshold))
    return "\n".join(lines) + "\n"


def to_text(rows: Sequence[Mapping[str, Any]], width: int = 250) -> str:
    from rich.console import Console
    console = Console(width=width, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(render(rows, width), crop=False)
    return console.export_text()


def forest_png(rows: Sequence[Mapping[str, Any]], threshold: float = stats.TIE_THRESHOLD) -> bytes | None:
    """The verdicts of one machine as a forest plot: JAX/PyTorch on a log axis, one row per
    workload, the point estimate with its CI (at the level its look spends), the tie band shaded, coloured by verdict."""
    shown = [r for r in rows if r.get("ratio")]
    # rows with no ratio to draw (a side measured only while the machine was busy, or missing): listed apart
    apart = [r for r in rows if not r.get("ratio")]
    if not shown and not apart:
        return None
    import math

    from stackwars.report.plots import plt_agg, to_png
    plt = plt_agg()
    colour = {"JAX faster": "tab:blue", "PyTorch faster": "tab:red", SAME: "tab:green", NO_DIFFERENCE: "tab:olive",
              "cannot say": "tab:gray"}
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.32 * (len(shown) + len(apart))))
    ax.axvspan(1 / (1 + threshold), 1 + threshold, color="tab:green", alpha=0.12, lw=0,
               label=f"tie band (±{threshold:.0%})")
    ax.axvline(1.0, color="black", lw=0.8)
    for i, r in enumerate(shown):
        c = colour[r["verdict"]]
        # a verdict that cannot decide (too few clean processes, a busy machine) is hollow and grey
        decided = r["processes"] >= stats.MIN_PROCESSES and r.get("reason_tag") != "busy machine"
        ax.errorbar(r["ratio"], i, xerr=[[r["ratio"] - r["ci_low"]], [r["ci_high"] - r["ratio"]]], fmt="o", color=c,
                    ms=4, capsize=2, lw=1.2, mfc=c if decided else "white")
    energy_shown = False
    for i, r in enumerate(shown):  # where measured: the energy ratio of the same two bests, a diamond below
        if r.get("energy_ratio") is not None:
            e = r["energy_ratio"]
            ax.errorbar(e, i + 0.25, xerr=[[e - r["energy_ci_low"]], [r["energy_ci_high"] - e]], fmt="D",
                        color="tab:orange", ms=3, capsize=2, lw=0.8)
            energy_shown = True
    for j, r in enumerate(apart):
        ax.text(1.0, len(shown) + j, f"not drawn: {r['verdict']} ({r.get('reason_tag') or 'no ratio'})",
                ha="center", va="center", fontsize=7, color="tab:gray")
    labels = [f"{title(r)} ({r['best_torch']} vs {r['best_jax']}, {fmt.level(r['confidence'])} CI)" for r in shown]
    labels += [title(r) + (f" ({r.get('best_torch') or 'no PyTorch best'} vs {r.get('best_jax') or 'no JAX best'})"
                           if r.get("best_torch") or r.get("best_jax") else "") for r in apart]
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xscale("log")
    lo = min([r["ci_low"] for r in shown] + [r["energy_ci_low"] for r in shown if r.get("energy_ratio")]
             + [1 / (1 + threshold)])
    hi = max([r["ci_high"] for r in shown] + [r["energy_ci_high"] for r in shown if r.get("energy_ratio")]
             + [1 + threshold])
    pad = math.exp(0.08 * (math.log(hi) - math.log(lo)) + 0.02)
    ax.set_xlim(lo / pad, hi * pad)
    levels = ", ".join(dict.fromkeys(fmt.level(r["confidence"]) for r in shown))
    ax.set_xlabel("JAX time / PyTorch time, best backend of each (log; < 1: JAX faster); "
                  + (f"CI over rounds at {levels}, the level each row was read at" if shown
                     else "no row has a ratio to draw: each says why"))
    for v, c in colour.items():
        ax.plot([], [], "o", color=c, label=v)
    ax.plot([], [], "o", color="tab:gray", mfc="white",
            label=f"fewer than {stats.MIN_PROCESSES} clean processes, or a busy machine")
    if energy_shown:
        ax.plot([], [], "D", color="tab:orange", ms=3, label="energy JAX/PyTorch (J a call), CI over processes")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(alpha=0.3, axis="x", which="both")
    fig.tight_layout()
    return to_png(fig)
