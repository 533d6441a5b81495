"""End-to-end models: resnet50, bert-base, gpt2, vit-b16, gpt-neo-1.3b, llama3-8b.

Each is a workload like the micro-ops: presets (``tiny`` for tests, ``small`` = the
published architecture at a batch/sequence a 2-core CPU can run, ``paper`` = the
published sizes), a canonical parameter layout (the PyTorch twin's ``state_dict``),
weights drawn once with numpy, a PyTorch twin (``torch_nets``) and a Flax NNX twin
(``jax_nets``). Phases: ``forward`` (inference) and ``train-step`` (loss, gradients,
AdamW via torch.optim / optax; BatchNorm in training mode with its running statistics).

Reference: the PyTorch twin in float64 on the CPU (a JAX cell's parity is therefore a
cross-framework check; the tests also run the JAX twin in float64 against it).
"""

from __future__ import annotations

import dataclasses
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from stackwars.registry import register_workload
from stackwars.workloads.attention import Geometry
from stackwars.records import DTYPES
from stackwars.workloads.base import Arrays, OptimizerSpec, Workload, host_threads, itemsize, param_dtype
from stackwars.workloads.models.config import ResNetConfig, TransformerConfig
from stackwars.workloads.models.shapes import canonical_shapes, counts

T = TransformerConfig

GPT2 = dict(kind="lm", d_model=768, n_layers=12, n_heads=12, d_ff=3072, vocab=50257, max_pos=1024, gelu="tanh")
BERT = dict(kind="encoder", d_model=768, n_layers=12, n_heads=12, d_ff=3072, vocab=30522, max_pos=512, type_vocab=2,
            pad_id=0, prenorm=False, final_norm=False, norm_eps=1e-12, gelu="erf")
VIT = dict(kind="vit", d_model=768, n_layers=12, n_heads=12, d_ff=3072, image=224, patch=16, classes=1000,
           channels=3, norm_eps=1e-6, gelu="erf")
NEO = dict(kind="lm", d_model=2048, n_layers=24, n_heads=16, d_ff=8192, vocab=50257, max_pos=2048, qkv_bias=False,
           attn_scale=False, local_window=256, gelu="tanh")
LLAMA = dict(kind="lm", d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, vocab=128256, norm="rmsnorm",
             positions="rope", rope_theta=500000.0, rope_scaling="llama3", mlp="swiglu", bias=False, qkv_bias=False,
             tie_embeddings=False)
TINY = dict(d_model=32, n_layers=2, n_heads=4, d_ff=64)


def _stream(name: str) -> int:
    """A stable integer naming a tensor's random stream (crc32: the same in every process)."""
    return zlib.crc32(name.encode())


DRAW_BLOCK = 1 << 22  # elements one random stream draws at most (16 MiB of float32)


def _blocks(shape: tuple[int, ...]) -> list[tuple[int, int]]:
    """The rows [lo, hi) of each block a tensor is drawn in: whole rows, about ``DRAW_BLOCK``
    elements each (one block for all but the large tensors)."""
    rows = shape[0] if shape else 1
    per_row = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    step = max(1, DRAW_BLOCK // max(1, per_row))
    return [(lo, min(rows, lo + step)) for lo in range(0, rows, step)]


def _draw_block(seed: int, name: str, shape: tuple[int, ...], out: np.ndarray, block: int, lo: int, hi: int) -> None:
    """Rows [lo, hi) of one canonical tensor, float32, into ``out``, from the block's own
    stream: (seed, name) for the first block, so a tensor of one block is what it always was,
    and (seed, name, block) for the others."""
    key = (_stream(name),) if block == 0 else (_stream(name), block)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))
    view = out[lo:hi] if shape else out

    def normal(scale: float) -> None:
        rng.standard_normal(dtype=np.float32, out=view)
        np.multiply(view, np.float32(scale), out=view)  # in place: no second copy of a large tensor

    if name.endswith("running_mean"):
        normal(0.1)
    elif name.endswith("running_var"):
        view[...] = rng.uniform(0.5, 1.5, view.shape)
    elif name.endswith("bn3.weight"):
        # the last BatchNorm of each bottleneck starts near zero (torchvision's
        # zero_init_residual, Goyal et al. 2017): at 1, a random ResNet-50's gradients move
        # by 1.5% of their largest when the weights move by 1e-7, so no float32 step could
        # agree with the float64 one; near zero, by 2e-7
        normal(0.02)
    elif name.endswith("weight") and len(shape) == 1:  # a norm's scale
        normal(0.02)
        view += np.float32(1.0)
    elif len(shape) == 4:  # convolution: He initialisation
        normal(float(np.sqrt(2.0 / np.prod(shape[1:]))))
    elif len(shape) == 2 and "emb" not in name:
        # a linear layer [out, in]: std 1/sqrt(in), so attention scores are O(1) and the
        # softmax far from uniform; with GPT-2's 0.02 a tiny model's queries and keys would
        # get gradients too small for a float32 comparison to test them
        normal(1 / np.sqrt(shape[1]))
    else:
        normal(0.02)


