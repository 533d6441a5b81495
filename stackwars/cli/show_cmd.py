"""stackwars show: a stored run as tables (the latest by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from stackwars.cli.common import DB_HELP, command, out
from stackwars.errors import SpecError
from stackwars.records import Env
from stackwars.report.tables import render
from stackwars.store.results import Store, rows


@command
def show(
    run_id: Optional[str] = typer.Argument(None, help="run to show (default: the latest)"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Print a stored run as the seed-style tables."""
    with Store(db, create=False) as store:
        run_id = run_id or store.latest_run_id()
        if run_id is None:
            raise SpecError(f"no runs stored in {store.path}")
        info = store.run(run_id)
        result_rows = rows(store, run_id)
        missing = len(store.missing(run_id))
    out.print(f"run {run_id} ({info.created_at}): {info.command or ''}", highlight=False)
    out.print(render(result_rows, Env(info.env).summary()))
    if missing:
        out.print(f"{missing} planned cell(s) not measured yet: `stackwars run --resume {run_id}`")
