"""`stackwars reproduce`: every published study (../shared/STUDIES.md) at the sizes the device
can run, into one database, then the report.

    stackwars reproduce                          # CPU, small sizes
    stackwars reproduce --device cuda --budget 60

The plan is a list of steps, each one stackwars command (the same commands the README
documents), run in order of importance as subprocesses writing to the same database. The
`run` steps choose each row's two bests on one process a cell and decide them in rounds at the
verdict's looks (run's default, or fewer and a lower cap where processes are long:
``CPU_RUN_LOOKS``),
so the report that closes the plan opens with a verdict that can name winners; but `why`, whose question is
where a train step's time and memory go, not which mode is faster: one profiled process a
cell (the models and micro-op steps decide). The
steps done are recorded in ``OUT/reproduce-state.json`` (with their run ids, status and time),
so running the command again continues where it stopped; a step that would start after the
budget is left for the next invocation and listed as such. Each step's output goes to
``OUT/logs/STEP.log``; the report is written last, from everything the database holds.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from stackwars.errors import SpecError


FINISHED = (0, 1)  # exit codes of a command that ran to its end (1: some cell failed, and is recorded)


@dataclass(frozen=True)
class Step:
    name: str
    answers: str  # which study and question
    args: tuple[str, ...]  # after `stackwars`
    estimate_min: float  # on the device it is planned for, for the budget
    note: str = ""  # what planning changed for this machine (a model at a size that fits, one left out), and why


SWEEPS = (("run",), ("study", "control-flow"))  # the commands whose cells an executor places (--executor)

MODELS = ("resnet50", "bert-base", "gpt2", "vit-b16", "gpt-neo-1.3b", "llama3-8b")  # S3's model table
# a transformer whose preset does not fit is planned at this depth: the fewest layers that keep each kind
# of layer (GPT-Neo alternates global and local attention), so its per-layer cost is still measured
FIT_LAYERS = 2


@dataclass(frozen=True)
class Fit:
    """How a model is planned on this machine: ``overrides`` empty at its preset, ``{"n_layers": ...}``
    at a depth that fits, or ``None``: left out. ``reason``: why, in figures (empty when it fits)."""
    model: str
    overrides: dict[str, int] | None
    reason: str = ""


# why a model that fits only smaller is not run smaller by the CPU's plan (``plan(reduce=False)``, its default)
NOT_REDUCED = ("S3's figure for it is an out-of-memory of the whole model, which a cut-down one does not answer (the "
               "report gives the memory it needs at S3's size), and at 2 layers its step took 20 of reproduce's "
               "107 minutes on the 2-CPU VM (results/report-2026-11-28-cpu-107min)")


def fit(model: str, preset: str, phase: str, dtype: str, device: str, memory: int, reduce: bool = True) -> Fit:
    """Whether ``model`` at ``preset`` fits ``memory`` bytes (the device's: the host's available memory
    on the CPU, the GPU's total on CUDA), by the same estimate and rule the cells' pre-flight check
    holds it to (runner/planning.py: the weights and the running program, under HEADROOM of the
    memory), known before anything runs. One that does not is planned at ``FIT_LAYERS`` layers where
    that fits (and ``reduce``), or left out; either way the reason names both figures."""
    from stackwars import registry
    from stackwars.runner.planning import GiB, HEADROOM, memory_need

    wl = registry.workload(model)
    cfg = wl.config(preset, {})
    have = HEADROOM * memory
    need, where = memory_need(wl.memory_estimate(cfg, phase, dtype), device)
    if need <= have:
        return Fit(model, {})
    why = (f"{model} {preset} {phase} {dtype} needs about {need / GiB:.1f} GiB of {where} (weights and the "
           f"running program), more than {HEADROOM:.0%} of the {memory / GiB:.1f} GiB it may take here")
    layers = getattr(cfg, "n_layers", None)
    if layers and layers > FIT_LAYERS:
        small = wl.config(preset, {"n_layers": FIT_LAYERS})
        need_small, _ = memory_need(wl.memory_estimate(small, phase, dtype), device)
        if need_small <= have and not reduce:
            return Fit(model, None, f"{why}: left out, not run at {FIT_LAYERS} of its {layers} layers, where it would "
                                    f"fit ({need_small / GiB:.1f} GiB; `stackwars run {model} --set "
                                    f"n_layers={FIT_LAYERS}`): {NOT_REDUCED}")
        if need_small <= have:
            return Fit(model, {"n_layers": FIT_LAYERS},
                       f"{why}: planned at {FIT_LAYERS} of its {layers} layers (--set n_layers={FIT_LAYERS}, "
                       f"{need_small / GiB:.1f} GiB), every other size as the preset's")
        why += f", and {need_small / GiB:.1f} GiB at {FIT_LAYERS} layers"
    return Fit(model, None, why + ": left out")


def device_memory(device: str) -> int:
    """The memory a cell of ``device`` may take now: the host's available memory on the CPU, the
    first GPU's total where NVML sees one (the host's available memory where it does not)."""
    import psutil

    from stackwars.runner.planning import machine_memory

    gpu = machine_memory()[1] if device == "cuda" else None
    return gpu if gpu is not None else int(psutil.virtual_memory().available)


# the wall seconds each `run` step may take on the CPU (`run --budget`): its planned processes always run, and a
# verdict that cannot decide takes more only while they fit. From the whole reproduce of 2026-11-28 on the 2-CPU Xeon
# VM (results/report-2026-11-28-cpu-107min/): its planned processes alone took about these; the looks past them took 18
# more processes and about 930 s in the models step, 6 and about 600 s in llama3-8b's (gpt-neo-1.3b's and
# llama3-8b's calls of 1.3-6.6 s on a VM whose neighbours took 7-36% of its CPUs)
# `why` has none: one process a cell asks no verdict, so it has no look to stop
CPU_RUN_BUDGET_S = {"micro-ops": 300, "models": 1200, "models-": 600, "kernels": 180}
# the looks of the `run` steps on the CPU whose processes are long (the models' forward calls take 0.15-4.4 s and a
# gpt-neo-1.3b process 15-27 s of building its weights; the custom kernels' calls 0.35-0.8 s, interpreted): a first
# look at 3 rounds and a cap of 9 (looks 3, 5, 7, 9; run's default: 4 to 16), so that the step's budget reaches its
# later looks; the boundary spends its 5% over those looks (not measured on the VM yet: issue 87's note); the
# micro-ops step reads its rows as the main job does
CPU_RUN_LOOKS = {"models": (3, 9), "models-": (3, 9), "kernels": (3, 9)}


def cpu_run_args(name: str, device: str) -> tuple[str, ...]:
    """What a `run` step adds on the CPU, in one place (``plan``): ``--budget SECONDS`` (CPU_RUN_BUDGET_S) and
    ``--processes N --max-processes M`` (CPU_RUN_LOOKS); ``models-`` is any model planned at a smaller size. Nothing
    on CUDA: its plan has no measured times to bound its steps by, and its calls are short."""
    if device != "cpu":
        return ()

    def setting(table: dict) -> object:
        return table.get(name, table.get("models-") if name.startswith("models-") else None)

    seconds, looks = setting(CPU_RUN_BUDGET_S), setting(CPU_RUN_LOOKS)
    return ((("--budget", str(seconds)) if seconds else ())
            + (("--processes", str(looks[0]), "--max-processes", str(looks[1])) if looks else ()))


def model_steps(device: str, size: str, memory: int, reduce: bool = True) -> list[Step]:
    """S3's model table, forward: the models that fit at ``size`` in one step; each one that fits only
    smaller in a step of its own (its size named in the step), or, without ``reduce``, left out with
    that reason; one that fits at no size named in the first step's note, never run into an
    out-of-memory."""
    dev = ("--device", device)
    dtype = ("--dtype", "bfloat16") if device == "cuda" else ()
    fits = [fit(m, size, "forward", "bfloat16" if device == "cuda" else "float32", device, memory, reduce)
            for m in MODELS]
    whole = [f.model for f in fits if f.overrides == {}]
    left = [f.reason for f in fits if f.overrides is None]
    steps = [Step("models", "S3's model table (the six models), forward",
                  ("run", *whole, "--preset", size, "--phase", "forward", *dev, *dtype), 30,
                  "; ".join(left))] if whole else []
    for f in fits:
        if f.overrides:
            sets = tuple(a for k, v in f.overrides.items() for a in ("--set", f"{k}={v}"))
            steps.append(Step(f"models-{f.model}", f"S3's model table: {f.model} at a size that fits, forward",
                              ("run", f.model, "--preset", size, *sets, "--phase", "forward", *dev, *dtype), 10,
                              f.reason))
    return steps


def plan(device: str, data_dir: str | None, executor: Sequence[str] = (), memory: int | None = None,
         reduce: bool | None = None) -> list[Step]:
    """The steps for the device, most important first. CPU: small sizes (the 2-core VM runs
    each step in minutes); CUDA: the published (paper) sizes. ``executor``: the arguments that
    choose where cells run (``--executor gpu-pool``...), given to every step that sweeps cells.
    ``memory``: the bytes a cell may take (default: this machine's, ``device_memory``), against which
    each model is planned at a size that fits or left out (``fit``). ``reduce``: whether a model that fits
    only smaller is run smaller (default: on CUDA; the CPU plan leaves it out, ``NOT_REDUCED_ON_CPU``)."""
    size = "paper" if device == "cuda" else "small"
    dev = ("--device", device)
    memory = device_memory(device) if memory is None else memory
    steps = [
        Step("peaks", "rooflines: the device's measured matmul and memory peaks", ("peaks", *dev), 1),
        Step("micro-ops", "S3's micro-op table (GEMM, FFN, MHA), every backend, both phases",
             ("run", "gemm", "ffn", "mha", "--preset", size, "--phase", "forward", "--phase", "train-step", *dev), 12),
        *model_steps(device, size, memory, device != "cpu" if reduce is None else reduce),
        Step("recompile", "S1/S2: what changing shapes recompiles",
             ("study", "recompile", "mha", "--vary", "seq=16,32,48,64,96,128", *dev), 3),
        Step("cache", "S1: compile caches, cold vs warm", ("study", "cache", "mha", *dev), 3),
        Step("control-flow", "S1: loops and branches, the cliffs",
             ("study", "control-flow", "rnn", "--vary", "n=10,30,100", "-p", "small", *dev), 12),
        Step("stream", "S1: dynamic shapes over a stream of requests",
             ("study", "stream", "mha", "--requests", "24", *dev), 5),
        Step("vmap", "S5: per-example ops, loop vs vmap vs batched, S5's method beside ours",
             ("study", "vmap", "--batch", "1,16,128", *dev), 8),
        Step("scaling", "S1/S2: data parallelism, JAX sharding vs DDP/FSDP2",
             ("study", "scaling", "gpt2", "--preset", "tiny" if device == "cpu" else "small", "--devices",
              "1,2,4" if device == "cpu" else "1", *dev), 6),
        # one process a cell: rounds for a verdict took 268 of its 508 s on the 2-CPU VM (2026-11-28), and which
        # mode is faster is not its question
        Step("why", "S1/S2: where a train step's time and memory go (profiles, memory anatomy), GPT-2",
             ("run", "gpt2", "--preset", size, "--phase", "train-step", "-b", "torch-eager", "-b", "torch-compile",
              "-b", "jax-jit", "--profile", "2", "--processes", "1", *dev)
             + (("--dtype", "bfloat16") if device == "cuda" else ()), 10),
        Step("kernels", "S2: a custom kernel in Triton (PyTorch) and in Pallas (JAX) beside the operators",
             ("run", "softmax", "layernorm", "--preset", size, "--set", "impl=framework,custom", *dev), 7),
    ]
    mnist = ("train", "mnist", "--lr", "0.01", "--batch-size", "64", "--batch-size", "256", "--batch-size", "1024",
             "--epochs", "10" if device == "cuda" else "3", *dev)
    steps.insert(next(i for i, s in enumerate(steps) if s.name == "recompile"),
                 Step("mnist", "S4: the MNIST MLP at S4's settings (SGD 0.01, batch 64/256/1024)",
                      mnist + (("--data-dir", data_dir) if data_dir else ()), 10))
    steps = [replace(s, args=s.args + cpu_run_args(s.name, device)) if s.args[0] == "run" else s for s in steps]
    if executor:
        steps = [replace(s, args=s.args + tuple(executor))
                 if any(s.args[:len(c)] == c for c in SWEEPS) else s for s in steps]
    return steps


def load_state(path: Path, on_warning: Callable[[str], None] = lambda text: None,
               keep_aside: bool = True) -> dict[str, dict]:
    """The steps done so far. A state file that cannot be read is not silently taken for none:
    the warning names it, and it is kept aside (``.corrupt``, or ``.corrupt.N`` where an earlier
    one is kept: never over it) before a new one replaces it; ``keep_aside=False`` (a dry run,
    which writes nothing) leaves it where it is."""
    if not path.exists() and not path.is_symlink():
        return {}
    if not path.is_file():  # a FIFO would block the read forever, a link that leads nowhere would raise
        raise SpecError(f"{path} is not a regular file (a FIFO, a device, a folder or a broken link): the state "
                        f"of a reproduction is a JSON file the command writes; move it away and run again")
    try:
        state = json.loads(path.read_text())
        if not isinstance(state, dict) or not all(isinstance(v, dict) for v in state.values()):
            raise ValueError("not an object of steps")
        return state
    except (OSError, ValueError) as exc:
        where = "left where it is"
        if keep_aside:
            kept = next(k for k in (path.with_name(path.name + ".corrupt" + (f".{i}" if i else "")) for i in
                                    itertools.count()) if not k.exists() and not k.is_symlink())
            try:
                os.link(path, kept)  # a new name only: never over an earlier one (replace would be)
                path.unlink()
                where = f"kept as {kept}"
            except OSError:
                pass
        on_warning(f"{path} cannot be read ({exc}); it is {where}, and every step "
                   f"{'runs' if keep_aside else 'would run'} again")
        return {}


def failed(state: dict[str, dict]) -> list[str]:
    """The steps whose command did not end with exit 0, with how each ended."""
    return [f"{name} ({s.get('status', 'exit ' + str(s.get('exit_code')))})" for name, s in state.items()
            if "exit_code" in s and s["exit_code"] != 0]


def execute(steps: Sequence[Step], state_path: Path, budget_s: float | None,
            run_step: Callable[[Step], tuple[int, float]], clock: Callable[[], float] = time.monotonic,
            on_step: Callable[[Step, str], None] | None = None,
            on_warning: Callable[[str], None] = lambda text: None) -> dict[str, dict]:
    """Run the steps not yet done, in order, while the budget lasts; ``run_step`` returns (exit
    code, seconds). A step is done when its command finished: exit 0, or 1 (it ran, and some
    cell failed: that failure is a stored result). The state is rewritten after every step,
    whole, so an interrupted reproduce loses at most the step it was in."""
    from stackwars import outputs

    state = load_state(state_path, on_warning)
    start = clock()

    def save() -> None:
        outputs.write(state_path, json.dumps(state, indent=1), "the state file")

    for step in steps:
        done = state.get(step.name, {})
        if done.get("exit_code") in FINISHED:
            if on_step:
                on_step(step, "done before")
            continue
        if budget_s is not None and clock() - start >= budget_s:
            state[step.name] = {**done, "status": "not reached (budget)"}
            if on_step:
                on_step(step, "not reached")
            continue
        if on_step:
            on_step(step, "running")
        code, seconds = run_step(step)
        state[step.name] = {"exit_code": code, "seconds": round(seconds, 1), "args": list(step.args),
                            "status": {0: "done", 1: "done, some cells failed"}.get(code, f"exit {code}"),
                            **({"note": step.note} if step.note else {})}
        save()
        if on_step:
            on_step(step, state[step.name]["status"])
    save()
    return state