class ModelWorkload(Workload):
    twin_modules = {"torch": "stackwars.workloads.models.torch_nets",
                    "jax": "stackwars.workloads.models.jax_nets"}
    # the JAX twin imports flax.nnx (0.25 s a process on the idle 2-core VM): its servers preload
    # it; the PyTorch twin's 0.01 s is not worth a server of its own beside the micro-ops' servers
    framework_preload = {"jax": ("stackwars.workloads.models.jax_nets",)}
    published_params: int = 0  # the published count (e.g. HF's BertModel), checked by the tests
    training_heads: tuple[str, ...] = ()  # parameters only the loss uses, outside the published count
    source: str = ""

    def optimizer(self, cfg) -> OptimizerSpec:
        return OptimizerSpec("adamw", lr=3e-4, weight_decay=0.01)

    def tolerance(self, dtype: str, matmul_precision: str, phase: str) -> float:
        """Deep networks accumulate more rounding than a micro-op: float32 1e-3, TF32 1e-2,
        bfloat16 1e-1 (max|out-ref| / max|ref|, against the float64 reference)."""
        super().tolerance(dtype, matmul_precision, phase)  # validates the names
        if dtype == "bfloat16":
            return 1e-1
        return 1e-2 if matmul_precision == "tf32" else 1e-3

    def shapes(self, cfg):
        """Computed from the configuration (models/shapes.py): no framework imported."""
        return canonical_shapes(cfg), {k: s for k, (s, _) in self.batch_spec(cfg).items()}

    def parameter_count(self, cfg) -> int:
        """Trainable parameters (BatchNorm's running statistics are state, not counted);
        arithmetic in the layer count, never a loop over tensors."""
        return counts(cfg)[0]

    def init(self, cfg, seed: int) -> tuple[Arrays, Arrays]:
        """Random weights in the canonical layout, float32 (a float64 copy of a billion-parameter
        model would not fit beside it): non-zero biases and perturbed norm scales, so a bias or
        scale that a twin dropped would show.

        Each tensor has its own random streams, one a block of rows (``_blocks``), seeded by
        (seed, its name, the block): the draw does not depend on the order of the tensors or
        on the threads, and the blocks are drawn in parallel threads (numpy's generators
        release the GIL). In blocks, the largest tensor no longer sets the time: GPT-2's
        token embedding alone is 31% of its weights, which one thread drew while the others
        had finished."""
        shapes = self.shapes(cfg)[0]
        params = {name: np.empty(shape, np.float32) for name, shape in shapes.items()}
        jobs = [(name, shape, block, lo, hi) for name, shape in shapes.items()
                for block, (lo, hi) in enumerate(_blocks(shape))]
        # the largest blocks first, so that no large one starts last
        jobs.sort(key=lambda job: (job[4] - job[3]) * int(np.prod(job[1][1:])), reverse=True)
        with ThreadPoolExecutor(max_workers=host_threads()) as pool:
            list(pool.map(lambda job: _draw_block(seed, job[0], job[1], params[job[0]], *job[2:]), jobs))
        return params, self.init_batch(cfg, seed)

    def init_batch(self, cfg, seed: int) -> Arrays:
        """The inputs alone (their own stream): a new request for the same weights."""
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_stream("batch"),)))
        batch = {}
        for name, (shape, high) in self.batch_spec(cfg).items():
            batch[name] = (rng.integers(0, high, shape, dtype=np.int64) if high
                           else rng.standard_normal(shape, dtype=np.float32))
        return batch

    def batch_spec(self, cfg) -> dict[str, tuple[tuple[int, ...], int | None]]:
        """Inputs: name -> (shape, exclusive upper bound of integer values, or None for floats)."""
        raise NotImplementedError

    reference_devices = ("cpu", "cuda")  # the PyTorch twin in float64 runs on a GPU too

    def reference(self, cfg, phase: str, params: Arrays, batch: Arrays, device: str = "cpu",
                  stages: dict[str, float] | None = None) -> Arrays:
        """The PyTorch twin in float64; ``stages``, where given, gets the seconds of its parts
        (harness/reference.py keeps them: on the H200 GPT-2 paper's float64 run took 8.5 s
        whole, more than its arithmetic explains)."""
        return self._twin_run(cfg, phase, params, batch, device, "float64", stages)

    def reference_float32(self, cfg, phase: str, params: Arrays, batch: Arrays, device: str = "cpu") -> Arrays:
        """The same PyTorch twin and step in float32 (exact float32 matmuls on the CPU)."""
        out = self._twin_run(cfg, phase, params, batch, device, "float32")
        return {k: v for k, v in out.items() if not k.startswith("grad") and k != "grad_floor"}

    def _twin_run(self, cfg, phase: str, params: Arrays, batch: Arrays, device: str, dtype: str,
                  stages: dict[str, float] | None = None) -> Arrays:
        """The twin's step at ``dtype`` on ``device``. On a GPU the outputs are rounded to float32
        there, before they cross to the host: the run's cache keeps float32 anyway
        (harness/reference.stored), and GPT-2 paper's float64 logits are 3.3 GB."""
        import time

        import torch

        from stackwars.backends.torch_common import make_optimizer
        from stackwars.workloads.models import torch_nets

        narrow = torch.float32 if device != "cpu" else torch.float64
        parts: dict[str, float] = {}
        clock = [time.perf_counter()]

        def lap(name: str) -> None:  # the part just done, synchronised on a GPU
            if device != "cpu":
                torch.cuda.synchronize(device)
            now = time.perf_counter()
            parts[name] = parts.get(name, 0.0) + now - clock[0]
            clock[0] = now

        def host(t):
            lap("run_s")
            out = t.detach().to(narrow).cpu().numpy()
            lap("to_host_s")
            return out

        npd = {"float64": np.float64, "float32": np.float32}[dtype]
        model = torch_nets.build(cfg, {k: torch.from_numpy(np.array(v, dtype=npd)).to(device)
                                       for k, v in params.items()})
        tb = {k: torch.from_numpy(v if np.issubdtype(v.dtype, np.integer) else np.asarray(v, dtype=npd))
              .to(device) for k, v in batch.items()}
        lap("build_s")  # the twin and its inputs at dtype on the device
        if phase == "forward":
            model.eval()
            with torch.no_grad():
                out = {"out": host(model(tb))}
        else:
            model.train()
            before = {k: v.detach().clone() for k, v in torch_nets.canonical(model).items()}
            opt = make_optimizer(self.optimizer(cfg), model.parameters())
            loss = model(tb, loss=True)
            loss.backward()
            grads = {n: host(p.grad).copy() for n, p in model.named_parameters()}
            opt.step()
            out = {"loss": host(loss)}
            for k, v in torch_nets.canonical(model).items():
                out[f"update.{k}"] = host(v - before[k])
            out.update({f"grad.{k}": g for k, g in grads.items()})
            out["grad_floor"] = np.asarray(100 * 1e-8)  # 100 x AdamW's eps (torch and optax default)
        if stages is not None:
            stages.update(parts)
        return out

    def reference_name(self, cfg) -> str:
        return "PyTorch twin, float64"

    def describe(self, cfg) -> dict[str, Any]:
        """As Workload.describe, computed without listing every layer's tensors: instant and
        allocation-free whatever the model's size."""
        total, tensors = counts(cfg)
        heads = 0
        if self.training_heads:  # the training heads live outside the blocks
            outside = dict(canonical_shapes(dataclasses.replace(cfg, n_layers=1)) if hasattr(cfg, "n_layers")
                           else canonical_shapes(cfg))
            heads = sum(int(np.prod(s)) for n, s in outside.items() if n.startswith(self.training_heads))
        batch = {k: list(s) for k, (s, _) in self.batch_spec(cfg).items()}
        return {"workload": self.name, "description": self.description, "config": cfg.as_dict(),
                "parameters": total, "parameter_tensors": tensors, "inputs": batch,
                "flops": {p: self.flops(cfg, p) for p in self.phases}, "flops_formula": self.flops_formula,
                "bytes_moved": {f"{p}/{d}": self.bytes_moved(cfg, p, itemsize(d), itemsize(param_dtype(d, p)))
                                for p in self.phases for d in DTYPES},
                "source": self.source, "published_params": self.published_params,
                "parameters_published_part": total - heads,
                "memory_estimate_bytes": {f"{p}/{d}": self.memory_estimate(cfg, p, d)
                                          for p in self.phases for d in ("float32", "bfloat16")}}

    def bytes_moved(self, cfg, phase: str, itemsize_: int, param_itemsize: int) -> int:
        P = self.parameter_count(cfg)
        inputs = sum(int(np.prod(s)) * (8 if high else itemsize_) for s, high in self.batch_spec(cfg).values())
        if phase == "forward":
            return P * param_itemsize + inputs + self.output_elements(cfg) * itemsize_
        return 2 * P * param_itemsize + 4 * P * 4 + inputs  # parameters and both AdamW moments, read and written

    def output_elements(self, cfg) -> int:
        raise NotImplementedError

    def activation_bytes(self, cfg, phase: str, dtype: str) -> int:
        raise NotImplementedError

    def memory_estimate(self, cfg, phase: str, dtype: str) -> dict[str, int]:
        """A pre-flight estimate, in bytes, of what the cell holds at its peak. Approximate by
        design (activations especially); its parts are reported with any refusal."""
        P = self.parameter_count(cfg)
        pbytes = 4 if phase == "train-step" else itemsize(dtype)
        est = {"host_weights": 4 * P,  # the canonical float32 copy in the worker
               "parameters": P * pbytes,
               "optimizer": (P * 4 + 2 * P * 4) if phase == "train-step" else 0,  # gradients, AdamW m and v
               "activations": self.activation_bytes(cfg, phase, dtype)}
        # the float64 reference runs after the measured program is released
        est["reference"] = 8 * P * (4 if phase == "train-step" else 1) + \
            self.activation_bytes(cfg, phase, "float64")
        return est


