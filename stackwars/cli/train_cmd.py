"""stackwars train mnist: the MNIST MLP training study (JAX primitives vs PyTorch)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from stackwars import registry, runner
from stackwars.cli.common import (waiting, DB_HELP, command, command_line, err, exit_code, interruptible, interruption, number,
                                  out, seed as check_seed, table_width, writable_dir)
from stackwars import outputs
from stackwars.data import mnist
from stackwars.errors import SpecError
from stackwars.harness import env as envmod
from stackwars.records import DEVICES, Env, MeasureConfig
from stackwars.report import training as report
from stackwars.store.results import Store, check_db
from stackwars.studies import mnist as study


@command
def train(
    name: str = typer.Argument(..., help="training study: mnist"),
    framework: Optional[list[str]] = typer.Option(None, "--framework", help="torch and/or jax (default: both)"),
    batch_size: Optional[list[int]] = typer.Option(None, "--batch-size", help="default: 64, 256 and 1024"),
    epochs: int = typer.Option(10, help="epochs per training"),
    lr: float = typer.Option(0.01, help="SGD learning rate (the seed used 0.01)"),
    compile: bool = typer.Option(False, "--compile", help="train the PyTorch model under torch.compile"),
    placement: str = typer.Option("device", help="device: the split lives on the device (best practice); "
                                                 "host: every batch is copied from the host"),
    device: str = typer.Option("cpu", help="cpu or cuda"),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir",
                                            help="MNIST-style directory (default: $STACKWARS_DATA_DIR, else download)"),
    out_dir: Path = typer.Option(Path("mnist-results"), "--out", help="directory for the CSV and the PNG"),
    seed: int = typer.Option(0, help="initial weights and batch order"),
    split_seed: int = typer.Option(0, help="the train/validation split"),
    threads: Optional[int] = typer.Option(None, help="CPU threads for both frameworks (default: all)"),
    matmul_precision: str = typer.Option("float32", help="float32 (exact) or tf32, applied to both frameworks"),
    timeout: float = typer.Option(3600.0, help="per-training wall-clock limit, seconds"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    inline: bool = typer.Option(False, "--inline", help="debug: train in this process"),
) -> None:
    """Train the MNIST MLP in both frameworks; write benchmark_results.csv and training_curves.png."""
    studies = {n: s for n, s in registry.studies().items() if getattr(s, "kind", "") == "train"}
    if name not in studies:
        raise SpecError(f"unknown training study {name!r}; allowed: {', '.join(studies)}")
    if device not in DEVICES:
        raise SpecError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    number(lr, "--lr", low=0, high=MAX_LR, why=f" (plain SGD with a step above {MAX_LR:g} diverges at once)")
    check_seed(seed, "--seed")
    check_seed(split_seed, "--split-seed")
    configs = study.plan(framework or list(study.FRAMEWORKS), batch_size or [64, 256, 1024], epochs, lr,
                         placement, compile, device, seed, matmul_precision)
    runner.validate_config(MeasureConfig(threads=threads, timeout_s=timeout))
    writable_dir(out_dir, "--out")
    path = check_db(db)
    ds = mnist.locate(data_dir)  # missing, corrupt or mismatched files: a DataError, exit 2
    mnist.decoded(ds)  # every file parsed before anything is written: a truncated file is refused here
    err.print(f"data: {ds.directory} ({ds.dataset}, SHA-256 verified, decoded)")

    probe = runner.probe_machine(inline)
    env = envmod.fingerprint(threads, probe)
    fw_probe = {fw: probe.get(fw, {}) for fw in {c.framework for c in configs}}
    for fw, p in fw_probe.items():
        if not p.get("importable") or (device == "cuda" and not p.get("cuda")):
            raise SpecError(f"{fw} cannot run on {device} here: {p.get('error') or p.get('cuda_reason')}")

    out_dir.mkdir(parents=True, exist_ok=True)
    with Store(path, on_wait=waiting) as store:
        run_id = store.create_run(configs, {"study": name, "split_seed": split_seed, "data": str(ds.directory),
                                            "dataset": ds.dataset, "checksums": ds.checksums},
                                  kind=f"train:{name}", command=command_line())
        session = store.start_session(run_id, env)
        err.print(f"run {run_id}: {len(configs)} trainings, each in a fresh worker")

        def on_event(e):
            if e.get("event") == "epoch":
                compile_note = f" (compile {e['compile_s']:.2f} s)" if e.get("compile_s") else ""
                busy = (f"  [yellow]contended: others took {e['contention']:.0%} of its CPUs[/]"
                        if e.get("contended") else "")
                err.print(f"  {e['backend']:>13} b={e['batch_size']:<5} epoch {e['epoch']:>2}/{e['epochs']}: "
                          f"{e['epoch_s']:.2f} s{compile_note}, train loss {e['train_loss']:.4f}, "
                          f"val acc {100 * e['val_acc']:.2f}%{busy}", highlight=False)
            elif e.get("event") == "done" and e["status"] != "ok":
                err.print(f"[red]{e['framework']} b={e['batch_size']}: {e['status']}[/]: "
                          f"{(e.get('error') or '').splitlines()[0][:200]}")

        try:
            with interruptible():
                rows = study.run(configs, ds, split_seed, threads, timeout, runner.default_memory_limit(),
                                 lambda cfg, rs: store.add_study_rows(run_id, session, name, cfg.key, rs),
                                 on_event, inline)
        except KeyboardInterrupt as exc:
            err.print(f"\n{interruption(exc)}: finished trainings are stored in the database (run {run_id})")
            raise typer.Exit(exit_code(exc))
    title = (f"MNIST MLP 784-512-512-10, SGD lr={lr}, {epochs} epochs, {device}, "
             f"{ds.dataset}; placement={placement}")
    outputs.write(out_dir / "benchmark_results.csv", report.to_csv(rows), "--out")
    png = out_dir / "training_curves.png"
    plotted = report.plot(rows, png, title)
    out.print(report.summary(rows, title), width=table_width())
    out.print(f"Environment: {Env(env).summary()}", style="dim", highlight=False)
    wrote = f"{out_dir / 'benchmark_results.csv'}" + (f" and {png}" if plotted else
                                                        " (no curves: no training finished ok)")
    err.print(f"wrote {wrote}; run {run_id}")
    failed = sorted({r["status"] for r in rows if r["status"] in ("error", "timeout")})
    if failed:  # diverged and oom are results of the experiment; a crash or a hang is not
        err.print(f"trainings ended {', '.join(failed)}: exit status 1")
        raise typer.Exit(1)


MAX_LR = 10.0
