"""Fork-server management: how each worker process is made, and the servers started ahead.

``process_request`` says how a cell's worker is made (threads, device, caches, environment,
cores, and the fork server it is forked from: harness/forkserver.py); ``study_process`` and
``reference_process`` the same for a study's and a reference's worker. ``start_servers_ahead``
starts the servers a batch of cells will be forked from, together, and computes meanwhile the
float64 references that need a worker of their own (``reference_first``);
``start_servers_during_probe`` does it while the machine probe runs, into the folder
``run_references`` makes.
"""

from __future__ import annotations

import shutil
import time
from typing import Any, Callable, Mapping, Sequence

from stackwars import executors, registry
from stackwars.errors import SpecError
from stackwars.executors import Placement
from stackwars.harness import reference as refmod
from stackwars.harness import tmp
from stackwars.harness.isolation import run_inline, run_task
from stackwars.records import CellSpec, MeasureConfig
from stackwars.runner.planning import probe_guess

PROBE_DURING = "the machine probe"  # what a batch of servers started while the probe ran says it overlapped



def start_servers_during_probe(plan_for: Callable[[Mapping[str, Any]], Sequence[CellSpec]],
                               devices: str | Sequence[str], config: MeasureConfig,
                               references: str | None = None) -> dict[str, Any] | None:
    """The first batch of fork servers a new run here will want (its first process number's,
    and the next ones' where they fit), started while the machine probe's workers run instead of
    after them: both are imports (PyTorch's CUDA build took 3-5 s on an H100), and the run cannot
    start before either. ``plan_for``: the run's cells given a probe, here given ``probe_guess``
    (a plan the guess makes it refuse starts nothing). The requests are the serial executor's
    first ones exactly, so ``execute`` finds these servers running and starts none of them
    again; the run itself plans from the probe. ``references``: the run's reference folder
    (``run_references``), into which the float64 references its CUDA cells compute in workers
    of their own are computed meanwhile (``start_servers_ahead``); without it a folder of its
    own stands for it, and the references wait for their cells."""
    guess = probe_guess(devices)
    try:
        specs = list(plan_for(guess))
    except SpecError:
        return None
    if not specs:
        return None
    first = specs[0].repeat
    folder = references or tmp.mkdtemp("probe-references")  # the run's reference folder: empty at its start
    try:
        return start_servers_ahead(sorted(specs, key=lambda s: s.repeat != first), config, guess, executors.here,
                                   folder, during=PROBE_DURING, references_meanwhile=references is not None)
    finally:
        if references is None:
            shutil.rmtree(folder, ignore_errors=True)



def run_references() -> str:
    """A new run's float64 reference folder, made before the machine probe so that the references
    can be computed while it runs (``start_servers_during_probe``); the run removes it when it
    ends, and this process at its exit where no run took it."""
    import atexit

    folder = tmp.mkdtemp("reference")
    atexit.register(shutil.rmtree, folder, True)
    return folder



def process_request(spec: CellSpec, config: MeasureConfig, placement: Placement | None,
                    cache_dir: str | None) -> dict[str, Any]:
    """How a cell's worker process is made (isolation.run_task): its threads, device, caches,
    environment and cores, and the fork server it comes from: one that preloaded the
    framework (and what the workload's cells import: a user's model file's frameworks whatever
    the backend, a built-in model's twin on that framework), a server of its own for each
    process number of a cell (harness/forkserver.py)."""
    bspec, wl = registry.backend(spec.backend), registry.workload(spec.workload)
    return {"threads": config.threads, "device": spec.device, "cache_dir": cache_dir,
            "env": {**bspec.process_env(dict(spec.options), spec.device),
                    **wl.process_env(wl.config(spec.preset, dict(spec.overrides)), spec.device),
                    **(dict(placement.env) if placement else {})},
            "cpus": list(placement.cpus) if placement and placement.cpus else None,
            "preload": list(dict.fromkeys((*later_round(bspec, spec), *wl.preload_for(bspec.framework),
                                           *warm_keys(bspec, spec)))),
            "generation": spec.repeat}


INDUCTOR_KEYS = "stackwars.backends.inductor_keys"
# the PyTorch modes whose later rounds' processes share one server a round on the CPU (``later_round``)
SHARED_LATER = ("stackwars.backends.torch_eager", "stackwars.backends.torch_compile")