def _transformer_flops(cfg: TransformerConfig, phase: str) -> int:
    d, H, K, hd, L, ff = cfg.d_model, cfg.n_heads, cfg.kv_heads, cfg.d_head, cfg.n_layers, cfg.d_ff
    T = cfg.tokens
    tokens = cfg.batch * T
    proj = 2 * d * (H * hd + 2 * K * hd) + 2 * H * hd * d
    mlp = (3 if cfg.mlp == "swiglu" else 2) * 2 * d * ff
    per_layer = tokens * (proj + mlp)
    # keys each query attends to, summed over queries: T^2, causal T(T+1)/2, a causal window w:
    # w(w+1)/2 + (T-w)w (queries past the window's width see w keys); in closed form, so the
    # cost of describing a model never grows with its size
    n_local = L // 2 if cfg.local_window is not None else 0  # layer_is_local: the odd layers
    if cfg.kind != "lm":
        keys_global = keys_local = T * T
    else:
        keys_global = T * (T + 1) // 2
        w = min(cfg.local_window or T, T)
        keys_local = w * (w + 1) // 2 + (T - w) * w
    attn = cfg.batch * 2 * 2 * H * hd * ((L - n_local) * keys_global + n_local * keys_local)  # QK^T and PV
    total = L * per_layer + attn
    if cfg.kind == "lm":
        total += tokens * 2 * d * cfg.vocab
    elif cfg.kind == "vit":
        total += cfg.batch * (T - 1) * 2 * cfg.channels * cfg.patch ** 2 * d + cfg.batch * 2 * d * cfg.classes
    elif phase == "train-step":  # encoder: the MLM head and the pooler/NSP exist only in the loss
        total += tokens * 2 * d * cfg.vocab + cfg.batch * (2 * d * d + 2 * d * 2)
    return total * (3 if phase == "train-step" else 1)


