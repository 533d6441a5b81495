"""The verdict on simulated processes: how often it names a false winner, and how often the right one.

A verdict is calibrated when, between programs that are equally fast, it names a winner no more
often than its error allows (5% over all its looks and all the rows of a machine read together,
2.5% each way). That is shown here by simulation through the code the command line runs, not by
argument: each repetition is a run (``orchestrate.Run``: the first round, the choice of each side's
best, the rounds of the first look, the looks that add rounds while a row is open), stored in a
results database (``store.results``) and read back by ``stackwars.verdict.verdicts`` into the
printed words; only the processes are simulated, by ``Simulated``, an executor of the runner's kind.
A run holds ``rows`` rows, as the main job holds six (gemm, ffn, mha, forward and train step), read
together as the verdict reads a machine's rows: the family-wise rate is the share of runs that name
any false winner.

A simulated process is one median a process and its samples around it: the median is
``exp(mu + round + own)``, where ``round`` is shared by the processes of one round of one row (a slow
stretch of the host: two frameworks' processes in one round correlate +0.37 in the project's
stored results) and ``own`` is the process's own draw; the two together have the standard
deviation ``sd`` on the log scale (0.066 at the median of the stored results, 0.18 at their 90th
percentile). ``model``: ``normal``; ``skewed`` (a right-skewed draw, skewness 1.7, as the stored
process medians are: a slow process is slower than a fast one is fast); ``unequal`` (every
candidate its own spread, from sd/2 to 2 sd: modes are not equally stable). Each process is
reckoned to take ``process_s`` seconds (the median wall time of the main job's deciding processes
on the 2-CPU EPYC VM), for the seconds a row spends.

    python scripts/verdict-calibration.py --rows 6 --candidates 4,1 --sd 0.12 --reps 400
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from stackwars import orchestrate, stats
from stackwars.records import CellSpec, Measurement, MeasureConfig, Parity
from stackwars import verdict as vd
from stackwars.store.results import Store, rows

MODELS = ("normal", "skewed", "unequal")
ROUND_SHARE = 0.37  # the share of a process's log-variance its round shares with the round's other processes
SKEW_SHAPE = (2 / 1.7) ** 2  # a gamma of this shape has skewness 1.7
SAMPLES = 10  # samples a simulated process stores
WITHIN = 0.02  # their spread around the process's median (log sd)
MACHINE = {"cpu_model": "Simulated CPU", "cpu_count_logical": 2, "versions": {"torch": "sim", "jax": "sim"}}


ROWS = tuple((w, p) for w in ("gemm", "ffn", "mha", "softmax", "layernorm", "rnn") for p in ("forward", "train-step"))
PROCESS_S = 1.5  # seconds a simulated process is reckoned to take (the main job's deciding processes, EPYC VM)


@dataclass(frozen=True)
class Config:
    candidates: tuple[int, int] = (1, 1)  # PyTorch's and JAX's modes
    processes: int = stats.FIRST_LOOK  # run --processes
    sd: float = 0.066
    model: str = "normal"
    true_ratio: float = 1.0  # JAX time / PyTorch time of every candidate of every row but the null ones
    reps: int = 200
    seed: int = 0
    rows: int = 1  # rows read together (the main job: 6)
    null_rows: int = 0  # of them, rows with no true difference whatever true_ratio says (the last ones)
    max_processes: int | None = None  # run --max-processes (None: the run's default)
    process_s: float = PROCESS_S

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"model {self.model!r}; allowed: {', '.join(MODELS)}")
        if min(self.candidates) < 1 or self.processes < 1 or self.sd < 0 or self.true_ratio <= 0 or self.reps < 1:
            raise ValueError("need candidates >= 1 a side, processes >= 1, sd >= 0, true ratio > 0, reps >= 1")
        if not 1 <= self.rows <= len(ROWS) or not 0 <= self.null_rows <= self.rows:
            raise ValueError(f"need 1 <= rows <= {len(ROWS)} and 0 <= null rows <= rows")
        if self.max_processes is not None and self.max_processes < self.processes:
            raise ValueError("need max processes >= processes")
        for name in ("sd", "true_ratio", "process_s"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number")

    def ratio(self, row: int) -> float:
        """The true ratio of row ``row`` (counted from 0)."""
        return 1.0 if row >= self.rows - self.null_rows else self.true_ratio


def specs(config: Config) -> list[CellSpec]:
    """The first round of a run of the candidates: for each row (a workload and phase), PyTorch's as
    torch-eager, JAX's as jax-jit, each candidate told apart by an option (its label)."""
    out = []
    for workload, phase in ROWS[:config.rows]:
        for backend, k in (("torch-eager", config.candidates[0]), ("jax-jit", config.candidates[1])):
            out += [CellSpec(workload, "small", phase, backend, options=(("candidate", i),)) for i in range(k)]
    return out