def later_round(bspec, spec: CellSpec) -> tuple[str, ...]:
    """What the server of a cell's process preloads: its backend's (``BackendSpec.preload``); for a later
    round's process of PyTorch's eager or compiling mode on the CPU, the union of both, so that one server
    a round serves both sides' PyTorch cells (before: two, 4 s and 5.3 s of CPU each a round on the 2-CPU
    EPYC VM, the eager one importing torch._dynamo too). A cell's first process keeps its own mode's
    server: its first call and its memory are figures, and an eager user's process holds no Inductor.
    Importing Inductor changes none of torch's global settings (threads, matmul precision, oneDNN,
    determinism, grad mode: checked in tests/test_forkserver.py); a later round's process is there for its
    steady state, each still a fresh fork of a fresh server of its own round."""
    own = bspec.impl.split(":")[0]
    if spec.repeat > 0 and spec.device == "cpu" and bspec.framework == "torch" and own in SHARED_LATER:
        from stackwars.backends.base import PRELOAD, TORCH_COMPILER

        return tuple(dict.fromkeys((*PRELOAD["torch"], *TORCH_COMPILER, *SHARED_LATER)))
    return tuple(bspec.preload)


def warm_keys(bspec, spec: CellSpec) -> tuple[str, ...]:
    """What a later round's server of a compiling PyTorch backend on the CPU works out before it forks:
    Inductor's process-wide facts (backends/inductor_keys.py: the hashes of its and Triton's sources,
    the CPU's vector instruction sets), 0.8-1.3 s a process on the 2-CPU EPYC VM. Never for a cell's
    first process (repeat 0): its first call is the figure a user's fresh process pays, and pays them in.
    Not on CUDA: working out the device's facts there would touch the driver before the fork."""
    if "torch._inductor.compile_fx" in later_round(bspec, spec) and spec.repeat > 0 and spec.device == "cpu":
        return (INDUCTOR_KEYS,)
    return ()



def study_process(backend: str, device: str, cache_dir: str | None, threads: int | None = None) -> dict[str, Any]:
    """How a study's worker for one backend is made (isolation.run_task): a fresh process on
    ``device`` with its own compile caches, forked, as a cell's, from a server that preloaded
    the backend's framework (the study's own module is read in the child); a spawned
    interpreter imported PyTorch and Inductor again for every variant of a study."""
    return {"threads": threads, "device": device, "cache_dir": cache_dir,
            "preload": list(registry.backend(backend).preload)}



def reference_process(spec: CellSpec, config: MeasureConfig, placement: Placement | None) -> dict[str, Any]:
    """How a cell's reference worker is made (``reference_first``): forked, like every cell's,
    from a server that preloaded PyTorch (the references a GPU computes are the PyTorch twins
    in float64), one server for every reference of the run. torch._dynamo too: a twin is
    built on the meta device, whose initialisers dispatch through torch._refs, which imports
    it (2.5 s of a fresh worker's float64 run on the 2-core VM)."""
    return {"threads": config.threads, "device": spec.device, "cache_dir": None,
            "env": dict(placement.env) if placement else {},
            "cpus": list(placement.cpus) if placement and placement.cpus else None,
            "preload": ["stackwars.harness.reference", "torch", "torch._dynamo"]}


EARLY_REFERENCES_AT_ONCE = 4  # reference workers computing meanwhile, at most (each holds a model in float64)


# references computed while servers started, by (folder, key): the first cell of each key records it
_EARLY: dict[tuple[str, str], dict[str, Any]] = {}



