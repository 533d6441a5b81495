"""stackwars ir: the compilers' intermediate forms of a cell, one file per stage."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from stackwars import runner
from stackwars.parse import assignments
from stackwars.cli.common import command, err, out, writable_dir
from stackwars.errors import SpecError, Unsupported
from stackwars.harness.isolation import run_inline, run_task
from stackwars.ir.jax_ir import STAGES as JAX_STAGES
from stackwars.ir.torch_export import INSTALL_HINT
from stackwars.ir.torch_ir import STAGES as TORCH_STAGES
from stackwars.records import MATMUL_PRECISIONS
from stackwars.report import ir as report

FRAMEWORK_STAGES = {"jax": JAX_STAGES, "torch": TORCH_STAGES}


@command
def ir(
    workload: str = typer.Argument(..., help="workload (see `stackwars list`)"),
    framework: Optional[list[str]] = typer.Option(None, "--framework", help="jax and/or torch (default: both)"),
    stage: Optional[list[str]] = typer.Option(None, "--stage",
                                              help="jax: jaxpr, stablehlo, hlo; torch: fx, aot, inductor, "
                                                   "stablehlo, hlo (default: all)"),
    compare: bool = typer.Option(False, "--compare", help="both frameworks' StableHLO and optimized HLO, side by side"),
    preset: str = typer.Option("small", "--preset", "-p"),
    phase: str = typer.Option("forward", "--phase"),
    device: str = typer.Option("cpu", "--device"),
    dtype: str = typer.Option("float32", "--dtype"),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="override a preset parameter: KEY=VALUE"),
    matmul_precision: str = typer.Option("float32", help="float32 or tf32"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="artifact directory (default ./ir/<cell>)"),
    timeout: float = typer.Option(600.0, help="wall-clock limit, seconds"),
    inline: bool = typer.Option(False, "--inline", help="debug: dump in this process"),
) -> None:
    """Dump jaxpr / StableHLO / optimized HLO (JAX) and Dynamo FX / AOT / Inductor / StableHLO (PyTorch)."""
    if matmul_precision not in MATMUL_PRECISIONS:
        raise SpecError(f"unknown matmul precision {matmul_precision!r}; allowed: {', '.join(MATMUL_PRECISIONS)}")
    frameworks = framework or ["jax", "torch"]
    for fw in frameworks:
        if fw not in FRAMEWORK_STAGES:
            raise SpecError(f"unknown framework {fw!r}; allowed: jax, torch")
    if compare:
        if framework and set(frameworks) != {"jax", "torch"}:
            raise SpecError("--compare sets the two frameworks side by side; drop --framework (it takes both)")
        if stage:
            raise SpecError("--compare chooses its stages (StableHLO and optimized HLO); drop --stage")
        stages = {"jax": ["stablehlo", "hlo"], "torch": ["stablehlo", "hlo"]}
    else:
        stages = {}
        for fw in frameworks:
            chosen = [s for s in (stage or FRAMEWORK_STAGES[fw]) if s in FRAMEWORK_STAGES[fw]]
            stages[fw] = chosen
        unknown = [s for s in (stage or []) if not any(s in FRAMEWORK_STAGES[fw] for fw in frameworks)]
        if unknown:
            allowed = "; ".join(f"{fw}: {', '.join(FRAMEWORK_STAGES[fw])}" for fw in frameworks)
            raise SpecError(f"unknown stage(s) {', '.join(unknown)}; allowed: {allowed}")
    # one cell spec validates the workload, preset, phase, overrides, device and dtype
    spec = runner.plan_cells([workload], [preset], [phase], ["jax-jit"], [device], [dtype],
                             assignments(set_ or [], "--set"))[0]
    directory = writable_dir(out_dir or Path("ir") / f"{workload}-{preset}-{phase}-{dtype}", "--out")
    probe = runner.probe_machine(inline)
    if stages.get("torch") and {"stablehlo", "hlo"} & set(stages["torch"]) \
            and not (probe.get("torch_mlir") or {}).get("importable"):
        if compare:
            raise Unsupported(INSTALL_HINT)
        dropped = [s for s in stages["torch"] if s in ("stablehlo", "hlo")]
        stages["torch"] = [s for s in stages["torch"] if s not in dropped]
        err.print(f"[yellow]skipping torch {', '.join(dropped)}:[/] {INSTALL_HINT}")
    for fw in [fw for fw, s in stages.items() if s]:
        info = probe.get(fw) or {}
        if not info.get("importable") or (device == "cuda" and not info.get("cuda")):
            raise Unsupported(f"{fw} cannot run on {device} here: {info.get('error') or info.get('cuda_reason')}")
    task = {"target": "stackwars.ir.dump:dump_cell",
            "kwargs": {"spec": spec.to_dict(), "stages": stages, "out_dir": str(directory),
                       "matmul_precision": matmul_precision},
            "process": {"device": device, "cache_dir": None}}
    outcome = run_inline(task) if inline else run_task(task, timeout, runner.default_memory_limit())
    if outcome.status != "ok":
        status = outcome.status
        if status == "unsupported":
            raise Unsupported(outcome.error.splitlines()[0])
        err.print(f"[red]{status}[/]: {outcome.error}")
        raise typer.Exit(1)
    result = outcome.result
    if compare:
        out.print(report.compare(result["jax"], result["torch"], f"{spec.key}"))
        out.print(f"files: {directory}", highlight=False)
        return
    single = [(fw, s[0]) for fw, s in stages.items() if len(s) == 1] if sum(map(len, stages.values())) == 1 else []
    if single:  # one stage asked for: show the form itself, then its summary
        fw, st = single[0]
        files = result[fw][st].get("files") or [result[fw][st].get("file")]
        for f in files:
            out.print((directory / f).read_text(), highlight=False, markup=False, soft_wrap=True)  # as written
    for fw in stages:
        if result.get(fw):
            out.print(report.stage_table(fw, result[fw], str(directory)))
