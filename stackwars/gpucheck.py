"""The GPU check: what must hold on a GPU, in named stages that each fit one remote command.

    python -m stackwars.gpucheck --list                 # the stages, their cells and estimates
    python -m stackwars.gpucheck --stage tests-eager    # one stage (repeat --stage for more)
    python -m stackwars.gpucheck --proof                # the stages that prove the GPU paths
    python -m stackwars.gpucheck                        # every stage, in order

(``scripts/gpu-check.sh`` is this module with ``PYTHONPATH`` set.) The GPU machines we are
lent run each command on a fresh machine for at most 10 minutes and return only what is
written under the folder ``$OUT`` names. So a stage is the unit: it starts from nothing
(no state is carried from an earlier stage), its cells are counted and estimated from
figures measured on an H100 (``ESTIMATE_S``) to end well inside ``STAGE_LIMIT_S``, and
everything it writes goes under ``$OUT/<stage>/`` (the database, the JSON of the cells,
the tables, the log, ``env.json`` and ``SUMMARY.md``). ``$OUT`` is read, never assigned;
without it the results go to ``results/gpu-<device>/``. Caches are shared across a
stage's cells where the first call is not the point (the GPU tests); the tables whose
first-call column is the point run cold.

Without an NVIDIA GPU (NVML sees none) it says so and exits 3 (``--list`` and
``--dry-run`` work anywhere). Exit 0 when every stage asked for ended ok, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
STAGE_LIMIT_S = 540  # one remote command runs at most 600 s; the machine's start and the copy-back need the rest
NO_GPU_EXIT = 3

# Seconds one cell costs on an H100, harness included (GPU-NOTES, stackwars at b9fb656: wall per
# cell 9-19 s torch-eager micro-ops, 27-32 s torch-compile, 16-33 s jax-jit, 71-86 s a GPT-2 paper
# train step; the models' first calls 4-17 s). Rounded up: an estimate that is too low costs a
# stage its last cells.
ESTIMATE_S = {
    "tiny-eager": 10, "tiny-compiled": 25, "tiny-jax": 15,
    "micro-eager": 15, "micro-compiled": 32, "micro-jax": 33,
    # resnet50, vit-b16, bert-base, gpt2 paper forward, one process each: 82 and 84 s for 6 cells on the
    # H100 at 3effb27 (forked from preloaded servers), about 14 s a cell, rounded up
    "model-eager": 15, "model-compiled": 25, "model-jax": 25,
    "big-model": 150,  # gpt-neo-1.3b, llama3-8b: weights drawn on the host, the reference in its own worker
    "train-gpt2": 90, "peaks": 25, "mnist": 40, "scaling": 35, "kernel": 20,
    # a resnet50 / gpt2 paper forward cell-process forked from a preloaded server, caches warm after
    # the first: the H100 at 3effb27 ran 28 of them (torch-compile, jax-jit) in 269 s, 9.6 s each;
    # rounded up for the matched pairs' CUDA-graph captures and XLA's second compile
    "verdict-model": 15,
}
TIMING = ("--warmup", "2", "--min-samples", "5", "--min-time", "0.3", "--timeout", "240")
COMMON = (*TIMING, "--processes", "1", "--max-processes", "1")


def kind_of(backend: str, size: str) -> str:
    mode = "eager" if backend in ("torch-eager",) else "jax" if backend.startswith("jax") else "compiled"
    return f"{size}-{mode}"


@dataclass(frozen=True)
class Stage:
    name: str
    proves: str
    cells: tuple[tuple[int, str], ...]  # (count, ESTIMATE_S key)
    argv: Callable[[Path], list[str]]  # the command, given the stage's folder
    proof: bool = True  # part of the sequence that proves the GPU paths
    needs_data: bool = False
    within_s: int | None = None  # the stage's command stops its own work inside this (a --budget)

    @property
    def cell_count(self) -> int:
        return sum(n for n, _ in self.cells)

    @property
    def estimate_s(self) -> int:
        full = sum(n * ESTIMATE_S[k] for n, k in self.cells)
        return full if self.within_s is None else min(full, self.within_s)


def _run(*args: str) -> Callable[[Path], list[str]]:
    def argv(d: Path) -> list[str]:
        return [sys.executable, "-m", "stackwars", "run", *args, *COMMON, "--db", str(d / "stackwars.db"),
                "--json", str(d / "cells.json")]
    return argv


def _pytest(*args: str) -> Callable[[Path], list[str]]:
    def argv(d: Path) -> list[str]:
        return [sys.executable, "-m", "pytest", "-q", "-rs", "-m", "gpu", "-p", "no:cacheprovider",
                f"--junitxml={d / 'junit.xml'}", *args]
    return argv


def _cells(backends: Sequence[str], size: str, per_backend: int) -> tuple[tuple[int, str], ...]:
    counts: dict[str, int] = {}
    for b in backends:
        counts[kind_of(b, size)] = counts.get(kind_of(b, size), 0) + per_backend
    return tuple((n, k) for k, n in counts.items())


# on CUDA a verdict sets programs that replay CUDA graphs against each other, and those that do not
# (verdict/choose.py): each side's program of both kinds, so that every row is best against best
MATCHED = ("torch-compile", "torch-cudagraphs", "jax-jit", "jax-jit-no-graphs")
NO_GRAPHS = ("torch-compile", "jax-jit-no-graphs")  # the pair without graph replay, for big models and knobs
MICRO_BACKENDS = ("torch-eager", *MATCHED)
MODEL_BACKENDS = ("torch-eager", *MATCHED)
WHY_BACKENDS = ("torch-eager", *NO_GRAPHS)  # train steps profiled: launch-by-launch, what the profile shows
SCALING_ARGS = ("study", "scaling", "gpt2", "--preset", "small", "--device", "cuda", "--devices", "1",
                "-s", "dp", "-s", "fsdp", "--steps", "10")


def _data_dir() -> str | None:
    for candidate in (os.environ.get("STACKWARS_DATA_DIR"), ROOT / ".data" / "mnist", ROOT.parent / "shared" / "data"
                      / "mnist"):
        if candidate and (Path(candidate) / "train-images-idx3-ubyte.gz").exists():
            return str(candidate)
    return None


def _mnist(d: Path) -> list[str]:
    return [sys.executable, "-m", "stackwars", "train", "mnist", "--device", "cuda", "--epochs", "2", "--lr", "0.1",
            "--data-dir", str(_data_dir()), "--out", str(d / "mnist"), "--db", str(d / "stackwars.db")]


def _scaling(d: Path) -> list[str]:
    return [sys.executable, "-m", "stackwars", *SCALING_ARGS, "--db", str(d / "stackwars.db"), "--out", str(d / "scaling")]


def _peaks(d: Path) -> list[str]:
    return [sys.executable, "-m", "stackwars", "peaks", "--device", "cuda", "--min-time", "1",
            "--db", str(d / "stackwars.db")]


def _verdict_speed(d: Path) -> list[str]:
    """The verdict a GPU user asks for first: resnet50 and gpt2, paper, bfloat16, forward, on
    `run`'s default backends on CUDA (each framework's programs with and without graph replay,
    and the eager modes), each row's two bests chosen on one process a cell, then decided on 3
    rounds of the two (a round: one fresh process of each, back to back, in a drawn order), more
    rounds for a row too wide, within the budget (issue 55: both rows decided in at most 150 s)."""
    return [sys.executable, "-m", "stackwars", "run", "resnet50", "gpt2", "--preset", "paper", "--device", "cuda",
            "--dtype", "bfloat16", "--phase", "forward", "--processes", "3",
            "--budget", "150", "--timeout", "240", "--db", str(d / "stackwars.db"), "--json", str(d / "cells.json")]


def _models_verdict(d: Path) -> list[str]:
    """The four published models (paper, bfloat16, forward) in one command, decided within its
    budget (issue 55: all four rows in at most 540 s)."""
    return [sys.executable, "-m", "stackwars", "run", "resnet50", "vit-b16", "bert-base", "gpt2", "--preset", "paper",
            "--device", "cuda", "--dtype", "bfloat16", "--phase", "forward", "--processes", "3", "--budget", "480",
            "--timeout", "240", "--db", str(d / "stackwars.db"), "--json", str(d / "cells.json")]


AA_ARGS = ("run", "gpt2", "--preset", "paper", "--device", "cuda", "--dtype", "bfloat16", "--phase",
           "forward", "-b", "torch-compile", "-b", "jax-jit", "--processes", "3", "--max-processes", "3", "--aa",
           "--timeout", "240")


def _aa(d: Path) -> list[str]:
    """A GPU A/A check of the deciding design: each cell's processes after its first in three
    back-to-back pairs (run --aa), each pair a round of the cell against itself, then `verdict
    --aa` (aa.json): each should read the same speed."""
    return [sys.executable, "-c", "import sys; from stackwars.gpucheck import aa_stage; sys.exit(aa_stage(sys.argv[1:]))",
            *AA_ARGS, "--db", str(d / "stackwars.db"), "--json", str(d / "cells.json")]


def aa_stage(args: list[str]) -> int:
    """``stackwars ARGS`` (a run with --aa), then `stackwars verdict --aa -f json` on its database
    into aa.json beside it."""
    db = args[args.index("--db") + 1]
    code = subprocess.run([sys.executable, "-m", "stackwars", *args], cwd=ROOT).returncode
    with open(Path(db).parent / "aa.json", "w") as out:
        checked = subprocess.run([sys.executable, "-m", "stackwars", "verdict", "--aa", "-f", "json", "--db", db],
                                 cwd=ROOT, stdout=out).returncode
    return code or checked


def _spread(d: Path) -> list[str]:
    """mha paper bf16 forward in 4 processes a backend (the pair without graph replay: launch-bound), each
    profiled (3 steps after its timed
    calls): the notes under the tables set the fastest process's kernels against the slowest's."""
    return [sys.executable, "-m", "stackwars", "run", "mha", "--preset", "paper", "--device", "cuda", "--dtype",
            "bfloat16", "--phase", "forward", *_bs(NO_GRAPHS), "--profile", "3",
            "--processes", "4", "--max-processes", "4", *TIMING, "--db", str(d / "stackwars.db"),
            "--json", str(d / "cells.json")]


def _bs(backends: Sequence[str]) -> tuple[str, ...]:
    return tuple(x for b in backends for x in ("-b", b))


ENERGY_ARGS = ("run", "gpt2", "--preset", "paper", "--device", "cuda", "--dtype", "bfloat16", "--phase", "forward",
               *_bs(MATCHED), "--processes", "3", "--max-processes", "3", "--timeout", "240")
POWER_QUERY = ("nvidia-smi", "--query-gpu=timestamp,power.draw", "--format=csv,noheader,nounits", "-lms", "100")


def _energy(d: Path) -> list[str]:
    """The energy of gpt2 paper forward bf16, torch-compile against jax-jit, 3 processes, with
    nvidia-smi's power.draw sampled every 100 ms beside it (``energy_stage``)."""
    return [sys.executable, "-c", "import sys; from stackwars.gpucheck import energy_stage; "
                                  "sys.exit(energy_stage(sys.argv[1:]))",
            *ENERGY_ARGS, "--db", str(d / "stackwars.db"), "--json", str(d / "cells.json")]


