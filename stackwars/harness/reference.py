"""What a cell's outputs are compared with: the float64 reference, computed once per run, or
the other framework's outputs where no float64 reference fits.

The reference depends on the workload, its configuration, the phase, the seed and the
dtypes the inputs and parameters were rounded to; not on the backend. ``execute`` gives a
run one directory (``ReferenceCache``); the first cell that needs a reference computes it
and stores it there (written atomically, under an exclusive ``flock``, so cells running in
turn or in parallel compute it once and never read half a file); every later cell of the
same key loads it.

Where it is computed (``placement``): on a CUDA cell of a workload whose reference can run
on the device (the models: the PyTorch twin in float64), on the GPU when the estimate fits
in its free memory (the measured program is released first); else on the host when it fits
in the available memory; else nowhere, and the cell's outputs are compared with another
backend's outputs from the same inputs (``peer``): preferably the other framework's. The
first cell of a peer comparison has nothing to compare with yet; it stores its outputs and
says so (its parity column reads "pending"). A train step compared with a peer compares
the loss only: AdamW's first update of an element whose gradient neither side resolves is
±lr in either framework, and without float64 gradients nothing tells those elements apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import glob
import hashlib
import inspect
import json
import math
import os
import shutil
import tempfile
import time
from typing import Any, Iterator, Mapping

import numpy as np
import psutil

from stackwars.harness.parity import compare
from stackwars.records import Parity

VERSION = 1  # bump when a reference's outputs change meaning
PARITY_MODES = ("auto", "reference", "peer")
HEADROOM = 0.9

# the parity rules' factors, applied here (rules.py renders them for the docs and legends):
# a float32 cell may be this many times further from float64 than the reference implementation's own
# float32 run (where the workload has one: the models' PyTorch twin), if that is above the dtype's fixed
# tolerance: a deep, ill-conditioned model (GPT-Neo's unscaled attention) rounds more than a fixed
# number allows, and every framework's float32 pays it alike
FLOAT32_ERROR_FACTOR = 4.0
PEER_TOLERANCE_FACTOR = 2.0  # each side may be off by the tolerance: together by twice it
# Where the reference implementation has a float32 mode, each output (tensor) of a float32 cell gets a
# tolerance of its own: FLOAT32_ERROR_FACTOR x that tensor's error in the reference implementation's
# float32 run, the largest over FLOAT32_BATCHES batches (the cell's and others drawn for the estimate),
# never below a floor. One tensor's rounding then no longer sets the whole step's tolerance: a BatchNorm
# scale near 1.0 takes an AdamW update of about 3e-5, which float32 stores with about 1e-3 of relative
# error in every backend, while the loss and the other updates are good to 1e-5 or better.
# The floors, from every backend of the six built-in models at tests/test_models.py's size on the 2-core
# VM (each backend's error of each tensor over PyTorch float32's, the largest over 3 batches):
# - TENSOR_FLOOR, outputs and the loss (about 8 float32 ulps of the tensor's largest value): the worst
#   ratio was 1.7 (jax-eager, BERT's loss; 1.55 GPT-Neo's logits). tanh-approximate GELU against
#   exact GELU differs by 2.7e-5 in a forward whose float32 error is 1.5e-7: 27 x this floor.
# - UPDATE_FLOOR, a train step's updates: they come from reductions over the batch (weight gradients,
#   BatchNorm's running statistics) whose order each compiler chooses, so one implementation's float32
#   error says less of another's: Inductor's running means in ResNet-50 were 2.7e-6 off, 13 x PyTorch
#   eager's 2.1e-7; the bias updates of the transformers up to 2.1 x. The wrong twins' updates are off
#   by far more (tanh GELU's 2.1e-4: 21 x this floor).
# Where the cell's matmuls are not float32 (TF32), the dtype's fixed tolerance is the floor as well: the
# reference implementation's float32 run does not round like them.
FLOAT32_BATCHES = 3
TENSOR_FLOOR = 1e-6
UPDATE_FLOOR = 1e-5


def derived_tolerance(fixed: float, float32_error: float | None) -> tuple[float, str]:
    """The cell's tolerance and the rule that set it."""
    if float32_error is None:
        return fixed, f"fixed for the dtype: {fixed:.1e}"
    if not math.isfinite(float32_error):  # the reference implementation's float32 run overflowed or gave NaN
        return math.inf, ("not finite: the reference implementation's own float32 run holds NaN or infinity, so no "
                          "tolerance can be derived from it")
    derived = FLOAT32_ERROR_FACTOR * float32_error
    if derived <= fixed:
        return fixed, (f"fixed for the dtype: {fixed:.1e} (above {FLOAT32_ERROR_FACTOR:g} x {float32_error:.1e}, "
                       f"the reference implementation's own float32 error)")
    return derived, (f"{FLOAT32_ERROR_FACTOR:g} x {float32_error:.1e}, the reference implementation's own float32 "
                     f"error (above the dtype's fixed {fixed:.1e})")


