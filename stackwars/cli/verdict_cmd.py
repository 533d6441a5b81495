"""stackwars verdict: JAX or PyTorch, per workload, from stored runs; see ``stackwars.report.verdict``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from stackwars import stats
from stackwars import outputs
from stackwars.cli.common import DB_HELP, command, err, number, out, table_width
from stackwars.errors import SpecError
from stackwars.report import format as fmt
from stackwars import verdict as vd
from stackwars.report import verdict as view
from stackwars.store.results import CELL_KINDS, Store, check_db, one_model_per_name, rows

FORMATS = ("table", "markdown", "json")


def load(store: Store, run_ids: list[str] | None) -> tuple[list[str], list[dict[str, Any]], list, list]:
    """The named runs of measured cells (default: the latest), their rows, profiles and anatomy."""
    from stackwars.report.profiles import anatomy_rows, profile_rows

    if not run_ids:
        latest = store.latest_run_id()
        if latest is None:
            raise SpecError(f"no run of measured cells in {store.path}; `stackwars run ...` measures some")
        run_ids = [latest]
    found, measured = [], []
    for rid in dict.fromkeys(run_ids):
        info = store.run(rid)
        if info.kind not in CELL_KINDS:
            raise SpecError(f"run {rid} is a {info.kind} run; a verdict is drawn from runs of measured cells "
                            f"({', '.join(CELL_KINDS)}); `stackwars runs` lists them")
        found += rows(store, rid)
        measured += [m for _, m in store.cells(rid)]
    one_model_per_name(found, f"runs {', '.join(dict.fromkeys(run_ids))} of {store.path}")
    return list(dict.fromkeys(run_ids)), found, profile_rows(measured), anatomy_rows(measured)


def to_json(result: list[dict[str, Any]], run_ids: list[str], threshold: float | None, mixed: str | None = None) -> str:
    return json.dumps({"runs": run_ids, "threshold": threshold, "min_processes": stats.MIN_PROCESSES,
                       "mixed_machines": mixed, "verdicts": result}, indent=1, default=str) + "\n"


@command
def verdict(
    run_ids: Optional[list[str]] = typer.Argument(None, help="runs of measured cells (default: the latest); for a "
                                                             "cell in several, the latest run's processes count"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown or json"),
    threshold: Optional[float] = typer.Option(None, "--threshold",
                                              help="read \"same speed\" at this margin instead of the one each run "
                                                   "declared (run --margin): its two one-sided tests at 1/(1+t)..1+t"),
    aa: bool = typer.Option(False, "--aa", help="self-check instead: the same program set against itself, each "
                                               "cell's processes after its first in back-to-back pairs (what `run "
                                               "--aa` measures), each pair a round read as a verdict reads its "
                                               "rounds; counts same speed, no difference found, false verdicts "
                                               "and undecided"),
    sensitivity: bool = typer.Option(False, "--sensitivity",
                                     help="re-measure each verdict row's two bests with one knob changed at a time "
                                          "(new runs in the database, the same processes and statistics) and say "
                                          "which knobs flip it; the cost is printed before it starts"),
    knob: Optional[list[str]] = typer.Option(None, "--knob", "-k",
                                             help="with --sensitivity: only these knobs (default: all): "
                                                  "tf32, cuda-graphs, attention, optimizer, compile-mode, batch-x2, "
                                                  "batch-half, dtype; 'again' (the row re-measured unchanged, "
                                                  "which tells a flip from drift) always comes first"),
    budget: Optional[float] = typer.Option(None, "--budget",
                                           help="with --sensitivity: seconds the knobs may take; a knob whose cells "
                                                "would not fit in what is left, from the wall times of the same "
                                                "cells so far, is not measured and its rows say so"),
    explain: bool = typer.Option(False, "--explain", help="every row's details: each side's best with what was "
                                                         "kept out, processes and timing, compile pays, memory, "
                                                         "parity, why, energy, the whole reason, its command again "
                                                         "and the full legend (the table format only; the JSON and "
                                                         "Markdown always hold them)"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """JAX or PyTorch: per workload x preset x phase x dtype x device and machine, the best
    PyTorch backend against the best JAX backend, the ratio with its CI over processes (95%, or
    the level its look spent where the run added processes while undecided), and a verdict (JAX faster, PyTorch faster, same speed, no difference found, cannot say) with its reason."""
    if format not in FORMATS:
        raise SpecError(f"unknown format {format!r}; allowed: {', '.join(FORMATS)}")
    if explain and (format != "table" or aa or sensitivity):
        raise SpecError("--explain details the verdict's table; the JSON and Markdown hold every detail already, "
                        "and --aa and --sensitivity print their own tables")
    if threshold is not None:
        number(threshold, "--threshold", low=0, high=0.5)
    if knob and not sensitivity:
        raise SpecError("--knob chooses the knobs of --sensitivity; give --sensitivity too")
    if aa and sensitivity:
        raise SpecError("--aa (the same program against itself) and --sensitivity (each row with a knob changed) are "
                        "two checks of their own; give one of them")
    if sensitivity and threshold is not None:
        raise SpecError("--threshold does not apply to --sensitivity: a knob's verdict is read with the margin the "
                        "stored verdict was read with, so that a flip is the knob's and not the margin's; give one of "
                        "them")
    if budget is not None:
        if not sensitivity:
            raise SpecError("--budget limits the knobs of --sensitivity; give --sensitivity too")
        number(budget, "--budget (seconds)", low=0, low_inclusive=True)  # 0: every knob named, none measured
    if sensitivity:
        _sensitivity(run_ids, sensitivity_knobs(knob or []), format, db, budget)
        return
    path = check_db(db, create=False)
    with Store(path, create=False) as store:
        ids, found, profiles, anatomy = load(store, run_ids)
    if aa:
        _self_check(found, ids, threshold, format)
        return
    result = vd.verdicts(found, profiles, anatomy, threshold=threshold, db=str(db) if db else None)
    mixed = view.mixed_machines(found)
    if mixed:
        err.print(f"[yellow]{mixed}[/]", highlight=False)
    if format == "json":
        outputs.emit(to_json(result, ids, threshold, mixed))
    elif format == "markdown":
        outputs.emit(view.markdown(result, threshold))
    else:
        if not result:
            out.print(f"runs {', '.join(ids)} hold no cells to decide on", highlight=False)
            return
        if explain:
            out.print(view.render(result, table_width(), threshold), width=table_width(), crop=False)
        else:
            out.print("\n".join(view.brief(result, ids, table_width(), threshold, str(db) if db else None)), highlight=False, markup=False,
                      soft_wrap=True, width=max(table_width(), view.BRIEF_WIDTH))  # laid out by brief


def sensitivity_knobs(names: list[str]) -> list[str]:
    from stackwars import sensitivity as sens

    return sens.check_knobs(names)


def _sensitivity(run_ids: list[str] | None, knobs: list[str], format: str, db: Optional[Path],
                 budget: float | None = None) -> None:
    """Which knob flips which verdict (stackwars/sensitivity.py): the plan and its cost first,
    then one run a knob, then the rows x knobs table and a sentence a row."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from stackwars import orchestrate, runner, sensitivity as sens
    from stackwars.cli.common import command_line, exit_code, interruptible, interruption, waiting
    from stackwars.executors import Serial
    from stackwars.harness import env as envmod
    from stackwars.report import studies

    if run_ids and len(run_ids) > 1:
        raise SpecError("--sensitivity tests the verdict of one run; name one")
    path = check_db(db)  # it writes: the knobs' runs and the study's rows
    with Store(path, create=False, on_wait=waiting) as store:
        ids = load(store, run_ids)[0]
        planned = sens.plan(store, ids[0], knobs)
        variants, cells = planned.cost()
        floor = orchestrate.estimate_s(range(cells), planned.config)
        err.print(f"sensitivity of run {ids[0]}: {len(planned.base)} verdict row(s) x {len(knobs)} knob(s): "
                  f"{variants} changed row(s) to measure, {cells} cell-processes ({planned.config.processes} a "
                  f"side), at least {floor / 60:.1f} min" + (f"; --budget {budget:g} s: a knob that no longer fits "
                                                               f"is left out and said so" if budget is not None else ""),
                  highlight=False)
        probe = runner.probe_machine(False)
        try:
            with interruptible(), Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                           MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                                           transient=True) as progress:
                task = progress.add_task("knobs", total=cells)
                hooks = orchestrate.Hooks(
                    on_start=lambda spec: progress.update(task, description=spec.key),
                    on_done=lambda m: progress.advance(task),
                    on_note=lambda text: progress.console.print(f"[yellow]{text}[/]", highlight=False),
                    on_more=lambda n: progress.update(task, total=progress.tasks[task].total + n))
                results, measured = sens.run(store, ids[0], knobs, probe, Serial(), hooks, command_line(), planned,
                                             budget)
        except KeyboardInterrupt as exc:
            err.print(f"\n{interruption(exc)}: the knobs' finished cells are stored in their runs")
            raise typer.Exit(exit_code(exc))
        study = sens.save(store, ids[0], knobs, results, measured, envmod.fingerprint(None, probe), command_line())
    err.print(f"stored as run {study} (`stackwars show {study}`); the knobs' cells: "
              + (f"runs {', '.join(measured)}" if measured else "none measured (each row says why)"), highlight=False)
    if format == "json":
        outputs.emit(json.dumps({"run": ids[0], "knobs": knobs, "study": study, "runs": measured,
                                 "rows": results}, indent=1, default=str) + "\n")
        return
    if format == "markdown":
        outputs.emit(studies.sensitivity_markdown(results))
        return
    out.print(studies.sensitivity_table(results, f"Which knob flips the verdict of run {ids[0]}"), width=table_width())


