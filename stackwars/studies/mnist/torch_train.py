"""The MNIST MLP in idiomatic PyTorch: an nn.Module, torch.optim.SGD, cross-entropy on
class indices (the same function as softmax cross-entropy on one-hot labels);
optionally under torch.compile."""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from stackwars.studies.mnist.common import EpochStats, TrainConfig


class Mlp(nn.Module):
    def __init__(self, params: list[dict[str, np.ndarray]]):
        super().__init__()
        layers: list[nn.Module] = []
        for i, p in enumerate(params):
            linear = nn.Linear(*p["w"].shape, device="meta")
            linear.weight = nn.Parameter(torch.from_numpy(p["w"].T.copy()))  # canonical [in, out] -> [out, in]
            linear.bias = nn.Parameter(torch.from_numpy(p["b"].copy()))
            layers.append(linear)
            if i < len(params) - 1:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):  # x: [B, 784]
        return self.net(x)  # [B, 10]


def _compile_seconds() -> float:
    from torch._dynamo.utils import calculate_time_spent

    t = calculate_time_spent()
    return t.get("entire_frame_compile", 0.0) + t.get("entire_backward_compile", 0.0)


class TorchTrainer:
    def __init__(self, cfg: TrainConfig, params: list[dict[str, np.ndarray]]):
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        self.model = Mlp(params).to(self.device)
        self.step_model = torch.compile(self.model) if cfg.compile else self.model
        self.opt = torch.optim.SGD(self.model.parameters(), lr=cfg.lr)
        self.data: dict[str, tuple] = {}

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _put(self, x: np.ndarray, y: np.ndarray):
        return torch.from_numpy(x).to(self.device), torch.from_numpy(y).to(self.device)

    def put_data(self, name: str, x: np.ndarray, y: np.ndarray) -> float:
        t0 = time.perf_counter()
        if name == "train" and self.cfg.placement == "host":
            self.data[name] = (x, y)
        else:
            self.data[name] = self._put(x, y)
            self._sync()
        return time.perf_counter() - t0

    def run_epoch(self, epoch: int, order: np.ndarray) -> EpochStats:
        B = self.cfg.batch_size
        steps = len(order) // B
        data_s = 0.0
        compiled_before = _compile_seconds() if self.cfg.compile else 0.0
        self.model.train()
        t0 = time.perf_counter()
        x, y = self.data["train"]
        if self.cfg.placement == "device":  # shuffle on the device: one gather for the epoch
            td = time.perf_counter()
            idx = torch.from_numpy(order).to(self.device).view(steps, B)
            images, targets = x[idx], y[idx]  # [steps, B, 784], [steps, B]
            self._sync()
            data_s += time.perf_counter() - td
        losses, corrects = [], []
        for i in range(steps):
            if self.cfg.placement == "host":  # copy this batch from the host, synchronised
                td = time.perf_counter()
                sl = order[i * B:(i + 1) * B]
                xb, yb = self._put(x[sl], y[sl])
                self._sync()
                data_s += time.perf_counter() - td
            else:
                xb, yb = images[i], targets[i]
            self.opt.zero_grad(set_to_none=True)
            logits = self.step_model(xb)
            loss = F.cross_entropy(logits, yb)
            loss.backward()
            self.opt.step()
            losses.append(loss.detach())
            corrects.append((logits.detach().argmax(-1) == yb).sum())
        self._sync()  # the epoch is over only when its last update is computed
        epoch_s = time.perf_counter() - t0
        compile_s = _compile_seconds() - compiled_before if self.cfg.compile else 0.0
        step_losses = torch.stack(losses).double().cpu().numpy()
        return EpochStats(epoch, epoch_s, data_s, compile_s, steps, steps * B, float(step_losses.mean()),
                          float(torch.stack(corrects).sum()) / (steps * B), step_losses.tolist())

    @torch.no_grad()
    def evaluate(self, name: str) -> tuple[float, float]:
        """Eager model (not the compiled one: evaluation shapes differ and are not what is compared)."""
        self.model.eval()
        x, y = self.data[name]
        logits = self.model(x)
        return float(F.cross_entropy(logits, y)), float((logits.argmax(-1) == y).float().mean())
