"""One run, from a valid request to its verdict: plan, start or resume, measure, look again.

The CLI (``cli/run_cmd.py``) parses options and prints; everything in between lives here, as
plain functions and one class a test can drive:

* ``Run.start`` / ``Run.resume``: a new run of cells ``runner.plan_cells`` planned, with the
  machine's fingerprint; or a stored run's missing cells, its fingerprint checked, its
  pending cells stored;
* ``Run.measure``: every planned cell through the executor (where the run screens, every
  cell's first process, which chooses each row's two bests, then ``--processes`` rounds of the two
  chosen cells, one fresh process of each back to back in a drawn order: verdict/choose.screen),
  then the looks: while a verdict is open (not decided, before its cap, not futile), the next look
  measures the rounds that bring its clean rounds to its next look (``next_look``: verdict/plan.py;
  a busy round is replaced and uses up no look), the rows most likely to decide a second first
  where the run's ``--budget`` (from this session's start) cannot afford them all; never for a
  row more processes cannot decide (a faster candidate that failed parity, a machine that stayed
  busy through the cells' latest processes: verdict.no_top_up, said once). Each look reads at its
  boundary's level (verdict/sequential.py: 5% spent over the looks and the machine's rows), so
  stopping when decided names a false winner at most 5% of the time. The run's compile caches and
  float64 references last across its looks. ``Run.resume`` goes on where a run stopped: its
  missing cells, its screening, and the looks its open verdicts still take.

Cells the database refuses are kept in the run's pending file and reported (``Hooks``); the
caller decides how to tell the user.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from pathlib import Path

from stackwars import registry, runner
from stackwars.errors import SpecError
from stackwars.executors import Choice, Executor
from stackwars.harness import env as envmod
from stackwars.harness.settings import available_cpus
from stackwars import verdict as vd
from stackwars.records import CellSpec, MeasureConfig, Measurement
from stackwars.store.lock import RunLock
from stackwars.store.results import SCREENING, Store, StoreWriteError, pending_paths, rows, store_pending


@dataclass
class Hooks:
    """What the caller hears: a cell starts, a cell is done, a cell could not be stored, a note."""

    on_start: Callable[[CellSpec], None] | None = None
    on_done: Callable[[Measurement], None] | None = None
    on_unsaved: Callable[[Measurement, Any, StoreWriteError], None] | None = None
    on_note: Callable[[str], None] = lambda text: None
    on_more: Callable[[int], None] = lambda n: None  # n more cell-processes were planned


_now = time.monotonic  # the budget's clock (a test's synthetic machine advances its own)


@dataclass
class Budget:
    """The run's wall-clock budget (None: none). A look starts only if what it is expected to
    take, from the median wall time of its cells' processes so far, still fits."""

    seconds: float | None
    started: float = field(default_factory=lambda: _now())

    def left(self) -> float:
        return float("inf") if self.seconds is None else self.seconds - (_now() - self.started)

    def allows(self, expected_s: float) -> bool:
        return expected_s <= self.left()


def _walls(done: Iterable[tuple[str, float | None]]) -> dict[str, list[float]]:
    """The wall times of each cell's processes so far, by cell id."""
    walls: dict[str, list[float]] = {}
    for key, wall in done:
        if wall is not None:
            walls.setdefault(key.split("#r")[0], []).append(wall)
    return walls


def look_cost(extra: Sequence[CellSpec], done: Iterable[tuple[str, float | None]]) -> float:
    """What ``extra`` should take: each cell-process the median wall time of its cell's
    processes so far (the median of all of ``done`` where its cell has none). ``done``: (cell
    key, wall seconds) of the processes measured."""
    walls = _walls(done)
    every = [w for ws in walls.values() for w in ws]
    fallback = statistics.median(every) if every else 0.0
    return sum(statistics.median(walls[s.key.split("#r")[0]]) if s.key.split("#r")[0] in walls else fallback
               for s in extra)


