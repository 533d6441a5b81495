"""stackwars compare: two stored runs cell by cell, with a significance test on the stored
samples (pyperf / asv style); see ``stackwars.report.compare``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from stackwars import outputs
from stackwars.cli.common import DB_HELP, command, number, out, table_width
from stackwars.errors import SpecError
from stackwars.report import compare as cmp
from stackwars.verdict import runs
from stackwars.store.results import CELL_KINDS, Store, check_db, one_model_per_name, rows

FORMATS = ("table", "markdown", "csv", "json")


def _load(path: Path, run_id: str, which: str):
    with Store(path, create=False) as store:
        info = store.run(run_id)
        if info.kind not in CELL_KINDS:
            raise SpecError(f"run {which} {run_id} is a {info.kind} run; compare takes runs of measured cells "
                            f"({', '.join(CELL_KINDS)}); `stackwars runs` lists them")
        return info, rows(store, run_id)


@command
def compare(
    run_a: str = typer.Argument(..., help="the baseline run (`stackwars runs` lists them)"),
    run_b: str = typer.Argument(..., help="the run compared with it"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    db_b: Optional[Path] = typer.Option(None, "--db-b", help="run B's database, when it is another one "
                                                              "(another machine's results)"),
    threshold: float = typer.Option(0.05, "--threshold", help="smallest change called a regression or an "
                                                              "improvement, as a fraction"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression",
                                            help="exit 1 when a cell regressed or broke (for CI)"),
) -> None:
    """Compare two runs cell by cell: ratio of steady-state medians with a bootstrap 95% CI,
    regressions and improvements flagged, a difference within the noise called not
    significant, contended cells unreliable. Exit 0; with --fail-on-regression, 1 when any
    cell regressed or broke."""
    if format not in FORMATS:
        raise SpecError(f"unknown format {format!r}; allowed: {', '.join(FORMATS)}")
    number(threshold, "--threshold", low=0, high=0.99, low_inclusive=True)
    path_a = check_db(db, create=False)
    path_b = check_db(db_b, create=False, flag="--db-b") if db_b is not None else path_a
    info_a, rows_a = _load(path_a, run_a, "A")
    info_b, rows_b = _load(path_b, run_b, "B")
    one_model_per_name([*rows_a, *rows_b], f"runs {run_a} ({path_a}) and {run_b} ({path_b})")
    result = runs.compare_cells(rows_a, rows_b, threshold=threshold)
    if not any(r["verdict"] not in ("only in A", "only in B") for r in result):
        raise SpecError(f"runs {run_a} and {run_b} have no cell in common (same workload, preset, phase, backend, "
                        f"device, dtype and options); nothing to compare")
    diffs = runs.environment_differences(info_a.env, info_b.env, info_a.config, info_b.config)
    machine = runs.machine_state(rows_a, rows_b)
    machine_text = cmp.machine_line(machine)
    if format in ("csv", "json"):
        from stackwars.cli.export_cmd import to_csv
        outputs.emit(to_csv(result) if format == "csv" else json.dumps(
            {"run_a": run_a, "run_b": run_b, "threshold": threshold, "environment_differences": diffs,
             "machine": {**machine, "note": machine_text}, "cells": result}, indent=1, default=str) + "\n")
    else:
        title = f"A = {run_a} ({info_a.created_at[:16]}), B = {run_b} ({info_b.created_at[:16]}), " \
                f"threshold {threshold:.0%}"
        env_text = ("environments differ: " + "; ".join(diffs)) if diffs else (
            "same machine, libraries and settings" if machine["differs"] is None else
            "same machine fingerprint, libraries and settings; but the machine itself ran at another speed (below)")
        if format == "markdown":
            print(cmp.markdown(result, title) + f"\n{env_text}" + (f"\n\n{machine_text}" if machine_text else ""))
        else:
            out.print(cmp.render(result, title, table_width()), width=table_width())
            out.print(cmp.summary_line(result), highlight=False)
            out.print(env_text, highlight=False)
            if machine_text:
                out.print(f"[yellow]{machine_text}[/]", highlight=False)
    if fail_on_regression and any(r["verdict"] in ("regression", "broke") for r in result):
        raise typer.Exit(1)
