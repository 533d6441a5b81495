"""Choose: each side's best, on one process a candidate, and which cells go on after the first round.

The fastest of k equally fast candidates is fast by luck, so a best chosen and compared on the same
processes favours the side with more modes (the winner's curse: x1.06 with 4:1 modes at an sd of
0.10): each side's best is chosen on its candidates' first clean processes and the processes that
chose never decide (``decide.py``). ``screen`` says, after a run's first round, which cells are
measured in more processes.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Sequence

from stackwars import stats
from stackwars.report import format as fmt
from stackwars.verdict import figures
from stackwars.verdict.beside import pays, parity, parity_text
from stackwars.verdict.words import FRAMEWORKS, REPLAY_KINDS


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


def analysis(backend: str) -> bool:
    """An analysis path rather than a way the framework's users run code (registry flag)."""
    from stackwars import registry
    from stackwars.errors import SpecError
    try:
        return bool(getattr(registry.backend(backend), "analysis", False))
    except SpecError:  # a plugin backend not importable here
        return False


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


def sides(row: dict[str, Any], combined: Sequence[Mapping[str, Any]], by_backend: Mapping[tuple, Mapping[str, Any]],
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
               "candidates": [{"backend": figures.backend_variant(r), "cell": cell_id(r),
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
    passed = [r for r in side if r["status"] == "ok" and parity(r)["ok"] is not False]
    b, chosen_on = choose(passed)
    # what the choice read of the best: its choosing process, or (one candidate) all its processes
    b_s = chosen_on["median_s"] if chosen_on else b["steady_median_s"] if b is not None else None
    row[f"{fw}_chosen_on"] = chosen_on
    # a candidate measured only while the machine was busy might be the side's best: the side
    # cannot decide while its fastest busy process beats the clean best (busy slows, never speeds)
    shadow = [r for r in passed if r.get("busy") and (b is None or _fastest_busy(r) < b_s)]
    row[f"{fw}_busy_candidates"] = [{"backend": figures.backend_variant(r), "cell": cell_id(r),
                                     "processes_busy": r.get("processes_busy", 0),
                                     "why": r.get("busy_reasons"),
                                     "fastest_busy_s": _fastest_busy(r),
                                     # the rounds its run may measure (--processes, --max-processes): fewer than a
                                     # verdict's first look, and a process more to judge it could decide nothing
                                     "allowed": figures.rounds_allowed([r])} for r in shadow]
    # the cells whose latest look came out all busy: the machine stayed busy through it, and a
    # top-up would measure the same machine again (plan.wanted gives them none)
    row[f"{fw}_stayed_busy"] = {cell_id(r): {"backend": figures.backend_variant(r),
                                             "processes": r.get("latest_look_processes", 0)}
                                for r in ([b] if b is not None else []) + shadow
                                if r.get("latest_look_processes") and not r.get("latest_look_clean")}
    failed = [r for r in side if r["status"] == "parity_fail" and r.get("steady_median_s")
              and (b is None or r["steady_median_s"] < b_s)]
    row[f"{fw}_aside"] = [{"backend": figures.backend_variant(r), "seconds": r["steady_median_s"]}
                          for r in everything if r not in side and r["status"] == "ok"
                          and r.get("steady_median_s") and b is not None
                          and r["steady_median_s"] < b_s]
    row[f"{fw}_candidates"] = len(passed)
    row[f"{fw}_excluded"] = [{"backend": figures.backend_variant(r), "seconds": r["steady_median_s"],
                              "why": f"failed parity: {parity_text(parity(r))}"} for r in failed]
    row[f"{fw}_pays"] = pays(side, by_backend)
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
                   "none ran ok with parity (" + ", ".join(f"{figures.backend_variant(r)} {r['status']}"
                                                           for r in side) + ")")
        missing = f"no {name} backend: {why}"
        # its parity where everything it ran failed it: the smallest error, not "unchecked"
        errs = [(r["parity_max_rel_err"], r) for r in side if r["status"] == "parity_fail"
                and r.get("parity_max_rel_err") is not None]
        if errs:
            err, r = min(errs, key=lambda x: x[0])
            row[f"{fw}_parity"] = {**parity(r), "backend": figures.backend_variant(r)}
        elif shadow:  # measured while busy, in parity: the fastest one's, named, not "unchecked"
            r = min(shadow, key=_fastest_busy)
            row[f"{fw}_parity"] = {**parity(r), "backend": figures.backend_variant(r)}
        row.update({f"best_{fw}": None, f"{fw}_s": None, f"{fw}_processes": 0,
                    f"{fw}_processes_busy": sum(x["processes_busy"] for x in row[f"{fw}_busy_candidates"]),
                    f"{fw}_one_sided": bool(not side and _one_sided(workload, fw))})
        return b, side, shadow, missing
    row.update({f"best_{fw}": figures.backend_variant(b), f"{fw}_label": figures.label(b),
                f"{fw}_cell": cell_id(b), f"{fw}_analysis_path": analysis(b["backend"]),
                f"{fw}_s": b["steady_median_s"], f"{fw}_first_call_s": b.get("first_call_s"),
                f"{fw}_ci_low_s": b.get("steady_ci_low_s"), f"{fw}_ci_high_s": b.get("steady_ci_high_s"),
                f"{fw}_processes": len(b["process_samples"]),
                f"{fw}_processes_busy": b.get("processes_busy", 0),
                f"{fw}_parity": parity(b), f"{fw}_memory_bytes": b.get("memory_added_bytes"),
                f"{fw}_process_memory_bytes": b.get("process_memory_bytes"),
                f"{fw}_optimizer_impl": b.get("optimizer_impl"), f"{fw}_attention": b.get("attention"),
                f"{fw}_processes_kept": b.get("processes_kept", 0), f"{fw}_kept_why": b.get("kept_why")})
    return b, side, shadow, None


def _fastest_busy(row: Mapping[str, Any]) -> float:
    """The lowest per-process median of a cell's busy processes: busy slows a program, never
    speeds it, so a clean measurement of it would be at most about this."""
    medians = [statistics.median(s) for s in row.get("busy_samples") or () if s]
    return min(medians) if medians else (row.get("busy_figures") or {}).get("steady_median_s") or float("inf")


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
    for key, group in figures.group_rows(latest_processes(rows), by_machine=True).items():
        combined = figures.combine_repeats(group)
        for kind, cells in replay_kinds(combined, key[3]):
            chosen = {}
            for fw, name in FRAMEWORKS:
                side = [r for r in cells if r.get("framework") == fw]
                passed = [r for r in side if r["status"] == "ok" and parity(r)["ok"] is not False]
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
                           f"{figures.backend_variant(best)}'s {fmt.seconds(first)}"}
        # beside a best, one process judges it (it may become the best, then _complete_first_look gives it its
        # rounds); a side with no clean process at all measures on as planned, its choice made later
        return {"keep": True, "rounds": 1 if two_sided and best is not None else rest,
                "why": "its process was not measured cleanly: not judged"}
    if two_sided:
        mine = min(statistics.median(s) for s in r["process_samples"])
        return {"keep": False, "rounds": 0,
                "why": f"not chosen: {fmt.seconds(mine)} against {figures.backend_variant(best)}'s "
                       f"{fmt.seconds(first)}, one process each; the verdict decides on the chosen two"}
    fastest = min(min(s) for s in r["process_samples"])
    if fastest > factor * best["steady_median_s"]:
        return {"keep": False, "rounds": 0,
                "why": (f"clearly slower: its fastest sample {fmt.seconds(fastest)} is over {factor:g}x "
                        f"{figures.backend_variant(best)}'s {fmt.seconds(best['steady_median_s'])}")}
    return {"keep": True, "rounds": rest, "why": f"within {factor:g}x of {figures.backend_variant(best)}"}
