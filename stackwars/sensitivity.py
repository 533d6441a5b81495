"""Which setting moves the verdict: each verdict row re-measured with one fairness knob changed.

    stackwars verdict RUN --sensitivity                # every knob this device has
    stackwars verdict RUN --sensitivity -k dtype -k batch-x2

For each verdict row of a stored run, the two cells that decided it (the best PyTorch and the
best JAX backend) are measured again with one knob changed at a time, on both sides where the
knob exists on both, as new runs of the same processes, configuration and statistics (one run
per knob, ``orchestrate.Run``). What is tested is the change itself: the changed row's ratio
JAX/PyTorch against the stored row's, (J'/T') / (J/T), with its own interval from the four
cells' processes (``stats.compare_change``), read at 1 - 5%/m where the row tests m knobs
(Bonferroni: the chance that any of a row's knobs is said to move it when none does stays
within 5%), and judged by the verdict's rule (``stats.decide``):

* ``flips``: the knob moves the ratio by more than the tie band (±5%), the change's interval
  excluding it; the changed row's own verdict is given beside it;
* ``stands``: the change's interval lies within the band, or holds 1 within ±20%;
* ``cannot say``: the change's interval is too wide, or a row (stored or changed) has fewer than
  three clean processes a side;
* ``not here``: the knob does not exist for this row on this device (both sides), named with
  why; a knob that exists on one side only changes that side, and the row says so.

The modes are held fixed: a knob that changes the program (dtype, batch) measures the same two
backends, not a new search for each side's best. The stored verdict is the baseline, measured
with the same processes and statistics but at another time; the knob ``again`` (first, and in
the default set) measures the row unchanged beside the knobs and is tested like them, so a row
whose ratio moved with nothing changed says its knobs' moves cannot be told from the machine's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from stackwars import orchestrate, registry, stats
from stackwars.errors import SpecError
from stackwars.records import CellSpec, MeasureConfig
from stackwars.report import tables
from stackwars.verdict import figures
from stackwars import verdict as vd
from stackwars.store.results import rows

FRAMEWORKS = (("torch", "PyTorch"), ("jax", "JAX"))
BATCH_PARAM = {"gemm": "m"}  # the leading dimension where a workload has no `batch`


@dataclass
class Variant:
    """One row with one knob changed: each side's spec (None: the side is not measured) and
    the run configuration; ``changed`` the sides the knob changed; ``missing`` why a side has
    no such knob."""

    torch: CellSpec | None
    jax: CellSpec | None
    config: MeasureConfig
    changed: tuple[str, ...]
    missing: dict[str, str] = field(default_factory=dict)
    what: str = ""  # "both use TF32", in the row's sentence


class NotHere(Exception):
    """The knob does not exist for this row on this device: why."""


def _opts(spec: CellSpec, **kw: Any) -> CellSpec:
    return dataclasses.replace(spec, options=tuple({**dict(spec.options), **kw}.items()))


def _over(spec: CellSpec, **kw: Any) -> CellSpec:
    return dataclasses.replace(spec, overrides=tuple({**dict(spec.overrides), **kw}.items()))


def _tf32(t: CellSpec, j: CellSpec, config: MeasureConfig, params: Mapping[str, Any]) -> Variant:
    if t.device != "cuda":
        raise NotHere("TF32 is a GPU matmul mode: no effect on a CPU")
    new = "float32" if config.matmul_precision == "tf32" else "tf32"
    return Variant(t, j, dataclasses.replace(config, matmul_precision=new), ("torch", "jax"),
                   what="both use TF32" if new == "tf32" else "both use exact float32 matmuls")


# each program's twin of the other graph-replay kind (records.replays_graphs): one knob, one change
GRAPH_TWIN = {"torch-compile": "torch-cudagraphs", "torch-cudagraphs": "torch-compile",
              "jax-jit": "jax-jit-no-graphs", "jax-jit-no-graphs": "jax-jit"}


def _graph_twin(spec: CellSpec) -> CellSpec | None:
    """The same program with graph replay turned over: torch.compile with and without CUDA graphs,
    jax.jit with and without XLA's command buffers (a backend, or its option); None where the
    program has no such twin (an eager mode: its graphs would come with compiling)."""
    options = dict(spec.options)
    if spec.backend == "jax-jit" and options.get("xla_command_buffers") == "off":
        return dataclasses.replace(spec, options=tuple((k, v) for k, v in options.items()
                                                       if k != "xla_command_buffers"))
    if spec.backend == "jax-jit" and options.get("xla_command_buffers") == "on":
        options.pop("xla_command_buffers")
    twin = GRAPH_TWIN.get(spec.backend)
    if twin is None:
        return None
    if spec.backend.startswith("torch-"):
        options.pop("mode", None)  # the twin's own mode: with CUDA graphs, or without
    return dataclasses.replace(spec, backend=twin, options=tuple(options.items()))


def _graphs(t: CellSpec, j: CellSpec, config: MeasureConfig, params: Mapping[str, Any]) -> Variant:
    """Graph replay turned over on both sides at once. On CUDA every verdict row sets programs
    of one kind against each other (verdict/choose.replay_kinds: graph replay, or none), so the knob sets
    both-on against both-off: PyTorch between torch-compile and torch-cudagraphs, JAX between
    jax.jit with XLA's command buffers (its default) and without. A side whose best has no twin
    (an eager mode) keeps its program, and the row says so."""
    if t.device != "cuda":
        raise NotHere("CUDA graphs and XLA's command buffers exist on CUDA only")
    missing, what = {}, []
    new_t, new_j = _graph_twin(t), _graph_twin(j)
    if new_t is None:
        missing["torch"] = f"PyTorch's best is {t.backend}: no graph-replay twin (its graphs come with compiling)"
        new_t = t
    else:
        what.append("PyTorch replays CUDA graphs" if new_t.backend == "torch-cudagraphs"
                    else "PyTorch does not replay CUDA graphs")
    if new_j is None:
        missing["jax"] = f"JAX's best is {j.backend}, not one program compiled by XLA"
        new_j = j
    else:
        what.append("XLA forms its command buffers" if new_j.backend == "jax-jit"
                    and dict(new_j.options).get("xla_command_buffers") != "off" else "XLA forms no command buffers")
    changed = tuple(fw for fw, new, old in (("torch", new_t, t), ("jax", new_j, j)) if new != old)
    if not changed:
        raise NotHere("; ".join(missing.values()))
    return Variant(new_t, new_j, config, changed, missing, " and ".join(what))


def _attention(t: CellSpec, j: CellSpec, config: MeasureConfig, params: Mapping[str, Any]) -> Variant:
    if "attention" not in params:
        raise NotHere(f"{t.workload} has no attention")
    plain = params["attention"] != "naive"
    value = "naive" if plain else "best"
    return Variant(_over(t, attention=value), _over(j, attention=value), config, ("torch", "jax"),
                   what="both use their plain attention" if plain else "both use their fused attention")


def _optimizer(t: CellSpec, j: CellSpec, config: MeasureConfig, params: Mapping[str, Any]) -> Variant:
    if t.phase != "train-step":
        raise NotHere("a forward has no optimizer")
    current = dict(t.options).get("optimizer_impl", "fast")
    new = "for-loop" if current != "for-loop" else "fast"
    return Variant(_opts(t, optimizer_impl=new), j, config, ("torch",),
                   {"jax": "optax's update is one traced program: no fused or for-loop variant"},
                   f"PyTorch's optimizer is the {new} one")


def _compile_mode(t: CellSpec, j: CellSpec, config: MeasureConfig, params: Mapping[str, Any]) -> Variant:
    missing = {}
    new_t = t
    if t.backend == "torch-compile":
        new_t = dataclasses.replace(t, backend="torch-compile-max-autotune")
    elif t.backend == "torch-compile-max-autotune":
        new_t = dataclasses.replace(t, backend="torch-compile")
    else:
        missing["torch"] = f"PyTorch's best is {t.backend}, which Inductor's modes do not apply to"
    new_j = j
    if j.device == "cuda" and j.backend in ("jax-jit", "jax-jit-no-graphs"):
        level = dict(j.options).get("xla_autotune_level")
        new_j = _opts(j, xla_autotune_level=0 if level in (None, 4) else 4)
    else:
        missing["jax"] = ("XLA's autotuning is a GPU pass: no level to change on a CPU" if j.device != "cuda"
                          else f"JAX's best is {j.backend}, not compiled by XLA whole")
    changed = tuple(fw for fw, new, old in (("torch", new_t, t), ("jax", new_j, j)) if new != old)
    if not changed:
        raise NotHere("; ".join(missing.values()))
    return Variant(new_t, new_j, config, changed, missing, "the other compile mode (Inductor max-autotune; XLA "
                                                           "autotune level)")


def _batch(factor: float) -> Callable[..., Variant]:
    def knob(t: CellSpec, j: CellSpec, config: MeasureConfig, params: Mapping[str, Any]) -> Variant:
        name = BATCH_PARAM.get(t.workload, "batch")
        if name not in params:
            raise NotHere(f"{t.workload} has no batch size")
        value = int(params[name] * factor)
        if value < 1:
            raise NotHere(f"{name} {params[name]} cannot be halved")
        return Variant(_over(t, **{name: value}), _over(j, **{name: value}), config, ("torch", "jax"),
                       what=f"{name} is {value}")
    return knob


def _dtype(t: CellSpec, j: CellSpec, config: MeasureConfig, params: Mapping[str, Any]) -> Variant:
    new = "bfloat16" if t.dtype == "float32" else "float32"
    return Variant(dataclasses.replace(t, dtype=new), dataclasses.replace(j, dtype=new), config, ("torch", "jax"),
                   what=f"both run in {new}")


def _again(t: CellSpec, j: CellSpec, config: MeasureConfig, params: Mapping[str, Any]) -> Variant:
    """No knob: the row's two bests measured again as they were, in the same sitting as the
    knobs. Where this does not repeat the stored verdict, a knob's flip cannot be told from the
    machine having changed since the stored run."""
    return Variant(t, j, config, (), what="nothing changed")


AGAIN = "again"
KNOBS: dict[str, Callable[..., Variant]] = {
    AGAIN: _again, "tf32": _tf32, "cuda-graphs": _graphs, "attention": _attention, "optimizer": _optimizer,
    "compile-mode": _compile_mode, "batch-x2": _batch(2), "batch-half": _batch(0.5), "dtype": _dtype,
}


def variants(row: Mapping[str, Any], plan: Sequence[CellSpec], config: MeasureConfig, knobs: Sequence[str],
             params: Callable[[CellSpec], Mapping[str, Any]]) -> dict[str, Variant | str]:
    """The row's variant for each knob, or why the knob is not here. ``plan``: the stored run's
    cells (the row's two bests are found there); ``params``: a spec's workload parameters."""
    specs = {s.key: s for s in plan if s.repeat == 0}
    t, j = specs.get(str(row.get("torch_cell"))), specs.get(str(row.get("jax_cell")))
    out: dict[str, Variant | str] = {}
    for name in knobs:
        if t is None or j is None:
            out[name] = "the stored verdict has no best on one side: nothing to change"
            continue
        try:
            v = KNOBS[name](t, j, config, params(t))
        except NotHere as why:
            out[name] = str(why)
            continue
        out[name] = v
    return out


def processes_of(v: Variant, n: int) -> list[CellSpec]:
    """Both sides' specs, ``n`` processes each, interleaved round by round as a run plans them."""
    sides = [s for s in (v.torch, v.jax) if s is not None]
    return [dataclasses.replace(s, repeat=r) for r in range(n) for s in sides]


NOT_MEASURED = "not measured"  # the knob exists here, but the study's --budget ran out before it
OUTCOME = {"tie": "stands", "lower": "flips", "higher": "flips", "noisy": "cannot say"}  # stats.decide's classes


def change(base: Mapping[str, Any], changed: Mapping[str, Any], base_rows: Sequence[Mapping[str, Any]],
           changed_rows: Sequence[Mapping[str, Any]], tested: int) -> tuple[Any, str | None]:
    """The change a knob made to a row's ratio, with its interval at 1 - 5%/``tested`` (the
    knobs the row tests), or None and why it cannot be measured."""
    for what, row, found in (("the stored row", base, base_rows), ("the changed row", changed, changed_rows)):
        for fw, name in FRAMEWORKS:
            if row.get(f"{fw}_processes", 0) < stats.MIN_PROCESSES:
                return None, (f"{what} has {row.get(f'{fw}_processes', 0)} clean {name} process(es); a change is "
                              f"measured from {stats.MIN_PROCESSES} a side")
    samples = [_process_samples(found, row[f"{fw}_cell"]) for row, found in ((base, base_rows),
                                                                                (changed, changed_rows))
               for fw, _ in FRAMEWORKS]
    confidence = 1.0 - stats.VERDICT_ALPHA / max(1, tested)
    return stats.compare_change(tuple(samples[:2]), tuple(samples[2:]), confidence), None


def _process_samples(found: Sequence[Mapping[str, Any]], cell: str) -> list[list[float]]:
    """A cell's clean processes' samples, as the verdict resamples them."""
    (row,) = figures.combine_repeats([r for r in vd.latest_processes(found) if vd.cell_id(r) == cell])
    return row["process_samples"]


def compare(base: Mapping[str, Any], changed: Mapping[str, Any] | None, v: Variant | str,
            skipped: str | None = None, moved: Any = None, why: str | None = None, tested: int = 1,
            threshold: float | None = None) -> dict[str, Any]:
    """One row x knob cell of the sensitivity table (``skipped``: why the knob was not measured;
    ``moved``: the change's Comparison, or None with ``why``; ``tested``: the knobs the row tests)."""
    if isinstance(v, str):
        return {"outcome": "not here", "why": v}
    if skipped is not None:
        return {"outcome": NOT_MEASURED, "why": skipped, "changed_sides": list(v.changed), "missing": v.missing,
                "what": v.what}
    if changed is None:
        return {"outcome": "cannot say", "why": "no verdict from the changed cells (a side failed: see its run)",
                "changed_sides": list(v.changed), "missing": v.missing, "what": v.what}
    out = {"verdict": changed["verdict"], "ratio": changed.get("ratio"), "ci_low": changed.get("ci_low"),
           "ci_high": changed.get("ci_high"), "reason": changed.get("reason"), "changed_sides": list(v.changed),
           "missing": v.missing, "what": v.what, "tested": tested}
    if moved is None:
        return {**out, "outcome": "cannot say", "why": why}
    decision = stats.decide(moved, stats.TIE_THRESHOLD if threshold is None else threshold)
    return {**out, "outcome": OUTCOME[decision], "moves": moved.ratio - 1.0,
            "change": {"ratio": moved.ratio, "ci_low": moved.ci_low, "ci_high": moved.ci_high,
                       "confidence": 1.0 - stats.VERDICT_ALPHA / max(1, tested)}}


def sentence(base: Mapping[str, Any], knobs: Mapping[str, Mapping[str, Any]]) -> str:
    """'PyTorch faster; unless both use TF32 (then a tie); stands with: dtype, batch-x2; not here: ...'"""
    again = knobs.get(AGAIN)
    changed = {name: k for name, k in knobs.items() if name != AGAIN}
    flips = [f"{k['what']} (then {k['verdict']}, the ratio {k['moves']:+.0%})" for k in changed.values()
             if k["outcome"] == "flips"]
    stands = [name for name, k in changed.items() if k["outcome"] == "stands"]
    unsure = [name for name, k in changed.items() if k["outcome"] == "cannot say"]
    absent = [name for name, k in changed.items() if k["outcome"] == "not here"]
    unmeasured = [name for name, k in changed.items() if k["outcome"] == NOT_MEASURED]
    text = base["verdict"]
    if again and again["outcome"] == "flips":
        text += (f" in the stored run, but measured again unchanged its ratio moved {again['moves']:+.0%} "
                 f"({again['verdict']}): the machine moved between the two, so no knob's move below is the knob's "
                 f"alone")
    elif again and again["outcome"] == "cannot say":
        text += " in the stored run; measured again unchanged, undecided"
    elif again and again["outcome"] == "stands":
        text += " (repeated when measured again)"
    elif again and again["outcome"] == NOT_MEASURED:
        text += " in the stored run; not measured again within the budget, so a flip below may be the machine's"
    if flips:
        text += ", unless " + "; or unless ".join(flips)
    if stands:
        text += f"; stands when changing {', '.join(stands)}"
    if unsure:
        text += f"; undecided after changing {', '.join(unsure)}"
    if absent:
        text += f"; not on this device or workload: {', '.join(absent)}"
    if unmeasured:
        text += f"; not measured within the budget: {', '.join(unmeasured)}"
    return text


def cost(plan: Mapping[str, Mapping[str, Variant | str]], processes: int) -> tuple[int, int]:
    """(variants measured, cell-processes) of a sensitivity plan."""
    measured = [v for row in plan.values() for v in row.values() if not isinstance(v, str)]
    return len(measured), sum(len(processes_of(v, processes)) for v in measured)


def check_knobs(names: Sequence[str]) -> list[str]:
    """The knobs to measure: those named (default: all), always after ``again``, which tells a
    knob's flip from the machine's drift."""
    for n in names:
        if n not in KNOBS:
            raise SpecError(f"unknown knob {n!r}; allowed: {', '.join(KNOBS)}")
    return [AGAIN, *dict.fromkeys(n for n in names if n != AGAIN)] if names else list(KNOBS)


def row_title(row: Mapping[str, Any]) -> str:
    over = ",".join(f"{k}={v}" for k, v in (row.get("overrides") or ()))
    return "/".join(str(x) for x in (row["workload"], row["preset"], row["phase"], row["device"], row["dtype"])) + \
        (f" [{over}]" if over else "") + (f" ({row['replay']})" if row.get("replay") else "")


@dataclass
class Plan:
    """What a sensitivity study of a stored run will measure: its verdict rows and each row's
    variant (or why not) for each knob."""

    run_id: str
    config: MeasureConfig
    base: list[dict[str, Any]]
    variants: dict[int, dict[str, Variant | str]]

    def cost(self) -> tuple[int, int]:
        return cost(self.variants, self.config.processes)


def plan(store, run_id: str, knobs: Sequence[str]) -> Plan:
    """The stored run's verdict rows and their variants, nothing measured yet."""
    info = store.cell_run(run_id)
    base = vd.verdicts(rows(store, run_id))
    if not base:
        raise SpecError(f"run {run_id} holds no verdict row to test")

    def params(spec: CellSpec) -> Mapping[str, Any]:
        return registry.workload(spec.workload).config(spec.preset, dict(spec.overrides)).as_dict()

    return Plan(run_id, info.measure_config, base,
                {i: variants(r, info.plan, info.measure_config, knobs, params) for i, r in enumerate(base)})


def run(store, run_id: str, knobs: Sequence[str], probe: Mapping[str, Any], executor, hooks=None,
        command: str | None = None, planned: Plan | None = None, budget_s: float | None = None
        ) -> tuple[list[dict[str, Any]], list[str]]:
    """Measure the run's verdict rows with each knob changed (``planned``: from ``plan``, else
    planned here); one run per knob (its cells' processes interleaved as every run's are).
    ``budget_s``: the wall seconds the knobs may take; a knob whose cells are expected to take
    more than what is left (each cell-process the median wall time of that cell's processes so
    far, in the stored run and the knobs before it) is not started, and its rows say so, and
    a knob's run adds no top-up past it. Returns one result per verdict row (its stored
    verdict, each knob's outcome, the sentence) and the ids of the runs it measured."""
    planned = planned or plan(store, run_id, knobs)
    config, base, plan_ = planned.config, planned.base, planned.variants
    changed: dict[tuple[int, str], Mapping[str, Any] | None] = {}
    found_of: dict[tuple[int, str], list] = {}
    skipped: dict[str, str] = {}
    budget = orchestrate.Budget(budget_s)
    walls = [(r["cell_key"], r.get("wall_s")) for r in rows(store, run_id)]
    measured_runs = []
    for knob in knobs:
        todo = {i: v for i, row in plan_.items() for k, v in row.items() if k == knob and not isinstance(v, str)}
        if not todo:
            continue
        specs = [s for v in todo.values() for s in processes_of(v, config.processes)]
        specs = sorted(dict.fromkeys(specs), key=lambda s: s.repeat)  # round by round, as a run plans them
        expected = orchestrate.look_cost(specs, walls)
        if not budget.allows(expected):
            skipped[knob] = (f"not measured: its {len(specs)} cell-processes would take about {expected:.0f} s, more "
                             f"than the {max(0.0, budget.left()):.0f} s left of --budget {budget_s:g} s")
            if hooks:
                hooks.on_note(f"knob {knob}: {skipped[knob]}")
            continue
        knob_config = next(iter(todo.values())).config
        if budget_s is not None:  # its top-ups stop where the study's budget does
            knob_config = dataclasses.replace(knob_config, budget_s=max(0.0, budget.left()))
        the_run = orchestrate.Run.start(store, specs, knob_config, probe, executor, False,
                                        f"{command or 'stackwars verdict ' + run_id + ' --sensitivity'} (knob {knob})",
                                        kind="sensitivity-cells")
        measured_runs.append(the_run.run_id)
        the_run.measure(hooks)
        found = rows(store, the_run.run_id)
        walls += [(r["cell_key"], r.get("wall_s")) for r in found]
        for i, v in todo.items():
            ids = {s.key for s in (v.torch, v.jax) if s is not None}
            mine = [r for r in found if vd.cell_id(r) in ids]
            verdicts = vd.verdicts(mine)
            changed[(i, knob)] = verdicts[0] if verdicts else None
            found_of[(i, knob)] = mine
    results = []
    stored = rows(store, run_id)
    for i, r in enumerate(base):
        measured_here = [k for k in knobs if changed.get((i, k)) is not None]
        per_knob = {}
        for k in knobs:
            moved, why = (change(r, changed[(i, k)], stored, found_of[(i, k)], len(measured_here))
                          if k in measured_here else (None, None))
            per_knob[k] = compare(r, changed.get((i, k)), plan_[i][k], skipped.get(k), moved, why,
                                  len(measured_here))
        results.append({"row": row_title(r), "machine": r["machine"], "verdict": r["verdict"], "ratio": r.get("ratio"),
                        "ci_low": r.get("ci_low"), "ci_high": r.get("ci_high"), "best_torch": r.get("best_torch"),
                        "best_jax": r.get("best_jax"), "knobs": per_knob, "sentence": sentence(r, per_knob)})
    return results, measured_runs


def save(store, run_id: str, knobs: Sequence[str], results: Sequence[Mapping[str, Any]], measured: Sequence[str],
         env: Mapping[str, Any], command: str | None = None) -> str:
    """The results as a study run (``study:sensitivity``, one row per verdict row): `show`, the
    report and `export` read it like any study."""
    study = store.create_run([], {"study": "sensitivity", "of": run_id, "knobs": list(knobs), "runs": list(measured)},
                             kind="study:sensitivity", command=command)
    session = store.start_session(study, env)
    store.add_study_rows(study, session, "sensitivity", run_id, results)
    return study
