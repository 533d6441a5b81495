"""stackwars run: measure cells (workloads x presets x phases x backends x devices x dtypes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from stackwars import orchestrate, outputs, registry, runner, stats
from stackwars.outputs import REPLACES
from stackwars.cli.common import (EXECUTOR_OPTION, GPUS_OPTION, MAX_JOBS_OPTION, RAY_ADDRESS_OPTION, SHARED_DIR_OPTION,
                                  SLURM_PARTITION_OPTION, waiting, DB_HELP, PROFILE_DIR_HELP, PROFILE_HELP,
                                  backend_names, command, command_line, err, executor_args, exit_code, interruptible,
                                  interruption, make_executor, number, out, profile_settings, seed as check_seed,
                                  table_width, writable_dir)
from stackwars.parse import assignments
from stackwars.errors import SpecError
from stackwars.records import CellSpec, Env, MeasureConfig, Measurement
from stackwars.report import format as fmt
from stackwars.cli import verdict_cmd
from stackwars.report import verdict as vd
from stackwars.report.tables import render
from stackwars.store.results import Store, StoreWriteError, check_db, rows


def _progress_line(m: Measurement) -> str:
    row = m.to_row()
    colour = "green" if m.status == "ok" else "red"
    what = (f"median {fmt.seconds(row['steady_median_s'])}, first {fmt.seconds(row['first_call_s'])}"
            if row["steady_median_s"] is not None else (m.error or "").splitlines()[0][:120] if m.error else "")
    if row.get("contended"):
        what += f"  [yellow]contended: others took {row['contention']:.0%} of its CPUs[/]"
    return f"[{colour}]{m.status:>11}[/] {m.spec.key}  {what}"


DEFAULT_PROCESSES = runner.DEFAULT_PROCESSES


@command
def run(
    ctx: typer.Context,
    workloads: Optional[list[str]] = typer.Argument(None, help="workloads to measure (see `stackwars list`)"),
    preset: list[str] = typer.Option(["small"], "--preset", "-p", help="preset(s): tiny, small, paper"),
    phase: list[str] = typer.Option(["forward"], "--phase", help="phase(s): forward, train-step"),
    backend: Optional[list[str]] = typer.Option(None, "--backend", "-b",
                                                help="backend(s); default: every default backend available here"),
    device: list[str] = typer.Option(["cpu"], "--device", help="cpu or cuda"),
    dtype: list[str] = typer.Option(["float32"], "--dtype", help="float32 or bfloat16"),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="override a preset parameter: KEY=VALUE"),
    compile_mode: Optional[str] = typer.Option(None, "--compile-mode",
                                               help="torch.compile mode: default, reduce-overhead, max-autotune, ..."),
    fullgraph: Optional[bool] = typer.Option(None, "--fullgraph/--no-fullgraph", help="torch.compile fullgraph"),
    torch_optimizer: Optional[str] = typer.Option(None, "--torch-optimizer",
                                                  help="train steps on PyTorch backends: fast (the default: the "
                                                       "fused optimizer in eager modes, its step compiled under "
                                                       "torch.compile, as PyTorch's own guidance has it), default "
                                                       "(PyTorch's rule: for-loop on the CPU, foreach on CUDA), "
                                                       "for-loop, foreach, fused, or compiled (the step compiled in "
                                                       "any mode)"),
    xla_autotune_level: Optional[int] = typer.Option(None, "--xla-autotune-level",
                                                     help="JAX backends: XLA's GPU autotuning level 0-4 "
                                                          "(default: XLA's, 4; 0 = off)"),
    xla_command_buffers: Optional[str] = typer.Option(None, "--xla-command-buffers",
                                                      help="JAX backends on CUDA: on or off, XLA's command buffers "
                                                           "(CUDA graphs) for the cell (default: XLA's, on)"),
    stablehlo: Optional[Path] = typer.Option(None, "--stablehlo",
                                             help="torch-mlir-xla: run this exported StableHLO file (from `stackwars ir "
                                                  "... --framework torch --stage stablehlo`) instead of exporting"),
    timeout: float = typer.Option(600.0, "--timeout", help="per-cell wall-clock limit, seconds"),
    warmup: int = typer.Option(3, help="warm-up calls after the second call"),
    min_samples: int = typer.Option(10, help="steady state: at least this many samples"),
    min_time: float = typer.Option(1.0, help="steady state: at least this many seconds of sampling per cell, "
                                             "spread over its processes"),
    max_samples: int = typer.Option(100_000, help="steady state: stop at this many samples"),
    processes: int = typer.Option(DEFAULT_PROCESSES, "--processes", "--repeat",
                                  help="measure every cell in N fresh processes, interleaved across backends (A B C "
                                       "A B C ...); --min-time is spread over them. The verdict needs 3 or more: "
                                       "its confidence interval is bootstrapped over processes"),
    max_processes: Optional[int] = typer.Option(None, "--max-processes",
                                                help="a verdict that cannot decide (a process measured while the "
                                                     "machine was busy, a CI too wide) measures its two best cells "
                                                     "in more processes, once, up to N a cell (default: twice "
                                                     "--processes; equal to --processes: never)"),
    budget: Optional[float] = typer.Option(None, "--budget",
                                           help="seconds the run may take: while a verdict cannot decide, a look of "
                                                "more processes starts only if its estimate fits what is left (the "
                                                f"planned processes always run); with it, --max-processes defaults "
                                                f"to {stats.BUDGET_LOOKS}x --processes. Each look spends a share of the "
                                                "verdict's 5% error, so stopping when decided stays honest"),
    timing: Optional[str] = typer.Option(None, "--timing",
                                         help="how every cell's steady state is timed, both sides of every "
                                              "comparison alike: throughput (blocks of 2+ back-to-back calls lasting "
                                              "--min-block-time, one sync a block; the default) or latency (one call "
                                              "a sync; the default with --flush-l2)"),
    min_block_time: float = typer.Option(1e-3, "--min-block-time",
                                         help="throughput timing: a block of calls lasts at least this (and holds "
                                              "at least 2 calls)"),
    threads: Optional[int] = typer.Option(None, help="CPU threads for both frameworks (default: all available)"),
    matmul_precision: str = typer.Option("float32", help="float32 (exact) or tf32, applied to both frameworks"),
    warm_cache: Optional[Path] = typer.Option(None, "--warm-cache",
                                              help="reuse this compile-cache directory (default: the run's own, per "
                                                   "cell: its first process cold, its later ones warm from it)"),
    cold_every_process: bool = typer.Option(False, "--cold-every-process",
                                            help="every process of a cell starts from empty compile caches (slower: "
                                                 "each pays the cold compile; first-call figures come from cold "
                                                 "processes either way)"),
    memory_limit: Optional[float] = typer.Option(None, "--memory-limit",
                                                 help="GiB of RSS per worker before it is killed as oom "
                                                      "(default: 90% of physical memory)"),
    seed: int = typer.Option(0, help="numpy seed for inputs and weights"),
    parity: str = typer.Option("auto", "--parity",
                               help="auto: the float64 reference (computed once per run) where it fits, else the "
                                    "other framework's outputs; reference: always the float64 reference; peer: "
                                    "always compare backends with each other"),
    flush_l2: bool = typer.Option(False, "--flush-l2",
                                  help="write a buffer larger than the last-level cache (GPU: 256 MiB; CPU: twice "
                                       "the LLC) before every timed call, outside the clock; one call per sample"),
    energy: bool = typer.Option(True, "--energy/--no-energy",
                                help="after the steady state, a window of calls on the device's energy counter "
                                     "(NVML's total energy on CUDA, RAPL where readable on a CPU): joules per call "
                                     "and the verdict's energy ratio"),
    screen: bool = typer.Option(True, "--screen/--no-screen",
                                help="with --processes N > 1: every cell's first process first, then the rest of N "
                                     "only for the cells that can still change a verdict (not clearly slower than "
                                     "their framework's best); --no-screen: every cell in N processes"),
    duets: bool = typer.Option(True, "--duets/--no-duets",
                               help="a verdict too wide to decide: its two bests measured together in more processes "
                                    "(both programs alternating in one process, whose state cancels in their ratio) "
                                    "rather than each in more processes of its own"),
    aa: bool = typer.Option(False, "--aa",
                            help="an A/A check of the paired design: every cell also measured against itself (two "
                                 "instances alternating in one process) in N processes; `stackwars verdict --aa` "
                                 "reads them"),
    cuda_graph_replay: bool = typer.Option(False, "--cuda-graph-replay",
                                           help="CUDA: time warm-up and steady state as replays of one forward call "
                                                "captured into a CUDA graph (PyTorch backends; XLA uses its own)"),
    profile: int = typer.Option(0, "--profile", help=PROFILE_HELP, metavar="N"),
    profile_dir: Optional[Path] = typer.Option(None, "--profile-dir", help=PROFILE_DIR_HELP),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the cells as a JSON list to this file"+REPLACES),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    resume: Optional[str] = typer.Option(None, "--resume", help="measure only the cells run RUN_ID still lacks"),
    inline: bool = typer.Option(False, "--inline", help="debug: run cells in this process (no isolation)"),
    executor: str = EXECUTOR_OPTION,
    gpus: Optional[str] = GPUS_OPTION,
    ray_address: Optional[str] = RAY_ADDRESS_OPTION,
    shared_dir: Optional[Path] = SHARED_DIR_OPTION,
    slurm_partition: Optional[str] = SLURM_PARTITION_OPTION,
    max_jobs: Optional[int] = MAX_JOBS_OPTION,
) -> None:
    """Measure workloads on backends; print the seed-style tables.

    Exit status: 0 when every cell is ok, oom or unsupported (out of memory and "cannot run
    here" are results); 1 when any cell of the run ended error, timeout or parity_fail; 2 for
    bad input (nothing run, nothing written); 128+N when stopped by signal N (SIGINT, SIGTERM
    or SIGHUP: finished cells are kept and the resume command is printed).
    """
    if warm_cache is not None:
        warm_cache = writable_dir(warm_cache, "--warm-cache").resolve()
    if memory_limit is not None:
        number(memory_limit, "--memory-limit (GiB)", low=0)
    check_seed(seed)
    path = check_db(db)
    if json_out is not None:
        outputs.check(json_out, "--json", [path])
    profiling = profile_settings(profile, profile_dir, path)
    if resume is not None:
        # the stored run fixes what is measured and how; only where the results go and how long a
        # cell may take can change, and the message says so
        fixed = [f"--{n.rstrip('_').replace('_', '-')}" if n != "workloads" else "workloads" for n in given_options(ctx)
                 if n not in RESUME_MAY_CHANGE]
        if fixed:
            raise SpecError(f"--resume measures what and how the stored run planned; {', '.join(fixed)} cannot "
                            f"change it (allowed with --resume: --db, --timeout, --json, --inline, --executor and "
                            f"its settings)")
        if not path.exists():
            raise SpecError(f"--resume {resume}: no results database at {path}")
        with Store(path, on_wait=waiting) as store:
            store.cell_run(resume, "--resume")  # an unknown id or a training/study run: refused here

    if resume is None:
        if processes < 1:
            raise SpecError(f"--processes must be >= 1, got {processes}")
        number(min_time, "--min-time", low=0, low_inclusive=True)
        if budget is not None:
            number(budget, "--budget (seconds)", low=0)
        config = MeasureConfig(
            warmup=warmup, min_samples=min_samples, min_time_s=min_time / processes, max_samples=max_samples,
            processes=processes,
            min_block_s=min_block_time, timeout_s=timeout,
            timing=timing,
            max_processes=max_processes if max_processes is not None else
            stats.default_max_processes(processes, budget is not None),
            budget_s=budget,
            threads=threads, matmul_precision=matmul_precision, cache_dir=str(warm_cache) if warm_cache else None,
            cold_every_process=cold_every_process,
            seed=seed, memory_limit_bytes=int(memory_limit * 2**30) if memory_limit else runner.default_memory_limit(),
            parity_mode=parity, flush_cache=flush_l2, cuda_graph_replay=cuda_graph_replay, energy=energy,
            screen=screen, duets=duets, aa_duets=aa,
            **profiling)
        if cuda_graph_replay and set(device) != {"cuda"}:
            raise SpecError(f"--cuda-graph-replay replays CUDA graphs: it needs --device cuda alone, got "
                            f"{', '.join(device)}")
        runner.validate_config(config)
        options = orchestrate.backend_options(mode=compile_mode, fullgraph=fullgraph,
                                              xla_autotune_level=xla_autotune_level, optimizer_impl=torch_optimizer,
                                              xla_command_buffers=xla_command_buffers,
                                              stablehlo=str(stablehlo.resolve()) if stablehlo is not None else None)
        overrides = assignments(set_ or [], "--set")
        # validate names, sizes and options before the (seconds-long) machine probe
        backend = backend_names(backend)
        planned = runner.plan_cells(workloads or [], preset, phase, backend or list(registry.backends()), device,
                                    dtype, overrides, options, processes, config.timeout_s,
                                    lambda text: err.print(text, highlight=False))
        if stablehlo is not None:
            _check_stablehlo(stablehlo, [s for s in planned if s.backend == "torch-mlir-xla"], config.matmul_precision)
    placer = make_executor(executor, gpus, ray_address, shared_dir, slurm_partition, max_jobs,
                           config.timeout_s if resume is None else timeout, inline)
    if resume is None:
        def plan_for(found: Mapping[str, Any]) -> list[CellSpec]:  # the cells, given what the probe found
            return runner.plan_cells(workloads or [], preset, phase, backend or runner.backends_for(
                runner.default_backends(found, device), workloads or []), device, dtype, overrides, options,
                processes, config.timeout_s)
    # a new run's first fork servers start while the probe runs, and the references its CUDA cells
    # compute in workers of their own are computed meanwhile (runner.start_servers_during_probe)
    references = runner.run_references() if resume is None and placer.name == "serial" and not inline else None
    early = (lambda: runner.start_servers_during_probe(plan_for, device, config, references)) if references else None
    probe = runner.probe_machine(inline, meanwhile=early)
    if resume is None:
        specs = plan_for(probe)
        if warm_cache is not None:
            warm_cache.mkdir(parents=True, exist_ok=True)
        placer.check(specs)
        floor = orchestrate.estimate_s(specs, config)
        if floor > orchestrate.LONG_PLAN_S:  # said before it starts: a typo costs a Ctrl-C, not an afternoon
            err.print(f"[yellow]{len(specs)} cell-processes: at least {fmt.duration(floor)} at "
                      f"{orchestrate.PROCESS_FLOOR_S + config.min_time_s:.2g} s each or more; Ctrl-C stops it and "
                      f"keeps what is done[/]", highlight=False)

    # The request is valid; from here on the database is written.
    with Store(path, on_wait=waiting) as store:
        note = lambda text: err.print(text, highlight=False)  # noqa: E731
        if resume is None:
            the_run = orchestrate.Run.start(store, specs, config, probe, placer, inline, command_line(),
                                            references=references)
        else:
            the_run = orchestrate.Run.resume(store, resume, probe, placer, inline,
                                             timeout if "timeout" in given_options(ctx) else None, note)
        run_id, specs = the_run.run_id, the_run.specs
        err.print(f"run {run_id} -> {path}  ({len(specs)} cells, each in a fresh worker"
                  + (f", through --executor {placer.name})" if placer.name != "serial" else ")"))
        # the same executor, to go on where this one stopped
        again = executor_args(executor, gpus, ray_address, shared_dir, slurm_partition, max_jobs)
        resume_hint = f"`stackwars run --resume {run_id}{f' --db {db}' if db else ''}{''.join(' ' + a for a in again)}`"
        unsaved: list = []
        try:
            with interruptible(), Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                           MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                                           transient=True) as progress:
                task = progress.add_task("starting" if placer.name in ("serial", "gpu-pool") else
                                         f"cells in flight on {placer.name}", total=len(specs))

                def on_done(m):
                    progress.console.print(_progress_line(m), highlight=False)
                    progress.advance(task)

                def on_unsaved(m, where, exc):
                    progress.console.print(f"[red]not stored[/] {m.spec.key}: {exc.reason}; "
                                           + (f"kept in {where}" if where else "and no file could keep it"),
                                           highlight=False)

                hooks = orchestrate.Hooks(
                    on_start=lambda spec: progress.update(task, description=spec.key), on_done=on_done,
                    on_unsaved=on_unsaved, on_note=lambda text: progress.console.print(f"[yellow]{text}[/]",
                                                                                        highlight=False),
                    on_more=lambda n: progress.update(task, total=progress.tasks[task].total + n),
                    on_duet=lambda d: (progress.advance(task), progress.console.print(duet_line(d), highlight=False)))
                unsaved = the_run.measure(hooks)
                if unsaved:
                    raise _Unsaved()
        except KeyboardInterrupt as exc:
            err.print(f"\n{interruption(exc)}: finished cells are stored; continue with {resume_hint}")
            raise typer.Exit(exit_code(exc))
        except (_Unsaved, StoreWriteError) as exc:
            where = sorted({str(w) for _, w, _ in unsaved if w})
            lost = sum(1 for _, w, _ in unsaved if not w)
            err.print(f"[red]{len(unsaved)} measured cell(s) could not be stored in {path}[/] "
                      f"({unsaved[0][2].reason if unsaved else exc}); "
                      + (f"they are kept in {', '.join(where)}; " if where else "")
                      + (f"{lost} could not be kept anywhere; " if lost else "")
                      + f"{resume_hint} stores them and measures what is still missing", highlight=False)
            raise typer.Exit(1)
        result_rows = rows(store, run_id)
        run_env = store.run(run_id).env
        _, _, profiles, anatomy, duets = verdict_cmd.load(store, [run_id])
    out.print(render(result_rows, Env(run_env).summary(), width=table_width()))
    # the answer last, where the eye lands: best PyTorch against best JAX, per table
    decided = vd.verdicts(result_rows, profiles, anatomy, duets=duets)
    if decided:
        out.print(vd.render(decided, table_width()), width=table_width())
        err.print(f"the verdict as JSON: `stackwars verdict {run_id} -f json{f' --db {db}' if db else ''}`")
    if json_out is not None:
        outputs.write(json_out, json.dumps(result_rows, indent=1, default=str), "--json")
        err.print(f"wrote {len(result_rows)} cells to {json_out}")
    err.print(orchestrate.spent_text(orchestrate.spent(result_rows)), highlight=False)
    mixed = vd.mixed_machines(result_rows)
    if mixed:
        err.print(f"[yellow]{mixed}[/]", highlight=False)
    failed = [r for r in result_rows if r["status"] in FAILED]
    lost = [r for r in result_rows if r.get("lost")]
    if lost:
        err.print(f"{len(lost)} cell(s) lost with their {lost[0]['lost']} worker (killed, pre-empted or its node "
                  f"gone): {resume_hint} measures them again", highlight=False)
    if failed:
        err.print(f"{len(failed)} cell(s) ended {', '.join(sorted({r['status'] for r in failed}))}: exit status 1")
        raise typer.Exit(1)


FAILED = ("error", "timeout", "parity_fail")  # oom and unsupported are results, not failures


def duet_line(d: Mapping[str, Any]) -> str:
    """One duet as the run's progress prints it (harness/duet.py)."""
    a, b = CellSpec.from_dict(d["a"]), CellSpec.from_dict(d["b"])
    head = f"  duet {a.key.split('#r')[0]} | {b.backend} #{d.get('repeat')}"
    if d.get("status") != "ok":
        return f"{d.get('status'):>9} {head}: {d.get('error') or ''}"[:300]
    return (f"       ok {head}  {b.backend}/{a.backend} {d['ratio']:.3f} over {len(d.get('first') or ())} rounds "
            f"({fmt.seconds(d['median_a_s'])} / {fmt.seconds(d['median_b_s'])})")


RESUME_MAY_CHANGE = ("resume", "db", "timeout", "json_out", "inline", "executor", "gpus", "ray_address", "shared_dir",
                     "slurm_partition", "max_jobs")


def given_options(ctx: typer.Context) -> list[str]:
    """The parameters given on the command line (not left at their defaults)."""
    return [p.name for p in ctx.command.params
            if getattr(ctx.get_parameter_source(p.name), "name", None) == "COMMANDLINE"]


class _Unsaved(Exception):
    """Some measured cells could not be stored: the run stops short of its tables."""


def _check_stablehlo(path: Path, specs, matmul_precision: str) -> None:
    """An exported program is read and matched to every torch-mlir-xla cell before anything runs."""
    from stackwars.ir.torch_export import TorchExport

    exp = TorchExport.load(path)
    for spec in specs:
        wl = registry.workload(spec.workload)
        exp.check_matches({"workload": spec.workload, "config": wl.config(spec.preset, dict(spec.overrides)).as_dict(),
                           "phase": spec.phase, "dtype": spec.dtype, "matmul_precision": matmul_precision})
