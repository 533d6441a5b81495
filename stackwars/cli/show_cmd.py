"""stackwars show: a stored run (the latest by default), as tables, Markdown, CSV or JSON;
stackwars runs: every stored run, one line each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from stackwars import outputs
from stackwars.cli.common import DB_HELP, command, out, table_width
from stackwars.errors import SpecError
from stackwars.records import Env
from stackwars.report import format as fmt
from stackwars.report.tables import markdown, render
from stackwars.store.results import CELL_KINDS, Store, check_db, merge_conflicts, rows, study_rows

FORMATS = ("table", "markdown", "csv", "json")


@command
def show(
    run_id: Optional[str] = typer.Argument(None, help="run to show (default: the latest run of cells, else the "
                                                     "latest run of any kind; `stackwars runs` lists them)"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown, csv or json"),
    profile: bool = typer.Option(False, "--profile", help="the profiles of the run's cells (`run --profile N`): "
                                                          "busy time, gaps, top kernels and host operators"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Print a stored run: cells as the seed-style tables, trainings and studies as theirs."""
    if format not in FORMATS:
        raise SpecError(f"unknown format {format!r}; allowed: {', '.join(FORMATS)}")
    if profile and format == "csv":
        raise SpecError("--profile prints table, markdown or json (its top-kernel lists do not fit a CSV)")
    path = check_db(db, create=False)
    with Store(path, create=False) as store:
        # an id given empty is an id given (Store.run refuses it), never the latest run nobody named
        run_id = run_id if run_id is not None else store.latest_run_id() or store.latest_run_id(kind=None)
        if run_id is None:
            raise SpecError(f"no runs stored in {store.path}")
        info = store.run(run_id)
        conflicts: list = []
        if info.kind in CELL_KINDS:
            result = rows(store, run_id)
            missing = len(store.missing(run_id))
            measured = [m for _, m in store.cells(run_id)]
            conflicts = merge_conflicts(store, run_id)
        elif profile:
            measured = [m for _, m in store.cells(run_id)]
        else:
            result = study_rows(store, run_id)
            missing = 0
    if profile:
        _show_profiles(run_id, measured, format)
        return
    if format in ("csv", "json"):
        from stackwars.cli.export_cmd import to_csv
        outputs.emit(to_csv(result) if format == "csv" else json.dumps(result, indent=1, default=str) + "\n")
        return
    header = f"run {run_id} ({info.kind}, {info.created_at})" + (f": `{info.command}`" if info.command else "")
    if info.kind == "study:control-flow":
        from stackwars.studies import control_flow
        result = [control_flow.row(m) for m in measured]  # its results are cells (report.build does the same)
    if info.kind != "cells":
        _show_study(info, result, header, format)
        return
    if format == "markdown":
        print(f"{header}\n\n{markdown(result, Env(info.env).summary())}")
    else:
        out.print(header, highlight=False)
        out.print(render(result, Env(info.env).summary(), width=table_width()), width=table_width())
    if missing:
        out.print(f"{missing} planned cell(s) not measured yet: `stackwars run --resume {run_id}`")
    if conflicts:
        out.print(f"{len(conflicts)} cell(s) a merge kept apart (another copy of this run measured their key "
                  f"otherwise; in no table or verdict): " + ", ".join(sorted({c['item_key'] for c in conflicts})))


def _plain(body) -> str:
    """Rich tables as plain text (for Markdown code blocks)."""
    console = fmt.text_console(table_width())
    console.print(body)
    return console.export_text()


def _show_profiles(run_id: str, measured, format: str) -> None:
    from stackwars.report.profiles import anatomy_rows, anatomy_table, profile_rows, profile_tables

    found, anatomy = profile_rows(measured), anatomy_rows(measured)
    if not found and not anatomy:
        raise SpecError(f"run {run_id} has no profiled cells and no train-step memory anatomy; measure with "
                        "`stackwars run ... --profile N` (train steps add their memory anatomy)")
    if format == "json":
        outputs.emit(json.dumps({"profiles": found, "memory_anatomy": anatomy}, indent=1, default=str) + "\n")
        return
    parts = [profile_tables(found, f"profiles · run {run_id}")] if found else []
    if anatomy:
        parts.append(anatomy_table(anatomy, f"memory anatomy of the train steps · run {run_id}"))
    from rich.console import Group
    body = Group(*parts)
    if format == "markdown":
        print(f"```\n{_plain(body)}```")
        return
    out.print(body, width=table_width())


def _show_study(info, result: list[dict[str, Any]], header: str, format: str) -> None:
    from stackwars.report import studies

    kind, config = info.kind, info.config
    title = f"{kind} · " + ", ".join(f"{k}={v}" for k, v in config.items()
                                     if k not in ("checksums", "data", "measure"))
    body = studies.study_view(kind, result, config, info.env, title)[0]
    if format == "markdown":  # the study tables as text; their rows in full: --format csv
        print(f"{header}\n\n```\n{_plain(body)}```")
        return
    out.print(header, highlight=False)
    out.print(body, width=table_width())


@command
def runs(
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    format: str = typer.Option("table", "--format", "-f", help="table or json"),
) -> None:
    """List the stored runs: id, kind, command, cells or rows, their statuses, date."""
    if format not in ("table", "json"):
        raise SpecError(f"unknown format {format!r}; allowed: table, json")
    path = check_db(db, create=False)
    with Store(path, create=False) as store:
        listed = store.runs()
    if format == "json":
        outputs.emit(json.dumps(listed, indent=1) + "\n")
        return
    if not listed:
        out.print(f"no runs stored in {path}")
        return
    table = Table(title=f"runs in {path}", title_justify="left")
    for c in ("run", "kind", "done", "statuses", "date", "command"):
        table.add_column(c, overflow="fold")
    for r in listed:
        done = f"{r['done']}/{r['planned']} cells" if r["kind"] in CELL_KINDS else f"{r['done']} rows"
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
        table.add_row(r["run_id"], r["kind"], done, statuses, r["created_at"][:19].replace("T", " "),
                      r["command"] or "")
    out.print(table, width=table_width())