class TransformerWorkload(ModelWorkload):
    config_cls = TransformerConfig
    shape_params = ("batch", "seq")
    flops_formula = ("matmul FLOPs (2 per multiply-add): per token and layer 2*d*(q+k+v widths) + 2*d*d "
                     "+ MLP (2 or 3 matrices) x 2*d*d_ff; attention 4*d_head*heads*(keys attended: T^2, "
                     "T(T+1)/2 causal, windowed for local layers); LM head 2*d*vocab per token; "
                     "train-step = 3 x forward")

    def flops(self, cfg, phase):
        return _transformer_flops(cfg, phase)

    def batch_spec(self, cfg):
        B, T = cfg.batch, cfg.seq
        if cfg.kind == "vit":
            return {"images": ((B, cfg.channels, cfg.image, cfg.image), None), "labels": ((B,), cfg.classes)}
        spec = {"ids": ((B, T), cfg.vocab)}
        if cfg.kind == "encoder":
            spec.update(types=((B, T), cfg.type_vocab), labels=((B, T), cfg.vocab), nsp=((B,), 2))
        return spec

    def output_elements(self, cfg):
        if cfg.kind == "vit":
            return cfg.batch * cfg.classes
        return cfg.batch * cfg.seq * (cfg.vocab if cfg.kind == "lm" else cfg.d_model)

    def activation_bytes(self, cfg, phase, dtype):
        b = {"float32": 4, "bfloat16": 2, "float64": 8}[dtype]
        T, tokens = cfg.tokens, cfg.batch * cfg.tokens
        scores = cfg.batch * cfg.n_heads * T * T  # materialised by naive attention and on the CPU
        per_layer = tokens * (12 * cfg.d_model + 3 * cfg.d_ff) + 2 * scores
        logits = tokens * cfg.vocab if cfg.kind in ("lm", "encoder") else 0
        if phase == "train-step":
            return b * cfg.n_layers * per_layer + 3 * 4 * logits
        return b * (2 * per_layer + logits)

    def pad_exact(self, cfg, key, phase):
        # examples are independent; a causal model's real positions never see padding after them
        return phase == "forward" and (key == "batch" or (key == "seq" and cfg.kind == "lm"))

    def attention_geometry(self, cfg) -> list[Geometry]:
        causal = cfg.kind == "lm"
        out = [Geometry(head_dim=cfg.d_head, causal=causal)]
        if any(cfg.layer_is_local(i) for i in range(cfg.n_layers)):  # GPT-Neo: causal, left-only window
            out.append(Geometry(head_dim=cfg.d_head, causal=True, local_window=cfg.local_window))
        return out


