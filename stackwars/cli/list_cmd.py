"""stackwars list: workloads, presets, phases, backends and whether each can run here."""

from __future__ import annotations

import typer
from rich.table import Table

from stackwars import registry
from stackwars.cli.common import command, out
from stackwars.runner import probe_machine


@command
def list_(
    device: str = typer.Option("cpu", help="device to check backend availability for: cpu or cuda"),
) -> None:
    """List workloads, presets, phases and backends (with availability on this machine)."""
    wt = Table(title="workloads", title_justify="left")
    for c in ("workload", "description", "presets", "phases"):
        wt.add_column(c)
    for name, wl in registry.workloads().items():
        presets = "\n".join(f"{p}: {', '.join(f'{k}={v}' for k, v in cfg.as_dict().items())}"
                            for p, cfg in wl.presets.items())
        wt.add_row(name, wl.description, presets, ", ".join(wl.phases))
    out.print(wt)

    probe = probe_machine()
    bt = Table(title=f"backends (availability for device {device})", title_justify="left")
    for c in ("backend", "framework", "default", "available here", "description"):
        bt.add_column(c)
    for name, spec in registry.backends().items():
        ok, reason = spec.availability(probe, device)
        bt.add_row(name, spec.framework, "yes" if spec.default else "no",
                   "[green]yes[/]" if ok else f"[red]no[/]: {reason}", spec.description)
    out.print(bt)
    studies = registry.studies()
    out.print("studies: " + (", ".join(studies) if studies else "none registered"))
    mlir = probe.get("torch_mlir", {})
    out.print("torch-mlir (PyTorch -> StableHLO): " + ("installed" if mlir.get("importable")
              else "not installed (optional: pip install torch-mlir)"))
