"""stackwars describe: a workload's configuration, parameter count, FLOPs and memory
estimate, computed from shapes (nothing is allocated)."""

from __future__ import annotations

import json
from typing import Any, Optional

import typer
from rich.table import Table

from stackwars.errors import SpecError
from stackwars import registry
from stackwars import outputs
from stackwars.parse import assignments
from stackwars.cli.common import command, err, out
from stackwars.report import format as fmt


def describe_workload(name: str, preset: str, overrides: dict[str, str] | None = None,
                      timeout_s: float | None = None) -> dict[str, Any]:
    """What ``describe`` shows. A user's model that fails anywhere in it (its factory, its
    forward on meta tensors, FLOP counting) is bad input: SpecError, exit 2, naming the file;
    it is described in a worker killed after ``timeout_s`` (default: the check's 600 s), said
    on stderr before the wait."""
    resolved = registry.resolve_workload(name)
    workload = registry.workload(resolved)
    cfg = workload.config(preset, overrides)
    origin = registry.origin("workload", resolved)
    if hasattr(workload, "verify"):  # a user's model: described in a worker, where its factories run
        from stackwars.runner.planning import CHECK_TIMEOUT_S, describe_user_model

        limit = CHECK_TIMEOUT_S if timeout_s is None else timeout_s
        err.print(f"describing model {resolved} in a worker, where its factories run (up to {limit:g} s: --timeout)",
                  highlight=False)
        return {"preset": preset, **describe_user_model(resolved, preset, overrides or {}, limit)}
    try:
        return {"preset": preset, **workload.describe(cfg)}
    except SpecError:
        raise
    except Exception as exc:  # noqa: BLE001 - only a user's model lands here as bad input; a built-in's is a bug
        if origin.startswith(("built-in", "unknown")):
            raise
        raise SpecError(f"{origin}: model {resolved!r}: describing it raised {type(exc).__name__}: {exc}") from None


def _render(d: dict[str, Any]) -> None:
    t = Table(title=f"{d['workload']} --preset {d['preset']}: {d['description']}", title_justify="left",
              show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    t.add_row("configuration", ", ".join(f"{k}={v}" for k, v in d["config"].items()))
    if d.get("source"):
        t.add_row("architecture of", d["source"])
    params = f"{d['parameters']:,}"
    if d.get("published_params"):
        part = d["parameters_published_part"]
        same = "equal" if part == d["published_params"] else "DIFFERENT"
        params += (f"  (published {d['published_params']:,}: {same}"
                   + (f"; + {d['parameters'] - part:,} in the training heads" if part != d["parameters"] else "")
                   + ")")
    t.add_row("parameters", params + f" in {d['parameter_tensors']} tensors")
    t.add_row("inputs", ", ".join(f"{k} {tuple(v)}" for k, v in d["inputs"].items()))
    for side, part in (d.get("sides") or {}).items():  # a user's model: each side on its own
        t.add_row(f"{side} side", f"{part['parameters']:,} parameters in {part['parameter_tensors']} tensors; "
                  + ", ".join(f"{fmt.quantity(f, 'FLOP')} per {p}" for p, f in part["flops"].items()))
    for phase, flops in d["flops"].items():
        t.add_row(f"FLOPs per {phase}", fmt.quantity(flops, "FLOP"))
    t.add_row("FLOPs formula", d["flops_formula"])
    for key, b in d["bytes_moved"].items():
        t.add_row(f"min bytes moved {key}", fmt.nbytes(b))
    for key, parts in d.get("memory_estimate_bytes", {}).items():
        detail = ", ".join(f"{k} {fmt.nbytes(v)}" for k, v in parts.items() if v)
        t.add_row(f"memory estimate {key}", detail)
    out.print(t)


@command
def describe(
    workload: str = typer.Argument(..., help="workload (see `stackwars list`)"),
    preset: str = typer.Option("small", "--preset", "-p", help="preset: tiny, small, paper"),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="override a preset parameter: KEY=VALUE"),
    json_: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="seconds a user's model may take to be "
                                                                    "described in its worker (default 600)"),
) -> None:
    """Configuration, parameter count, FLOPs per step and memory estimate; nothing allocated."""
    d = describe_workload(workload, preset, assignments(set_ or [], "--set"), timeout)
    if json_:
        outputs.emit(json.dumps(d, indent=1, default=str) + "\n")
    else:
        _render(d)
