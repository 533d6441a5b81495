"""stackwars report: one self-contained HTML page and its Markdown twin from the results database."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from stackwars import outputs
from stackwars.cli.common import DB_HELP, command, err, exit_code, interruptible, interruption, writable_dir
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

    writable_dir(out_dir, "--out", dirs=("figures", "traces"))
    for d in ir or ():
        if not (d / "summary.json").is_file():
            raise SpecError(f"--ir {d}: no summary.json there; give a directory written by `stackwars ir ... --out`")
    path = check_db(db, create=False)
    if out_dir.exists():
        for name in ("report.html", "report.md"):  # the page and its twin may not replace the database
            outputs.check(out_dir / name, "--out", [path])
    with Store(path, create=False) as store:
        data = build.collect(store, run_ids)
    if not data["runs"]:
        raise SpecError(f"{path} holds no runs; run `stackwars run ...` or a study first")
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    created = not out_dir.exists()
    try:
        with interruptible():
            out_dir.mkdir(parents=True, exist_ok=True)
            build.keep_traces(data.get("profiles") or [], out_dir)
            html_path, md_path = page.write(build.document(data, generated, ir or ()), out_dir)
    except (KeyboardInterrupt, Exception) as exc:
        if created:  # a folder this command made holds nothing worth keeping if it did not finish
            shutil.rmtree(out_dir, ignore_errors=True)
        if isinstance(exc, KeyboardInterrupt):
            err.print(f"{interruption(exc)}: no report written" + (f"; {out_dir} removed" if created else
                                                                     f"; files already in {out_dir} were kept"))
            raise typer.Exit(exit_code(exc))
        raise
    err.print(f"wrote {html_path} and {md_path} ({len(data['runs'])} runs, {len(data['cells'])} cells)")
