"""stackwars export: stored results as CSV or JSON: every run's cells, or one run (its cells,
or the rows of a training or study run)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Optional

import typer

from stackwars import outputs
from stackwars.outputs import REPLACES
from stackwars.cli.common import DB_HELP, command
from stackwars.errors import SpecError
from stackwars.store.results import CELL_KINDS, Store, check_db, rows, screening_rows, study_rows

FORMATS = ("csv", "json")


def to_csv(result_rows: list[dict]) -> str:
    if not result_rows:
        return ""
    columns = list(dict.fromkeys(k for r in result_rows for k in r))  # every key any row has, in order
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in result_rows:
        # lists and dicts (raw samples, options) as JSON inside the cell; None as empty
        writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else ("" if v is None else v)
                         for k, v in r.items()})
    return buf.getvalue()


@command
def export(
    format: str = typer.Option("csv", "--format", "-f", help="csv or json"),
    run_id: Optional[str] = typer.Option(None, "--run", help="only this run (default: every run)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write here instead of stdout"+REPLACES),
    screening: bool = typer.Option(False, "--screening", help="a run's screening decisions (which cells went on "
                                                              "after one process each, and why) instead of its cells"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Export stored cells (raw samples included), or one run's rows, as CSV or JSON."""
    if format not in FORMATS:
        raise SpecError(f"unknown format {format!r}; allowed: {', '.join(FORMATS)}")
    path = check_db(db, create=False)
    if output is not None:
        outputs.check(output, "--output", [path])
    with Store(path, create=False) as store:
        kind = store.run(run_id).kind if run_id is not None else "cells"  # unknown run -> clear error
        if screening:  # every decision, kept or not (a cell's row says only why it was set aside: screened_out)
            if run_id is None or kind not in CELL_KINDS:
                raise SpecError("--screening exports one run of cells' screening decisions: give it with --run RUN")
            result_rows = [{"run_id": run_id, **d} for d in screening_rows(store, run_id)]
        else:
            result_rows = rows(store, run_id) if kind in CELL_KINDS else study_rows(store, run_id)
    text = to_csv(result_rows) if format == "csv" else json.dumps(result_rows, indent=1, default=str) + "\n"
    if output is None:
        outputs.emit(text)
    else:
        outputs.write(output, text, "--output")

