"""One training (framework x batch size), run inside a worker process."""

from __future__ import annotations

import hashlib
import math
import os
import time
from typing import Any

import numpy as np

from stackwars.data import mnist
from stackwars.harness import progress
from stackwars.harness.contention import ForeignLoad
from stackwars.studies.mnist.common import TrainConfig, epoch_order, init_params

# an epoch's mean cross-entropy above 100 x chance (100 ln 10): the weights have exploded
DIVERGED_LOSS = 100 * math.log(10)


def _trainer(cfg: TrainConfig, params):
    """The framework's trainer, its matmul precision set as the cells set it: the same in both
    (JAX's own default on a GPU is TF32, PyTorch's full float32; left alone, they differ)."""
    settings = {"matmul_precision": cfg.matmul_precision}
    if cfg.framework == "jax":
        from stackwars.backends.jax_common import configure_jax
        from stackwars.studies.mnist.jax_train import JaxTrainer
        applied = configure_jax(settings)
        return JaxTrainer(cfg, params), {"jax_default_matmul_precision": applied["jax_default_matmul_precision"]}
    import torch

    from stackwars.backends.torch_common import configure_torch
    from stackwars.studies.mnist.torch_train import TorchTrainer
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # the same thread budget XLA sizes its pool from (the pinned CPUs)
    applied = configure_torch({**settings, "threads": threads})
    return TorchTrainer(cfg, params), {"torch_num_threads": torch.get_num_threads(), "torch": torch.__version__,
                                       "torch_float32_matmul_precision": applied["torch_float32_matmul_precision"],
                                       "torch_cuda_matmul_allow_tf32": applied["torch_cuda_matmul_allow_tf32"]}


def train(config: dict[str, Any], data_file: str, split_seed: int) -> dict[str, Any]:
    cfg = TrainConfig(**config)
    with np.load(data_file) as z:
        sp = mnist.split({k: z[k] for k in mnist.FILES}, seed=split_seed)
    train_x, train_y = sp.train_x[: cfg.limit_train], sp.train_y[: cfg.limit_train]
    val_x, val_y = sp.val_x[: cfg.limit_eval], sp.val_y[: cfg.limit_eval]
    test_x, test_y = sp.test_x[: cfg.limit_eval], sp.test_y[: cfg.limit_eval]

    trainer, settings = _trainer(cfg, init_params(cfg.init_seed))
    settings["placement"] = cfg.placement
    transfer_s = trainer.put_data("train", train_x, train_y)
    trainer.put_data("val", val_x, val_y)
    trainer.put_data("test", test_x, test_y)
    rows = []
    status = "ok"
    for epoch in range(1, cfg.epochs + 1):
        others = ForeignLoad().start()  # what other processes took of our CPUs during the epoch
        stats = trainer.run_epoch(epoch, epoch_order(cfg.shuffle_seed, epoch, len(train_x), cfg.batch_size))
        contention = others.stop()
        t0 = time.perf_counter()
        val_loss, val_acc = trainer.evaluate("val")
        compiles = cfg.backend != "torch-eager"  # eager has no compile step: null, not an invented zero
        row = {"epoch": epoch, "epoch_s": stats.epoch_s, "includes_compile": stats.compile_s > 0,
               "compile_s": stats.compile_s if compiles else None, "compute_s": stats.compute_s,
               "data_s": stats.data_s,
               "steps": stats.steps, "samples": stats.samples, "train_loss": stats.train_loss,
               "train_acc": stats.train_acc, "val_loss": val_loss, "val_acc": val_acc,
               "eval_s": time.perf_counter() - t0, "step_losses": stats.step_losses,
               "contention": contention["fraction"], "contended": contention["contended"]}
        rows.append(row)
        progress.report(event="epoch", framework=cfg.framework, backend=cfg.backend, batch_size=cfg.batch_size,
                        epoch=epoch, epochs=cfg.epochs, epoch_s=stats.epoch_s, compile_s=stats.compile_s,
                        train_loss=stats.train_loss, val_acc=val_acc, contended=contention["contended"],
                        contention=contention["fraction"])
        if not (math.isfinite(stats.train_loss) and math.isfinite(val_loss)) or stats.train_loss > DIVERGED_LOSS:
            # the loss left the floats, or blew up far beyond chance (ln 10 = 2.3) and killed the
            # network: later epochs would only compute NaN or a dead model; stop and say so
            status = "diverged"
            break
    test_loss, test_acc = trainer.evaluate("test") if status == "ok" else (None, None)
    return {"status": status, "epochs": rows, "test_loss": test_loss, "test_acc": test_acc,
            "initial_transfer_s": transfer_s, "settings": settings,
            "sizes": {"train": len(train_x), "val": len(val_x), "test": len(test_x)},
            # proves both frameworks trained and validated on the same split
            "split_digest": hashlib.sha256(sp.val_index.tobytes()).hexdigest()[:16]}