def _back_to_back(plan: Sequence[CellSpec], wanted: Mapping[str, int]) -> list[CellSpec]:
    """``wanted`` processes more of each cell, two of a cell one after the other (its own processes
    a round of an A/A check: run --aa), the cells taking turns pair by pair."""
    last: dict[str, CellSpec] = {}
    for s in plan:
        base = s.key.split("#r")[0]
        if base not in last or s.repeat > last[base].repeat:
            last[base] = s
    return [dataclasses.replace(last[base], repeat=last[base].repeat + 1 + j)
            for k in range(0, max(wanted.values(), default=0), 2) for base, n in wanted.items() if base in last
            for j in (k, k + 1) if j < n]


DEFAULT_TIMEOUT_S = 600.0  # a cell's wall-clock limit where none is given (run --timeout)
PROCESS_FLOOR_S = 1.0  # a cell-process's least cost beyond its steady state: start, first call, warm-up
LONG_PLAN_S = 1800.0  # a plan estimated longer than this says so before it starts


def estimate_s(specs: Sequence[CellSpec], config: MeasureConfig) -> float:
    """A floor on a plan's wall time: each cell-process's steady window plus the least a process
    costs (the fork server's start and a tiny cell's first call, about a second on the 2-core CPU);
    compiles and big models take longer, so the run takes at least this."""
    return len(specs) * (PROCESS_FLOOR_S + config.min_time_s)


