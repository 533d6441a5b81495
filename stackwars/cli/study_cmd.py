"""stackwars study recompile|cache: compile behaviour across calls and processes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

import typer

from stackwars import outputs, runner
from stackwars.outputs import REPLACES
from stackwars.cli.common import (EXECUTOR_OPTION, GPUS_OPTION, MAX_JOBS_OPTION, RAY_ADDRESS_OPTION, SHARED_DIR_OPTION,
                                  SLURM_PARTITION_OPTION, OneValueCommand, waiting, DB_HELP, PROFILE_DIR_HELP,
                                  PROFILE_HELP, backend_names, command, command_line, err, exit_code, interruptible,
                                  interruption, make_executor, number, out, profile_settings, writable_dir)
from stackwars.errors import SpecError, Unsupported
from stackwars.harness import env as envmod
from stackwars.harness.isolation import run_inline, run_task
from stackwars.records import DTYPES, MeasureConfig, Env
from stackwars.report import format as fmt
from stackwars.report import studies as report
from stackwars.store.results import Store, check_db, db_path
from stackwars.studies import autotune as autotune_study
from stackwars.studies import cache as cache_study
from stackwars.studies import recompile as recompile_study
from stackwars.harness import tmp

app = typer.Typer(help="structured experiments: recompile, cache, autotune, control-flow, stream, vmap, scaling", no_args_is_help=True)


def _check_available(probe, backends, device) -> None:
    from stackwars import registry
    for b in backends:
        ok, why = registry.backend(b).availability(probe, device)
        if not ok:
            raise Unsupported(f"{b}: {why}")


def _interrupted(exc: BaseException, name: str, items, rows, config: dict, env: dict, db: Optional[Path]) -> None:
    """Ctrl-C, SIGTERM or SIGHUP in a study: the rows of the items that finished are stored as
    the run (its plan lists every item, so `stackwars runs` shows what is missing), and said;
    the worker in flight was stopped and its temporary files removed on the way out."""
    done = [r for r in rows if r.get("status") not in ("interrupted",)]
    if done:
        run_id = _store(name, items, done, {**config, "interrupted": interruption(exc)}, env, db)
        err.print(f"\n{interruption(exc)}: the {len(done)} row(s) of the finished items are stored as run {run_id}")
    else:
        err.print(f"\n{interruption(exc)}: nothing had finished; nothing stored")
    raise typer.Exit(exit_code(exc))


def _store(name: str, items, rows, config: dict, env: dict, db: Optional[Path]) -> str:
    class _Item:
        def __init__(self, d):
            self.key, self._d = f"{d['backend']}/{d.get('variant', '')}", d

        def to_dict(self):
            return self._d

    with Store(db_path(db), on_wait=waiting) as store:
        run_id = store.create_run([_Item(i) for i in items], config, kind=f"study:{name}", command=command_line())
        session = store.start_session(run_id, env)
        for item in items:
            key = f"{item['backend']}/{item.get('variant', '')}"
            mine = [r for r in rows if f"{r['backend']}/{r.get('variant', '')}" == key]
            store.add_study_rows(run_id, session, name, key, mine)
    return run_id


@app.command("recompile", cls=OneValueCommand)
@command
def recompile(
    workload: str = typer.Argument(..., help="workload (see `stackwars list`)"),
    vary: str = typer.Option(..., "--vary", help="KEY=V1,V2,...: a shape parameter, dtype, or scale"),
    backend: Optional[list[str]] = typer.Option(None, "--backend", "-b", help="jax-jit and/or torch-compile"),
    variant: Optional[list[str]] = typer.Option(None, "--variant", help="restrict to these variants"),
    preset: str = typer.Option("small", "--preset", "-p"),
    phase: str = typer.Option("forward", "--phase"),
    device: str = typer.Option("cpu", "--device"),
    dtype: str = typer.Option("float32", "--dtype"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="one row per call"+REPLACES),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    timeout: float = typer.Option(900.0, help="per backend x variant, seconds"),
    inline: bool = typer.Option(False, "--inline"),
) -> None:
    """Call a compiled function over a sequence of inputs; count compiles and say why."""
    if dtype not in DTYPES:
        raise SpecError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
    if json_out is not None:
        outputs.check(json_out, "--json", [db_path(db)])
    check_db(db)
    key, values = recompile_study.parse_vary(vary)
    backends = backend or list(recompile_study.VARIANTS)
    items = recompile_study.plan(workload, preset, phase, key, values, backends, variant)
    probe = runner.probe_machine(inline)
    _check_available(probe, {i["backend"] for i in items}, device)
    env = envmod.fingerprint(None, probe)
    rows = []
    config = {"study": "recompile", "workload": workload, "preset": preset, "phase": phase, "vary": vary,
              "dtype": dtype, "device": device}
    try:
        with interruptible():
            for item in items:
                o = runner.run_cold(lambda cache: {
                    "target": "stackwars.studies.recompile:run_item",
                    "kwargs": {"item": item, "dtype": dtype, "device": device, "cache_dir": cache},
                    "process": runner.study_process(item["backend"], device, cache)}, timeout,
                    runner.default_memory_limit(), inline)
                if o.status != "ok":
                    err.print(f"[red]{item['backend']} {item['variant']}: {o.status}[/] "
                              f"{(o.error or '').splitlines()[0]}")
                    rows.append({**{k: None for k in recompile_study.ROW_KEYS}, "backend": item["backend"],
                                 "variant": item["variant"], "status": o.status, "error": o.error})
                    continue
                rows.extend(o.result["rows"])
                err.print(f"{item['backend']} {item['variant']}: {o.result['rows'][-1]['compile_count']} compiles")
    except KeyboardInterrupt as exc:
        _interrupted(exc, "recompile", items, rows, config, env, db)
    run_id = _store("recompile", items, rows, config, env, db)
    ok_rows = [r for r in rows if r.get("call_index") is not None]
    if ok_rows:
        out.print(report.recompile_table(ok_rows, f"recompiles: {workload} {preset} {phase}, --vary {vary} ({device})"))
    out.print(f"Environment: {Env(env).summary()}", style="dim", highlight=False)
    if json_out is not None:
        outputs.write(json_out, json.dumps(rows, indent=1, default=str), "--json")
    err.print(f"run {run_id}")


@app.command("cache", cls=OneValueCommand)
@command
def cache(
    workload: str = typer.Argument(..., help="workload (see `stackwars list`)"),
    backend: Optional[list[str]] = typer.Option(None, "--backend", "-b", help="default: jax-jit and torch-compile"),
    preset: str = typer.Option("small", "--preset", "-p"),
    phase: str = typer.Option("forward", "--phase"),
    device: str = typer.Option("cpu", "--device"),
    dtype: str = typer.Option("float32", "--dtype"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="one row per backend and run"+REPLACES),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    timeout: float = typer.Option(600.0, help="per cell, seconds"),
    inline: bool = typer.Option(False, "--inline"),
) -> None:
    """First-call time with cold caches, with warm caches, and the second call."""
    if json_out is not None:
        outputs.check(json_out, "--json", [db_path(db)])
    check_db(db)
    backends = cache_study.plan(backend_names(backend) or ["jax-jit", "torch-compile"])
    specs = runner.plan_cells([workload], [preset], [phase], backends, [device], [dtype])
    config = MeasureConfig(warmup=1, min_samples=5, min_time_s=0.2, timeout_s=timeout,
                           memory_limit_bytes=runner.default_memory_limit())
    probe = runner.probe_machine(inline)
    _check_available(probe, backends, device)
    env = envmod.fingerprint(None, probe)
    rows = []
    study_config = {"study": "cache", "workload": workload, "preset": preset, "phase": phase, "dtype": dtype,
                    "device": device}
    try:
        with interruptible():
            for spec in specs:
                err.print(f"{spec.backend}: cold, then warm ...")
                rows.extend(cache_study.run(spec, config, probe,
                                            lambda s, c, p, peak: runner.measure_one(s, c, p, peak, inline)))
    except KeyboardInterrupt as exc:
        _interrupted(exc, "cache", [{"backend": b} for b in backends], rows, study_config, env, db)
    run_id = _store("cache", [{"backend": b} for b in backends], rows, study_config, env, db)
    out.print(report.cache_table(rows, f"compile caches: {workload} {preset} {phase} ({device})"))
    out.print(f"Environment: {Env(env).summary()}", style="dim", highlight=False)
    if json_out is not None:
        outputs.write(json_out, json.dumps(rows, indent=1, default=str), "--json")
    err.print(f"run {run_id}")


@app.command("autotune", cls=OneValueCommand)
@command
def autotune(
    workload: str = typer.Argument(..., help="workload (see `stackwars list`)"),
    backend: Optional[list[str]] = typer.Option(None, "--backend", "-b",
                                                help="default: jax-jit and torch-compile; also "
                                                     "torch-compile-max-autotune"),
    preset: str = typer.Option("small", "--preset", "-p"),
    phase: str = typer.Option("forward", "--phase"),
    device: str = typer.Option("cpu", "--device"),
    dtype: str = typer.Option("float32", "--dtype"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="one row per variant"+REPLACES),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    timeout: float = typer.Option(600.0, help="per cell, seconds"),
    inline: bool = typer.Option(False, "--inline"),
) -> None:
    """What XLA's GPU autotuning costs at compile time and buys at run time, per matmul precision."""
    if json_out is not None:
        outputs.check(json_out, "--json", [db_path(db)])
    check_db(db)
    backends = backend or ["jax-jit", "torch-compile"]
    runner.plan_cells([workload], [preset], [phase], backends, [device], [dtype])  # validates names and sizes
    cells = autotune_study.plan(workload, preset, phase, device, dtype, backends)
    config = MeasureConfig(warmup=2, min_samples=5, min_time_s=0.5, timeout_s=timeout,
                           memory_limit_bytes=runner.default_memory_limit())
    probe = runner.probe_machine(inline)
    _check_available(probe, backends, device)
    env = envmod.fingerprint(None, probe)

    finished: list[dict] = []

    def on_row(r):
        finished.append(r)
        err.print(f"{r['backend']} {r['autotune']} {r['matmul_precision']}: {r['status']}, compile "
                  f"{fmt.seconds(r['compile_s'])}, steady {fmt.seconds(r['steady_median_s'])}")

    study_config = {"study": "autotune", "workload": workload, "preset": preset, "phase": phase, "dtype": dtype,
                    "device": device}
    try:
        with interruptible():
            rows = autotune_study.run(cells, config, probe,
                                      lambda s, c, p, peak: runner.measure_one(s, c, p, peak, inline), on_row)
    except KeyboardInterrupt as exc:
        _interrupted(exc, "autotune", [{"backend": r["backend"], "variant": r["variant"]} for r in finished],
                     finished, study_config, env, db)
    notes = autotune_study.findings(rows, device)
    items = [{"backend": r["backend"], "variant": r["variant"]} for r in rows]
    run_id = _store("autotune", items, rows, study_config, env, db)
    out.print(report.autotune_table(rows, f"autotuning and precision: {workload} {preset} {phase} {dtype} "
                                          f"({device})", notes))
    out.print(f"Environment: {Env(env).summary()}", style="dim", highlight=False)
    if json_out is not None:
        outputs.write(json_out, json.dumps(rows, indent=1, default=str), "--json")
    err.print(f"run {run_id}")


