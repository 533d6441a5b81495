"""stackwars list: workloads, presets, phases, backends and whether each can run here."""

from __future__ import annotations

import typer
from rich.table import Table

from stackwars import registry
from stackwars.cli.common import command, out, table_width
from stackwars.records import DEVICES
from stackwars.errors import SpecError
from stackwars.runner import probe_machine


@command
def list_(
    device: str = typer.Option("cpu", help="device to check backend availability for: cpu or cuda"),
    all_: bool = typer.Option(False, "--all", help="every preset's parameters and every backend's description"),
) -> None:
    """What can be measured: workloads, presets, phases, backends (available here?), studies."""
    if device not in DEVICES:
        raise SpecError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    wt = Table(title="workloads", title_justify="left")
    for c in (("workload",) if all_ else ("workloads",)) + ("presets", "phases") + (("description",) if all_ else ()):
        wt.add_column(c, overflow="fold")
    alike: dict[tuple[str, str], list[str]] = {}  # the overview: workloads with the same presets and phases share a row
    for name, wl in registry.workloads().items():
        if all_:
            presets = "\n".join(f"{p}: {', '.join(f'{k}={v}' for k, v in cfg.as_dict().items())}"
                                for p, cfg in wl.presets.items())
            wt.add_row(name, presets, ", ".join(wl.phases), wl.description)
        else:
            alike.setdefault((", ".join(wl.presets), ", ".join(wl.phases)), []).append(name)
    for (presets, phases), names in alike.items():
        wt.add_row(", ".join(names), presets, phases)
    out.print(wt, width=table_width())

    probe = probe_machine()
    bt = Table(title=f"backends (on {device} here)", title_justify="left")
    for c in ("backend", "default", "available") + (("description",) if all_ else ()):
        bt.add_column(c, overflow="fold")
    for name, spec in registry.backends().items():
        ok, reason = spec.availability(probe, device)
        available = "[green]yes[/]" if ok else (f"[red]no[/]: {reason}" if all_ else f"[red]no[/]: {reason[:60]}")
        default = ("yes" if set(spec.devices) >= set(DEVICES) else f"on {', '.join(spec.devices)}") \
            if spec.default else "no"
        bt.add_row(name, default, available, *((spec.description,) if all_ else ()))
    out.print(bt, width=table_width())
    studies = registry.studies()
    out.print("studies: " + (", ".join(studies) if studies else "none registered"))
    mlir = probe.get("torch_mlir", {})
    out.print("torch-mlir (PyTorch -> StableHLO): " + ("installed" if mlir.get("importable")
              else "not installed (optional: pip install torch-mlir)"))
    if not all_:
        out.print("presets' sizes and backends' descriptions: `stackwars list --all`; one workload in detail: "
                  "`stackwars describe NAME --preset P`", style="dim")
