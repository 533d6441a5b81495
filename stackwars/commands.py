"""The command line that measures stored cells again, on this machine.

Every verdict row carries one (the dynamo dashboard's users asked for exactly this:
pytorch/pytorch#136647): the workload as it is named on the command line (a user's file
with its Model's name in it), its preset, phase, device and dtype, the backends that
decided the row, every option and override those cells ran with, the matmul precision and
the timing mode. tests/test_verdict.py runs a row's command and checks that it plans the
row's cells exactly.

No framework is imported here.
"""

from __future__ import annotations

import shlex
from typing import Any, Iterable, Mapping, Sequence

# a backend option (CellSpec.options) -> the `stackwars run` flag that sets it, declared once: the
# run command reads each option from its flag's parameter (cli/run_cmd.parse), and a row's command
# writes it back (fullgraph is a switch: --fullgraph / --no-fullgraph)
OPTION_FLAGS = {"mode": "--compile-mode", "fullgraph": "--fullgraph", "xla_autotune_level": "--xla-autotune-level",
                "optimizer_impl": "--torch-optimizer", "xla_command_buffers": "--xla-command-buffers",
                "stablehlo": "--stablehlo"}


def db_flag(db: Any) -> str:
    """`` --db PATH`` for a command the tool prints to be pasted, PATH quoted for the shell where it
    must be (a space, a quote): copied whole, it runs as printed; empty where ``db`` is None."""
    return f" --db {shlex.quote(str(db))}" if db else ""


def workload_argument(row: Mapping[str, Any]) -> str:
    """How the row's workload is named on the command line: a user's file as ``path:NAME``
    (its recorded origin, ``file PATH:NAME``), anything else by its registered name."""
    origin = str(row.get("workload_origin") or "")
    if origin.startswith("file ") and ".py:" in origin:
        return origin[len("file "):]
    return str(row["workload"])


def run_command(rows: Sequence[Mapping[str, Any]], processes: int) -> str:
    """``stackwars run ...`` measuring the cells of ``rows`` (one table's rows: the same
    workload, preset, phase, device and dtype) again, each in ``processes`` processes. An
    option applies to every selected backend that takes it, so rows whose options cannot
    come from one command line (rows of two runs, one with ``--torch-optimizer``) get one
    command each, joined by ``&&``."""
    groups: list[list[Mapping[str, Any]]] = []
    for r in rows:
        home = next((g for g in groups if all(_compatible(r, m) for m in g)), None)
        if home is None:
            groups.append([r])
        else:
            home.append(r)
    return " && ".join(_one_command(g, processes) for g in groups)


def _accepts(backend: str) -> set[str]:
    from stackwars import registry
    from stackwars.errors import SpecError

    try:
        return set(registry.backend(backend).option_defaults)
    except SpecError:  # a plugin backend not importable here
        return set()


def _compatible(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether one command line can measure both rows: an option one of them ran with would
    reach the other (its backend takes it) only with the value the other ran with."""
    oa, ob = a.get("options") or {}, b.get("options") or {}
    for key in set(oa) | set(ob):
        if oa.get(key) == ob.get(key):
            continue
        if (key in oa and key in _accepts(b["backend"])) or (key in ob and key in _accepts(a["backend"])):
            return False
    return True


def _one_command(rows: Sequence[Mapping[str, Any]], processes: int) -> str:
    first = rows[0]
    args = ["stackwars", "run", workload_argument(first), "--preset", first["preset"], "--phase", first["phase"]]
    for b in dict.fromkeys(r["backend"] for r in rows):
        args += ["-b", b]
    if first.get("device") and first["device"] != "cpu":
        args += ["--device", first["device"]]
    if first.get("dtype") and first["dtype"] != "float32":
        args += ["--dtype", first["dtype"]]
    for key, values in _merged(r.get("overrides") or {} for r in rows).items():
        args += ["--set", f"{key}={','.join(values)}"]
    for key, values in _merged(r.get("options") or {} for r in rows).items():
        if key == "fullgraph":
            args.append("--fullgraph" if values == ["True"] else "--no-fullgraph")
        elif key in OPTION_FLAGS:
            args += [OPTION_FLAGS[key], values[0]]
    if first.get("matmul_precision") not in (None, "float32"):
        args += ["--matmul-precision", first["matmul_precision"]]
    if any(r.get("graph_replayed") for r in rows):
        args.append("--cuda-graph-replay")
    if any(r.get("flushed") for r in rows):
        args.append("--flush-l2")  # latency timing follows from it
    elif any(r.get("timing_mode") == "latency" or r.get("timing_modes") == ["latency"] for r in rows):
        args += ["--timing", "latency"]
    args += ["--processes", str(processes)]
    return shlex.join(args)


def _merged(dicts: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Every key's values across the rows, in order, once each (a sweep: ``--set k=a,b``)."""
    out: dict[str, list[str]] = {}
    for d in dicts:
        for k, v in sorted(d.items()):
            out.setdefault(k, [])
            if str(v) not in out[k]:
                out[k].append(str(v))
    return out
