"""Worker process entry: ``python -m stackwars.harness.worker TASK.json RESULT.json``.

A task names a function (``"target": "module:function"``) and its keyword arguments,
plus process settings applied before anything heavy is imported. The function returns
a plain dict; an exception becomes ``{"status": "oom"|"error", "error": traceback}``.
The result is written atomically, so a missing file means the process died.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any


def classify(exc: BaseException) -> str:
    """``oom`` for every out-of-memory signal the frameworks raise, ``unsupported`` for a
    request this machine cannot serve (a missing optional extra), else ``error``."""
    from stackwars.errors import Unsupported

    if isinstance(exc, Unsupported):
        return "unsupported"
    if isinstance(exc, MemoryError):
        return "oom"
    name = type(exc).__name__
    text = str(exc)
    if name == "OutOfMemoryError" or "CUDA out of memory" in text:
        return "oom"
    if "RESOURCE_EXHAUSTED" in text or "Out of memory" in text:
        return "oom"
    return "error"


# how this process was made: a fresh interpreter (spawned), or a fork of a preloading server
# (forkserver.py sets it in the child, with what the server had loaded and its state)
SPAWNED = "spawned: a fresh interpreter"
ORIGIN: dict[str, Any] = {"how": SPAWNED}


def execute(task: dict[str, Any]) -> dict[str, Any]:
    from stackwars.harness import settings

    proc = task.get("process")
    if proc:
        applied = settings.apply(proc.get("threads"), proc.get("device", "cpu"), proc.get("cache_dir"),
                                 proc.get("env"), proc.get("cpus"), prepared=ORIGIN["how"] != SPAWNED)
        # where a fork server was asked for and could not serve, the record says why it was spawned
        applied["origin"] = {**ORIGIN, "pid": os.getpid(),
                             **({"spawned_because": proc["spawned_because"]} if proc.get("spawned_because") else {})}
    else:  # inline (debug) mode: the parent's process is left as it is
        applied = {"inline": True}
    try:
        module, func = task["target"].split(":")
        result = getattr(importlib.import_module(module), func)(**task.get("kwargs", {}))
        result.setdefault("process_settings", applied)
        return result
    except BaseException as exc:  # noqa: BLE001 - every failure must come back as a record
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"status": classify(exc), "error": f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}",
                "process_settings": applied}


def write_atomic(path: str, payload: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, default=_default)
    os.replace(tmp, path)


def _default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (tuple, set)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _exit_when_orphaned(parent: int, interval_s: float = 1.0) -> None:
    """Workers live in their own session (so a timeout can kill their whole tree); if the
    parent dies without killing them (SIGKILL), they must not run on: exit, with the group."""
    import signal
    import threading
    import time

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                try:
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                finally:
                    os._exit(3)

    threading.Thread(target=watch, daemon=True, name="stackwars-orphan-watch").start()


PARENT_ENV = "STACKWARS_PARENT_PID"


def main(argv: list[str], parent: int | None = None) -> int:
    """``parent``: the process whose death ends this one (a fork server names itself)."""
    task_path, result_path = argv
    # the parent names itself: a parent killed while this interpreter was still starting has
    # already handed us to init, and getppid() alone would then look like a parent forever
    parent = parent or int(os.environ.get(PARENT_ENV) or os.getppid())
    if os.getppid() != parent:
        return 3
    _exit_when_orphaned(parent)
    with open(task_path) as f:
        task = json.load(f)
    write_atomic(result_path, execute(task))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
