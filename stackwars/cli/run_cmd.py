"""stackwars run: measure cells (workloads x presets x phases x backends x devices x dtypes)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Optional, Sequence

import typer
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from stackwars import orchestrate, outputs, registry, runner, stats
from stackwars.commands import OPTION_FLAGS, db_flag
from stackwars.outputs import REPLACES
from stackwars.cli.common import (EXECUTOR_OPTION, GPUS_OPTION, MAX_JOBS_OPTION, RAY_ADDRESS_OPTION, SHARED_DIR_OPTION,
                                  SLURM_PARTITION_OPTION, waiting, DB_HELP, PROFILE_DIR_HELP, PROFILE_HELP,
                                  backend_names, command, command_line, err, executor_choice, exit_code, interruptible,
                                  interruption, number, out, profile_settings, seed as check_seed,
                                  table_width, writable_dir)
from stackwars.parse import assignments
from stackwars.errors import SpecError
from stackwars.records import CellSpec, Env, MeasureConfig, Measurement
from stackwars.report import format as fmt
from stackwars.cli import verdict_cmd
from stackwars import verdict as vd
from stackwars.report import verdict as view
from stackwars.report.tables import render
from stackwars.store.results import Store, StoreWriteError, check_db, rows


def _progress_line(m: Measurement) -> str:
    row = m.to_row()
    colour = "green" if m.status == "ok" else "red"
    what = (f"median {fmt.seconds(row['steady_median_s'])}, first {fmt.seconds(row['first_call_s'])}"
            if row["steady_median_s"] is not None else fmt.error_line(m.error, 160))
    if row.get("contended"):  # short: a progress line is cut at the terminal's edge, never wrapped mid-phrase
        what += f"  [yellow]contended ({row['contention']:.0%} of its CPUs to others)[/]"
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
    timeout: float = typer.Option(orchestrate.DEFAULT_TIMEOUT_S, "--timeout", help="per-cell wall-clock limit, seconds"),
    warmup: int = typer.Option(3, help="warm-up calls after the second call"),
    min_samples: int = typer.Option(MeasureConfig.min_samples, help="steady state: at least this many samples a "
                                                                     "process (each a block of calls)"),
    min_time: float = typer.Option(1.0, help="steady state: at least this many seconds of sampling per cell, "
                                             "spread over its processes"),
    max_samples: int = typer.Option(100_000, help="steady state: stop at this many samples"),
    processes: int = typer.Option(DEFAULT_PROCESSES, "--processes", "--repeat",
                                  help="every cell's first process chooses each side's best; then N rounds of each "
                                       "row's two chosen cells (one fresh process of each, back to back, in a drawn "
                                       "order) make its first look, read on Student's t over rounds; --min-time is "
                                       "spread over a cell's processes"),
    max_processes: Optional[int] = typer.Option(None, "--max-processes",
                                                help="a verdict not yet decided takes more rounds of its two chosen "
                                                     f"cells, {stats.LOOK_STEP} a look, up to N rounds after the "
                                                     f"choice (default: {stats.MAX_ROUNDS}; equal to --processes: one "
                                                     "look). The looks share the verdict's 5% on an O'Brien-Fleming "
                                                     "boundary: a row that stops when decided stays honest"),
    budget: Optional[float] = typer.Option(None, "--budget",
                                           help="seconds the run may take: a look of more rounds starts only where its "
                                                "estimate fits what is left, the rows most likely to decide a second "
                                                "first (the first look's rounds always run); a row left out says what "
                                                "it would need. With --resume: the seconds this session may take"),
    margin: float = typer.Option(stats.MARGIN, "--margin",
                                 help="\"same speed\" within ±MARGIN (0.10: ±10%), declared before the run: two "
                                      "one-sided tests show it, each spending 5% over the looks"),
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
                                help="with --processes N > 1: every cell's first process first, then more only "
                                     "for the cells that can still change a verdict (each row's two chosen cells; in "
                                     "a table of one framework, the modes not clearly slower than its best); "
                                     "--no-screen: every cell in N processes, then the chosen pair's missing rounds"),
    aa: bool = typer.Option(False, "--aa",
                            help="an A/A check of the deciding design: each chosen cell measured in twice as many "
                                 "processes after the choice, in back-to-back pairs; `stackwars verdict --aa` reads "
                                 "each pair as a round of the cell against itself"),
    cuda_graph_replay: bool = typer.Option(False, "--cuda-graph-replay",
                                           help="CUDA: time warm-up and steady state as replays of one forward call "
                                                "captured into a CUDA graph (PyTorch backends; XLA uses its own)"),
    profile: int = typer.Option(0, "--profile", help=PROFILE_HELP, metavar="N"),
    profile_dir: Optional[Path] = typer.Option(None, "--profile-dir", help=PROFILE_DIR_HELP),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the cells as a JSON list to this file"+REPLACES),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    resume: Optional[str] = typer.Option(None, "--resume", help="measure only the cells run RUN_ID still lacks"),
    inline: bool = typer.Option(False, "--inline", help="debug: run cells in this process (no isolation)"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="a line per cell-process as it ends, and every "
                                 "mode's table before the verdict (so where the output is not a terminal: a log); "
                                 "in a terminal, by default, a live progress line, then the verdict"),
    executor: str = EXECUTOR_OPTION,
    gpus: Optional[str] = GPUS_OPTION,
    ray_address: Optional[str] = RAY_ADDRESS_OPTION,
    shared_dir: Optional[Path] = SHARED_DIR_OPTION,
    slurm_partition: Optional[str] = SLURM_PARTITION_OPTION,
    max_jobs: Optional[int] = MAX_JOBS_OPTION,
) -> None:
    """Measure workloads on backends; print the seed-style tables.

    Exit status: 0 when every cell is ok, oom or unsupported (out of memory and "cannot run
    here" are results); 1 when any cell of the run ended error, timeout or parity_fail (an analysis
    path's, torch-mlir-xla's, is shown and said, and fails nothing: it decides no verdict); 2 for
    bad input (nothing run, nothing written); 128+N when stopped by signal N (SIGINT, SIGTERM
    or SIGHUP: finished cells are kept and the resume command is printed).
    """
    measure(parse(given_options(ctx), SimpleNamespace(**{k: v for k, v in locals().items() if k != "ctx"})), db,
            verbose)


def parse(given: Sequence[str], o: SimpleNamespace,
          on_note: Callable[[str], None] = lambda text: err.print(text, highlight=False)) -> orchestrate.Request:
    """The command line (or ``stackwars.run``'s arguments: api.py) as one request
    (orchestrate.Request), every option checked: bad input exits 2 before anything is probed or
    written. ``given``: the options given, not left at their defaults (``--resume`` refuses those
    it cannot change)."""
    warm_cache = writable_dir(o.warm_cache, "--warm-cache").resolve() if o.warm_cache is not None else None
    if o.memory_limit is not None:
        number(o.memory_limit, "--memory-limit (GiB)", low=0)
    check_seed(o.seed)
    path = check_db(o.db)
    if o.json_out is not None:
        outputs.check(o.json_out, "--json", [path])
    profiling = profile_settings(o.profile, o.profile_dir, path)
    where = dict(db=path, inline=o.inline, json_out=o.json_out, command=command_line())
    if o.resume is not None:
        # the stored run fixes what is measured and how; only where the results go and how long a
        # cell may take can change, and the message says so
        fixed = [f"--{n.rstrip('_').replace('_', '-')}" if n != "workloads" else "workloads" for n in given
                 if n not in orchestrate.RESUME_MAY_CHANGE]
        if fixed:
            raise SpecError(f"--resume measures what and how the stored run planned; {', '.join(fixed)} cannot "
                            f"change it (allowed with --resume: --db, --timeout, --budget, --json, --inline, "
                            f"--executor and its settings)")
        if not path.exists():
            raise SpecError(f"--resume {o.resume}: no results database at {path}")
        with Store(path, on_wait=waiting) as store:
            store.cell_run(o.resume, "--resume")  # an unknown id or a training/study run: refused here
        if o.budget is not None:
            number(o.budget, "--budget (seconds)", low=0)
        return orchestrate.Request(executor=_executor(o), resume=o.resume, **where,
                                   timeout_s=o.timeout if "timeout" in given else None,
                                   budget_s=o.budget)
    if o.processes < 1:
        raise SpecError(f"--processes must be >= 1, got {o.processes}")
    number(o.min_time, "--min-time", low=0, low_inclusive=True)
    if o.budget is not None:
        number(o.budget, "--budget (seconds)", low=0)
    config = MeasureConfig(
        warmup=o.warmup, min_samples=o.min_samples, min_time_s=o.min_time / o.processes, max_samples=o.max_samples,
        processes=o.processes, min_block_s=o.min_block_time, timeout_s=o.timeout, timing=o.timing,
        max_processes=o.max_processes if o.max_processes is not None else stats.default_max_processes(o.processes),
        budget_s=o.budget, margin=o.margin, threads=o.threads, matmul_precision=o.matmul_precision,
        cache_dir=str(warm_cache) if warm_cache else None, cold_every_process=o.cold_every_process,
        seed=o.seed, memory_limit_bytes=int(o.memory_limit * 2**30) if o.memory_limit else runner.default_memory_limit(),
        parity_mode=o.parity, flush_cache=o.flush_l2, cuda_graph_replay=o.cuda_graph_replay, energy=o.energy,
        screen=o.screen, aa=o.aa, **profiling)
    if o.cuda_graph_replay and set(o.device) != {"cuda"}:
        raise SpecError(f"--cuda-graph-replay replays CUDA graphs: it needs --device cuda alone, got "
                        f"{', '.join(o.device)}")
    runner.validate_config(config)
    # each backend option from the flag commands.OPTION_FLAGS names for it
    options = {opt: getattr(o, flag[2:].replace("-", "_")) for opt, flag in OPTION_FLAGS.items()}
    options["stablehlo"] = str(o.stablehlo.resolve()) if o.stablehlo is not None else None
    cells = orchestrate.Cells(
        tuple(o.workloads or ()), tuple(o.preset), tuple(o.phase), tuple(backend_names(o.backend) or ()) or None,
        tuple(o.device), tuple(o.dtype), assignments(o.set_ or [], "--set"), orchestrate.backend_options(**options))
    # names, sizes and options checked before the (seconds-long) machine probe
    planned = cells.plan(config, on_note=on_note)
    if o.stablehlo is not None:
        _check_stablehlo(o.stablehlo, [s for s in planned if s.backend == "torch-mlir-xla"], config.matmul_precision)
    return orchestrate.Request(executor=_executor(o), cells=cells, config=config, **where)


def _executor(o: SimpleNamespace):
    return executor_choice(o.executor, o.gpus, o.ray_address, o.shared_dir, o.slurm_partition, o.max_jobs, o.inline)


def measure(request: orchestrate.Request, db_option: Optional[Path] = None, verbose: bool = False) -> None:
    """Measure the request with a progress bar, then print its tables and verdict. In a terminal
    (and not ``verbose``): a live line (the cell, cells done of those planned, elapsed, an estimate
    of the rest) and then the verdict alone, on one screen; every mode's table is `stackwars show
    RUN`'s (a run of one framework shows its modes' table: no verdict between frameworks answers
    it). Elsewhere (a file, a pipe, CI's log) or ``verbose``: a line per cell-process and the
    tables before the verdict."""
    ready = orchestrate.prepare(request)
    if ready.estimate_s > orchestrate.LONG_PLAN_S:  # said before it starts: a typo costs a Ctrl-C, not an afternoon
        err.print(f"[yellow]{len(ready.specs)} cell-processes: at least {fmt.duration(ready.estimate_s)} at "
                  f"{orchestrate.PROCESS_FLOOR_S + request.config.min_time_s:.2g} s each or more; Ctrl-C stops it "
                  f"and keeps what is done[/]", highlight=False)
    path = request.db
    placer = ready.executor
    again = "".join(" " + a for a in request.executor.args())  # the same executor, to go on where this one stopped
    opened: dict[str, Any] = {}

    @contextlib.contextmanager
    def measuring(the_run):
        """The run opened: said, then measured under a progress bar (Ctrl-C, SIGTERM and SIGHUP stop it)."""
        opened.update(run_id=the_run.run_id, specs=the_run.specs)
        err.print(f"run {the_run.run_id} -> {path}  ({len(the_run.specs)} cells, each in a fresh worker"
                  + (f", through --executor {placer.name})" if placer.name != "serial" else ")"))
        with interruptible(), Progress(SpinnerColumn(), TextColumn("{task.description}", style="bold"),
                                       BarColumn(bar_width=20), MofNCompleteColumn(), TimeElapsedColumn(),
                                       TextColumn("left"), TimeRemainingColumn(), console=err,
                                       transient=True) as progress:
            yield _hooks(progress, len(the_run.specs), placer.name, verbose or not err.is_terminal)

    def resume_hint() -> str:
        return f"`stackwars run --resume {opened['run_id']}{db_flag(db_option)}{again}`"

    # The request is valid; from here on the database is written.
    try:
        run_id = orchestrate.execute(request, ready, measuring, lambda text: err.print(text, highlight=False), waiting)
    except KeyboardInterrupt as exc:
        if "run_id" not in opened:
            raise
        err.print(f"\n{interruption(exc)}: finished cells are stored; continue with {resume_hint()}")
        raise typer.Exit(exit_code(exc))
    except (orchestrate.Unsaved, StoreWriteError) as exc:
        if "run_id" not in opened:
            raise
        unsaved = exc.unsaved if isinstance(exc, orchestrate.Unsaved) else []
        where = sorted({str(w) for _, w, _ in unsaved if w})
        lost = sum(1 for _, w, _ in unsaved if not w)
        err.print(f"[red]{len(unsaved)} measured cell(s) could not be stored in {path}[/] "
                  f"({unsaved[0][2].reason if unsaved else exc}); "
                  + (f"they are kept in {', '.join(where)}; " if where else "")
                  + (f"{lost} could not be kept anywhere; " if lost else "")
                  + f"{resume_hint()} stores them and measures what is still missing", highlight=False)
        raise typer.Exit(1)
    with Store(path, on_wait=waiting) as store:
        result_rows = rows(store, run_id)
        run_env = store.run(run_id).env
        _, _, profiles, anatomy = verdict_cmd.load(store, [run_id])
    # in a terminal the verdict alone, unless the run holds one framework: its answer is the table of
    # that framework's modes, which no verdict between frameworks gives
    one_framework = len({r.get("framework") for r in result_rows if r.get("framework")}) <= 1
    _show(result_rows, run_env, profiles, anatomy, run_id, db_option, request.json_out, resume_hint(),
          verbose or not out.is_terminal or one_framework)


def _hooks(progress: Progress, total: int, executor: str, lines: bool = True) -> orchestrate.Hooks:
    """The run's progress: a bar of cell-processes (the current cell, done of planned, elapsed, an
    estimate of the rest), the notes in yellow, and with ``lines`` a line a cell as it ends."""
    task = progress.add_task("starting" if executor in ("serial", "gpu-pool") else f"cells in flight on {executor}",
                             total=total)

    def on_done(m):
        if lines:
            progress.console.print(_progress_line(m), highlight=False, no_wrap=True, overflow="ellipsis")
        progress.advance(task)

    def on_unsaved(m, where, exc):
        progress.console.print(f"[red]not stored[/] {m.spec.key}: {exc.reason}; "
                               + (f"kept in {where}" if where else "and no file could keep it"), highlight=False)

    return orchestrate.Hooks(
        on_start=lambda spec: progress.update(task, description=spec.key), on_done=on_done,
        on_unsaved=on_unsaved, on_note=lambda text: progress.console.print(f"[yellow]{text}[/]", highlight=False),
        on_more=lambda n: progress.update(task, total=progress.tasks[task].total + n))


def _show(result_rows, run_env, profiles, anatomy, run_id: str, db_option, json_out, resume_hint: str,
          tables: bool = True) -> None:
    """The run's tables (``tables``), then its verdict (the answer last, where the eye lands), what
    it spent, and its exit status."""
    where = db_flag(db_option)
    if tables:
        out.print(render(result_rows, Env(run_env).summary(), width=table_width()))
    db = str(db_option) if db_option else None  # named in the commands printed where it is not the default
    decided = vd.verdicts(result_rows, profiles, anatomy, db=db)
    if decided:
        out.print("\n".join(view.brief(decided, [run_id], table_width(), db=db)), highlight=False, markup=False,
                  soft_wrap=True, width=max(table_width(), view.BRIEF_WIDTH))  # laid out by brief
        # a command a line, never broken by the console (soft_wrap): it is copied whole
        err.print(f"every row's details: stackwars verdict {run_id} --explain{where}", highlight=False,
                  soft_wrap=True)
        err.print(f"as JSON: stackwars verdict {run_id} -f json{where}", highlight=False, soft_wrap=True)
    if not tables:  # a terminal: the verdict on one screen; every mode's table one command away
        err.print(f"every mode's table (or run with -v): stackwars show {run_id}{where}", highlight=False,
                  soft_wrap=True)
    if json_out is not None:
        outputs.write(json_out, json.dumps(result_rows, indent=1, default=str), "--json")
        err.print(f"wrote {len(result_rows)} cells to {json_out}")
    err.print(orchestrate.spent_text(orchestrate.spent(result_rows)), highlight=False)
    mixed = view.mixed_machines(result_rows)
    if mixed:
        err.print(f"[yellow]{mixed}[/]", highlight=False)
    # an analysis path (PyTorch's program on XLA) decides no verdict: its failure is shown, not the run's
    failed_all = [r for r in result_rows if r["status"] in FAILED]
    failed = [r for r in failed_all if not vd.analysis(r["backend"])]
    if len(failed) < len(failed_all):
        aside = sorted({r["backend"] for r in failed_all if vd.analysis(r["backend"])})
        err.print(f"{len(failed_all) - len(failed)} cell(s) of an analysis path ({', '.join(aside)}) ended "
                  f"{', '.join(sorted({r['status'] for r in failed_all if vd.analysis(r['backend'])}))}: shown in "
                  f"the tables; an analysis path decides no verdict, so it does not fail the run", highlight=False)
    lost = [r for r in result_rows if r.get("lost")]
    if lost:
        err.print(f"{len(lost)} cell(s) lost with their {lost[0]['lost']} worker (killed, pre-empted or its node "
                  f"gone): {resume_hint} measures them again", highlight=False)
    if failed:
        err.print(f"{len(failed)} cell(s) ended {', '.join(sorted({r['status'] for r in failed}))}: exit status 1"
                  + ("" if tables else f" (their errors: `stackwars show {run_id}{where}`)"), highlight=False)
        raise typer.Exit(1)


FAILED = ("error", "timeout", "parity_fail")  # oom and unsupported are results, not failures


def given_options(ctx: typer.Context) -> list[str]:
    """The parameters given on the command line (not left at their defaults)."""
    return [p.name for p in ctx.command.params
            if getattr(ctx.get_parameter_source(p.name), "name", None) == "COMMANDLINE"]


def _check_stablehlo(path: Path, specs, matmul_precision: str) -> None:
    """An exported program is read and matched to every torch-mlir-xla cell before anything runs."""
    from stackwars.ir.torch_export import TorchExport

    exp = TorchExport.load(path)
    for spec in specs:
        wl = registry.workload(spec.workload)
        exp.check_matches({"workload": spec.workload, "config": wl.config(spec.preset, dict(spec.overrides)).as_dict(),
                           "phase": spec.phase, "dtype": spec.dtype, "matmul_precision": matmul_precision})
