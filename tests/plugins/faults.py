"""A workload that misbehaves on purpose, for the harness's fault-injection tests.

Loaded into parent and workers through STACKWARS_PLUGINS=tests.plugins.faults. Its
presets are the faults: ``ok`` (behaves), ``sleep`` (4 s first call, then fine),
``crash`` (SIGSEGV), ``hang`` (never returns), ``oom`` (raises MemoryError), ``alloc``
(allocates until something stops it), ``raise`` (an ordinary exception), ``child`` (starts
a child process that stays busy for 2 s: the cell's own work, as Inductor's compile
workers are). It is also a
twin module for both frameworks: y = x * w, per-example squared error.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import numpy as np

from stackwars.registry import register_workload
from stackwars.workloads.base import Config, Workload, as_float64, choices, normal, sq_error

MODES = ("ok", "sleep", "crash", "hang", "oom", "alloc", "raise", "child")


@dataclass(frozen=True)
class FaultConfig(Config):
    size: int = 8
    mode: str = choices(*MODES, default="ok")


_fired = {"done": False}


def misbehave(mode: str) -> None:
    if _fired["done"]:
        return
    _fired["done"] = True
    if mode == "sleep":
        time.sleep(4.0)
    elif mode == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif mode == "hang":
        while True:
            time.sleep(1.0)
    elif mode == "oom":
        raise MemoryError("simulated allocation failure")
    elif mode == "alloc":
        hoard = []
        while True:
            hoard.append(bytearray(64 * 2**20))  # zero-filled: the pages are touched
    elif mode == "raise":
        raise RuntimeError("simulated bug in a twin")
    elif mode == "child":
        import subprocess
        import sys
        subprocess.Popen([sys.executable, "-c", "import time\nt = time.perf_counter()\n"
                          "while time.perf_counter() - t < 2.0: pass"])


class Fault(Workload):
    name = "fault"
    description = "test-only: injects a fault on the first call"
    config_cls = FaultConfig
    presets = {m: FaultConfig(mode=m) for m in MODES}
    twin_modules = {"torch": "tests.plugins.faults", "jax": "tests.plugins.faults"}

    def shapes(self, cfg):
        return {"w": (cfg.size,)}, {"x": (2, cfg.size), "target": (2, cfg.size)}

    def init(self, cfg, seed):
        rng = np.random.default_rng(seed)
        return {"w": normal(rng, (cfg.size,))}, {"x": normal(rng, (2, cfg.size)), "target": normal(rng, (2, cfg.size))}

    def reference(self, cfg, phase, params, batch):
        params, batch = as_float64(params), as_float64(batch)
        y = batch["x"] * params["w"]
        if phase == "forward":
            return {"out": y}
        loss, dy = sq_error(y, batch["target"])
        return {"loss": np.asarray(loss), "update.w": -self.optimizer(cfg).lr * (batch["x"] * dy).sum(0)}

    def flops(self, cfg, phase):
        return 2 * cfg.size

    def bytes_moved(self, cfg, phase, itemsize, param_itemsize):
        return 3 * cfg.size * itemsize


register_workload(Fault())


# ---- twin functions (both frameworks; the model is the parameter dict) ---------------------

def build(cfg, params):
    if type(next(iter(params.values()))).__module__.startswith("torch"):
        import torch

        model = torch.nn.Module()
        model.cfg = cfg
        model.w = torch.nn.Parameter(params["w"])
        return model
    return cfg, dict(params)


def canonical(*model):
    return {"w": model[0].w} if len(model) == 1 else model[1]


def forward(*args):
    cfg, params, batch = (args[0].cfg, {"w": args[0].w}, args[1]) if len(args) == 2 else args
    misbehave(cfg.mode)
    return batch["x"] * params["w"]


def loss(*args):
    y = forward(*args)
    return (((y - args[-1]["target"]) ** 2).sum(-1)).mean()