def energy_stage(args: list[str]) -> int:
    """Run ``stackwars ARGS`` while nvidia-smi samples the GPU's power beside its --db; then
    line each cell's energy window up with the samples inside it (``power_check``) into
    power-check.json there."""
    d = Path(args[args.index("--db") + 1]).parent
    with open(d / "power.csv", "w") as samples:
        meter = subprocess.Popen(POWER_QUERY, stdout=samples, stderr=subprocess.DEVNULL)
        try:
            code = subprocess.run([sys.executable, "-m", "stackwars", *args], cwd=ROOT).returncode
        finally:
            meter.terminate()
            meter.wait(timeout=10)
    cells = json.loads((d / "cells.json").read_text()) if (d / "cells.json").exists() else []
    checked = power_check(cells, (d / "power.csv").read_text())
    (d / "power-check.json").write_text(json.dumps(checked, indent=1))
    for c in checked:
        print(f"{c['cell']}: energy window {c.get('counter_w')} W (NVML counter) against nvidia-smi power.draw "
              f"{c.get('smi_w')} W over the {c.get('smi_samples')} samples whose {c['averaged_s']:g} s average lies "
              f"inside it: ratio {c.get('ratio', c.get('why'))} (all {c.get('smi_samples_any')} samples inside: "
              f"{c.get('smi_w_any')} W)")
    return code


