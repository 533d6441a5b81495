"""stackwars peaks: measure and store the device's achievable GEMM FLOP/s and bandwidth."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from stackwars import runner
from stackwars.cli.common import waiting, DB_HELP, command, err, interruptible, number, out, table_width
from stackwars.errors import SpecError
from stackwars.harness import env as envmod
from stackwars.records import DEVICES, DTYPES, MeasureConfig
from stackwars.report import format as fmt
from stackwars.store.results import Store, check_db


@command
def peaks(
    device: str = typer.Option("cpu", help="cpu or cuda"),
    dtype: list[str] = typer.Option(["float32", "bfloat16"], "--dtype", help="dtype(s) to measure"),
    threads: Optional[int] = typer.Option(None, help="CPU threads (default: all available), as for `run`"),
    matmul_precision: str = typer.Option("float32", help="float32 or tf32"),
    min_time: float = typer.Option(2.0, help="seconds of steady-state sampling per measurement"),
    timeout: float = typer.Option(600.0, help="per-measurement wall-clock limit, seconds"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    inline: bool = typer.Option(False, "--inline", help="debug: measure in this process"),
) -> None:
    """Measure the device roofline once; later runs report each cell's fraction of it."""
    if device not in DEVICES:
        raise SpecError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    for d in dtype:
        if d not in DTYPES:
            raise SpecError(f"unknown dtype {d!r}; allowed: {', '.join(DTYPES)}")
    number(min_time, "--min-time", low=0)
    config = MeasureConfig(threads=threads, matmul_precision=matmul_precision, timeout_s=timeout,
                           memory_limit_bytes=runner.default_memory_limit())
    runner.validate_config(config)
    path = check_db(db)
    probe = runner.probe_machine(inline)
    env = envmod.fingerprint(threads, probe)
    err.print(f"measuring peaks of {envmod.device_key(env, device)} ...")
    with Store(path, on_wait=waiting) as store, interruptible():
        stored = runner.measure_peaks(store, device, dtype, config, env, inline, min_time)
    table = Table(title=f"device peaks: {envmod.device_key(env, device)}", title_justify="left")
    for c in ("dtype", "matmul precision", "framework", "GEMM (median)", "GEMM (best)", "stream (median)", "status"):
        table.add_column(c)
    for s in stored:
        for fw, r in s["per_framework"].items():
            ok = r.get("status") == "ok"
            table.add_row(s["dtype"], s["matmul_precision"], fw,
                          fmt.rate(r["gemm"]["median_per_s"], "FLOP") if ok else fmt.DASH,
                          fmt.rate(r["gemm"]["best_per_s"], "FLOP") if ok else fmt.DASH,
                          fmt.rate(r["stream"]["median_per_s"], "B") if ok else fmt.DASH,
                          r.get("status", "?"))
        table.add_row(s["dtype"], s["matmul_precision"], "[bold]roofline[/]",
                      f"[bold]{fmt.rate(s['flops_per_s'], 'FLOP')}[/]", "",
                      f"[bold]{fmt.rate(s['bytes_per_s'], 'B')}[/]",
                      f"stored as peaks #{s['id']}" if s["id"] else "[red]not stored: contended[/]")
    out.print(table, width=table_width())
    out.print("GEMM and stream: the best of 3 rounds' medians (a round slowed by other processes must not "
              "lower a peak); each round's contention is in the stored record.", style="dim")
    refused = [s for s in stored if s.get("refused")]
    for s in refused:
        err.print(f"[yellow]{s['dtype']}: {s['refused']}[/]")
    if refused:
        raise typer.Exit(1)
