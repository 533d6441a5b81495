"""stackwars fidelity: compare stackwars' timings with independent references (a benchmark,
not a test); the output is recorded under results/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from stackwars import runner
from stackwars import outputs
from stackwars.outputs import REPLACES
from stackwars.cli.common import command, err, out
from stackwars.errors import SpecError
from stackwars.harness import env as envmod
from stackwars.records import DEVICES, MeasureConfig
from stackwars.report import format as fmt

TARGET = (0.97, 1.03)  # ratio of medians, for calls of 1 ms or more
OVERHEAD_TARGET_S = 2e-6


@command
def fidelity(
    device: str = typer.Option("cpu", help="cpu or cuda"),
    output: Optional[Path] = typer.Option(None, "--out", help="write the JSON record here (e.g. results/fidelity-cpu.json)"+REPLACES),
    min_time: float = typer.Option(0.5, help="seconds of sampling per side and round"),
    threads: Optional[int] = typer.Option(None, help="CPU threads for both frameworks"),
    inline: bool = typer.Option(False, "--inline", help="debug: run in this process"),
) -> None:
    """Time the same operations with stackwars and with torch.utils.benchmark / a JAX loop."""
    if device not in DEVICES:
        raise SpecError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    if output is not None:
        outputs.check(output, "--out")
    config = MeasureConfig(min_time_s=min_time, threads=threads, memory_limit_bytes=runner.default_memory_limit())
    runner.validate_config(config)
    probe = runner.probe_machine(inline)
    env = envmod.fingerprint(threads, probe)
    table = Table(title=f"harness fidelity on {envmod.device_key(env, device)}", title_justify="left")
    for c in ("cell", "stackwars median", "reference median", "ratio", "round spread", "within 1.00±0.03",
              "reference"):
        table.add_column(c)

    def on_done(r):
        err.print(f"{r.get('cell')}: {r.get('status')} ratio={r.get('ratio', float('nan')):.3f}")

    result = runner.fidelity(device, config, probe, inline, on_done)
    for r in result["cells"]:
        if r.get("status") != "ok":
            table.add_row(r["cell"], "—", "—", "—", "—", r["status"], (r.get("error") or "")[:80])
            continue
        long_enough = r["reference_median_s"] >= 1e-3
        within = TARGET[0] <= r["ratio"] <= TARGET[1]
        if not long_enough:
            verdict = "yes" if within else "n/a (< 1 ms)"
        elif within:
            verdict = "yes"
        else:  # outside the target: a disagreement, unless the machine itself moved more than that
            verdict = "[yellow]noise[/] (rounds spread more)" if r["round_spread"] > TARGET[1] - 1 else "[red]no[/]"
        r["meets_target"] = within if long_enough else None
        table.add_row(r["cell"], fmt.seconds(r["stackwars_median_s"]), fmt.seconds(r["reference_median_s"]),
                      f"{r['ratio']:.3f}", f"{100 * r['round_spread']:.1f}%", verdict, r["reference_tool"])
    out.print(table)
    for fw, o in result["overhead"].items():
        if o.get("status") == "ok":
            out.print(f"{fw}: harness overhead per sample {o['bare_per_sample_s'] * 1e6:.2f} µs (no-op, target "
                      f"< {OVERHEAD_TARGET_S * 1e6:.0f} µs); with {o['framework_sync']}: "
                      f"{o['framework_sync_per_sample_s'] * 1e6:.2f} µs", highlight=False)
    if output is not None:
        record = {"device": device, "env": env, "config": config.to_dict(), "target_ratio": TARGET,
                  "overhead_target_s": OVERHEAD_TARGET_S, **result}
        outputs.write(output, json.dumps(record, indent=1, default=str), "--out")
        err.print(f"wrote {output}")
