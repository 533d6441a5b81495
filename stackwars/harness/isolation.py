"""Run a task in a fresh worker process, with a timeout and a memory watchdog.

The worker is a new ``python -m stackwars.harness.worker`` process (a spawn: nothing is
inherited from the parent but the environment) in its own session, so a timeout kills
it together with everything it started (Inductor's compile workers). Outcomes:

* the worker wrote a result: its status (``ok`` or what the worker classified);
* the wall clock passed ``timeout_s``: ``timeout``;
* the worker's process tree passed ``memory_limit_bytes`` of RSS: ``oom`` (killed);
* the worker died without a result (segfault, abort, kernel OOM kill): ``error`` with
  the signal and the tail of its output.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import psutil

from stackwars.harness import progress

LOG_TAIL_CHARS = 4000
# seconds a worker has, after writing its result, to end (an interpreter's shutdown takes well under
# one); then it is ended: a thread that is not a daemon (a user's factory started one) would keep it
ENDING_S = 5.0


@dataclass(frozen=True)
class Outcome:
    status: str
    result: dict[str, Any] | None
    error: str | None
    wall_s: float
    peak_tree_rss_bytes: int | None = None
    stage: str | None = None  # the last stage the worker reported (where a timeout or a crash caught it)


_STOP = threading.Event()  # set: every worker still running is killed (see stop_running)


def stop_running() -> None:
    """Kill the workers other threads of this process still wait on: an executor running cells
    side by side was stopped (Ctrl-C), so their results would not be stored; they end now
    instead of running to their end. ``allow_running`` lets new workers start again."""
    _STOP.set()


def allow_running() -> None:
    _STOP.clear()


class TreeRSS:
    """The resident memory of a worker and its descendants (Inductor's compile workers), read at
    every poll of the watchdog. Listing descendants reads every process in /proc (psutil):
    2.3 ms of CPU on the 2-core Zen 3 VM, so at a poll every 50 ms the parent took 5% of a CPU
    from the timed cell's cores, which its contention meter counted as others' load (the main
    job's processes read 5-6% there, a quarter of them over the 5% that makes a process busy).
    The list is made again once every ``REFRESH_S``; each poll reads the listed processes'
    memory (0.03 ms each)."""

    REFRESH_S = 1.0

    def __init__(self, proc: psutil.Process, clock: Callable[[], float] = time.monotonic):
        self.proc, self.clock = proc, clock
        self.kids: list[psutil.Process] = []
        self.listed: float | None = None

    def read(self) -> int:
        now = self.clock()
        if self.listed is None or now - self.listed >= self.REFRESH_S:
            try:
                self.kids = self.proc.children(recursive=True)
            except psutil.Error:  # a forked worker reaped by its server as we looked: nothing left to count
                return 0
            self.listed = now
        total = 0
        for p in (self.proc, *self.kids):
            try:
                total += p.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return total


def _kill_group(pid: int, running: bool = True) -> None:
    """``running``: the process has not been reaped (its pid is still its own), so where it has
    no group yet (a forked child before its setsid) it is killed alone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        if running:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def log_tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    return text[-LOG_TAIL_CHARS:]


def _start(task: dict[str, Any], argv: list[str], log_path: str, extra_env: dict[str, str]) -> Any:
    """The worker's process: forked from a preloading server where the task names what to
    preload (forkserver.py), else a fresh interpreter. Either way a new process in its own
    session, under the environment ``settings.environment`` gives the task."""
    from stackwars.harness import forkserver, settings

    proc_settings = task.get("process") or {}
    preload = proc_settings.get("preload")
    if preload and forkserver.enabled():
        env, _ = settings.environment(proc_settings.get("threads"), proc_settings.get("device", "cpu"),
                                      proc_settings.get("cache_dir"), proc_settings.get("env"),
                                      proc_settings.get("cpus"))
        child, why = forkserver.fork(argv, {**env, **extra_env}, log_path, tuple(preload),
                                     int(proc_settings.get("generation") or 0))
        if child is not None:
            return child
        task.setdefault("process", {})["spawned_because"] = why.get("spawned_because")
        with open(argv[0], "w") as f:
            json.dump(task, f)
    with open(log_path, "w") as log:
        return subprocess.Popen([sys.executable, "-m", "stackwars.harness.worker", *argv],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **extra_env})


def run_task(task: dict[str, Any], timeout_s: float, memory_limit_bytes: int | None = None,
             poll_s: float = 0.05, on_progress: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"stackwars-worker-{os.getpid()}-") as tmp:
        task_path, result_path, log_path, progress_path = (
            os.path.join(tmp, n) for n in ("task.json", "result.json", "log.txt", "progress.jsonl"))
        with open(task_path, "w") as f:
            json.dump(task, f)
        tail = progress.Tail(progress_path)
        stage: list[str | None] = [None]

        def relay() -> None:
            for event in tail.read():
                if event.get("event") == "stage":
                    stage[0] = event.get("stage")
                if on_progress is not None:
                    on_progress(event)

        start = time.perf_counter()
        proc = _start(task, [task_path, result_path], log_path,
                      {progress.ENV: progress_path, "STACKWARS_PARENT_PID": str(os.getpid())})
        try:
            ps = TreeRSS(psutil.Process(proc.pid))
        except psutil.NoSuchProcess:  # a forked child that has already ended: nothing to watch
            ps = None
        peak = 0
        killed: tuple[str, str] | None = None
        written: float | None = None  # when the result was first seen
        try:
            while True:
                try:
                    proc.wait(timeout=poll_s)
                    break
                except subprocess.TimeoutExpired:
                    pass
                relay()
                elapsed = time.perf_counter() - start
                if written is None and os.path.exists(result_path):
                    written = elapsed
                if written is not None and elapsed - written > ENDING_S:
                    # the result is written, and the worker does not end: something it ran holds its
                    # interpreter (a user's factory that started a thread that is not a daemon); what it
                    # had to say is said, so it is ended with its group, not waited for to the timeout
                    _kill_group(proc.pid)
                    proc.wait()
                    break
                if memory_limit_bytes is not None and ps is not None:
                    rss = ps.read()
                    peak = max(peak, rss)
                    if rss > memory_limit_bytes:
                        killed = ("oom", f"worker RSS {rss / 2**30:.2f} GiB exceeded the memory limit "
                                         f"{memory_limit_bytes / 2**30:.2f} GiB (watchdog killed it)")
                if killed is None and _STOP.is_set():
                    killed = ("error", "stopped: the run was interrupted while this cell ran; worker killed")
                if killed is None and elapsed > timeout_s and os.path.exists(result_path):
                    # the worker wrote its result (atomically) and is ending: this process was the one held
                    # up (stopped with Ctrl-Z, or starved), not the cell; its end is awaited, bounded
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=10)
                    break
                if killed is None and elapsed > timeout_s:
                    relay()
                    during = f" during the {stage[0]}" if stage[0] else ""
                    killed = ("timeout", f"no result after {timeout_s:g} s (per-cell timeout){during}; worker killed")
                if killed:
                    _kill_group(proc.pid)
                    proc.wait()
                    break
        finally:
            if proc.poll() is None:  # parent interrupted (Ctrl-C): take the worker down with it
                _kill_group(proc.pid)
                proc.wait()
            _kill_group(proc.pid, running=False)  # stragglers left by a worker that exited (compile pools)
        relay()
        wall = time.perf_counter() - start
        tail = log_tail(log_path)
        if killed:
            return Outcome(killed[0], None, f"{killed[1]}\n\n--- worker output (tail) ---\n{tail}", wall, peak or None,
                           stage[0])
        if os.path.exists(result_path):
            with open(result_path) as f:
                result = json.load(f)
            return Outcome(result.get("status", "ok"), result, result.get("error"), wall, peak or None, stage[0])
        code = proc.returncode
        orphaned = getattr(proc, "orphaned", None)
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        hint = " (SIGKILL without a watchdog kill: possibly the kernel's OOM killer)" if code == -9 else ""
        if orphaned:  # a status names what happened, not a guess
            how, hint = (f"an unknown status: its fork server {orphaned} while the worker ran (a signal from "
                         f"outside?), so nothing reported how the worker ended"), ""
        during = f" during the {stage[0]}" if stage[0] else ""
        return Outcome("error", None, f"worker died without a result{during}: {how}{hint}\n\n--- worker output "
                                      f"(tail) ---\n{tail}", wall, peak or None, stage[0])


def run_inline(task: dict[str, Any], on_progress: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    """Debug mode: run the task in this process (no isolation, no timeout, no pinning)."""
    from stackwars.harness.worker import execute

    start = time.perf_counter()
    inline_task = dict(task, process=None)  # never pin or re-point caches in the parent
    progress.listen(on_progress)
    try:
        result = execute(inline_task)
    finally:
        progress.listen(None)
        # a JAX cell pointed the process's persistent cache at its own folder: back to the process's own
        jax_common = sys.modules.get("stackwars.backends.jax_common")
        if jax_common is not None:
            jax_common.restore_process_cache()
    return Outcome(result.get("status", "ok"), result, result.get("error"), time.perf_counter() - start)