class ResNetWorkload(ModelWorkload):
    config_cls = ResNetConfig
    shape_params = ("batch",)
    flops_formula = "sum over convolutions of 2*C_in*C_out*k^2*H_out*W_out, + 2*C*classes; train-step = 3 x forward"

    def _convs(self, cfg):
        """(C_in, C_out, k, H_out) of every convolution, for FLOPs and activation sizes."""
        out = []
        h = (cfg.image + 1) // 2
        out.append((3, cfg.width, 7, h))
        h = (h + 1) // 2  # max pool
        inplanes = cfg.width
        for i, (n, stride) in enumerate(zip(cfg.blocks, (1, 2, 2, 2))):
            planes = cfg.width * 2 ** i
            for j in range(int(n)):
                s = stride if j == 0 else 1
                h_out = (h + s - 1) // s
                out += [(inplanes, planes, 1, h), (planes, planes, 3, h_out), (planes, planes * 4, 1, h_out)]
                if s != 1 or inplanes != planes * 4:
                    out.append((inplanes, planes * 4, 1, h_out))
                inplanes, h = planes * 4, h_out
        return out, inplanes

    def flops(self, cfg, phase):
        convs, features = self._convs(cfg)
        fwd = cfg.batch * (sum(2 * ci * co * k * k * h * h for ci, co, k, h in convs) + 2 * features * cfg.classes)
        return fwd * (3 if phase == "train-step" else 1)

    def batch_spec(self, cfg):
        return {"images": ((cfg.batch, 3, cfg.image, cfg.image), None), "labels": ((cfg.batch,), cfg.classes)}

    def output_elements(self, cfg):
        return cfg.batch * cfg.classes

    def activation_bytes(self, cfg, phase, dtype):
        b = {"float32": 4, "bfloat16": 2, "float64": 8}[dtype]
        convs, _ = self._convs(cfg)
        maps = cfg.batch * sum(co * h * h for _, co, _, h in convs)  # one output map per convolution
        return b * (3 * maps if phase == "train-step" else maps)  # conv, BN and ReLU outputs kept for backward