def tensor_tolerances(fixed: float, errors: Mapping[str, float] | None, exact: bool
                      ) -> tuple[dict[str, float] | None, str]:
    """Each output's tolerance from the reference implementation's float32 error of that output
    (``errors``, the largest over FLOAT32_BATCHES batches), and the rule that set them; (None, why)
    where no such errors exist (the scalar rule, ``derived_tolerance``, applies). ``exact``: the
    cell's matmuls are float32 (not TF32), so no fixed floor above TENSOR_FLOOR is needed."""
    if not errors:
        return None, "no float32 run of the reference implementation"
    if not all(math.isfinite(e) for e in errors.values()):
        return None, "the reference implementation's float32 run holds NaN or infinity"

    def floor(k: str) -> float:
        own = UPDATE_FLOOR if k.startswith("update.") else TENSOR_FLOOR
        return own if exact else max(own, fixed)

    tols = {k: max(floor(k), FLOAT32_ERROR_FACTOR * e) for k, e in errors.items()}
    rule = (f"per tensor: {FLOAT32_ERROR_FACTOR:g} x the reference implementation's own float32 error of that "
            f"tensor (the largest over {FLOAT32_BATCHES} batches), at least "
            + (f"{TENSOR_FLOOR:.0e} ({UPDATE_FLOOR:.0e} an update)" if exact else
               f"the dtype's fixed {fixed:.1e} (the cell's matmuls are not float32)"))
    return tols, rule


def key(workload: Any, cfg: Any, phase: str, seed: int, dtype: str, param_dtype: str) -> str:
    payload = {"workload": workload.name, "config": cfg.as_dict(), "phase": phase, "seed": seed,
               "inputs_dtype": dtype, "params_dtype": param_dtype, "reference": workload.reference_name(cfg),
               "version": VERSION}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