@app.command("control-flow", cls=OneValueCommand)
@command
def control_flow(
    workloads: Optional[list[str]] = typer.Argument(None, help="rnn, ode, newton, branch (default: all four)"),
    vary: str = typer.Option("n=10,30,100", "--vary", help="n=V1,V2,...: loop lengths (steps, or layers for newton)"),
    impl: Optional[list[str]] = typer.Option(None, "--impl", help="restrict to these implementations"),
    backend: Optional[list[str]] = typer.Option(None, "--backend", "-b",
                                                help="default: torch-eager, torch-compile, jax-eager, jax-jit"),
    phase: list[str] = typer.Option(["forward"], "--phase", help="forward and/or train-step"),
    remat: bool = typer.Option(False, "--remat", help="also measure each train step rematerialised per step"),
    preset: str = typer.Option("small", "--preset", "-p"),
    device: str = typer.Option("cpu", "--device"),
    dtype: str = typer.Option("float32", "--dtype"),
    min_time: float = typer.Option(0.3, "--min-time", help="steady state: seconds of sampling per cell"),
    timeout: float = typer.Option(600.0, help="per cell, seconds"),
    out_dir: Path = typer.Option(Path("study-results") / "control-flow", "--out", help="PNG plots and rows.json"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="one row per cell"+REPLACES),
    profile: int = typer.Option(0, "--profile", help=PROFILE_HELP, metavar="N"),
    profile_dir: Optional[Path] = typer.Option(None, "--profile-dir", help=PROFILE_DIR_HELP),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    inline: bool = typer.Option(False, "--inline"),
    executor: str = EXECUTOR_OPTION,
    gpus: Optional[str] = GPUS_OPTION,
    ray_address: Optional[str] = RAY_ADDRESS_OPTION,
    shared_dir: Optional[Path] = SHARED_DIR_OPTION,
    slurm_partition: Optional[str] = SLURM_PARTITION_OPTION,
    max_jobs: Optional[int] = MAX_JOBS_OPTION,
) -> None:
    """Loops, data-dependent loops and branches over a sweep of n: compile, run time, memory,
    program size, graph breaks; growth with n fitted and the cliffs named. Its cells go
    through an executor as `run`'s do (--executor)."""
    from stackwars.report import plots
    from stackwars.studies import control_flow as study

    if json_out is not None:
        outputs.check(json_out, "--json", [db_path(db)])
    writable_dir(out_dir, "--out")
    path = check_db(db)
    number(min_time, "--min-time", low=0, low_inclusive=True)
    if remat and "train-step" not in phase:
        raise SpecError("--remat rematerialises a train step's forward pass for its backward; add --phase "
                        "train-step (the forward phase has no backward to remat for)")
    ns = study.parse_ns(vary)
    specs = study.plan(workloads or list(study.WORKLOADS), impl, ns, phase, backend or list(study.BACKENDS),
                       preset, remat, device, dtype)
    config = MeasureConfig(warmup=1, min_samples=5, min_time_s=min_time, timeout_s=timeout,
                           memory_limit_bytes=runner.default_memory_limit(),
                           **profile_settings(profile, profile_dir, path))
    runner.validate_config(config)
    placer = make_executor(executor, gpus, ray_address, shared_dir, slurm_partition, max_jobs, timeout, inline)
    placer.check(specs)
    probe = runner.probe_machine(inline)
    env = envmod.fingerprint(None, probe)
    err.print(f"{len(specs)} cells (each in a fresh worker"
              + (f", through --executor {placer.name})" if placer.name != "serial" else ")"))
    with Store(path, on_wait=waiting) as store:
        run_id = store.create_run(specs, {"study": "control-flow", "vary": vary, "preset": preset, "device": device,
                                          "dtype": dtype, "measure": config.to_dict()},
                                  kind="study:control-flow", command=command_line())
        try:
            with interruptible():
                done = runner.execute(store, run_id, specs, config, env, inline=inline,
                                      on_done=lambda m: err.print(f"{m.status:>11} {m.spec.key}", highlight=False),
                                      executor=placer)
        except KeyboardInterrupt as exc:
            err.print(f"\n{interruption(exc)}: finished cells are stored (run {run_id})")
            raise typer.Exit(exit_code(exc))
    rows = [study.row(m) for m in done]
    notes = study.cliffs(rows)
    out.print(report.control_flow_tables(rows, f"control flow · {preset} · {device} · {dtype}", notes))
    out.print(f"Environment: {Env(env).summary()}", style="dim", highlight=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs = plots.control_flow(rows, out_dir)
    rows_file = out_dir / f"control-flow-{'-'.join(dict.fromkeys(r['workload'] for r in rows))}.json"
    outputs.write(rows_file, json.dumps({"run_id": run_id, "command": command_line(), "rows": rows, "cliffs": notes,
                                        "capabilities": study.capabilities(rows), "env": env}, indent=1, default=str))
    if json_out is not None:
        outputs.write(json_out, json.dumps(rows, indent=1, default=str), "--json")
    err.print(f"run {run_id}; wrote {', '.join(str(p) for p in pngs)} and {rows_file}")


@app.command("vmap", cls=OneValueCommand)
@command
def vmap(
    op: Optional[list[str]] = typer.Option(None, "--op", help="dot and/or attention (default: both)"),
    batch: str = typer.Option("1,16,256,1024", "--batch", help="batch sizes, comma-separated"),
    impl: Optional[list[str]] = typer.Option(None, "--impl", help="loop, vmap, batched (default: all)"),
    backend: Optional[list[str]] = typer.Option(None, "--backend", "-b",
                                                help="default: torch-eager, torch-compile, jax-eager, jax-jit"),
    preset: str = typer.Option("small", "--preset", "-p"),
    device: str = typer.Option("cpu", "--device"),
    dtype: str = typer.Option("float32", "--dtype"),
    min_time: float = typer.Option(1.0, "--min-time", help="steady state: seconds of sampling per cell"),
    timeout: float = typer.Option(600.0, help="per cell, seconds"),
    out_dir: Path = typer.Option(Path("study-results") / "vmap", "--out", help="PNG plots and the rows as JSON"),
    profile: int = typer.Option(0, "--profile", help=PROFILE_HELP, metavar="N"),
    profile_dir: Optional[Path] = typer.Option(None, "--profile-dir", help=PROFILE_DIR_HELP),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    inline: bool = typer.Option(False, "--inline"),
) -> None:
    """Per-example dot product and attention: Python loop, vmap, batched, eager and compiled,
    over batch sizes; the harness's figures beside S5's unsynchronised method."""
    from stackwars.report import plots
    from stackwars.studies import vmap as study

    writable_dir(out_dir, "--out")
    path = check_db(db)
    number(min_time, "--min-time", low=0, low_inclusive=True)
    specs = study.plan(op or list(study.OPS), impl, study.parse_batches(batch), backend or list(study.BACKENDS),
                       preset, device, dtype)
    config = MeasureConfig(warmup=3, min_samples=10, min_time_s=min_time, timeout_s=timeout,
                           memory_limit_bytes=runner.default_memory_limit(),
                           **profile_settings(profile, profile_dir, path))
    runner.validate_config(config)
    probe = runner.probe_machine(inline)
    env = envmod.fingerprint(None, probe)
    err.print(f"{len(specs)} cells, each measured by the harness and by S5's method (two workers)")
    references = tmp.mkdtemp("reference")

    def naive(spec):
        task = {"target": "stackwars.studies.vmap:s5_method",
                "kwargs": {"spec": spec.to_dict(), "config": config.to_dict()},
                "process": runner.process_request(spec, config, None, None)}  # as the harness's own cell
        o = run_inline(task) if inline else run_task(task, timeout, config.memory_limit_bytes)
        return o.result if o.status == "ok" else {"status": o.status, "error": o.error}

    with Store(path, on_wait=waiting) as store:
        run_id = store.create_run(specs, {"study": "vmap", "batch": batch, "preset": preset, "device": device,
                                          "dtype": dtype, "measure": config.to_dict()},
                                  kind="study:vmap", command=command_line())
        session = store.start_session(run_id, env)

        def measure(spec):
            m = runner.measure_one(spec, config, probe, None, inline, reference_dir=references, run_id=run_id)
            store.add_cell(run_id, session, m)
            return m

        try:
            with interruptible():
                rows = study.run(specs, measure, naive,
                                 lambda r: err.print(f"{r['status']:>11} {r['op']} b={r['batch']} {r['label']}: "
                                                     f"{fmt.seconds(r['steady_median_s'])}", highlight=False))
        except KeyboardInterrupt as exc:
            err.print(f"\n{interruption(exc)}: finished cells are stored (run {run_id})")
            raise typer.Exit(exit_code(exc))
        finally:
            shutil.rmtree(references, ignore_errors=True)
        store.add_study_rows(run_id, session, "vmap", "rows", rows)
    notes = study.findings(rows)
    out.print(report.vmap_table(rows, f"vmap · {preset} · {device} · {dtype}", notes))
    out.print(f"Environment: {Env(env).summary()}", style="dim", highlight=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs = plots.vmap(rows, out_dir)
    rows_file = out_dir / "vmap.json"
    outputs.write(rows_file, json.dumps({"run_id": run_id, "command": command_line(), "rows": rows, "findings": notes,
                                        "env": env}, indent=1, default=str))
    err.print(f"run {run_id}; wrote {', '.join(str(p) for p in pngs)} and {rows_file}")


@app.command("stream", cls=OneValueCommand)
@command
def stream(
    workload: str = typer.Argument(..., help="mha or gpt2"),
    preset: str = typer.Option("small", "--preset", "-p"),
    requests: int = typer.Option(40, "--requests", help="how many requests the stream holds"),
    min_seq: int = typer.Option(8, "--min-seq"),
    max_seq: int = typer.Option(1024, "--max-seq"),
    dist: str = typer.Option("lognormal:median=64,sigma=1.2", "--dist",
                             help="lognormal:median=M,sigma=S (long-tailed) or uniform"),
    backend: Optional[list[str]] = typer.Option(None, "--backend", "-b",
                                                help="default: torch-eager, torch-compile, jax-eager, jax-jit"),
    policy: Optional[list[str]] = typer.Option(None, "--policy",
                                               help="eager, exact, buckets, automatic, dynamic, mark_dynamic"),
    seed: int = typer.Option(0, help="lengths and inputs"),
    device: str = typer.Option("cpu", "--device"),
    dtype: str = typer.Option("float32", "--dtype"),
    timeout: float = typer.Option(1800.0, help="per policy, seconds"),
    out_dir: Path = typer.Option(Path("study-results") / "stream", "--out", help="PNG plot and the rows as JSON"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    inline: bool = typer.Option(False, "--inline"),
) -> None:
    """A stream of variable-length requests through a compiled forward pass under each shape
    policy: total time with every compile, compiles, padding waste, break-even, parity."""
    from stackwars.cli.common import seed as check_seed
    from stackwars.report import plots
    from stackwars.studies import stream as study

    if dtype not in DTYPES:
        raise SpecError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
    writable_dir(out_dir, "--out")
    check_db(db)
    check_seed(seed)
    lengths = study.draw_lengths(requests, min_seq, max_seq, dist, seed)
    items = study.plan(workload, preset, backend or list(study.POLICIES), policy, max(lengths))
    probe = runner.probe_machine(inline)
    _check_available(probe, {i["backend"] for i in items}, device)
    env = envmod.fingerprint(None, probe)
    stream_config = {"study": "stream", "workload": workload, "preset": preset, "lengths": lengths, "dist": dist,
                     "seed": seed, "device": device, "dtype": dtype}
    references = tmp.mkdtemp("reference")
    rows = []
    try:
        with interruptible():
            for item in items:
                o = runner.run_cold(lambda cache: {
                    "target": "stackwars.studies.stream:run_policy",
                    "kwargs": {"item": item, "lengths": lengths, "seed": seed, "dtype": dtype, "device": device,
                               "reference_dir": references, "cache_dir": cache},
                    "process": runner.study_process(item["backend"], device, cache)}, timeout,
                    runner.default_memory_limit(), inline)
                if o.status != "ok":
                    err.print(f"[red]{item['backend']} {item['policy']}: {o.status}[/] "
                              f"{(o.error or '').splitlines()[0][:200]}")
                    rows.append({"backend": item["backend"], "policy": item["policy"], "status": o.status,
                                 "error": o.error, "request": None})
                    continue
                rows.extend(o.result["rows"])
                last = o.result["rows"][-1]
                err.print(f"{item['backend']} {item['policy']}: {last['compile_count']} compiles, "
                          f"{fmt.seconds(sum(r['call_s'] for r in o.result['rows']))} in all", highlight=False)
    except KeyboardInterrupt as exc:
        _interrupted(exc, "stream", [{"backend": i["backend"], "variant": i["policy"]} for i in items],
                     [{**r, "variant": r["policy"]} for r in rows], stream_config, env, db)
    finally:
        shutil.rmtree(references, ignore_errors=True)
    served = [r for r in rows if r.get("request") is not None]
    summary = study.summary(served)
    config = stream_config
    run_id = _store("stream", [{"backend": i["backend"], "variant": i["policy"]} for i in items],
                    [{**r, "variant": r["policy"]} for r in rows], config, env, db)
    out.print(report.stream_table(summary, served, f"stream: {workload} {preset} forward ({device}, {dtype})"))
    out.print(f"Environment: {Env(env).summary()}", style="dim", highlight=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = plots.stream(served, out_dir, f"{workload}-{preset}")
    rows_file = out_dir / f"stream-{workload}-{preset}.json"
    outputs.write(rows_file, json.dumps({"run_id": run_id, "command": command_line(), "lengths": lengths,
                                        "summary": summary, "rows": rows, "env": env}, indent=1, default=str))
    err.print(f"run {run_id}; wrote {png} and {rows_file}")

