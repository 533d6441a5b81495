"""stackwars merge: other results databases' runs into this one (another machine's, a cluster
node's), each run keeping its machine; nothing lost, nothing duplicated, all or nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from stackwars import outputs
from stackwars.cli.common import DB_HELP, command, err, waiting
from stackwars.errors import SpecError
from stackwars.store.results import Store, check_db


@command
def merge(
    sources: list[Path] = typer.Argument(..., help="results databases to merge in"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP + "; the database merged into (created if absent)"),
) -> None:
    """Add every run, session, cell, study row and peak of SOURCES that the database lacks.

    A run in both gains only what it lacks, so merging twice adds nothing, and the shares of
    one run measured on two machines come together. All sources are merged in one
    transaction: a run id that names different runs, or a record that cannot be read, in any
    source is refused (exit 2) and nothing is written (a database this command created is
    removed)."""
    target = check_db(db)
    checked = []
    for source in sources:
        path = check_db(source, create=False, flag="source")
        if outputs.same_file(path, target):
            raise SpecError(f"source {source} is the database merged into (--db); give another")
        checked.append(path)
    with Store(target, on_wait=waiting) as store:  # a refused merge removes a target it created (command)
        for path, added in zip(checked, store.merge(checked)):
            apart = added.pop("cells_kept_apart", 0)
            err.print(f"{path}: added " + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in added.items())
                      + f" to {target}", highlight=False)
            if apart:
                err.print(f"[yellow]{path}: {apart} cell(s) of a run here were measured otherwise in it (two copies of "
                          f"the run resumed apart): each key keeps the record already here, and the other is kept "
                          f"apart as a merge conflict (`stackwars show RUN` names them), in no verdict[/]",
                          highlight=False)
