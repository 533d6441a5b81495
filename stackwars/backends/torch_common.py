"""What every PyTorch backend shares: settings, conversion, phases, sync, memory.

Subclasses change one thing, ``wrap(fn)``: eager returns ``fn``, torch.compile
returns the compiled function. The phases are built here, once:

* forward: ``twin.forward(model, batch)`` under ``torch.inference_mode()``;
* train-step: ``twin.loss`` (under ``torch.autocast`` when training bfloat16 on float32
  master weights), ``loss.backward()``, ``optimizer.step()``, ``zero_grad``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from stackwars.backends.base import Backend, Prepared
from stackwars.workloads.base import param_dtype

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def to_tensor(x: np.ndarray, dtype: str, device) -> torch.Tensor:
    """Floats in the cell's dtype (via float32, so bfloat16 rounds exactly as the reference's
    inputs did); integers (token ids, labels) as int64, as embeddings and losses want them."""
    if np.issubdtype(np.asarray(x).dtype, np.integer):
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.int64)).to(device=device)
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device=device, dtype=TORCH_DTYPES[dtype])


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


def make_optimizer(spec: Any, parameters) -> torch.optim.Optimizer:
    if spec.name == "sgd":
        return torch.optim.SGD(parameters, lr=spec.lr)
    if spec.name == "adamw":
        return torch.optim.AdamW(parameters, lr=spec.lr, weight_decay=spec.weight_decay)
    raise ValueError(f"unknown optimizer {spec.name!r}")


def configure_torch(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Thread budget and matmul precision, applied and reported."""
    applied: dict[str, Any] = {"torch_version": torch.__version__}
    threads = settings.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
        with contextlib.suppress(RuntimeError):  # only settable before parallel work starts
            torch.set_num_interop_threads(int(threads))
    applied["torch_num_threads"] = torch.get_num_threads()
    applied["torch_num_interop_threads"] = torch.get_num_interop_threads()
    precision = settings.get("matmul_precision", "float32")
    torch.set_float32_matmul_precision("highest" if precision == "float32" else "high")
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    applied["torch_float32_matmul_precision"] = torch.get_float32_matmul_precision()
    applied["torch_cuda_matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    applied["torch_cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
    return applied


class TorchBackend(Backend):
    framework = "torch"

    def configure(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        return configure_torch(settings)

    def wrap(self, fn: Callable) -> Callable:
        return fn

    def before_call(self) -> None:
        """Hook run at the start of every step (CUDA graphs need a step marker)."""

    def prepare(self, workload, cfg, phase, params, batch, device, dtype) -> Prepared:
        self.device = torch.device(device)
        twin = workload.twin("torch")
        pdtype = param_dtype(dtype, phase)
        model = twin.build(cfg, {k: to_tensor(v, pdtype, self.device) for k, v in params.items()})
        tbatch = {k: to_tensor(v, dtype, self.device) for k, v in batch.items()}
        notes: dict[str, Any] = {"param_dtype": pdtype, "compute_dtype": dtype}
        before = self.before_call

        if phase == "forward":
            model.eval()
            fwd = self.wrap(twin.forward)
            notes["grad_mode"] = "torch.inference_mode"

            def call():
                before()
                with torch.inference_mode():
                    return fwd(model, tbatch)

            def parity(out):
                return {"out": to_numpy(out)}

            return Prepared(call, parity, self.sync, notes=notes)

        model.train()
        spec = workload.optimizer(cfg)
        opt = make_optimizer(spec, model.parameters())
        loss_fn = self.wrap(twin.loss)
        mixed = pdtype != dtype
        autocast = (torch.autocast(device_type=self.device.type, dtype=TORCH_DTYPES[dtype])
                    if mixed else contextlib.nullcontext())
        notes.update(optimizer=f"torch.optim.{type(opt).__name__}(lr={spec.lr})",
                     mixed_precision="torch.autocast" if mixed else None)
        initial = {k: to_numpy(v) for k, v in twin.canonical(model).items()}

        def call():
            before()
            with autocast:
                loss = loss_fn(model, tbatch)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        def parity(loss):
            out = {"loss": to_numpy(loss)}
            for k, v in twin.canonical(model).items():
                out[f"update.{k}"] = to_numpy(v) - initial[k]
            return out

        return Prepared(call, parity, self.sync, notes=notes)

    def sync(self, outs: Sequence[Any]) -> None:
        # CPU tensors are computed when the op returns; CUDA work is queued on streams.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def device_peak_memory(self, device: str) -> tuple[int | None, str | None]:
        if device != "cuda":
            return None, None
        return (int(torch.cuda.max_memory_allocated(self.device)),
                "torch.cuda.max_memory_allocated (caching allocator, since worker start)")
