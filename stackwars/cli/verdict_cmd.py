"""stackwars verdict: JAX or PyTorch, per workload, from stored runs; see ``stackwars.report.verdict``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from stackwars import stats
from stackwars import outputs
from stackwars.cli.common import DB_HELP, command, err, number, out, table_width
from stackwars.errors import SpecError
from stackwars.report import verdict as vd
from stackwars.store.results import CELL_KINDS, Store, check_db, rows

FORMATS = ("table", "markdown", "json")


def load(store: Store, run_ids: list[str] | None) -> tuple[list[str], list[dict[str, Any]], list, list]:
    """The named runs of measured cells (default: the latest), their rows, profiles and anatomy."""
    from stackwars.report.profiles import anatomy_rows, profile_rows

    if not run_ids:
        latest = store.latest_run_id()
        if latest is None:
            raise SpecError(f"no run of measured cells in {store.path}; `stackwars run ...` measures some")
        run_ids = [latest]
    found, measured = [], []
    for rid in dict.fromkeys(run_ids):
        info = store.run(rid)
        if info.kind not in CELL_KINDS:
            raise SpecError(f"run {rid} is a {info.kind} run; a verdict is drawn from runs of measured cells "
                            f"({', '.join(CELL_KINDS)}); `stackwars runs` lists them")
        found += rows(store, rid)
        measured += [m for _, m in store.cells(rid)]
    return list(dict.fromkeys(run_ids)), found, profile_rows(measured), anatomy_rows(measured)


def to_json(result: list[dict[str, Any]], run_ids: list[str], threshold: float, mixed: str | None = None) -> str:
    return json.dumps({"runs": run_ids, "threshold": threshold, "min_processes": stats.MIN_PROCESSES,
                       "mixed_machines": mixed, "verdicts": result}, indent=1, default=str) + "\n"


@command
def verdict(
    run_ids: Optional[list[str]] = typer.Argument(None, help="runs of measured cells (default: the latest); for a "
                                                             "cell in several, the latest run's processes count"),
    format: str = typer.Option("table", "--format", "-f", help="table, markdown or json"),
    threshold: float = typer.Option(stats.TIE_THRESHOLD, "--threshold",
                                    help="a ratio whose whole 95% CI lies within 1/(1+t)..1+t is a tie"),
    aa: bool = typer.Option(False, "--aa", help="self-check instead: each cell's processes split into even and odd "
                                               "rounds, the same program set against itself; counts ties, false "
                                               "verdicts and undecided (needs 6+ processes a cell)"),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """JAX or PyTorch: per workload x preset x phase x dtype x device and machine, the best
    PyTorch backend against the best JAX backend, the ratio with its 95% CI over processes,
    and a verdict (JAX faster, PyTorch faster, tie, cannot say) with its reason."""
    if format not in FORMATS:
        raise SpecError(f"unknown format {format!r}; allowed: {', '.join(FORMATS)}")
    number(threshold, "--threshold", low=0, high=0.5, low_inclusive=True)
    path = check_db(db, create=False)
    with Store(path, create=False) as store:
        ids, found, profiles, anatomy = load(store, run_ids)
    if aa:
        _self_check(found, ids, threshold, format)
        return
    result = vd.verdicts(found, profiles, anatomy, threshold=threshold)
    mixed = vd.mixed_machines(found)
    if mixed:
        err.print(f"[yellow]{mixed}[/]", highlight=False)
    if format == "json":
        outputs.emit(to_json(result, ids, threshold, mixed))
    elif format == "markdown":
        outputs.emit(vd.markdown(result, threshold))
    else:
        if not result:
            out.print(f"runs {', '.join(ids)} hold no cells to decide on", highlight=False)
            return
        out.print(vd.render(result, table_width(), threshold), width=table_width())


def _self_check(found: list[dict[str, Any]], ids: list[str], threshold: float, format: str) -> None:
    checks = vd.self_check(found, threshold)
    if not checks:
        raise SpecError(f"runs {', '.join(ids)} have no cell with 6 or more clean processes; the self-check splits a "
                        f"cell's processes in two halves of 3+ (run ... --processes 6)")
    counts = {d: sum(c["decision"] == d for c in checks) for d in ("tie", "lower", "higher", "noisy")}
    false = counts["lower"] + counts["higher"]
    summary = (f"{len(checks)} same-program comparisons (even against odd rounds): {counts['tie']} tie, {false} false "
               f"verdict(s) ({false / len(checks):.1%}), {counts['noisy']} too wide to decide")
    if format == "json":
        outputs.emit(json.dumps({"runs": ids, "threshold": threshold, "summary": summary, "counts": counts,
                                 "checks": checks}, indent=1, default=str) + "\n")
        return
    bullet = "- " if format == "markdown" else ""
    for c in checks:
        print(f"{bullet}{c['table']} · {c['backend']} ({c['processes'][0]} vs {c['processes'][1]} processes): "
              f"{c['ratio']:.3f} ({c['ci_low']:.3f}-{c['ci_high']:.3f}) {c['decision']}")
    print(f"\n{summary}")
