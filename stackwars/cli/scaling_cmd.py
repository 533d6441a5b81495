"""stackwars study scaling: data-parallel train steps over 1, 2, 4... devices.

Launched here (``--launcher local``, the default): each cell starts its own processes, JAX's
worker (one per host) or torchrun (one per host). Launched by someone else (``--launcher
external``): every process of an existing job runs this command, joins the job's process
group (torchrun's environment; ``jax.distributed``), measures at the job's device count, and
process 0 stores the cells, with every rank's figures, in one results database.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from stackwars import runner
from stackwars.cli.common import (DB_HELP, command, command_line, err, exit_code, interruptible, out,
                                  writable_dir)
from stackwars import outputs
from stackwars.cli.study_cmd import _interrupted, _store
from stackwars.errors import SpecError, Unsupported
from stackwars.harness import env as envmod
from stackwars.records import Env
from stackwars.report import format as fmt
from stackwars.report import studies as report
from stackwars.store.results import check_db

LAUNCHERS = ("local", "external")


@command
def scaling(
    workload: str = typer.Argument(..., help="gpt2 or mlp-mnist"),
    preset: str = typer.Option("tiny", "--preset", "-p"),
    devices: Optional[str] = typer.Option(None, "--devices",
                                          help="device counts, comma-separated (default 1,2,4; external: the job's)"),
    strategy: Optional[list[str]] = typer.Option(None, "--strategy", "-s",
                                                 help="dp, fsdp, shard_map, pmap (default: dp and fsdp)"),
    framework: Optional[list[str]] = typer.Option(None, "--framework", help="jax and/or torch (default: both)"),
    scaling_: Optional[list[str]] = typer.Option(None, "--scaling", help="strong and/or weak (default: both)"),
    per_device_batch: Optional[int] = typer.Option(None, "--per-device-batch",
                                                   help="examples per device (default: the preset's batch)"),
    steps: int = typer.Option(20, "--steps", help="timed steady steps per cell"),
    warmup: int = typer.Option(3, "--warmup", help="untimed steps after the first"),
    hosts: int = typer.Option(1, "--hosts", help="processes standing for hosts on this machine (jax.distributed, "
                                                 "torchrun --nnodes)"),
    launcher: str = typer.Option("local", "--launcher", help="local: start the processes; external: this process "
                                                             "is one rank of a job torchrun / srun started"),
    coordinator: Optional[str] = typer.Option(None, "--coordinator",
                                              help="external JAX: process 0's HOST:PORT (default: detected)"),
    num_processes: Optional[int] = typer.Option(None, "--num-processes", help="external JAX: processes in the job"),
    process_id: Optional[int] = typer.Option(None, "--process-id", help="external JAX: this process's index"),
    device: str = typer.Option("cpu", "--device", help="cpu (simulated devices) or cuda (the visible GPUs)"),
    seed: int = typer.Option(0, help="weights and batch"),
    timeout: float = typer.Option(900.0, help="per cell, seconds (local launcher)"),
    out_dir: Path = typer.Option(Path("study-results") / "scaling", "--out", help="PNG plot and the rows as JSON"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Data-parallel training steps over 1, 2, 4... devices: JAX sharding (jit + NamedSharding,
    shard_map, pmap) against DDP and FSDP2 under torchrun; time, memory, communication, parity."""
    from stackwars.cli.common import seed as check_seed
    from stackwars.parse import positive_ints

    if per_device_batch is not None and per_device_batch < 1:
        raise SpecError(f"--per-device-batch must be a positive integer, got {per_device_batch} (leave it out for "
                        f"the workload's default)")
    from stackwars.studies import scaling as study
    from stackwars.studies.scaling import sweep

    if device not in ("cpu", "cuda"):
        raise SpecError(f"unknown device {device!r}; allowed: cpu, cuda")
    if launcher not in LAUNCHERS:
        raise SpecError(f"unknown launcher {launcher!r}; allowed: {', '.join(LAUNCHERS)}")
    frameworks = framework or list(study.FRAMEWORKS)
    counts = positive_ints(devices, "--devices", "device counts") if devices else None
    job: dict[str, Any] = {}
    if launcher == "external":
        counts, hosts, job = _external_job(frameworks, counts, coordinator, num_processes, process_id)
    counts = counts or [1, 2, 4]
    if counts[-1] > 64:
        raise SpecError(f"--devices: at most 64 devices, got {counts[-1]}")
    for flag, v, low in (("--steps", steps, 1), ("--warmup", warmup, 0), ("--hosts", hosts, 1)):
        if v < low:
            raise SpecError(f"{flag} must be at least {low}, got {v}")
    if not 0 < timeout < float("inf"):
        raise SpecError(f"--timeout must be a positive number of seconds, got {timeout}")
    check_seed(seed)
    writable_dir(out_dir, "--out")
    check_db(db)
    items = study.plan(workload, preset, counts, strategy or ["dp", "fsdp"], frameworks,
                       scaling_ or list(study.SCALINGS), per_device_batch, hosts)
    items = [{**i, "device": device, "seed": seed, "steps": steps, "warmup": warmup, "launcher": launcher, **job}
             for i in items]
    lead = not job or job.get("rank", 0) == 0  # the process that reports and stores
    env = envmod.fingerprint(None, runner.probe_machine(False) if lead else {})
    visible = len(env.get("gpus") or [])
    if device == "cuda" and visible == 0:
        raise Unsupported("--device cuda: NVML sees no GPU on this machine")
    simulated = device == "cpu"
    config = {"study": "scaling", "workload": workload, "preset": preset, "devices": counts, "hosts": hosts,
              "launcher": launcher, "strategies": strategy or ["dp", "fsdp"], "steps": steps, "warmup": warmup,
              "seed": seed, "device": device, "simulated_devices": simulated}
    rows: list[dict[str, Any]] = []
    try:
        with interruptible():
            sweep.measure(items, timeout, visible if launcher == "local" else None, rows,
                          _print_row if lead else None)
    except KeyboardInterrupt as exc:
        if not lead:
            raise typer.Exit(exit_code(exc))
        study.efficiency(rows)
        _interrupted(exc, "scaling", [{"backend": r["backend"], "variant": r["variant"]} for r in rows], rows,
                     config, env, db)
    if not lead:
        return
    study.efficiency(rows)
    from stackwars.harness.settings import available_cpus
    notes = study.findings(rows, simulated, len(available_cpus()))
    run_id = _store("scaling", [{"backend": r["backend"], "variant": r["variant"]} for r in rows], rows, config,
                    env, db)
    title = (f"scaling: {workload} {preset} train step ({device}{', simulated devices' if simulated else ''}"
             f"{f', {hosts} hosts' if hosts > 1 else ''}{', launched externally' if job else ''})")
    out.print(report.scaling_tables(rows, title, notes))
    out.print(f"Environment: {Env(env).summary()}", style="dim", highlight=False)
    from stackwars.report import plots
    out_dir.mkdir(parents=True, exist_ok=True)
    png = plots.scaling(rows, out_dir, f"{workload}-{preset}")
    rows_file = out_dir / f"scaling-{workload}-{preset}.json"
    outputs.write(rows_file, json.dumps({"run_id": run_id, "command": command_line(), "rows": rows,
                                        "findings": notes, "env": env}, indent=1, default=str))
    err.print(f"run {run_id}; wrote {png} and {rows_file}")
    if any(r["status"] in ("error", "timeout", "parity_fail") for r in rows):
        raise typer.Exit(1)


