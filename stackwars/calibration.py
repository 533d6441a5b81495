"""The verdict on simulated processes: how often it names a false winner, and how often the right one.

A verdict is calibrated when, between programs that are equally fast, it names a winner no more
often than its error allows (5% over all its looks, 2.5% each way). That is shown here by
simulation through the code the command line runs, not by argument: each repetition is a run
(``orchestrate.Run``: the first round, the choice of each side's best, the rounds that decide,
the looks that add rounds while a row is undecided), stored in a results database
(``store.results``) and read back by ``report.verdict.verdicts`` into the printed word; only the
processes are simulated, by ``Simulated``, an executor of the runner's kind.

A simulated process is one median a process and its samples around it: the median is
``exp(mu + round + own)``, where ``round`` is shared by every process of one round (a slow
stretch of the host: two frameworks' processes in one round correlate +0.37 in the project's
stored results) and ``own`` is the process's own draw; the two together have the standard
deviation ``sd`` on the log scale (0.066 at the median of the stored results, 0.18 at their 90th
percentile). ``model``: ``normal``; ``skewed`` (a right-skewed draw, skewness 1.7, as the stored
process medians are: a slow process is slower than a fast one is fast); ``unequal`` (every
candidate its own spread, from sd/2 to 2 sd: modes are not equally stable).

    python scripts/verdict-calibration.py --candidates 4,1 --processes 3 --sd 0.1 --reps 400
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from stackwars import orchestrate, stats
from stackwars.records import CellSpec, Measurement, MeasureConfig, Parity
from stackwars.report import verdict as vd
from stackwars.store.results import Store, rows

MODELS = ("normal", "skewed", "unequal")
ROUND_SHARE = 0.37  # the share of a process's log-variance its round shares with the round's other processes
SKEW_SHAPE = (2 / 1.7) ** 2  # a gamma of this shape has skewness 1.7
SAMPLES = 10  # samples a simulated process stores
WITHIN = 0.02  # their spread around the process's median (log sd)
MACHINE = {"cpu_model": "Simulated CPU", "cpu_count_logical": 2, "versions": {"torch": "sim", "jax": "sim"}}


@dataclass(frozen=True)
class Config:
    candidates: tuple[int, int] = (1, 1)  # PyTorch's and JAX's modes
    processes: int = 3  # run --processes
    sd: float = 0.066
    model: str = "normal"
    true_ratio: float = 1.0  # JAX time / PyTorch time of every candidate
    reps: int = 200
    seed: int = 0

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"model {self.model!r}; allowed: {', '.join(MODELS)}")
        if min(self.candidates) < 1 or self.processes < 1 or self.sd < 0 or self.true_ratio <= 0 or self.reps < 1:
            raise ValueError("need candidates >= 1 a side, processes >= 1, sd >= 0, true ratio > 0, reps >= 1")


def specs(config: Config) -> list[CellSpec]:
    """The first round of a run of the candidates: PyTorch's as torch-eager, JAX's as jax-jit,
    each candidate told apart by an option (its label), one table (gemm small forward)."""
    out = []
    for backend, k in (("torch-eager", config.candidates[0]), ("jax-jit", config.candidates[1])):
        out += [CellSpec("gemm", "small", "forward", backend, options=(("candidate", i),)) for i in range(k)]
    return out


class Simulated:
    """An executor whose processes are drawn, not run: every process of a round shares the
    round's draw, each has its own (``Config.model``). Deterministic in (seed, rep)."""

    name, local, shared_dir = "simulated", True, None

    def __init__(self, config: Config, rep: int):
        self.config = config
        self.rng = np.random.default_rng([config.seed, rep])
        self.rounds: dict[int, float] = {}
        n = sum(config.candidates)
        self.sds = (self.rng.uniform(0.5, 2.0, n) * config.sd if config.model == "unequal"
                    else np.full(n, config.sd))

    def check(self, specs):
        pass

    def scratch(self, kind):
        return None

    def _draw(self, sd: float) -> float:
        if self.config.model == "skewed":
            g = self.rng.gamma(SKEW_SHAPE)
            return sd * (g - SKEW_SHAPE) / math.sqrt(SKEW_SHAPE)
        return sd * self.rng.standard_normal()

    def run(self, specs: Sequence[CellSpec], measure, on_start=None) -> Iterator[Measurement]:
        for spec in specs:
            i = dict(spec.options)["candidate"] + (self.config.candidates[0] if spec.backend == "jax-jit" else 0)
            sd = float(self.sds[i])
            if spec.repeat not in self.rounds:  # the round's own draw, shared by its processes
                self.rounds[spec.repeat] = self._draw(1.0)
            mu = math.log(1e-3) + (math.log(self.config.true_ratio) if spec.backend == "jax-jit" else 0.0)
            median = math.exp(mu + sd * (math.sqrt(ROUND_SHARE) * self.rounds[spec.repeat])
                              + math.sqrt(1 - ROUND_SHARE) * self._draw(sd))
            samples = tuple(median * np.exp(self.rng.normal(0.0, WITHIN, SAMPLES)))
            yield Measurement(spec=spec, status="ok", framework=spec.backend.split("-")[0], first_call_s=0.5,
                              second_call_s=2e-3, samples=samples, number=2,
                              parity=Parity(max_rel_err=1e-7, tolerance=2e-4), wall_s=1.0)