# nvidia-smi's power.draw is, on Ampere and newer GPUs, the board's mean power over the last
# second (NVML's power usage), not an instantaneous reading: a sample at t covers [t - 1 s, t].
# The H200's samples show it: they climb from idle to the window's power over the second after
# the load starts, and fall over the second after it ends. The samples inside a 1.1 s energy
# window read 6-20% under the counter; those whose second lay wholly inside agreed with it to
# within 3.4% (results/gpu-h200-2026-11-26/).
POWER_DRAW_AVERAGED_S = 1.0


def power_check(cells: Sequence[dict], power_csv: str, averaged_s: float = POWER_DRAW_AVERAGED_S) -> list[dict]:
    """For each cell with an energy window: the window's mean power from the energy counter
    against the mean of nvidia-smi's power.draw samples whose averaging span (``averaged_s``
    before each) lies inside the window (``smi_w``, the ratio's), beside the mean of every
    sample taken inside it (``smi_w_any``, which lags the window's start)."""
    from datetime import datetime

    samples = []
    for line in power_csv.splitlines():
        stamp, _, watts = line.partition(",")
        try:
            t = datetime.strptime(stamp.strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()  # local time, as time.time()
            samples.append((t, float(watts)))
        except ValueError:
            continue  # a header, "[N/A]", a line cut short
    out = []
    for c in cells:
        start, end = c.get("energy_started_unix"), c.get("energy_ended_unix")
        row = {"cell": c.get("cell_key"), "counter_w": c.get("energy_power_w"), "averaged_s": averaged_s}
        inside = [(t, w) for t, w in samples if start and end and start <= t <= end]
        settled = [w for t, w in inside if t - averaged_s >= start]
        if inside:
            row.update(smi_w_any=round(sum(w for _, w in inside) / len(inside), 1), smi_samples_any=len(inside))
        if row["counter_w"] and settled:
            smi = sum(settled) / len(settled)
            row.update(smi_w=round(smi, 1), smi_samples=len(settled), ratio=round(row["counter_w"] / smi, 3))
        elif not row["counter_w"]:
            row["why"] = "no energy window in this cell"
        elif not inside:
            row["why"] = "no nvidia-smi sample inside it"
        else:
            row["why"] = (f"no nvidia-smi sample whose {averaged_s:g} s average lies inside the "
                          f"{end - start:.2f} s window")
        out.append(row)
    return out


SENSITIVITY_BASE = ("run", "gpt2", "--preset", "paper", "--device", "cuda", "--dtype", "bfloat16", "--phase",
                    "forward", *_bs(NO_GRAPHS), "--processes", "3", "--max-processes", "3",
                    "--timeout", "240", "--no-energy")


SENSITIVITY_KNOBS = ("tf32", "cuda-graphs", "attention")
SENSITIVITY_WITHIN_S = 480  # the run and the knobs; the rest of the stage's limit stores and prints the study
_now = time.monotonic  # the stage's clock


def _sensitivity(*knobs: str) -> Callable[[Path], list[str]]:
    """gpt2 paper bf16 forward's verdict (torch-compile against jax-jit, 3 processes), then its
    sensitivity to ``knobs`` (a stage starts from nothing, so each stage measures the verdict
    first), the knobs under a budget of what is left of SENSITIVITY_WITHIN_S."""
    def argv(d: Path) -> list[str]:
        return [sys.executable, "-c", "import sys; from stackwars.gpucheck import sensitivity_stage; "
                                      "sys.exit(sensitivity_stage(sys.argv[1:]))",
                ",".join(knobs), *SENSITIVITY_BASE, "--db", str(d / "stackwars.db"), "--json", str(d / "cells.json")]
    return argv


def sensitivity_stage(args: list[str], within_s: float = SENSITIVITY_WITHIN_S) -> int:
    """``KNOB[,KNOB...] stackwars-run-args``: the run, then `verdict --sensitivity -k KNOB...` on
    it with `--budget` what is left of ``within_s`` (a knob that no longer fits is named, not
    cut off by the stage's limit with nothing stored), its JSON beside the database
    (sensitivity.json)."""
    knobs, run_args = args[0].split(","), args[1:]
    db = run_args[run_args.index("--db") + 1]
    t0 = _now()
    code = subprocess.run([sys.executable, "-m", "stackwars", *run_args], cwd=ROOT).returncode
    if code not in (0, 1):
        return code
    budget = max(0.0, within_s - (_now() - t0))
    with open(Path(db).parent / "sensitivity.json", "w") as out:
        return subprocess.run([sys.executable, "-m", "stackwars", "verdict", "--sensitivity",
                               *(x for k in knobs for x in ("-k", k)), "--budget", f"{budget:.0f}", "-f", "json",
                               "--db", db], cwd=ROOT, stdout=out).returncode


def _llama(d: Path) -> list[str]:
    """llama3-8b's two cells in one command: one process each, a cell timeout that lets the
    jax-jit cell (16 GB of weights put on the device, XLA's compile) finish."""
    return [sys.executable, "-m", "stackwars", "run", "llama3-8b", "--preset", "paper", "--device", "cuda", "--dtype",
            "bfloat16", "--phase", "forward", *_bs(NO_GRAPHS), "--warmup", "2",
            "--min-samples", "5", "--min-time", "0.3", "--timeout", "400", "--processes", "1", "--max-processes", "1",
            "--db", str(d / "stackwars.db"), "--json", str(d / "cells.json")]


def _why(d: Path) -> list[str]:
    return _run("gpt2", "--preset", "paper", "--device", "cuda", "--dtype", "bfloat16", "--phase", "train-step",
                *_bs(WHY_BACKENDS), "--profile", "2",
                "--profile-dir", str(d / "traces"))(d)


STAGES: tuple[Stage, ...] = (
    Stage("tests-eager", "every framework sees the GPU; torch-eager cells in parity with the device allocator's "
          "peak; bf16 and TF32 in both; float32 attention on XLA; the model reference on the GPU; peaks",
          ((9, "tiny-eager"), (4, "tiny-jax"), (4, "peaks")),
          _pytest("tests/test_gpu.py", "-k", "not jax and not torch-compile and not torch-cudagraphs")),
    Stage("tests-jax", "jax-eager and jax-jit cells in parity with the device allocator's peak; cuDNN attention "
          "for JAX in bfloat16, read from the compiled HLO", ((14, "tiny-jax"), (2, "tiny-eager")),
          _pytest("tests/test_gpu.py", "-k", "jax and not torch-compile and not torch-cudagraphs")),
    Stage("tests-compiled", "torch-compile and torch-cudagraphs cells on CUDA in parity (one shared Inductor cache: "
          "the first call is not the point here); the matched pairs a verdict sets apart, and jax-jit's memory "
          "alike in a cold and a warm process", ((16, "tiny-compiled"), (4, "tiny-jax")),
          _pytest("tests/test_gpu.py", "-k", "torch-compile or torch-cudagraphs")),
    Stage("tests-paths", "point 9 of the GPU issue: cudagraphs really replays; --flush-l2 and --cuda-graph-replay; "
          "profiles and memory anatomy; compiled Triton and Pallas kernels; NCCL on one GPU; bf16 model cells; "
          "wall time against CUDA events; the float64 reference in its own worker; JAX's memory fraction; "
          "a warm torch-compile process without Inductor's compile pool; a large output's digest folded on the GPU",
          ((11, "tiny-eager"), (5, "tiny-compiled"), (9, "tiny-jax"), (2, "scaling")),  # with 3 reference workers
          _pytest("tests/test_gpu_paths.py")),
    Stage("peaks", "device peaks in both frameworks (float32 and bfloat16 GEMM, copy bandwidth)", ((4, "peaks"),),
          _peaks, proof=False),
    Stage("micro-bf16-forward", "gemm, ffn, mha at paper size, forward, bfloat16, each backend",
          _cells(MICRO_BACKENDS, "micro", 3), _run("gemm", "ffn", "mha", "--preset", "paper", "--device", "cuda",
                                                   "--dtype", "bfloat16", "--phase", "forward",
                                                   *(x for b in MICRO_BACKENDS for x in ("-b", b)))),
    Stage("micro-bf16-train", "the same, train step", _cells(MICRO_BACKENDS, "micro", 3),
          _run("gemm", "ffn", "mha", "--preset", "paper", "--device", "cuda", "--dtype", "bfloat16", "--phase",
               "train-step", *(x for b in MICRO_BACKENDS for x in ("-b", b))), proof=False),
    Stage("micro-f32-forward", "gemm, ffn, mha at paper size, forward, float32 (exact matmul precision: XLA autotunes "
          "each GEMM shape)", _cells(MICRO_BACKENDS, "micro", 3),
          _run("gemm", "ffn", "mha", "--preset", "paper", "--device", "cuda", "--phase", "forward",
               *(x for b in MICRO_BACKENDS for x in ("-b", b))), proof=False),
    Stage("micro-f32-train", "the same, train step", _cells(MICRO_BACKENDS, "micro", 3),
          _run("gemm", "ffn", "mha", "--preset", "paper", "--device", "cuda", "--phase", "train-step",
               *(x for b in MICRO_BACKENDS for x in ("-b", b))), proof=False),
    Stage("models-vision", "resnet50 and vit-b16 at paper size, forward, bfloat16 (the published table)",
          _cells(MODEL_BACKENDS, "model", 2), _run("resnet50", "vit-b16", "--preset", "paper", "--device", "cuda",
                                                   "--dtype", "bfloat16", "--phase", "forward",
                                                   *(x for b in MODEL_BACKENDS for x in ("-b", b)))),
    Stage("models-text", "bert-base and gpt2 at paper size, forward, bfloat16 (the published table)",
          _cells(MODEL_BACKENDS, "model", 2), _run("bert-base", "gpt2", "--preset", "paper", "--device", "cuda",
                                                   "--dtype", "bfloat16", "--phase", "forward",
                                                   *(x for b in MODEL_BACKENDS for x in ("-b", b)))),
    Stage("models-neo", "gpt-neo-1.3b at paper size, forward, bfloat16 (torch-compile, jax-jit-no-graphs)",
          ((2, "big-model"),), _run("gpt-neo-1.3b", "--preset", "paper", "--device", "cuda", "--dtype", "bfloat16",
                                    "--phase", "forward", *_bs(NO_GRAPHS)), proof=False),
    Stage("models-llama", "llama3-8b at paper size, forward, bfloat16 (torch-compile, jax-jit-no-graphs): 16 GB of "
          "weights, "
          "the float64 reference computed in its own worker first; both cells in this one command",
          ((2, "big-model"),), _llama, proof=False),
    Stage("verdict-speed", "the resnet50 + gpt2 paper bf16 forward verdict on run's default backends on CUDA (the "
          "matched pairs and the eager modes), each row's bests chosen on one process a cell and decided on 3 "
          "rounds of the two, more rounds for a row too wide, under "
          "--budget 150 (issue 55: both rows decided in at most 150 s; one pair took 269 s at 3effb27)",
          ((36, "verdict-model"),), _verdict_speed, proof=False, within_s=300),
    Stage("models-verdict", "resnet50, vit-b16, bert-base and gpt2 at paper size, bf16, forward, on run's default "
          "backends, chosen on one process a cell, decided on rounds of the two bests, under --budget 480 (issue 55: "
          "all four rows decided in at "
          "most 540 s)", ((72, "verdict-model"),), _models_verdict, proof=False, within_s=540),
    Stage("aa-gpu", "an A/A check of the deciding design on a GPU: gpt2 paper bf16 forward, torch-compile and jax-jit, "
          "each cell's processes after its first in three back-to-back pairs, then `verdict --aa` (each should read "
          "the same speed)",
          ((14, "verdict-model"),), _aa, proof=False),
    Stage("spread", "why a launch-bound cell's processes disagree (mha forward torch-compile: process medians 182-355 "
          "µs at 3fbd31d): mha paper bf16 forward, the pair that launches every kernel (torch-compile against "
          "jax-jit-no-graphs), 4 processes each profiled, the fastest's kernels set against the slowest's beside "
          "their device time", _cells(NO_GRAPHS, "micro", 4),
          _spread, proof=False),
    Stage("energy", "energy per call of gpt2 paper forward bf16, the matched pairs, 3 processes, with "
          "the verdict's energy ratio; each window's power checked against nvidia-smi's power.draw sampled beside it",
          ((12, "verdict-model"),), _energy, proof=False),
    Stage("sensitivity", "which setting flips gpt2 paper bf16 forward's verdict: tf32, cuda-graphs and attention in "
          "one command (the verdict, then `verdict --sensitivity` with the row measured unchanged once, under "
          f"--budget: a knob that does not fit in {SENSITIVITY_WITHIN_S} s is named, and its own stage below measures "
          "it)", ((30, "verdict-model"),), _sensitivity(*SENSITIVITY_KNOBS), proof=False,
          within_s=SENSITIVITY_WITHIN_S),
    *(Stage(f"sensitivity-{knob}", f"which setting flips gpt2 paper bf16 forward's verdict: {knob} (the verdict, "
            f"then `verdict --sensitivity -k {knob}`, which measures the row unchanged too)",
          ((18, "verdict-model"),), _sensitivity(knob), proof=False, within_s=SENSITIVITY_WITHIN_S)
      for knob in SENSITIVITY_KNOBS),
    Stage("why", "GPT-2 paper train step, bfloat16, profiled with its memory anatomy (jax-jit's 14.6 GB vs "
          "torch-compile's 6.3 GB explained part by part)", ((3, "train-gpt2"),), _why),
    Stage("kernels", "softmax and layernorm: Triton and Pallas kernels compiled, beside the framework operators",
          ((8, "kernel"),), _run("softmax", "layernorm", "--preset", "paper", "--device", "cuda", "--set",
                                 "impl=framework,custom", "-b", "torch-eager", "-b", "jax-jit")),
    Stage("flush", "gemm and mha with caches flushed before every call and PyTorch's calls replayed from a CUDA "
          "graph (do_bench's conditions)", ((4, "micro-eager"), (4, "micro-jax")),
          _run("gemm", "mha", "--preset", "paper", "--device", "cuda", "-b", "torch-eager", "-b", "jax-jit",
               "--phase", "forward", "--phase", "train-step", "--flush-l2", "--cuda-graph-replay")),
    Stage("mnist", "train mnist, two epochs, both frameworks, on the real data", ((2, "mnist"),), _mnist,
          proof=False, needs_data=True),
    Stage("scaling", "data parallelism on the visible GPU (dp, fsdp over NCCL)", ((4, "scaling"),), _scaling,
          proof=False),
)
BY_NAME = {s.name: s for s in STAGES}


def gpu_name() -> str | None:
    """The first GPU's name as NVML gives it, or None where NVML sees none."""
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            if not pynvml.nvmlDeviceGetCount():
                return None
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no library, no driver: no GPU
        return None
    return name.decode() if isinstance(name, bytes) else str(name)


def out_root(name: str) -> Path:
    """``$OUT`` where the runner set it (read, never assigned), else results/gpu-<device>."""
    given = os.environ.get("OUT")
    if given:
        return Path(given)
    return ROOT / "results" / ("gpu-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"))


