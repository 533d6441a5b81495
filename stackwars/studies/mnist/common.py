"""What both MNIST trainers share, so they run provably the same experiment.

* the MLP: 784-512-512-10, ReLU, parameters as a list of {"w": [in, out], "b": [out]};
* initial weights drawn once with numpy (PyTorch's default nn.Linear initialisation,
  U(-1/sqrt(fan_in), +1/sqrt(fan_in)) for weights and biases), converted by each side;
* the per-epoch order: a permutation from numpy's generator seeded by (seed, epoch);
  full batches only (the last partial batch is dropped, so no step changes shape);
* softmax cross-entropy on one-hot labels (PyTorch's class-index cross-entropy is the
  same function), plain SGD.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

LAYERS = (784, 512, 512, 10)
FRAMEWORKS = ("torch", "jax")
PLACEMENTS = ("device", "host")


@dataclass(frozen=True)
class TrainConfig:
    framework: str
    batch_size: int
    epochs: int = 10
    lr: float = 0.01
    placement: str = "device"  # device: the whole split on the device once; host: copy every batch
    compile: bool = False  # torch only: torch.compile the model
    device: str = "cpu"
    init_seed: int = 0
    shuffle_seed: int = 0
    matmul_precision: str = "float32"  # float32 (exact) in both frameworks, or tf32 in both (a GPU's choice)
    limit_train: int | None = None  # tests: train on the first N training images only
    limit_eval: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def key(self) -> str:
        return f"{self.backend}/b{self.batch_size}"

    @property
    def backend(self) -> str:
        if self.framework == "jax":
            return "jax-jit"
        return "torch-compile" if self.compile else "torch-eager"


def init_params(seed: int = 0, layers: tuple[int, ...] = LAYERS) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(layers[:-1], layers[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params.append({"w": rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32),
                       "b": rng.uniform(-bound, bound, fan_out).astype(np.float32)})
    return params


def epoch_order(seed: int, epoch: int, n: int, batch_size: int) -> np.ndarray:
    """Indices of the samples of one epoch, in order, full batches only: [steps * batch]."""
    steps = n // batch_size
    return np.random.default_rng([seed, epoch]).permutation(n)[: steps * batch_size]


def one_hot(labels: np.ndarray, classes: int = 10) -> np.ndarray:
    return np.eye(classes, dtype=np.float32)[labels]


@dataclass
class EpochStats:
    """What a trainer measured in one epoch; times in seconds, all synchronised."""

    epoch: int
    epoch_s: float  # wall time of the epoch's training loop, compile included in epoch 1
    data_s: float  # moving / shuffling data inside the epoch (see placement)
    compile_s: float  # compilation that happened inside this epoch's loop
    steps: int
    samples: int
    train_loss: float  # mean over the epoch's steps of the batch loss
    train_acc: float  # fraction correct over the epoch's samples, from the training forward passes
    step_losses: list[float] = field(default_factory=list)

    @property
    def compute_s(self) -> float:
        return self.epoch_s - self.data_s - self.compile_s
