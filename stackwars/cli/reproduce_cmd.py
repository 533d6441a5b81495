"""stackwars reproduce: every published study at the device's sizes, resumable, then the report."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from stackwars.cli.common import (EXECUTOR_OPTION, GPUS_OPTION, MAX_JOBS_OPTION, RAY_ADDRESS_OPTION, SHARED_DIR_OPTION,
                                  SLURM_PARTITION_OPTION, command, err, executor_choice, out,
                                  writable_dir)
from stackwars.errors import SpecError
from stackwars.harness.settings import available_cpus

OUTPUTS = ("mnist", "control-flow", "stream", "vmap", "scaling")  # steps whose command takes --out


@command
def reproduce(
    device: str = typer.Option("cpu", "--device", help="cpu (small sizes) or cuda (the published sizes)"),
    budget: Optional[float] = typer.Option(None, "--budget", help="minutes; steps that would start later are "
                                                                  "left for the next invocation"),
    out_dir: Path = typer.Option(Path("reproduce"), "--out", help="database, logs, study outputs and the report"),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="MNIST directory (default: STACKWARS_DATA_DIR "
                                                                     "or download)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan and what is already done; run nothing"),
    executor: str = EXECUTOR_OPTION,
    gpus: Optional[str] = GPUS_OPTION,
    ray_address: Optional[str] = RAY_ADDRESS_OPTION,
    shared_dir: Optional[Path] = SHARED_DIR_OPTION,
    slurm_partition: Optional[str] = SLURM_PARTITION_OPTION,
    max_jobs: Optional[int] = MAX_JOBS_OPTION,
) -> None:
    """Run every study of ../shared/STUDIES.md at the sizes that fit the device, into one
    database (OUT/results.db), resumable (OUT/reproduce-state.json), then write the report
    (OUT/report/) that sets the published figures beside ours."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from stackwars import reproduce as rp

    if device not in ("cpu", "cuda"):
        raise SpecError(f"unknown device {device!r}; allowed: cpu, cuda")
    if budget is not None and not 0 < budget < float("inf"):
        raise SpecError(f"--budget must be a positive number of minutes, got {budget}")
    if data_dir is not None and not data_dir.is_dir():
        raise SpecError(f"--data-dir {data_dir} is not a directory")
    writable_dir(out_dir, "--out")
    # where the cells of the sweeping steps run: checked here, once, before any step starts
    choice = executor_choice(executor, gpus, ray_address, shared_dir, slurm_partition, max_jobs)
    choice.make(600.0, available_cpus())
    if executor == "gpu-pool" and device != "cuda":
        raise SpecError(f"--executor gpu-pool places one cell per GPU; --device {device}'s cells run one at a time "
                        f"on this host (leave --executor out, or give --device cuda)")
    data = str(data_dir) if data_dir else os.environ.get("STACKWARS_DATA_DIR")
    steps = rp.plan(device, data, choice.args())
    state_path = out_dir / "reproduce-state.json"
    if dry_run:
        state = rp.load_state(state_path, lambda text: err.print(f"[yellow]warning:[/] {text}", highlight=False),
                              keep_aside=False)  # a dry run writes nothing, and moves nothing
        for s in steps:
            status = state.get(s.name, {}).get("status", "to do")
            out.print(f"{s.name:>13}  ~{s.estimate_min:g} min  [{status}]  {s.answers}\n"
                      f"               `stackwars {' '.join(s.args)}`"
                      + (f"\n               planned for this machine: {s.note}" if s.note else ""),
                      highlight=False, markup=False)
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(exist_ok=True)
    db = out_dir / "results.db"

    def run_step(step: rp.Step) -> tuple[int, float]:
        args = list(step.args) + ["--db", str(db)]
        if step.name in OUTPUTS:
            args += ["--out", str(out_dir / "outputs" / step.name)]
        t0 = time.monotonic()
        with open(out_dir / "logs" / f"{step.name}.log", "w") as log:
            log.write((f"# planned for this machine: {step.note}\n" if step.note else "")
                      + f"$ stackwars {' '.join(args)}\n")
            log.flush()
            code = subprocess.run([sys.executable, "-m", "stackwars", *args], stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "200"}).returncode
        return code, time.monotonic() - t0

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=err) as progress:
        task = progress.add_task("reproduce", total=len(steps))

        for s in steps:
            if s.note:  # what a model's memory changed in the plan, said before anything runs
                progress.console.print(f"{s.name}: {s.note}", highlight=False, markup=False)

        def on_step(step: rp.Step, status: str) -> None:
            if status == "running":
                progress.update(task, description=f"{step.name}: {step.answers[:60]}")
            else:
                progress.advance(task)
                progress.console.print(f"{step.name}: {status}", highlight=False, markup=False)

        state = rp.execute(steps, state_path, budget * 60 if budget else None, run_step, on_step=on_step,
                           on_warning=lambda text: progress.console.print(f"[yellow]warning:[/] {text}",
                                                                         highlight=False))
    from stackwars.report import build, page
    from stackwars.store.results import Store
    if not db.exists():
        raise SpecError("no step produced results; see the logs under " + str(out_dir / "logs"))
    with Store(db, create=False) as store:
        collected = build.collect(store)
    html_path, _ = page.write(build.document(collected, datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
                              out_dir / "report")
    left = [n for n, s in state.items() if s.get("exit_code") not in rp.FINISHED]
    err.print(f"report: {html_path}" + (f"; not finished: {', '.join(left)} (run again to continue)" if left else ""))
    bad = rp.failed(state)
    if bad:  # the report is written either way; the exit status says a step did not end cleanly
        err.print(f"[red]{len(bad)} step(s) did not end with exit 0:[/] {', '.join(bad)}; their logs are under "
                  f"{out_dir / 'logs'}: exit status 1", highlight=False)
        raise typer.Exit(1)
