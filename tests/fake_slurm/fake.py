"""A SLURM of one host, for tests: ``sbatch``, ``srun``, ``sacct`` and ``scancel`` as submitit
calls them. ``sbatch`` records the script's ``#SBATCH`` lines and runs the job (each task of
an array, one after another, as a node taken ``--exclusive`` would) in the background; ``sacct``
reports each task's state; ``srun`` runs its command with the job's output files. The state
lives in ``$FAKE_SLURM_DIR``."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ["FAKE_SLURM_DIR"])


def _jobs() -> dict:
    path = STATE / "jobs.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save(jobs: dict) -> None:
    tmp = STATE / "jobs.json.tmp"
    tmp.write_text(json.dumps(jobs))
    tmp.replace(STATE / "jobs.json")


def sbatch(script: str) -> None:
    text = Path(script).read_text()
    flags = re.findall(r"^#SBATCH (\S+)", text, re.M)
    array = next((f.split("=", 1)[1] for f in flags if f.startswith("--array=")), None)
    tasks = list(range(int(re.match(r"0-(\d+)", array).group(1)) + 1)) if array else [None]
    jobs = _jobs()
    job_id = str(1000 + len(jobs))
    jobs[job_id] = {"flags": flags, "script": script,
                    "tasks": {str(t): "PENDING" for t in tasks}}
    _save(jobs)
    subprocess.Popen([sys.executable, __file__, "_run", job_id], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    print(f"Submitted batch job {job_id}")


def _run(job_id: str) -> None:
    time.sleep(1.0)  # submitit renames the pickled tasks after sbatch returns, as on a real cluster
    job = _jobs()[job_id]
    for task in job["tasks"]:
        jobs = _jobs()
        if jobs[job_id]["tasks"][task] != "PENDING":
            continue  # cancelled
        jobs[job_id]["tasks"][task] = "RUNNING"
        _save(jobs)
        env = {**os.environ, "SLURM_JOB_ID": job_id if task == "None" else f"{job_id}{task}",
               "SLURM_NTASKS": "1", "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0", "SLURM_PROCID": "0",
               "SLURM_LOCALID": "0", "SLURM_JOB_NODELIST": socket.gethostname()}
        if task != "None":
            env.update(SLURM_ARRAY_JOB_ID=job_id, SLURM_ARRAY_TASK_ID=task)
        code = subprocess.run(["bash", job["script"]], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode
        jobs = _jobs()
        if jobs[job_id]["tasks"][task] == "RUNNING":
            jobs[job_id]["tasks"][task] = "COMPLETED" if code == 0 else "FAILED"
            _save(jobs)


def srun(args: list[str]) -> None:
    files = {}
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt in ("--output", "--error"):
            files[opt] = args.pop(0)
    ids = {"%A": os.environ.get("SLURM_ARRAY_JOB_ID", ""), "%a": os.environ.get("SLURM_ARRAY_TASK_ID", ""),
           "%j": os.environ["SLURM_JOB_ID"], "%t": "0"}
    for opt, name in list(files.items()):
        for k, v in ids.items():
            name = name.replace(k, v)
        files[opt] = open(name, "a")
    proc = subprocess.run(args, stdout=files.get("--output"), stderr=files.get("--error"))
    sys.exit(proc.returncode)


def sacct(args: list[str]) -> None:
    wanted = [args[i + 1] for i, a in enumerate(args) if a == "-j"]
    print("JobID|State|NodeList")
    for job_id, job in _jobs().items():
        if job_id in wanted:
            for task, state in job["tasks"].items():
                print(f"{job_id if task == 'None' else f'{job_id}_{task}'}|{state}|{socket.gethostname()}")


def scancel(args: list[str]) -> None:
    jobs = _jobs()
    for arg in args:
        job_id, _, task = arg.partition("_")
        if job_id in jobs:
            for t in ([task] if task else list(jobs[job_id]["tasks"])):
                if jobs[job_id]["tasks"].get(t) in ("PENDING", "RUNNING"):
                    jobs[job_id]["tasks"][t] = "CANCELLED"
    _save(jobs)


if __name__ == "__main__":
    name, rest = sys.argv[1], sys.argv[2:]
    if name == "_run":
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        _run(rest[0])
    elif name == "sbatch":
        sbatch(rest[-1])
    elif name == "srun":
        srun(rest)
    elif name == "sacct":
        sacct(rest)
    elif name == "scancel":
        scancel(rest)