def _external_job(frameworks, counts, coordinator, num_processes, process_id):
    """The job this process belongs to: its device count, host count and this rank."""
    if len(frameworks) != 1:
        raise SpecError("--launcher external runs one framework per job: give --framework torch (under torchrun) "
                        "or --framework jax (one process per host)")
    if frameworks[0] == "torch":
        missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
        if missing:
            raise SpecError(f"--launcher external with torch: {', '.join(missing)} not set; start this command "
                            f"under torchrun (or srun exporting them)")
        world = int(os.environ["WORLD_SIZE"])
        if counts and counts != [world]:
            raise SpecError(f"--devices {','.join(map(str, counts))}: the job has {world} ranks")
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        return [world], max(1, world // local), {"rank": int(os.environ["RANK"])}
    if not counts or len(counts) != 1:
        raise SpecError("--launcher external with jax: give the job's total device count, --devices N")
    if coordinator is not None and (num_processes is None or process_id is None):
        raise SpecError("--coordinator needs --num-processes and --process-id")
    if num_processes is not None and (num_processes < 1 or counts[0] % num_processes):
        raise SpecError(f"--num-processes {num_processes} must divide --devices {counts[0]}")
    if process_id is not None and not 0 <= process_id < (num_processes or 1):
        raise SpecError(f"--process-id {process_id} must be in [0, {num_processes})")
    return counts, num_processes or 1, {"rank": process_id or 0, "coordinator": coordinator,
                                        "process_id": process_id}


def _print_row(r: dict[str, Any]) -> None:
    err.print(f"{r['status']:>11} {r['framework']} {r['strategy']} N={r['devices']} {r['scaling']}: "
              f"{fmt.seconds(r['step_median_s'])} per step"
              + (f" ({(r['error'] or '').splitlines()[0][:120]})" if r["status"] != "ok" else ""), highlight=False)
