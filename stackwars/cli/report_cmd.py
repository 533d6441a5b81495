"""stackwars report: one self-contained HTML page and its Markdown twin from the results database."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from stackwars.cli.common import DB_HELP, command, err, writable_dir
from stackwars.errors import SpecError
from stackwars.store.results import Store, check_db


@command
def report(
    run_ids: Optional[list[str]] = typer.Argument(None, help="runs to report (default: every run; the latest "
                                                             "measurement of each cell)"),
    out_dir: Path = typer.Option(Path("report"), "--out", help="directory for report.html, report.md, figures/"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    ir: Optional[list[Path]] = typer.Option(None, "--ir", help="a `stackwars ir ... --out DIR` dump to excerpt "
                                                               "(repeatable)"),
) -> None:
    """Write report.html (self-contained: plots embedded, no network) and report.md: the runs,
    the environment, a decision guide generated from the data, the cells in the published
    table format, a speed-up heatmap, compile break-even, memory, every study and training,
    the profiles (their traces copied to traces/ beside the page) and memory anatomy."""
    from stackwars.report import build, page

    writable_dir(out_dir, "--out")
    for d in ir or ():
        if not (d / "summary.json").is_file():
            raise SpecError(f"--ir {d}: no summary.json there; give a directory written by `stackwars ir ... --out`")
    path = check_db(db, create=False)
    with Store(path, create=False) as store:
        data = build.collect(store, run_ids)
    if not data["runs"]:
        raise SpecError(f"{path} holds no runs; run `stackwars run ...` or a study first")
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out_dir.mkdir(parents=True, exist_ok=True)
    build.keep_traces(data.get("profiles") or [], out_dir)
    html_path, md_path = page.write(build.document(data, generated, ir or ()), out_dir)
    err.print(f"wrote {html_path} and {md_path} ({len(data['runs'])} runs, {len(data['cells'])} cells)")