def _workload(cls, name, description, source, published, presets, heads=()):
    obj = type(f"{name.title().replace('-', '').replace('.', '')}Workload", (cls,), {
        "name": name, "description": description, "source": source, "published_params": published,
        "training_heads": heads, "presets": presets})()
    register_workload(obj)
    return obj


_workload(TransformerWorkload, "gpt2", "GPT-2 small: 12 pre-LN layers, d 768, learned positions, tied LM head",
          "HF GPT2Model (gpt2)", 124_439_808, {
              "tiny": T(**{**GPT2, **TINY, "vocab": 96, "max_pos": 32}, batch=2, seq=16),
              "small": T(**GPT2, batch=1, seq=128),
              "paper": T(**GPT2, batch=8, seq=1024)})
_workload(TransformerWorkload, "bert-base", "BERT-base: 12 post-LN encoder layers, GELU (erf), MLM + NSP loss",
          "HF BertModel (bert-base-uncased); + MLM output bias and NSP head used by the loss", 109_482_240, {
              "tiny": T(**{**BERT, **TINY, "vocab": 96, "max_pos": 32}, batch=2, seq=16),
              "small": T(**BERT, batch=1, seq=128),
              "paper": T(**BERT, batch=8, seq=512)}, heads=("mlm_bias", "nsp."))
_workload(TransformerWorkload, "vit-b16", "ViT-B/16: 16x16 patches, class token, 12 pre-LN layers, 1000 classes",
          "torchvision vit_b_16 / timm vit_base_patch16_224", 86_567_656, {
              "tiny": T(**{**VIT, **TINY, "image": 32, "patch": 8, "classes": 10}, batch=2),
              "small": T(**VIT, batch=2),
              "paper": T(**VIT, batch=32)})
_workload(TransformerWorkload, "gpt-neo-1.3b", "GPT-Neo 1.3B: 24 layers alternating global/local (256) attention, "
          "no score scaling", "HF GPTNeoForCausalLM (EleutherAI/gpt-neo-1.3B)", 1_315_575_808, {
              "tiny": T(**{**NEO, **TINY, "vocab": 96, "max_pos": 32, "local_window": 4}, batch=2, seq=16),
              "small": T(**NEO, batch=1, seq=128),
              "paper": T(**NEO, batch=1, seq=2048)})
_workload(TransformerWorkload, "llama3-8b", "Llama 3.1 8B: 32 layers, RMSNorm, RoPE (llama3 scaling), SwiGLU, "
          "GQA 32/8", "HF LlamaForCausalLM (meta-llama/Llama-3.1-8B)", 8_030_261_248, {
              "tiny": T(**{**LLAMA, **TINY, "n_kv_heads": 2, "vocab": 96}, batch=2, seq=16),
              "small": T(**LLAMA, batch=1, seq=128),
              "paper": T(**LLAMA, batch=1, seq=2048)})
_workload(ResNetWorkload, "resnet50", "ResNet-50 (v1.5): bottlenecks 3-4-6-3, BatchNorm, 1000 classes",
          "torchvision resnet50", 25_557_032, {
              # 64 px and 4 images: the last stage still normalises over 16 values (2 x 2 x 4); at 32 px
              # and batch 2 it would be 2, and the backward pass through such a BatchNorm is so
              # ill-conditioned that float32 and float64 gradients disagree in sign
              "tiny": ResNetConfig(batch=4, image=64, classes=10, width=8, blocks=(1, 1, 1, 1)),
              "small": ResNetConfig(batch=2, image=224, classes=1000, width=64, blocks=(3, 4, 6, 3)),
              "paper": ResNetConfig(batch=32, image=224, classes=1000, width=64, blocks=(3, 4, 6, 3))})
