"""The scaling study's cells, measured: each item launched here (JAX's worker, torchrun) or,
when this process is one rank of a job someone else launched, measured in this process.

A scaling cell spans N devices (or hosts) at once, so it is not handed to a one-device
executor (``stackwars.executors``): its launchers are the distributed engines themselves
(``torchrun``, ``jax.distributed``, SLURM's environment). The CLI chooses and prints; this
module measures, as the runner does for the cell sweep.
"""

from __future__ import annotations

import json
import os
import tempfile
import traceback
from typing import Any, Callable, Mapping, Sequence

from stackwars.studies import scaling as study

_GROUP: dict[str, Any] = {}  # this rank's process group, joined once per process (external launcher)


def measure(items: Sequence[Mapping[str, Any]], timeout_s: float, visible: int | None, rows: list[dict[str, Any]],
            on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Each item's row appended to ``rows`` as it finishes (an interruption keeps those).
    ``visible``: GPUs this host has (a cell asking for more is unsupported); None: not known
    (an external job brings its own)."""
    try:
        return _measure(items, timeout_s, visible, rows, on_row)
    finally:
        leave_group()


def leave_group() -> None:
    """Leave the process group this process joined as a rank of an external job, if it joined one.
    A gloo group left to the interpreter's exit can abort the rank after its result is written
    ("terminate called without an active exception": its threads are destroyed still running), and
    torchrun then fails the whole job."""
    if _GROUP.pop("device", None) is None:
        return
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()
    _GROUP["left"] = True  # the process ends without the interpreter's teardown (torch_rank.end_process)


def left_a_group() -> bool:
    """Whether this process was a rank of an external PyTorch job (its group's threads may outlive it)."""
    return bool(_GROUP.get("left"))


def _measure(items, timeout_s, visible, rows, on_row) -> list[dict[str, Any]]:
    from stackwars.studies.scaling import launch, models

    meta: dict[tuple, tuple[int, int]] = {}
    for item in items:
        key = (item["model"], item["preset"], item["global_batch"])
        if key not in meta:
            pb = models.problem(item["model"], item["preset"], item["global_batch"], item["seed"], item["device"])
            meta[key] = (pb.parameter_count, pb.tokens_per_example)
        params, tokens = meta[key]
        if item["framework"] == "torch" and item["strategy"] in study.NO_TORCH:
            r = study.row(item, None, "unsupported", study.NO_TORCH[item["strategy"]], params, tokens)
        elif visible is not None and item["device"] == "cuda" and item["devices"] > visible:
            r = study.row(item, None, "unsupported", f"{item['devices']} GPUs asked for, {visible} visible",
                          params, tokens)
        elif item["launcher"] == "external":
            status, result, error = in_this_process(item)
            r = study.row(item, result, status, error, params, tokens)
        else:
            o = (launch.torch_cell if item["framework"] == "torch" else launch.jax_cell)(item, timeout_s)
            r = study.row(item, o.result, o.status, o.error, params, tokens)
        rows.append(r)
        if on_row:
            on_row(r)
        if r["status"] in ("error", "timeout") and item["launcher"] == "external":
            break  # the other ranks cannot be trusted to be where this one is
    return rows


def in_this_process(item: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None, str | None]:
    """A cell measured by this process as one rank of an external job."""
    from stackwars.harness.worker import classify

    try:
        if item["framework"] == "torch":
            from stackwars.studies.scaling import launch, torch_rank
            if "device" not in _GROUP:
                _GROUP["device"] = torch_rank.init_group(item["device"])
            with tempfile.TemporaryDirectory(prefix=f"stackwars-scaling-{os.getpid()}-") as tmp:
                path = os.path.join(tmp, "result.json")
                torch_rank.run_item({**item, "threads_per_rank": launch.threads_per_rank(
                    int(os.environ.get("LOCAL_WORLD_SIZE", item["devices"])))}, path, _GROUP["device"])
                if not os.path.exists(path):
                    return "ok", None, None  # not rank 0: rank 0 holds the figures
                with open(path) as f:
                    result = json.load(f)
        else:
            from stackwars.studies.scaling import jax_worker
            result = jax_worker.run_cell(item)
        return result.get("status", "ok"), result, result.get("error")
    except Exception as exc:  # noqa: BLE001 - a failing cell is a record
        return classify(exc), None, f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}"
