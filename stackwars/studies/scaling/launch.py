"""Starting a scaling cell's processes: JAX's worker (one per host), torchrun (one per host).

Several hosts are stood for on one machine by several launches joined over 127.0.0.1: JAX
processes through ``jax.distributed.initialize`` (coordinator = process 0), torchrun
launches through ``--nnodes H --node-rank k`` and a static rendezvous at process 0's
address. On a real cluster the same commands run once per host (README: "Scaling to many
GPUs and hosts").
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Mapping, Sequence

from stackwars.harness.isolation import Outcome, log_tail
from stackwars.harness.settings import available_cpus


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_group(commands: list[list[str]], envs: Sequence[Mapping[str, str]], timeout_s: float,
              logs: list[str]) -> str | None:
    """Run the commands together (each with its environment), each in its own session; kill
    every one of them when one fails or the time is up. None when all exited 0, else what went wrong."""
    procs = []
    for cmd, env, log in zip(commands, envs, logs):
        with open(log, "w") as f:
            procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, env=dict(env)))
    start, problem = time.perf_counter(), None
    try:
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed:
                problem = f"a process exited with code {failed[0].returncode}; the others were stopped"
                break
            if time.perf_counter() - start > timeout_s:
                problem = f"no result after {timeout_s:g} s (per-cell timeout); processes killed"
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            p.wait()
    codes = [p.returncode for p in procs]
    if problem is None and any(codes):
        problem = f"exit codes {codes}"
    return problem


def _outcome(result_path: str, problem: str | None, logs: list[str], wall: float) -> Outcome:
    tails = "\n".join(f"--- {os.path.basename(log)} (tail) ---\n{log_tail(log)[-3000:]}" for log in logs)
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
        status = result.get("status", "ok")
        if problem and result.get("complete"):
            # every rank's figures were gathered and the result written before a process died
            # on its way out (gloo's teardown has aborted a rank now and then): the measurement
            # stands, the crash is recorded beside it
            result["teardown_error"] = f"{problem}\n\n{tails}"
        elif problem and status == "ok":
            status = "error"
        error = result.get("error") or (f"{problem}\n\n{tails}" if problem and status != "ok" else None)
        return Outcome(status, result, error, wall)
    status = "timeout" if problem and "timeout" in problem else "error"
    return Outcome(status, None, f"{problem or 'no result written'}\n\n{tails}", wall)


def gpu_slices(hosts: int, per_host: int, visible: str | None) -> list[str]:
    """CUDA_VISIBLE_DEVICES for each of ``hosts`` launches standing for hosts on this one
    machine: launch k sees GPUs k*per_host .. (k+1)*per_host-1 of those this process may use
    (``visible``: its own CUDA_VISIBLE_DEVICES, else every GPU by index). Without it, each
    torchrun launch numbers its ranks' devices from cuda:0 (two ranks on one GPU) and each
    JAX process claims every GPU."""
    pool = [v.strip() for v in visible.split(",") if v.strip()] if visible else \
        [str(i) for i in range(hosts * per_host)]
    if len(pool) < hosts * per_host:
        raise ValueError(f"{hosts} launches of {per_host} GPU(s) need {hosts * per_host} GPUs; "
                         f"CUDA_VISIBLE_DEVICES allows {len(pool)}")
    return [",".join(pool[k * per_host:(k + 1) * per_host]) for k in range(hosts)]


def launch_envs(item: Mapping[str, Any], hosts: int, per_host: int, base: Mapping[str, str]) -> list[dict[str, str]]:
    """One environment per launch: on CUDA, each with its own slice of the GPUs."""
    if item["device"] != "cuda":
        return [dict(base) for _ in range(hosts)]
    return [{**base, "CUDA_VISIBLE_DEVICES": s, "CUDA_DEVICE_ORDER": base.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")}
            for s in gpu_slices(hosts, per_host, base.get("CUDA_VISIBLE_DEVICES"))]


def threads_per_rank(devices: int) -> int:
    return max(1, len(available_cpus()) // devices)


def torch_cell(item: Mapping[str, Any], timeout_s: float) -> Outcome:
    """torchrun, once per host; rank 0 writes the result."""
    hosts = int(item.get("hosts", 1))
    item = {**item, "threads_per_rank": threads_per_rank(item["devices"])}
    with tempfile.TemporaryDirectory(prefix=f"stackwars-scaling-{os.getpid()}-") as tmp:
        item_path, result_path = os.path.join(tmp, "item.json"), os.path.join(tmp, "result.json")
        with open(item_path, "w") as f:
            json.dump(item, f)
        port = free_port()
        commands, logs = [], []
        for node in range(hosts):
            commands.append([sys.executable, "-m", "torch.distributed.run", "--nnodes", str(hosts),
                             "--node-rank", str(node), "--nproc-per-node", str(item["devices"] // hosts),
                             "--master-addr", "127.0.0.1", "--master-port", str(port),
                             # its own folder (else a torchelastic_* in the system's temporary folder,
                             # left there by every cell), removed with the cell's
                             "--log-dir", os.path.join(tmp, f"elastic{node}"),
                             "-m", "stackwars.studies.scaling.torch_rank", item_path, result_path])
            logs.append(os.path.join(tmp, f"node{node}.log"))
        env = {**os.environ, "OMP_NUM_THREADS": str(item["threads_per_rank"]), "STACKWARS_PARENT_PID": str(os.getpid())}
        start = time.perf_counter()
        problem = run_group(commands, launch_envs(item, hosts, item["devices"] // hosts, env), timeout_s, logs)
        return _outcome(result_path, problem, logs, time.perf_counter() - start)


def jax_cell(item: Mapping[str, Any], timeout_s: float) -> Outcome:
    """The harness's worker, once per host (process 0 coordinates and writes the result)."""
    hosts = int(item.get("hosts", 1))
    with tempfile.TemporaryDirectory(prefix=f"stackwars-scaling-{os.getpid()}-") as tmp:
        coordinator = f"127.0.0.1:{free_port()}"
        commands, logs = [], []
        result0 = os.path.join(tmp, "result0.json")
        for pid in range(hosts):
            task = {"target": "stackwars.studies.scaling.jax_worker:run_cell",
                    "kwargs": {"item": {**item, "process_id": pid, "coordinator": coordinator}},
                    "process": {"device": item["device"], "cache_dir": None}}
            path = os.path.join(tmp, f"task{pid}.json")
            with open(path, "w") as f:
                json.dump(task, f)
            commands.append([sys.executable, "-m", "stackwars.harness.worker", path,
                             os.path.join(tmp, f"result{pid}.json")])
            logs.append(os.path.join(tmp, f"process{pid}.log"))
        start = time.perf_counter()
        env = {**os.environ, "STACKWARS_PARENT_PID": str(os.getpid())}
        problem = run_group(commands, launch_envs(item, hosts, item["devices"] // hosts, env), timeout_s, logs)
        return _outcome(result0, problem, logs, time.perf_counter() - start)
