"""MNIST MLP training study: JAX primitives vs PyTorch, timed honestly, to real accuracy.

A 784-512-512-10 ReLU MLP trained with plain SGD on a 50,000/10,000 train/validation
split of the MNIST training images (the 10,000 test images give the final test accuracy
only), in both frameworks from the same initial weights and the same batch order. Each
training (framework x batch size) runs in its own worker process; every epoch is
synchronised before the clock is read, the first epoch's compilation is timed apart
from its execution, and data movement is timed apart from compute.

    stackwars train mnist                      # both frameworks, batch 64/256/1024, 10 epochs
    stackwars train mnist --framework jax --batch-size 256 --epochs 5 --data-dir DIR --out DIR
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from stackwars import runner
from stackwars.data import mnist
from stackwars.errors import SpecError
from stackwars.harness.isolation import run_inline, run_task
from stackwars.registry import register_study
from stackwars.studies.mnist.common import FRAMEWORKS, PLACEMENTS, TrainConfig
from stackwars.harness import tmp

STUDY = "mnist"
TRAIN_SIZE = 50_000


@dataclass(frozen=True)
class MnistStudy:
    name: str = STUDY
    kind: str = "train"
    description: str = "MNIST 784-512-512-10 MLP, SGD, JAX primitives vs PyTorch (stackwars train mnist)"


register_study(MnistStudy())


def plan(frameworks: Sequence[str], batch_sizes: Sequence[int], epochs: int, lr: float, placement: str = "device",
         compile: bool = False, device: str = "cpu", seed: int = 0,
         matmul_precision: str = "float32") -> list[TrainConfig]:
    for fw in frameworks:
        if fw not in FRAMEWORKS:
            raise SpecError(f"unknown framework {fw!r}; allowed: {', '.join(FRAMEWORKS)}")
    if not frameworks:
        raise SpecError(f"name at least one framework: {', '.join(FRAMEWORKS)}")
    for b in batch_sizes:
        if not 0 < b <= TRAIN_SIZE:
            raise SpecError(f"batch size must be between 1 and {TRAIN_SIZE} (the training split), got {b}")
    if epochs < 1:
        raise SpecError(f"epochs must be >= 1, got {epochs}")
    if not lr > 0:
        raise SpecError(f"learning rate must be > 0, got {lr}")
    if placement not in PLACEMENTS:
        raise SpecError(f"unknown placement {placement!r}; allowed: {', '.join(PLACEMENTS)}")
    if compile and "torch" not in frameworks:
        raise SpecError("--compile applies to the PyTorch training; add --framework torch")
    from stackwars.records import MATMUL_PRECISIONS
    if matmul_precision not in MATMUL_PRECISIONS:
        raise SpecError(f"unknown matmul precision {matmul_precision!r}; allowed: {', '.join(MATMUL_PRECISIONS)}")
    return [TrainConfig(fw, b, epochs, lr, placement, compile and fw == "torch", device, seed, seed,
                        matmul_precision=matmul_precision)
            for b in batch_sizes for fw in frameworks]


def rows_of(cfg: TrainConfig, result: dict[str, Any] | None, status: str, error: str | None) -> list[dict[str, Any]]:
    """One row per epoch (test accuracy on the last), or one failure row."""
    base = {"framework": cfg.framework, "backend": cfg.backend, "batch_size": cfg.batch_size, "lr": cfg.lr,
            "placement": cfg.placement, "device": cfg.device}
    if status not in ("ok", "diverged") or not result or not result.get("epochs"):
        return [{**base, "epoch": None, "status": status, "error": error}]
    rows = []
    why = ("the loss became NaN, infinite or over 100x chance: training stopped" if status == "diverged" else None)
    for r in result["epochs"]:
        row = {**base, **r, "status": status, "error": why, "test_loss": None, "test_acc": None,
               "initial_transfer_s": result["initial_transfer_s"] if r["epoch"] == 1 else None,
               "split_digest": result["split_digest"]}
        rows.append(row)
    rows[-1]["test_loss"], rows[-1]["test_acc"] = result["test_loss"], result["test_acc"]
    return rows


def run(configs: Iterable[TrainConfig], ds: mnist.Verified, split_seed: int, threads: int | None,
        timeout_s: float, memory_limit_bytes: int | None,
        store_rows: Callable[[TrainConfig, list[dict[str, Any]]], None],
        on_event: Callable[[dict[str, Any]], None] | None = None, inline: bool = False,
        limits: dict[str, int] | None = None) -> list[dict[str, Any]]:
    data_file = str(mnist.decoded(ds))
    all_rows = []
    for cfg in configs:
        if limits:
            cfg = TrainConfig(**{**cfg.to_dict(), **limits})
        cache = tmp.mkdtemp("cold-cache")  # torch.compile starts cold, as cells do
        try:
            task = {"target": "stackwars.studies.mnist.worker:train",
                    "kwargs": {"config": cfg.to_dict(), "data_file": data_file, "split_seed": split_seed},
                    "process": runner.study_process(cfg.backend, cfg.device, cache, threads)}
            outcome = (run_inline(task, on_event) if inline
                       else run_task(task, timeout_s, memory_limit_bytes, on_progress=on_event))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        rows = rows_of(cfg, outcome.result, outcome.status, outcome.error)
        store_rows(cfg, rows)
        all_rows.extend(rows)
        if on_event:
            on_event({"event": "done", "framework": cfg.framework, "batch_size": cfg.batch_size,
                      "status": outcome.status, "error": outcome.error})
    return all_rows