class ReferenceCache:
    """A directory of references (``<key>.arrays/``) and peers' outputs
    (``<key>.peer.<framework>.<backend>.arrays/``): one ``.npy`` file per array and an index,
    read back memory-mapped. A fresh worker that read a GPT-2 train step's reference (1 GB)
    out of one ``.npz`` spent 2.4 s allocating and copying it; mapped, the comparison reads
    the pages from the file cache where they are."""

    SUFFIX = ".arrays"
    VERIFIED = ".verified.json"  # digest -> the comparison an output with it got (harness/digest.py)

    def __init__(self, directory: str | None):
        self.directory = directory

    def _path(self, name: str) -> str:
        assert self.directory is not None
        return os.path.join(self.directory, name)

    def has(self, name: str) -> bool:
        return self.directory is not None and os.path.isdir(self._path(name + self.SUFFIX))

    @contextlib.contextmanager
    def locked(self, name: str) -> Iterator[None]:
        if self.directory is None:
            yield
            return
        with open(self._path(name + ".lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def load(self, name: str) -> dict[str, np.ndarray] | None:
        if not self.has(name):
            return None
        folder = self._path(name + self.SUFFIX)
        with open(os.path.join(folder, "index.json")) as f:
            names = json.load(f)
        return {k: np.load(os.path.join(folder, f"{i}.npy"), mmap_mode="r") for i, k in enumerate(names)}

    def load_meta(self, name: str) -> dict[str, Any]:
        if self.directory is None:
            return {}
        try:
            with open(self._path(name + ".json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def store_meta(self, name: str, meta: Mapping[str, Any]) -> None:
        if self.directory is None:
            return
        tmp = self._path(f".partial-{name}.json")
        with open(tmp, "w") as f:
            json.dump(dict(meta), f)
        os.replace(tmp, self._path(name + ".json"))

    def store(self, name: str, arrays: Mapping[str, np.ndarray]) -> None:
        """Written whole into a temporary folder, then renamed into place: a reader never
        sees half a reference."""
        if self.directory is None:
            return
        tmp = tempfile.mkdtemp(dir=self.directory, prefix=".partial-")
        try:
            with open(os.path.join(tmp, "index.json"), "w") as f:
                json.dump(list(arrays), f)
            for i, v in enumerate(arrays.values()):
                np.save(os.path.join(tmp, f"{i}.npy"), np.asarray(v))
            final = self._path(name + self.SUFFIX)
            if os.path.isdir(final):  # a peer's outputs stored again: the newer ones
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def verified(self, name: str, digest: str, tolerance: float) -> dict[str, Any] | None:
        """The run's comparison of an output with ``digest`` (harness/digest.py) against
        reference ``name`` at ``tolerance`` (the workload's, before any derived from the
        reference), or None where it made none."""
        if self.directory is None:
            return None
        try:
            with open(self._path(name + self.VERIFIED)) as f:
                entry = json.load(f).get(digest)
        except (OSError, ValueError, AttributeError):
            return None
        return entry if isinstance(entry, dict) and entry.get("tolerance") == tolerance else None

    def keep_verified(self, name: str, digest: str, tolerance: float, parity: Parity, by: str) -> None:
        """Keep a comparison against reference ``name`` for the next output with ``digest``;
        rewritten whole and renamed into place under its own lock: cells in parallel add theirs."""
        if self.directory is None:
            return
        path = self._path(name + self.VERIFIED)
        with self.locked(name + ".verified"):
            try:
                with open(path) as f:
                    kept = json.load(f)
            except (OSError, ValueError):
                kept = {}
            kept[digest] = {"tolerance": tolerance, "by": by, "parity": dataclasses.asdict(parity)}
            tmp = self._path(f".partial-{name}{self.VERIFIED}")
            with open(tmp, "w") as f:
                json.dump(kept, f)
            os.replace(tmp, path)

    def peers(self, name: str) -> list[tuple[str, str]]:
        """(framework, backend) of every peer output stored under ``name``."""
        if self.directory is None:
            return []
        out = []
        for path in sorted(glob.glob(self._path(glob.escape(name) + ".peer.*" + self.SUFFIX))):
            framework, backend = os.path.basename(path)[len(name) + len(".peer."):-len(self.SUFFIX)].split(".", 1)
            out.append((framework, backend))
        return out


def placement(workload: Any, cfg: Any, phase: str, dtype: str, device: str) -> tuple[str | None, str]:
    """Where the float64 reference fits: 'cuda', 'cpu' or None (nowhere), and why."""
    estimate = workload.memory_estimate(cfg, phase, dtype)["reference"] if hasattr(workload, "memory_estimate") \
        else None
    if estimate is None:
        return "cpu", "host (small reference)"
    gib = 2**30
    notes = []
    if device == "cuda" and "cuda" in getattr(workload, "reference_devices", ("cpu",)):
        import torch

        free = torch.cuda.mem_get_info()[0]
        if estimate <= HEADROOM * free:
            return "cuda", f"GPU in float64: estimate {estimate / gib:.1f} GiB of {free / gib:.1f} GiB free"
        notes.append(f"not on the GPU ({estimate / gib:.1f} GiB > {HEADROOM:.0%} of {free / gib:.1f} GiB free)")
    available = psutil.virtual_memory().available
    if estimate <= HEADROOM * available:
        return "cpu", "; ".join([*notes, f"host: estimate {estimate / gib:.1f} GiB of {available / gib:.1f} GiB "
                                          "available"])
    return None, "; ".join([*notes, f"no float64 reference fits: {estimate / gib:.1f} GiB > {HEADROOM:.0%} of the "
                                    f"host's {available / gib:.1f} GiB available"])


def stored(ref: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the run's cache keeps: float32 (half the I/O of float64). Rounding a float64
    reference to float32 moves it by at most 6e-8 of each value, three orders of magnitude
    below the tightest tolerance (2e-4); the gradients only set the AdamW masking threshold."""
    return {k: np.asarray(v, dtype=np.float32) if np.issubdtype(np.asarray(v).dtype, np.floating) else v
            for k, v in ref.items()}


def _release_device_memory() -> None:
    """Before a GPU cell's reference is placed: device buffers that only a reference cycle still
    holds are freed, so that ``placement`` counts them free. Not for a CPU cell's: a full
    collection walks every object of the process (0.2-0.3 s in a fresh cell, more in a long-lived
    one: test_parity.py and test_loops.py, whose references are computed in pytest's process, took
    about 40 s more CPU with it on the 2-CPU VM, 2026-12-02), and host memory needs none (what no
    cycle holds is freed already, the rest in time)."""
    import gc
    import sys

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def compute(workload: Any, cfg: Any, phase: str, params: Mapping[str, np.ndarray], batch: Mapping[str, np.ndarray],
            tolerance: float, cache: ReferenceCache, ref_key: str, device: str, dtype: str, mode: str, backend: str,
            info: dict[str, Any]) -> dict[str, np.ndarray] | None:
    """Compute the reference where it fits, store it in the cache (caller holds its lock) and
    note in ``info`` where and how long; the stored arrays (``stored``: what the run's other
    cells load), or None where no reference fits."""
    if device != "cpu":
        _release_device_memory()  # before placement reads what the GPU has free
    where, why = placement(workload, cfg, phase, dtype, device) if mode == "auto" else ("cpu", "forced")
    info["placement"] = why
    if where is None:
        return None
    t1 = time.perf_counter()
    parts: dict[str, float] = {}  # a workload that times its own parts fills this (models: build, run, to host)
    timed = {"stages": parts} if "stages" in inspect.signature(workload.reference).parameters else {}
    ref = (workload.reference(cfg, phase, params, batch, device=where, **timed) if where != "cpu"
           else workload.reference(cfg, phase, params, batch, **timed))
    # where its seconds go (a GPU's float64 run is fast; its outputs' trip to the host and the
    # cache's file are not), each stage to the host's clock after the one before
    stages: dict[str, Any] = {"float64_run_s": time.perf_counter() - t1}
    if parts:
        stages["float64_parts"] = parts
    meta = {"where": where, "computed_by": backend}
    run32 = getattr(workload, "reference_float32", None)  # Workload's default: None
    if dtype == "float32" and run32 is not None:  # how far float32 alone takes the reference
        t = time.perf_counter()
        errors = float32_errors(workload, cfg, phase, params, batch, ref, tolerance, where, ref_key)
        if errors is not None:
            per, batches = errors
            meta["float32_error"] = max(per.values(), default=0.0)
            meta["float32_errors"], meta["float32_batches"] = per, batches
        stages["float32_run_s"] = time.perf_counter() - t
    t = time.perf_counter()
    kept = stored(ref)
    stages["to_float32_s"] = time.perf_counter() - t
    t = time.perf_counter()
    cache.store(ref_key, kept)  # making it available to the run's other cells is part of its cost
    stages.update(store_s=time.perf_counter() - t, stored_bytes=sum(int(np.asarray(v).nbytes) for v in kept.values()))
    info.update(source="computed", where=where, computed_s=time.perf_counter() - t1, stages=stages)
    cache.store_meta(ref_key, {**meta, "computed_in_s": info["computed_s"], "placement": why, "stages": stages,
                               **{k: info[k] for k in ("worker", "init_s") if k in info}})
    info.update(meta)
    # the arrays every other cell of the run loads: this cell's comparison is made against the
    # same reference as theirs (against the float64 arrays, GPT-2 small's error read 7.13e-07
    # here and 7.17e-07 in every later process, whose outputs had the same bits)
    return kept


def float32_errors(workload: Any, cfg: Any, phase: str, params: Mapping[str, np.ndarray],
                   batch: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray], tolerance: float, where: str,
                   ref_key: str) -> tuple[dict[str, float], int] | None:
    """Each output's error in the reference implementation's float32 run, the largest over the
    cell's batch and FLOAT32_BATCHES - 1 more drawn for the estimate (each with its own float64
    run), and how many batches it took; None where the workload has no float32 run. One batch is
    not enough: with another seed, one convolution's update error moved tenfold (issue 63). A
    workload that cannot draw another batch (no ``init_batch``) gives its one batch's errors."""
    from stackwars.workloads.base import round_all

    def errors(b: Mapping[str, np.ndarray], r: Mapping[str, np.ndarray]) -> dict[str, float] | None:
        ref32 = workload.reference_float32(cfg, phase, params, b, device=where)
        return None if ref32 is None else dict(compare(ref32, r, tolerance).per_output)

    worst = errors(batch, ref)
    if worst is None:
        return None
    draw = getattr(workload, "init_batch", None)
    batches = 1
    if draw is not None:
        base = int(hashlib.sha256(ref_key.encode()).hexdigest()[:8], 16)  # batches of their own, fixed by the key
        for i in range(1, FLOAT32_BATCHES):
            b = round_all(draw(cfg, base + i), "float32")  # as the cell's batch was
            more = errors(b, workload.reference(cfg, phase, params, b, **({"device": where} if where != "cpu"
                                                                              else {})))
            for k, e in (more or {}).items():
                worst[k] = max(worst.get(k, 0.0), e) if math.isfinite(e) else e
            batches += 1
    return worst, batches


def cell_key(cell: Any, seed: int) -> str:
    """The reference key of a cell (CellSpec), computed without a framework."""
    from stackwars import registry
    from stackwars.workloads.base import param_dtype

    workload = registry.workload(cell.workload)
    cfg = workload.config(cell.preset, dict(cell.overrides))
    return key(workload, cfg, cell.phase, seed, cell.dtype, param_dtype(cell.dtype, cell.phase))


def own_worker_wanted(workload: Any, device: str, mode: str, directory: str | None) -> bool:
    """A CUDA cell's float64 reference is computed in a worker of its own, before the cell's:
    after a measured program, JAX's allocator never returns its pool and PyTorch's CUDA-graph
    pools cannot be emptied, so a reference computed in the same process could be pushed off
    the GPU onto the slow host path (over 200 s for a large model was seen). It needs a run
    directory to hand the reference over, and a workload whose reference can run on a GPU."""
    return (device == "cuda" and mode != "peer" and directory is not None
            and "cuda" in getattr(workload, "reference_devices", ("cpu",)))


def compute_in_worker(spec: Mapping[str, Any], config: Mapping[str, Any], reference_dir: str) -> dict[str, Any]:
    """A worker's task: the cell's reference into the run's cache, unless it is there already.
    The parameters and batch are drawn from the seed exactly as the cell's worker draws them."""
    from stackwars import registry
    from stackwars.records import CellSpec, MeasureConfig
    from stackwars.workloads.base import param_dtype, round_all

    cell, cfg_m = CellSpec.from_dict(spec), MeasureConfig.from_dict(config)
    workload = registry.workload(cell.workload)
    cfg = workload.config(cell.preset, dict(cell.overrides))
    pdtype = param_dtype(cell.dtype, cell.phase)
    cache, ref_key = ReferenceCache(reference_dir), cell_key(cell, cfg_m.seed)
    info: dict[str, Any] = {"worker": "own (computed before the cell's worker)"}
    with cache.locked(ref_key):
        if cache.has(ref_key):
            return {"status": "ok", "source": "already in the run's cache"}
        t = time.perf_counter()
        params, batch = workload.init(cfg, cfg_m.seed)
        params = round_all(params, pdtype)
        batch = round_all(batch, cell.dtype)
        info["init_s"] = time.perf_counter() - t  # the parameters and inputs drawn, as the cell draws them
        tolerance = workload.tolerance(cell.dtype, cfg_m.matmul_precision, cell.phase)
        ref = compute(workload, cfg, cell.phase, params, batch, tolerance, cache, ref_key, cell.device, cell.dtype,
                      cfg_m.parity_mode, "reference worker", info)
    return {"status": "ok", "source": "computed" if ref is not None else "does not fit", **info}


def reference_parity(workload: Any, cfg: Any, phase: str, params: Mapping[str, np.ndarray],
                     batch: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray], tolerance: float,
                     cache: ReferenceCache, ref_key: str, device: str, dtype: str, mode: str,
                     framework: str, backend: str, matmul_precision: str = "float32") -> tuple[Parity, dict[str, Any]]:
    """The cell's parity and how it was obtained (``info``: source, where, seconds,
    computed_s = time spent computing a reference in this cell, 0 when reused)."""
    if mode not in PARITY_MODES:
        raise ValueError(f"parity mode {mode!r}; allowed: {', '.join(PARITY_MODES)}")
    t0 = time.perf_counter()
    info: dict[str, Any] = {"mode": mode, "key": ref_key, "computed_s": 0.0}
    if mode != "peer":
        with cache.locked(ref_key):
            ref = cache.load(ref_key)
            if ref is not None:
                info.update(source="reused from this run's cache", **cache.load_meta(ref_key))
            else:
                ref = compute(workload, cfg, phase, params, batch, tolerance, cache, ref_key, device, dtype, mode,
                              backend, info)
        if ref is not None:
            where = info.get("where")
            name = workload.reference_name(cfg) + (f", on {'the GPU' if where == 'cuda' else 'the host'}" if where
                                                   else "")
            tol, rule = derived_tolerance(tolerance, info.get("float32_error"))
            own, why = tensor_tolerances(tolerance, info.get("float32_errors"), matmul_precision == "float32")
            if own is not None:  # each tensor against its own tolerance; ``tol`` sets AdamW's masking only
                rule = why
            parity = dataclasses.replace(compare(outputs, ref, tol, reference_name=name, tolerances=own), rule=rule)
            info["seconds"] = time.perf_counter() - t0
            return parity, info
    info["source"] = "peer"
    parity = peer_parity(outputs, tolerance, cache, ref_key, phase, framework, backend)
    info["seconds"] = time.perf_counter() - t0
    return parity, info


def verified_parity(cache: ReferenceCache, ref_key: str, digest: str, entry: Mapping[str, Any],
                    mode: str) -> tuple[Parity, dict[str, Any]]:
    """The parity of an output whose digest (harness/digest.py) is one the run compared against
    the same reference at the same tolerance (``cache.verified``): that comparison, whose bits
    were these; ``info`` says whose it was."""
    t0 = time.perf_counter()
    parity = Parity(**entry["parity"])
    info: dict[str, Any] = {"mode": mode, "key": ref_key, "computed_s": 0.0, **cache.load_meta(ref_key),
                            "source": f"reused: the comparison of the same output bits by {entry.get('by')}",
                            "digest": digest}
    info["seconds"] = time.perf_counter() - t0
    return parity, info


def peer_parity(outputs: Mapping[str, np.ndarray], tolerance: float, cache: ReferenceCache, ref_key: str,
                phase: str, framework: str, backend: str) -> Parity:
    own = {k: np.asarray(v, dtype=np.float32) for k, v in outputs.items()}
    if phase != "forward":
        own = {k: v for k, v in own.items() if k == "loss"}
    tol = PEER_TOLERANCE_FACTOR * tolerance
    with cache.locked(ref_key + ".peer"):
        others = [p for p in cache.peers(ref_key) if p[1] != backend]
        others.sort(key=lambda p: p[0] == framework)  # the other framework first
        cache.store(f"{ref_key}.peer.{framework}.{backend}", own)
        if not others:
            where = "no other backend's outputs yet" if cache.directory else "no run directory to share outputs"
            return Parity(max_rel_err=None, tolerance=tol, reference=f"peer: pending ({where}); these outputs are "
                                                                     "kept for later cells of this run")
        fw, other = others[0]
        theirs = cache.load(f"{ref_key}.peer.{fw}.{other}")
    parity = compare(own, theirs, tol, reference_name=f"peer: {other} ({fw}) outputs from the same inputs")
    what = "the loss only (train step)" if phase != "forward" else "the outputs"
    return Parity(max_rel_err=parity.max_rel_err, tolerance=tol, per_output=parity.per_output, failure=parity.failure,
                  metric=f"{parity.metric}; compares {what}; tolerance {PEER_TOLERANCE_FACTOR:g} x the dtype's",
                  reference=parity.reference, rule=f"peer: {PEER_TOLERANCE_FACTOR:g} x the dtype's fixed {tolerance:.1e}")