def spent(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a run's cell-processes cost: their workers' wall time in all, that time on each
    kind of device (a CUDA cell holds its GPU for its worker's life: device-hours), and the
    energy its energy windows measured (joules; the windows only, not the whole run)."""
    wall = [float(r["wall_s"]) for r in rows if r.get("wall_s")]
    by_device: dict[str, float] = {}
    for r in rows:
        if r.get("wall_s"):
            by_device[r["device"]] = by_device.get(r["device"], 0.0) + float(r["wall_s"])
    windows = [r for r in rows if r.get("energy_j_per_call") and r.get("energy_power_w") and r.get("energy_window_s")]
    return {"processes": len(rows), "worker_s": sum(wall),
            "device_hours": {d: s / 3600 for d, s in by_device.items()},
            "energy_windows": len(windows),
            "energy_windows_j": sum(r["energy_power_w"] * r["energy_window_s"] for r in windows) if windows else None,
            "energy_windows_s": sum(r["energy_window_s"] for r in windows) if windows else None,
            # what the records say of why none was measured: --no-energy, no counter, a voided window
            "energy_why": sorted({str(r["energy_why"]) for r in rows if r.get("energy_why")})}


def spent_text(s: Mapping[str, Any]) -> str:
    hours = ", ".join(f"{h:.3g} {d}-hours" for d, h in s["device_hours"].items())
    text = f"spent: {s['processes']} cell-process(es), {s['worker_s'] / 60:.1f} min of worker time ({hours})"
    if s["energy_windows"]:
        text += (f"; energy measured in {s['energy_windows']} window(s) of {s['energy_windows_s']:.1f} s in all: "
                 f"{s['energy_windows_j']:.3g} J")
    else:
        why = s.get("energy_why") or ["the records do not say why"]
        text += f"; no energy measured ({'; '.join(why[:2])}{'; ...' if len(why) > 2 else ''})"
    return text


def backend_options(**given: Any) -> dict[str, Any]:
    """The backend options the user set (None: left to each backend's default)."""
    return {k: v for k, v in given.items() if v is not None}


@dataclass(frozen=True)
class Cells:
    """What a run measures: every combination of these (``runner.plan_cells``), each cell in
    ``config.processes`` processes. ``backends`` None: every default backend the probed machine
    runs (before the probe: every registered one, to check the names)."""

    workloads: tuple[str, ...] = ()
    presets: tuple[str, ...] = ("small",)
    phases: tuple[str, ...] = ("forward",)
    backends: tuple[str, ...] | None = None
    devices: tuple[str, ...] = ("cpu",)
    dtypes: tuple[str, ...] = ("float32",)
    overrides: Mapping[str, Any] = field(default_factory=dict)  # --set KEY=VALUE
    options: Mapping[str, Any] = field(default_factory=dict)  # backend options (backend_options)

    def plan(self, config: MeasureConfig, probe: Mapping[str, Any] | None = None,
             on_note: Callable[[str], None] | None = None) -> list[CellSpec]:
        backends = (list(self.backends) if self.backends else list(registry.backends()) if probe is None else
                    runner.backends_for(runner.default_backends(probe, list(self.devices)), list(self.workloads)))
        return runner.plan_cells(list(self.workloads), list(self.presets), list(self.phases), backends,
                                 list(self.devices), list(self.dtypes), dict(self.overrides), dict(self.options),
                                 config.processes, config.timeout_s, on_note)


@dataclass(frozen=True)
class Request:
    """One run asked for, declared once: what to measure (``cells``), how and under what limits
    (``config``, a MeasureConfig), where its cells run (``executor``) and its results go (``db``).
    A new run carries ``cells`` and ``config``; ``--resume`` carries the stored run's id instead
    (what and how are the stored run's), with what may change: where, and the cell timeout."""

    db: Path
    executor: Choice = Choice()
    cells: Cells | None = None
    config: MeasureConfig | None = None
    resume: str | None = None
    timeout_s: float | None = None  # resume: the cell timeout given now (None: the stored run's)
    budget_s: float | None = None  # resume: the seconds this session may take (None: the stored run's budget)
    inline: bool = False  # debug: cells in this process
    json_out: Path | None = None  # the cells also written as a JSON list
    command: str | None = None  # the command line, stored with a new run


# the options --resume accepts (a request's where and its cell timeout); the rest are the stored run's
RESUME_MAY_CHANGE = ("resume", "db", "json_out", "timeout", "budget", "inline", "verbose",
                     *(f.name for f in dataclasses.fields(Choice)))


@dataclass
class Prepared:
    """A request made ready, before the database is written: its executor, the machine's probe,
    the planned cells and the float64 references computed meanwhile."""

    request: Request
    executor: Executor
    probe: Mapping[str, Any] | None  # None: a resume, which probes once its run is claimed (Run.resume)
    specs: list[CellSpec] = field(default_factory=list)
    references: str | None = None

    @property
    def estimate_s(self) -> float:
        return estimate_s(self.specs, self.request.config) if self.request.config else 0.0


def prepare(request: Request) -> Prepared:
    """The executor made and reached, the machine probed and a new run's cells planned on what it
    found. A new run's first fork servers start while the probe runs, and the references its CUDA
    cells compute in workers of their own are computed meanwhile
    (runner.start_servers_during_probe). What can be refused without the probe is refused before
    it (seconds of workers): an executor's cluster that does not answer here, a resume's run that
    cannot be resumed in ``Run.resume``, which probes only once it holds the run."""
    config, cells = request.config, request.cells
    new = request.resume is None
    executor = request.executor.make(config.timeout_s if new else request.timeout_s or DEFAULT_TIMEOUT_S,
                                     available_cpus())
    executor.reach()
    if not new:
        return Prepared(request, executor, None)
    references = runner.run_references() if executor.name == "serial" and not request.inline else None
    early = ((lambda: runner.start_servers_during_probe(lambda found: cells.plan(config, found),
                                                        list(cells.devices), config, references))
             if references else None)
    probe = runner.probe_machine(request.inline, meanwhile=early)
    ready = Prepared(request, executor, probe, cells.plan(config, probe), references)
    if config.cache_dir is not None:
        Path(config.cache_dir).mkdir(parents=True, exist_ok=True)
    executor.check(ready.specs)
    return ready


def open_run(store: Store, ready: Prepared, on_note: Callable[[str], None] = lambda text: None) -> "Run":
    """The prepared request's run: a new one started, or the stored one resumed."""
    r = ready.request
    if r.resume is None:
        return Run.start(store, ready.specs, r.config, ready.probe, ready.executor, r.inline, r.command,
                         references=ready.references)
    return Run.resume(store, r.resume, lambda: runner.probe_machine(r.inline), ready.executor, r.inline, r.timeout_s,
                      on_note, r.budget_s)


class Unsaved(Exception):
    """Measured cells the database refused (``unsaved``: (measurement, where it was kept, error)); they
    are kept beside it, and ``--resume`` stores them."""

    def __init__(self, run_id: str, unsaved: list):
        super().__init__(f"{len(unsaved)} measured cell(s) of run {run_id} could not be stored")
        self.run_id, self.unsaved = run_id, unsaved


def execute(request: Request, ready: Prepared, measuring: Callable[["Run"], Any],
            on_note: Callable[[str], None] = lambda text: None,
            on_wait: Callable[[str], None] | None = None) -> str:
    """The engine of ``stackwars run`` and ``stackwars.run``: the prepared request's run opened (a new
    one started, or the stored one resumed) and measured, its looks included; returns its id.
    ``measuring(run)`` is a context manager that gives the run's ``Hooks`` (a front end's progress
    bar) for as long as it measures. Ctrl-C (KeyboardInterrupt) propagates with every finished cell
    stored; cells the database refused raise ``Unsaved`` (kept in the run's pending file)."""
    with Store(request.db, on_wait=on_wait) as store:
        the_run = open_run(store, ready, on_note)
        with measuring(the_run) as hooks:
            unsaved = the_run.measure(hooks)
        if unsaved:
            raise Unsaved(the_run.run_id, unsaved)
        return the_run.run_id


def _more_to_decide(store: Store, run_id: str, config: MeasureConfig) -> bool:
    """Whether a stored run has more to do than its missing cells: its first round measured but not
    screened, or a verdict (an ``--aa`` check) still open that its next look could decide."""
    if config.processes < 2:
        return False
    plan = store.run(run_id).plan
    if config.screens and not any(s.repeat > 0 for s in plan):
        return True
    found = rows(store, run_id)
    if config.aa:
        return bool(vd.aa_more(vd.self_check(found)))
    return bool(vd.wanted(vd.verdicts(found)))


class _Unsaved(Exception):
    """Some measured cells could not be stored: the run stops short of its looks."""


@dataclass
class Run:
    store: Store
    run_id: str
    specs: list[CellSpec]
    config: MeasureConfig
    env: Mapping[str, Any]
    executor: Executor
    inline: bool = False
    resumed_from: int | None = None  # cells of the plan before this session (resume)
    budget: Budget = field(default_factory=lambda: Budget(None))
    caches: str | None = None  # while measuring: the run's compile caches (runner.cell_cache)
    references: str | None = None  # while measuring: the run's float64 references (harness/reference.py)
    lock: RunLock | None = None  # held from start or resume to the end of measure: one process a run

    @classmethod
    def start(cls, store: Store, specs: Sequence[CellSpec], config: MeasureConfig, probe: Mapping[str, Any],
              executor: Executor, inline: bool = False, command: str | None = None, kind: str = "cells",
              references: str | None = None) -> "Run":
        """A new run; ``references``: its float64 reference folder where one was made before the
        machine probe (runner.run_references), else ``measure`` makes it."""
        env = envmod.fingerprint(config.threads, probe)
        if config.screens:  # the first round planned; the rest after it, for the cells still in the running
            specs = [s for s in specs if s.repeat == 0]
        run_id = runner.new_run(store, specs, config, command, kind)
        lock = RunLock(store.path, run_id).acquire()
        return cls(store, run_id, list(specs), config, env, executor, inline, budget=Budget(config.budget_s),
                   references=references, lock=lock)

    @classmethod
    def resume(cls, store: Store, run_id: str, probe: Callable[[], Mapping[str, Any]], executor: Executor,
               inline: bool = False, timeout_s: float | None = None,
               on_note: Callable[[str], None] = lambda text: None, budget_s: float | None = None) -> "Run":
        """The stored run's missing cells, resumed. ``probe`` is called once the run is held and
        has cells left: a resume refused (another process measures the run, nothing is left, its
        lock's path is not the tool's file) is refused before the machine is probed."""
        info = store.cell_run(run_id, "--resume")
        lock = RunLock(store.path, run_id).acquire()  # another process measuring it: refused, nothing written
        try:
            return cls._resume(store, info, lock, probe, executor, inline, timeout_s, on_note, budget_s)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def _resume(cls, store: Store, info, lock: RunLock, probe: Callable[[], Mapping[str, Any]], executor: Executor,
                inline: bool, timeout_s: float | None, on_note: Callable[[str], None],
                budget_s: float | None = None) -> "Run":
        run_id = info.run_id
        config = info.measure_config
        if timeout_s is not None and timeout_s != config.timeout_s:
            on_note(f"resuming with --timeout {timeout_s:g} s per cell (the run was started with "
                    f"{config.timeout_s:g} s)")
            config = dataclasses.replace(config, timeout_s=timeout_s)
            runner.validate_config(config)
        if budget_s is not None:
            config = dataclasses.replace(config, budget_s=budget_s)
        if not store.missing(run_id) and not any(p.is_file() for p in pending_paths(store.path, run_id)) \
                and not _more_to_decide(store, run_id, config):
            # a command with nothing to do writes nothing: no session, no look
            raise SpecError(f"run {run_id} has no cell left to measure ({len(info.plan)} of {len(info.plan)} "
                            f"stored) and no verdict a look could still decide: nothing to resume; "
                            f"`stackwars show {run_id}` prints it")
        runner.restore_models(store, info, on_note)  # its model files, unchanged, loaded as its start loaded them
        env = envmod.fingerprint(config.threads, probe())
        runner.check_resumable(info.env, env)
        executor.check(store.missing(run_id))  # before the session is written (Ray: the cluster reached)
        kept = store_pending(store, run_id, store.start_session(run_id, env))
        if kept:
            on_note(f"stored {kept} cell(s) an earlier session measured but could not store")
        specs = store.missing(run_id)
        on_note(f"resuming run {run_id}: {len(specs)} of {len(info.plan)} cells still to measure"
                + (", then the looks its open verdicts still take" if _more_to_decide(store, run_id, config) else ""))
        return cls(store, run_id, specs, config, env, executor, inline, len(info.plan), Budget(config.budget_s),
                   lock=lock)

    def _execute(self, specs: Sequence[CellSpec], hooks: Hooks, unsaved: list) -> list[Measurement]:
        def on_unsaved(m, where, exc):
            unsaved.append((m, where, exc))
            if hooks.on_unsaved:
                hooks.on_unsaved(m, where, exc)

        def on_duplicate(m):
            hooks.on_note(f"{m.spec.key}: another process stored this cell of the run first; "
                          "this measurement of it is not stored")

        done = runner.execute(self.store, self.run_id, specs, self.config, self.env, hooks.on_start, hooks.on_done,
                              self.inline, on_unsaved, self.executor, self.caches, on_duplicate,
                              self.references)
        if unsaved:
            raise _Unsaved()
        return done

    def _screen(self, hooks: Hooks) -> list[CellSpec]:
        """After every cell's first process: the choice of each row's two bests on it, and the rest
        for the cells that can still change a verdict (verdict/choose.screen: the two chosen, in
        --processes rounds after the choice; a candidate measured only while busy, once more to be
        judged; in a table of one framework, every mode not clearly slower); the decisions kept
        with the run, the plan extended, each round's two chosen cells next to each other in a drawn
        order. Nothing where the run does not screen or has screened (a resumed run)."""
        plan = self.store.run(self.run_id).plan
        if not self.config.screens or any(s.repeat > 0 for s in plan):
            return []
        found = rows(self.store, self.run_id)
        decisions = vd.screen(found, self.config.processes)
        # --aa: every cell that goes on, in --processes back-to-back pairs after its first process
        wanted = {k: 2 * self.config.processes if self.config.aa else d["rounds"]
                  for k, d in decisions.items() if d["keep"] and d["rounds"]}
        extra = self._rounds(plan, wanted, vd.pairs(vd.verdicts(found)))
        session = self.store.start_session(self.run_id, self.env)
        self.store.add_study_rows(self.run_id, session, SCREENING, "after the first round",
                                  [{"cell": k, **d} for k, d in decisions.items()])
        out = [k for k, d in decisions.items() if not d["keep"]]
        if out:
            hooks.on_note(f"chosen after one process each: {len(decisions) - len(out)} of {len(decisions)} cells go on "
                          f"(each row's two bests, and what is still unjudged); {len(extra)} more process(es)")
        if extra:
            self.store.extend_plan(self.run_id, extra)
            hooks.on_more(len(extra))  # the progress counts the session's cell-processes as planned so far
        return extra

    def _rounds(self, plan: Sequence[CellSpec], wanted: Mapping[str, int], pairs: Sequence[tuple[str, str]]
                ) -> list[CellSpec]:
        """More processes of ``wanted`` cells; with ``--aa`` a chosen cell's processes come in back-to-back
        pairs (verdict.self_check reads each pair as a round of the cell against itself)."""
        if self.config.aa:
            return _back_to_back(plan, wanted)
        return runner.more_rounds(plan, wanted, pairs, self.config.seed)

    def measure(self, hooks: Hooks | None = None) -> list[tuple[Measurement, Any, StoreWriteError]]:
        """The planned cells, then the looks: while a verdict is open (undecided, before its cap, not
        futile) the next look measures its rounds, the rows most likely to decide a second first where
        the budget cannot afford them all (verdict/plan.py). Returns the cells the database refused
        (kept in the pending file)."""
        hooks = hooks or Hooks()
        unsaved: list[tuple[Measurement, Any, StoreWriteError]] = []
        # the run's compile caches, one folder per cell, kept across its looks: a later process of a cell
        # starts warm from what its first process compiled (runner.cell_cache)
        self.caches = self.executor.scratch("caches")
        # and its float64 references: a later process compares with the reference its cell's first process
        # had computed, not computing it again in a worker of its own (the folder made before the probe where
        # there was one: references may have been computed into it)
        self.references = self.references or self.executor.scratch("reference")
        try:
            done = self._execute(self.specs, hooks, unsaved)
            extra = self._screen(hooks)
            if extra:
                done += self._execute(extra, hooks, unsaved)
            self._looks(hooks, unsaved, done)
        except _Unsaved:
            pass
        finally:
            for folder in (self.caches, self.references):
                if folder:
                    shutil.rmtree(folder, ignore_errors=True)
            self.caches = self.references = None
            if self.lock is not None:
                self.lock.release()
        return unsaved

    def next_look(self, done: Sequence[Measurement] = ()
                  ) -> tuple[list[CellSpec], list["vd.Want"], list["vd.Want"], list[dict[str, Any]]]:
        """What the run measures next: the processes of each open row's next look that the budget
        affords (the rows most likely to decide a second first), and the looks chosen and left out.
        Nothing where every row decided, reached its cap, stopped as futile or cannot be helped. With
        ``--aa``, the next pairs of each open check instead (verdict.self_check)."""
        found = rows(self.store, self.run_id)
        verdicts = vd.verdicts(found, lean=True)
        if self.config.processes < 2:  # a run of one process a cell asks no verdict
            return [], [], [], verdicts
        plan = self.store.run(self.run_id).plan
        if self.config.aa:
            wanted = vd.aa_more(vd.self_check(found))
            return _back_to_back(plan, wanted), [], [], verdicts
        wants = vd.wanted(verdicts)
        walls = [m.wall_s for m in done if m.wall_s] or [r["wall_s"] for r in found if r.get("wall_s")]
        fallback = 2 * statistics.median(walls) if walls else 0.0
        chosen, left = vd.allot(wants, self.budget.left(), fallback)
        extra = runner.more_rounds(plan, vd.as_cells(chosen), vd.pairs(verdicts), self.config.seed)
        return extra, chosen, left, verdicts

    def _looks(self, hooks: Hooks, unsaved: list, done: list[Measurement]) -> None:
        """Look after look while a row is open and the budget affords its next look."""
        held: set[str] = set()  # rows already said to get no more processes
        while True:
            extra, chosen, left, verdicts = self.next_look(done)
            for v in verdicts:
                if v.get("no_top_up") and vd.title(v) not in held:
                    held.add(vd.title(v))
                    hooks.on_note(f"{vd.title(v)}: {v['no_top_up']}")
            if left:
                hooks.on_note("the budget left ({:.0f} s of {:.0f} s) does not afford the next look of: ".format(
                    max(0.0, self.budget.left()), self.budget.seconds or 0.0)
                    + "; ".join(f"{w.row} ({w.why}, {w.rounds} round(s), about {w.seconds or 0:.0f} s)" for w in left))
            if not extra:
                break
            if self.config.aa:
                hooks.on_note(f"the open A/A checks look again: {len(extra)} more process(es), each cell's in "
                              f"back-to-back pairs")
            else:
                hooks.on_note(f"{len(chosen)} open verdict(s) look again: {len(extra)} more process(es), each row's two "
                              f"in rounds, about {sum(w.seconds or 0 for w in chosen):.0f} s")
            self.store.extend_plan(self.run_id, extra)
            hooks.on_more(len(extra))
            done += self._execute(extra, hooks, unsaved)