def listing(stages: Sequence[Stage] = STAGES) -> str:
    lines = ["| stage | cells | estimate on an H100 | in --proof | what it proves |", "|---|---|---|---|---|"]
    for s in stages:
        lines.append(f"| {s.name} | {s.cell_count} | {s.estimate_s} s | {'yes' if s.proof else 'no'} | {s.proves} |")
    proof = [s for s in stages if s.proof]
    lines.append("")
    lines.append(f"--proof: {len(proof)} stages, {sum(s.cell_count for s in proof)} cells, about "
                 f"{sum(s.estimate_s for s in proof) / 60:.0f} min of GPU time (each stage a command of at most "
                 f"{STAGE_LIMIT_S} s); all: {sum(s.estimate_s for s in stages) / 60:.0f} min")
    return "\n".join(lines)


GPU_SITE = ROOT / ".gpu-site"  # pytest for the GPU image, whose package list names none (scripts/setup.sh --tests builds it)


def has_pytest() -> bool:
    import importlib.util
    return importlib.util.find_spec("pytest") is not None


def stage_env() -> dict[str, str]:
    """The stage's processes see the repository on PYTHONPATH (and .gpu-site where this Python
    has no pytest) and write no bytecode beside it."""
    path = [str(ROOT)] + ([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    if not has_pytest() and GPU_SITE.is_dir():
        path.append(str(GPU_SITE))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONDONTWRITEBYTECODE": "1"}


def run_stage(stage: Stage, root: Path, limit_s: float = STAGE_LIMIT_S) -> dict[str, object]:
    """One stage into root/<stage>: its command's output (output.txt), log (log.txt), the
    environment (env.json) and SUMMARY.md. Returns its summary row."""
    from stackwars.harness.env import fingerprint

    folder = root / stage.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "env.json").write_text(json.dumps(fingerprint(), indent=1, default=str))
    row: dict[str, object] = {"stage": stage.name, "cells": stage.cell_count, "estimate_s": stage.estimate_s}
    if stage.needs_data and _data_dir() is None:
        row.update(status="not run: no MNIST files (set STACKWARS_DATA_DIR)", seconds=0.0)
    elif stage.name.startswith("tests-") and not has_pytest() and not GPU_SITE.is_dir():
        row.update(status="not run: no pytest here, and no .gpu-site to add (scripts/setup.sh --tests builds it; "
                          "carry it to the GPU machine)", seconds=0.0)
    else:
        argv = stage.argv(folder)
        row["command"] = " ".join(argv[1:])
        t0 = time.monotonic()
        with open(folder / "output.txt", "w") as out, open(folder / "log.txt", "w") as log:
            try:
                code = subprocess.run(argv, stdout=out, stderr=log, stdin=subprocess.DEVNULL, cwd=ROOT,
                                      env=stage_env(), timeout=limit_s).returncode
                status = "ok" if code == 0 else f"exit {code}"
            except subprocess.TimeoutExpired:
                status = f"stage time limit ({limit_s:g} s)"
        row.update(status=status, seconds=round(time.monotonic() - t0, 1))
    tail = (folder / "output.txt").read_text(errors="replace")[-3000:] if (folder / "output.txt").exists() else ""
    harness = re.search(r"^Time: .*$", tail, re.M)
    if harness:  # the run's own account: cells, measured windows, harness overhead per cell
        row["time"] = harness.group(0)
    (folder / "SUMMARY.md").write_text(
        f"# gpu-check stage {stage.name}\n\n{stage.proves}\n\n- status: {row['status']}\n- time: {row['seconds']} s "
        f"(estimate {stage.estimate_s} s for {stage.cell_count} cells)\n- command: `{row.get('command', '')}`\n\n"
        f"Files: output.txt (tables), log.txt (progress, errors), env.json, and the stage's own (stackwars.db, "
        f"cells.json, junit.xml, traces/ where it writes them).\n\n```\n{tail}\n```\n")
    if os.environ.get("OUT"):  # the remote runner returns few files, two folders deep: one archive a stage
        row["archive"] = pack(folder).name
    return row


def pack(folder: Path) -> Path:
    """``folder`` as ``folder.tar.gz`` beside it, the folder removed: what a stage wrote, as one
    file (the remote runner returns at most 8 files a command, two folders deep)."""
    import shutil
    import tarfile

    archive = folder.with_name(folder.name + ".tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    shutil.rmtree(folder)
    return archive


def summary(rows: Sequence[dict[str, object]], name: str) -> str:
    lines = [f"# gpu-check on {name}", "", f"Written by stackwars.gpucheck at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}; "
             "each stage's files in its folder (under $OUT: packed, <stage>.tar.gz).", "",
             "| stage | status | time | estimate | cells |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['stage']} | {r['status']} | {r['seconds']} s | {r['estimate_s']} s | {r['cells']} |")
    lines += ["", *(f"- {r['stage']}: {r['time']}" for r in rows if r.get("time"))]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="print the stages with their cells and estimates")
    p.add_argument("--dry-run", action="store_true", help="print each stage's command and where it writes")
    p.add_argument("--stage", action="append", default=[], metavar="NAME", help="run this stage (repeatable)")
    p.add_argument("--proof", action="store_true", help="the stages that prove the GPU paths, in order")
    args = p.parse_args(argv)
    unknown = [s for s in args.stage if s not in BY_NAME]
    if unknown:
        print(f"gpu-check: unknown stage {', '.join(map(repr, unknown))}; allowed: {', '.join(BY_NAME)}",
              file=sys.stderr)
        return 2
    chosen = [BY_NAME[s] for s in args.stage] or [s for s in STAGES if s.proof or not args.proof]
    if args.list:
        print(listing())
        return 0
    name = gpu_name()
    if args.dry_run:
        root = out_root(name or "none")
        for s in chosen:
            print(f"{s.name}: {' '.join(s.argv(root / s.name))}")
        return 0
    if not name:
        print("gpu-check: no NVIDIA GPU visible (NVML reports none, or no driver): this check needs one.",
              file=sys.stderr)
        print("gpu-check: nothing was run; on a CPU machine use the README's test command.", file=sys.stderr)
        return NO_GPU_EXIT
    root = out_root(name)
    root.mkdir(parents=True, exist_ok=True)
    print(f"gpu-check: {name} -> {root}; stages: {', '.join(s.name for s in chosen)}", flush=True)
    rows = []
    for s in chosen:
        print(f"gpu-check: stage {s.name} ({s.cell_count} cells, about {s.estimate_s} s)", flush=True)
        rows.append(run_stage(s, root))
        print(f"gpu-check: stage {s.name}: {rows[-1]['status']} in {rows[-1]['seconds']} s", flush=True)
        (root / "SUMMARY.md").write_text(summary(rows, name))
    print(summary(rows, name))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
