"""The MNIST MLP in JAX primitives: jax.numpy, jax.jit, jax.value_and_grad, jax.vmap.

A per-example ``predict`` is vmapped over the batch; parameters are a list of dicts;
the SGD update is a comprehension over them. (``jax.device_put`` and
``jax.block_until_ready`` place data and synchronise the clock; they compute nothing.)
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from stackwars.studies.mnist.common import EpochStats, TrainConfig, one_hot


def predict(params, image):  # one example: [784] -> logits [10]
    h = image
    for layer in params[:-1]:
        h = jnp.maximum(h @ layer["w"] + layer["b"], 0.0)  # ReLU
    return h @ params[-1]["w"] + params[-1]["b"]


batched_predict = jax.vmap(predict, in_axes=(None, 0))  # [B, 784] -> [B, 10]


def log_softmax(logits):
    z = logits - jnp.max(logits, axis=-1, keepdims=True)
    return z - jnp.log(jnp.sum(jnp.exp(z), axis=-1, keepdims=True))


def loss_and_logits(params, images, targets):  # targets: one-hot [B, 10]
    logits = batched_predict(params, images)
    return -jnp.mean(jnp.sum(targets * log_softmax(logits), axis=-1)), logits


class JaxTrainer:
    def __init__(self, cfg: TrainConfig, params: list[dict[str, np.ndarray]]):
        self.cfg = cfg
        self.device = jax.devices("gpu" if cfg.device == "cuda" else "cpu")[0]
        self.params = jax.device_put([{k: jnp.asarray(v) for k, v in p.items()} for p in params], self.device)
        lr = cfg.lr

        def train_step(params, images, targets, step):  # images: [steps, B, 784]; one step of them
            xb, yb = images[step], targets[step]
            (loss, logits), grads = jax.value_and_grad(loss_and_logits, has_aux=True)(params, xb, yb)
            correct = jnp.sum(jnp.argmax(logits, -1) == jnp.argmax(yb, -1))
            return [{k: p[k] - lr * g[k] for k in p} for p, g in zip(params, grads)], loss, correct

        def evaluate(params, images, targets):
            loss, logits = loss_and_logits(params, images, targets)
            return loss, jnp.mean(jnp.argmax(logits, -1) == jnp.argmax(targets, -1))

        self._train_step = jax.jit(train_step, donate_argnums=0)
        self._evaluate = jax.jit(evaluate)
        # the epoch's shuffle: one gather of the whole split on the device, compiled once like the step (an
        # eager x[idx] compiled its gather inside the first epoch's data time: 195-240 ms on an H100, the
        # median of two epochs one of which compiled, against PyTorch's 10 ms)
        self._shuffle = jax.jit(lambda x, y, idx: (x[idx], y[idx]))
        self._compiled = self._shuffled = None
        self.data: dict[str, tuple] = {}

    def _put(self, x: np.ndarray, y: np.ndarray):
        return jax.device_put(x, self.device), jax.device_put(one_hot(y), self.device)

    def put_data(self, name: str, x: np.ndarray, y: np.ndarray) -> float:
        """Keep a split on the device (``host`` placement keeps the training split on the host)."""
        t0 = time.perf_counter()
        if name == "train" and self.cfg.placement == "host":
            self.data[name] = (x, y)  # batches are one-hot encoded and copied per step
        else:
            self.data[name] = jax.block_until_ready(self._put(x, y))
        return time.perf_counter() - t0

    def run_epoch(self, epoch: int, order: np.ndarray) -> EpochStats:
        B = self.cfg.batch_size
        steps = len(order) // B
        data_s = compile_s = 0.0
        t0 = time.perf_counter()
        x, y = self.data["train"]
        if self.cfg.placement == "device":  # shuffle on the device: one gather for the epoch
            td = time.perf_counter()
            idx = jax.device_put(order.reshape(steps, B), self.device)
            if self._shuffled is None:  # compiled in the first epoch, timed apart (compile_s), as the step is
                tc = time.perf_counter()
                self._shuffled = self._shuffle.lower(x, y, idx).compile()
                took = time.perf_counter() - tc
                compile_s += took
                td += took  # not the data's time
            images, targets = jax.block_until_ready(self._shuffled(x, y, idx))  # [steps, B, 784], [steps, B, 10]
            data_s += time.perf_counter() - td
        params, losses, corrects = self.params, [], []
        for i in range(steps):
            if self.cfg.placement == "host":  # copy this batch from the host, synchronised
                td = time.perf_counter()
                sl = order[i * B:(i + 1) * B]
                images, targets = jax.block_until_ready(self._put(x[sl][None], y[sl][None]))
                data_s += time.perf_counter() - td
                step = np.int32(0)
            else:
                step = np.int32(i)
            if self._compiled is None:  # the first step compiles (AOT, so it can be timed apart)
                tc = time.perf_counter()
                self._compiled = self._train_step.lower(params, images, targets, step).compile()
                compile_s += time.perf_counter() - tc
            params, loss, correct = self._compiled(params, images, targets, step)
            losses.append(loss)
            corrects.append(correct)
        jax.block_until_ready(params)  # the epoch is over only when its last update is computed
        epoch_s = time.perf_counter() - t0
        self.params = params
        step_losses = np.asarray(jnp.stack(losses), dtype=np.float64)
        return EpochStats(epoch, epoch_s, data_s, compile_s, steps, steps * B, float(step_losses.mean()),
                          float(np.sum(jnp.stack(corrects))) / (steps * B), step_losses.tolist())

    def evaluate(self, name: str) -> tuple[float, float]:
        x, y = self.data[name]
        loss, acc = self._evaluate(self.params, x, y)
        return float(loss), float(acc)