def _self_check(found: list[dict[str, Any]], ids: list[str], threshold: float | None, format: str) -> None:
    every = vd.self_check(found, threshold)
    checks = [c for c in every if c["look"] >= 1]  # a look's pairs or more
    # what was found: the back-to-back pairs measured, those that count, and why the others do not
    left: dict[str, int] = {}
    for c in every:
        for why, n in c["pairs_left_out"].items():
            left[why] = left.get(why, 0) + n
    found_pairs = (f"{sum(c['pairs_measured'] for c in every)} back-to-back pair(s) measured in {len(every)} cell(s), "
                   f"{sum(c['pairs_counted'] for c in every)} counted"
                   + (" (left out: " + ", ".join(f"{n} {why}" for why, n in left.items()) + ")" if left else "")
                   + (f"; {len(every) - len(checks)} cell(s) short of a look's pairs" if len(every) > len(checks)
                      else ""))
    if not checks:
        raise SpecError(f"runs {', '.join(ids)} have no cell with a look's back-to-back pairs of clean processes "
                        f"after its first ({found_pairs if every else 'no pair measured'}); the self-check sets each "
                        f"cell against itself, a pair a round (run ... --aa measures them: --processes N gives N "
                        f"pairs a chosen cell, and more where pairs were busy)")
    counts = {w: sum(c["word"] == w for c in checks) for w in (vd.SAME, vd.NO_DIFFERENCE, "JAX faster",
                                                                 "PyTorch faster", "cannot say")}
    false = counts["JAX faster"] + counts["PyTorch faster"]
    summary = (f"{len(checks)} same-program comparisons (paired rounds: back-to-back processes of a cell): "
               f"{counts[vd.SAME]} same speed, {counts[vd.NO_DIFFERENCE]} no difference found, {false} false "
               f"verdict(s) ({false / len(checks):.1%}), {counts['cannot say']} too wide to decide")
    summary += f"; {found_pairs}"
    if format == "json":
        outputs.emit(json.dumps({"runs": ids, "threshold": threshold, "summary": summary, "counts": counts,
                                 "pairs": {"measured": sum(c["pairs_measured"] for c in every),
                                           "counted": sum(c["pairs_counted"] for c in every), "left_out": left},
                                 "checks": checks}, indent=1, default=str) + "\n")
        return
    bullet = "- " if format == "markdown" else ""
    for c in checks:
        level = f", {fmt.level(c['confidence'])}" if c.get("confidence") else ""
        print(f"{bullet}{c['table']} · {c['backend']} ({c['processes'][0]} pairs): "
              f"{c['ratio']:.3f} ({c['ci_low']:.3f}-{c['ci_high']:.3f}{level}) {c['word']}")
    print(f"\n{summary}")