class Simulated:
    """An executor whose processes are drawn, not run: every process of a round of a row shares the
    round's draw, each has its own (``Config.model``). Deterministic in (seed, rep)."""

    name, local, shared_dir = "simulated", True, None

    def __init__(self, config: Config, rep: int):
        self.config = config
        self.rng = np.random.default_rng([config.seed, rep])
        self.rounds: dict[tuple, float] = {}
        self.sds: dict[tuple, float] = {}
        self.rows = {row: i for i, row in enumerate(ROWS[:config.rows])}

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
            row = self.rows[(spec.workload, spec.phase)]
            candidate = (spec.workload, spec.phase, spec.backend, dict(spec.options)["candidate"])
            if candidate not in self.sds:  # each candidate's own spread (unequal) or the shared one
                self.sds[candidate] = (float(self.rng.uniform(0.5, 2.0)) * self.config.sd
                                       if self.config.model == "unequal" else self.config.sd)
            sd = self.sds[candidate]
            key = (row, spec.repeat)
            if key not in self.rounds:  # the round's own draw, shared by its processes
                self.rounds[key] = self._draw(1.0)
            mu = math.log(1e-3) + (math.log(self.config.ratio(row)) if spec.backend == "jax-jit" else 0.0)
            median = math.exp(mu + sd * (math.sqrt(ROUND_SHARE) * self.rounds[key])
                              + math.sqrt(1 - ROUND_SHARE) * self._draw(sd))
            samples = tuple(median * np.exp(self.rng.normal(0.0, WITHIN, SAMPLES)))
            yield Measurement(spec=spec, status="ok", framework=spec.backend.split("-")[0], first_call_s=0.5,
                              second_call_s=2e-3, samples=samples, number=2,
                              parity=Parity(max_rel_err=1e-7, tolerance=2e-4), wall_s=self.config.process_s)


def one_run(config: Config, rep: int, folder: Path) -> list[dict[str, Any]]:
    """One simulated run through orchestrate.Run, as `stackwars run` makes it (its defaults: the
    first round, the choice, --processes rounds, then a look every LOOK_STEP rounds while a row is
    open, up to --max-processes), read back into its verdict rows."""
    cap = config.max_processes if config.max_processes is not None else stats.default_max_processes(config.processes)
    mc = MeasureConfig(processes=config.processes, max_processes=cap, seed=rep)
    first = specs(config)
    planned = first if mc.screens else [dataclasses.replace(s, repeat=r) for r in range(config.processes)
                                        for s in first]
    with Store(folder / f"r{rep}.db") as store:
        run_id = store.create_run(planned, {"measure": mc.to_dict()}, command="calibration")
        orchestrate.Run(store, run_id, planned, mc, MACHINE, Simulated(config, rep)).measure()
        cells = rows(store, run_id)
        # the words and levels as the printed verdict has them, without the figures shown beside (lean: the
        # bootstraps of each cell's interval; tests/test_verdict.py checks lean and full rows agree)
        found = vd.verdicts(cells, lean=True)
    processes = {}
    for r in cells:
        processes[(r["workload"], r["phase"])] = processes.get((r["workload"], r["phase"]), 0) + 1
    index = {row: i for i, row in enumerate(ROWS)}
    for v in found:
        v["_processes"] = processes[(v["workload"], v["phase"])]
        v["_row"] = index[(v["workload"], v["phase"])]
    return sorted(found, key=lambda v: v["_row"])