def start_servers_ahead(specs: Sequence[CellSpec], config: MeasureConfig, probe: Mapping[str, Any],
                        placement: Callable[[CellSpec], Placement], reference_dir: str | None = None,
                        during: str | None = None, references_meanwhile: bool = True) -> dict[str, Any] | None:
    """Start together the fork servers ``specs`` will be forked from (forkserver.start_ahead),
    leaving out cells that will not start a worker (unsupported here). With ``reference_dir``,
    where a cell will compute its float64 reference in a worker of its own first (a CUDA cell of
    a model) and the folder lacks it: with ``references_meanwhile``, those references are
    computed while the servers start, in workers spawned for them (at most
    ``EARLY_REFERENCES_AT_ONCE`` at once), and waited for before this returns. On the H200
    gpt2's took 11.6 s and resnet50's 1.6 s, each before its first cell, after the 14.7 s the
    servers took to start; nothing is timed while servers start. Else the reference workers'
    server starts in the batch: started as that worker came, it evicted the oldest server of
    the batch, a cell's, and on the H200 the first cells waited for their servers again (7.9 s
    in one cold process) and a later batch restarted the evicted (11.2 s). Between cells only."""
    from concurrent.futures import ThreadPoolExecutor

    from stackwars.harness import forkserver, settings  # when servers start: a command's import stays light

    if not forkserver.enabled():
        return None
    requests = []
    early: dict[str, CellSpec] = {}  # the references to compute meanwhile, one cell each

    def request(proc: Mapping[str, Any]) -> None:
        env, _ = settings.environment(proc["threads"], proc["device"], None, proc["env"], proc["cpus"])
        requests.append((proc["preload"], env, proc.get("generation") or 0))

    for spec in specs:
        try:
            bspec = registry.backend(spec.backend)
            if not bspec.preload or not bspec.availability(probe, spec.device, dict(spec.options))[0]:
                continue
            wl = registry.workload(spec.workload)
            if wl.unsupported(wl.config(spec.preset, dict(spec.overrides)), bspec.framework, bspec.name, spec.phase):
                continue
            proc = process_request(spec, config, placement(spec), None)
            key = refmod.cell_key(spec, config.seed)
            if refmod.own_worker_wanted(wl, spec.device, config.parity_mode, reference_dir) and \
                    not refmod.ReferenceCache(reference_dir).has(key):
                if references_meanwhile:
                    early.setdefault(key, spec)
                else:
                    request(reference_process(spec, config, placement(spec)))  # needed first: before the cell's
        except Exception:  # noqa: BLE001 - the cell itself records what is wrong with it; its server waits
            continue
        request(proc)
    if not early:
        return forkserver.start_ahead(requests, during)
    pool = ThreadPoolExecutor(max_workers=min(len(early), EARLY_REFERENCES_AT_ONCE),
                              thread_name_prefix="stackwars-reference")
    futures = {key: pool.submit(reference_first, spec, config, reference_dir, placement(spec), False, True)
               for key, spec in early.items()}
    try:
        batch = forkserver.start_ahead(requests, during)
    finally:
        t0 = time.perf_counter()
        outcomes = {}
        for key, future in futures.items():  # the run starts once its references are in the folder
            try:
                outcomes[key] = future.result()
            except Exception as exc:  # noqa: BLE001 - the cell computes it as before, and records this
                outcomes[key] = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]}
        pool.shutdown()
        # what the references took beyond the servers' start (the rest of their time overlapped it),
        # carried by the first of them
        waited = time.perf_counter() - t0
        for i, (key, outcome) in enumerate(outcomes.items()):
            _EARLY[(reference_dir, key)] = {**outcome, "after_servers_s": waited if i == 0 else 0.0,
                                            "computed": "while the fork servers started"
                                            + (f", during {during}" if during else "") + ", before the cells"}
    return batch



def reference_first(spec: CellSpec, config: MeasureConfig, reference_dir: str, placement: Placement | None = None,
                    inline: bool = False, spawn: bool = False) -> dict[str, Any]:
    """The cell's float64 reference computed in a fresh worker of its own, into the run's
    reference cache, before the cell's worker starts (harness/reference.py says why). What
    happened is returned for the record; where it failed, the cell's worker computes the
    reference itself, as before. ``spawn``: a fresh interpreter, not a fork of the reference
    workers' server (while the servers start: ``start_servers_ahead``). A reference computed
    that way is recorded by the first cell of its key, as if that cell had computed it."""
    key = refmod.cell_key(spec, config.seed)
    earlier = _EARLY.pop((reference_dir, key), None)
    if refmod.ReferenceCache(reference_dir).has(key):
        if earlier is not None and earlier.get("status") == "ok":
            return earlier
        return {"status": "ok", "source": "already in the run's cache"}  # no worker to start
    process = reference_process(spec, config, placement)
    if spawn:
        process.pop("preload")
    task = {"target": "stackwars.harness.reference:compute_in_worker",
            "kwargs": {"spec": spec.to_dict(), "config": config.to_dict(), "reference_dir": reference_dir},
            "process": process}
    outcome = run_inline(task) if inline else run_task(task, config.timeout_s, config.memory_limit_bytes)
    out = {"status": outcome.status, "wall_s": outcome.wall_s}
    if earlier is not None:  # computed while the servers started, and failed: this is the second try
        out["first_try"] = {k: earlier.get(k) for k in ("status", "error", "computed")}
    if outcome.result:
        out.update({k: v for k, v in outcome.result.items()
                    if k in ("source", "where", "computed_s", "placement", "stages", "init_s")})
        origin = (outcome.result.get("process_settings") or {}).get("origin")
        if origin:  # how its process was made: the server it was forked from, started ahead or by it
            out["origin"] = origin
    if outcome.status != "ok":
        out["error"] = (outcome.error or "")[:2000]
    return out