def one_run(config: Config, rep: int, folder: Path) -> dict[str, Any]:
    """One simulated run through orchestrate.Run, as `stackwars run` makes it (its defaults: the
    first round, the choice, --processes rounds, more rounds while undecided up to twice
    --processes), read back into its verdict row."""
    mc = MeasureConfig(processes=config.processes, max_processes=stats.default_max_processes(config.processes),
                       seed=rep)
    first = specs(config)
    planned = first if mc.screens else [dataclasses.replace(s, repeat=r) for r in range(config.processes)
                                        for s in first]
    with Store(folder / f"r{rep}.db") as store:
        run_id = store.create_run(planned, {"measure": mc.to_dict()}, command="calibration")
        orchestrate.Run(store, run_id, planned, mc, MACHINE, Simulated(config, rep)).measure()
        (v,) = vd.verdicts(rows(store, run_id))
        v["_processes"] = len(rows(store, run_id))
    return v


def simulate(config: Config) -> dict[str, Any]:
    """``config.reps`` runs; what their verdicts said, as rates with their Monte-Carlo error."""
    # in memory where the machine has a tmpfs: a run's database is written a few hundred times
    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="stackwars-calibration-", dir=shm if shm.is_dir() else None))
    counts = dict.fromkeys(vd.VERDICTS, 0)
    processes = rounds = 0
    try:
        for rep in range(config.reps):
            v = one_run(config, rep, folder)
            counts[v["verdict"]] += 1
            processes += v["_processes"]
            rounds += v.get("processes") or 0
            (folder / f"r{rep}.db").unlink(missing_ok=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    n = config.reps
    rate = {k: c / n for k, c in counts.items()}
    right = ("JAX faster" if config.true_ratio < 1 else "PyTorch faster" if config.true_ratio > 1 else None)
    return {"config": dataclasses.asdict(config), "counts": counts, "rates": rate,
            "false_jax": rate["JAX faster"] if config.true_ratio >= 1 else 0.0,
            "false_torch": rate["PyTorch faster"] if config.true_ratio <= 1 else 0.0,
            "false": sum(rate[w] for w in ("JAX faster", "PyTorch faster") if w != right),
            "right": rate[right] if right else None,
            "processes_a_run": processes / n, "rounds_a_row": rounds / n}


def mc_error(rate: float, reps: int) -> float:
    """The Monte-Carlo standard error of a rate from ``reps`` repetitions (of the nominal rate where
    it is larger, so that a rate of 0 in a few reps does not claim more than it shows)."""
    return math.sqrt(max(rate, 0.025) * (1 - max(rate, 0.025)) / reps)


def exceeds(result: dict[str, Any]) -> list[str]:
    """Where a configuration with no true difference names false winners beyond what the verdict
    allows (5% in all, 2.5% each way), by more than two Monte-Carlo standard errors."""
    if result["config"]["true_ratio"] != 1.0:
        return []
    reps = result["config"]["reps"]
    out = []
    for key, limit in (("false", stats.VERDICT_ALPHA), ("false_jax", stats.VERDICT_ALPHA / 2),
                       ("false_torch", stats.VERDICT_ALPHA / 2)):
        if result[key] - 2 * mc_error(result[key], reps) > limit:
            out.append(f"{key} {result[key]:.1%} > {limit:.1%}")
    return out