def _wrong(config: Config, v: Mapping[str, Any]) -> bool:
    """A winner named where none is, or the wrong one."""
    r = config.ratio(v["_row"])
    return (v["verdict"] == "JAX faster" and r >= 1.0) or (v["verdict"] == "PyTorch faster" and r <= 1.0)


def simulate(config: Config) -> dict[str, Any]:
    """``config.reps`` runs; what their verdicts said, as rates with their Monte-Carlo error: per
    row (over the rows with ``true_ratio``; the null rows apart) and, for the run's rows read together,
    the share of runs naming any false winner (family-wise)."""
    # in memory where the machine has a tmpfs: a run's database is written a few hundred times
    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="stackwars-calibration-", dir=shm if shm.is_dir() else None))
    counts = dict.fromkeys(vd.VERDICTS, 0)
    null_counts = dict.fromkeys(vd.VERDICTS, 0)
    processes = rounds = seconds = family = 0
    measured = 0
    try:
        for rep in range(config.reps):
            found = one_run(config, rep, folder)
            family += any(_wrong(config, v) for v in found)
            for v in found:
                null = v["_row"] >= config.rows - config.null_rows and config.null_rows
                (null_counts if null else counts)[v["verdict"]] += 1
                if not null:
                    measured += 1
                    processes += v["_processes"]
                    rounds += (v.get("sequence") or {}).get("rounds_measured") or v.get("processes") or 0
                    seconds += v["_processes"] * config.process_s
            (folder / f"r{rep}.db").unlink(missing_ok=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    n = max(measured, 1)
    rate = {k: c / n for k, c in counts.items()}
    right = ("JAX faster" if config.true_ratio < 1 else "PyTorch faster" if config.true_ratio > 1 else None)
    out = {"config": dataclasses.asdict(config), "counts": counts, "rates": rate,
           "false_jax": rate["JAX faster"] if config.true_ratio >= 1 else 0.0,
           "false_torch": rate["PyTorch faster"] if config.true_ratio <= 1 else 0.0,
           "false": sum(rate[w] for w in ("JAX faster", "PyTorch faster") if w != right),
           "right": rate[right] if right else None,
           "decided": rate["JAX faster"] + rate["PyTorch faster"] + rate[vd.SAME],
           "family_false": family / config.reps,
           "processes_a_row": processes / n, "rounds_a_row": rounds / n, "seconds_a_row": seconds / n}
    if config.null_rows:
        nn = config.null_rows * config.reps
        out["null_rows"] = {k: c / nn for k, c in null_counts.items()}
    return out


def mc_error(rate: float, reps: int) -> float:
    """The Monte-Carlo standard error of a rate from ``reps`` repetitions (of the nominal rate where
    it is larger, so that a rate of 0 in a few reps does not claim more than it shows)."""
    return math.sqrt(max(rate, 0.025) * (1 - max(rate, 0.025)) / reps)


def exceeds(result: dict[str, Any]) -> list[str]:
    """Where a configuration names false winners beyond what the verdict allows (5% in all, 2.5%
    each way, for a row alone; 5% for any of a run's rows read together), by more than two
    Monte-Carlo standard errors. With a true difference, only the family-wise rate (its null rows,
    and a winner named the wrong way) is held to 5%."""
    reps = result["config"]["reps"]
    out = []
    checks = [("family_false", stats.VERDICT_ALPHA)]
    if result["config"]["true_ratio"] == 1.0:
        checks += [("false", stats.VERDICT_ALPHA), ("false_jax", stats.VERDICT_ALPHA / 2),
                   ("false_torch", stats.VERDICT_ALPHA / 2)]
    for key, limit in checks:
        got = result.get(key)
        if got is not None and got - 2 * mc_error(got, reps) > limit:
            out.append(f"{key} {got:.1%} > {limit:.1%}")
    return out
