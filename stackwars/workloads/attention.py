"""Which attention implementation each framework runs, and why: one rule, no framework imports.

``--set attention=`` takes one of ``CHOICES``:

* ``best`` (default): each framework's fastest valid choice on this device and dtype.
  JAX: ``jax.nn.dot_product_attention(implementation="cudnn")`` (cuDNN's fused flash
  attention) where its documented constraints hold, else ``"xla"``; its own default
  (``implementation=None``) is XLA's unfused path on every device ("defaults to XLA for
  now" in JAX's source), so leaving it alone would make JAX slow on a GPU for no reason of
  its own. PyTorch: ``scaled_dot_product_attention`` with its dispatcher left to choose
  (flash, memory-efficient, cuDNN or math, by its priority order and each kernel's
  constraints): that dispatcher already is PyTorch's best-valid rule.
* ``sdpa``: each framework's fused entry point with its own default (what a user gets
  without choosing): JAX ``implementation=None``, PyTorch's dispatcher.
* explicit implementations: ``xla`` and ``cudnn`` for JAX; ``flash``, ``efficient``,
  ``cudnn`` and ``math`` for PyTorch (``torch.nn.attention.sdpa_kernel``). A name the other
  framework lacks makes that framework's cells ``unsupported`` (with this reason), so
  ``--set attention=cudnn`` is the like-for-like comparison of the same library.
* ``naive``: softmax(QK^T * scale + mask) V spelled out in both twins.

cuDNN fused attention through JAX (jax/_src/cudnn/fused_attention_stablehlo.py, and the
``cudnn`` branch of ``jax.nn.dot_product_attention``): a CUDA GPU of compute capability
8.0 or later; float16 or bfloat16 inputs; head dimension a multiple of 8 and at most 256
on Hopper or later (128 before); no mask other than causal; a local window only to the
left (GPT-Neo's local layers qualify). The rule below checks exactly these; whatever it
chooses, the cell records what actually ran (the compiled HLO's custom calls for JAX, the
SDPA kernel PyTorch dispatched), and the table shows it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable

from stackwars.errors import Unsupported

CHOICES = ("best", "sdpa", "naive", "xla", "cudnn", "flash", "efficient", "math")
IMPLEMENTATIONS = {"jax": ("xla", "cudnn"), "torch": ("flash", "efficient", "cudnn", "math")}
HALF = ("bfloat16", "float16")


@dataclass(frozen=True)
class Geometry:
    """One attention pattern of a workload (a model may have several: GPT-Neo's global and
    local layers)."""

    head_dim: int
    causal: bool
    local_window: int | None = None  # keys within this many positions back (left only)
    explicit_mask: bool = False  # an arbitrary mask or bias array (none of ours)


@dataclass(frozen=True)
class Choice:
    requested: str
    implementation: str  # what the twin is built with: naive | sdpa | xla | cudnn | flash | efficient | math
    reason: str

    def as_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def _capability(cc: str | None) -> tuple[int, int] | None:
    if not cc:
        return None
    try:
        major, minor = (int(x) for x in str(cc).split(".")[:2])
    except ValueError:
        return None
    return major, minor


def cudnn_unmet(device: str, dtype: str, geometries: Iterable[Geometry], compute_capability: str | None) -> list[str]:
    """The cuDNN fused-attention constraints (as JAX checks them) that do not hold; empty = usable."""
    unmet = []
    if device != "cuda":
        return [f"cuDNN needs a CUDA device, not {device}"]
    cc = _capability(compute_capability)
    if cc is None:
        unmet.append("the GPU's compute capability is unknown")
    elif cc < (8, 0):
        unmet.append(f"compute capability {compute_capability} < 8.0 (cuDNN flash attention needs Ampere or later)")
    if dtype not in HALF:
        unmet.append(f"dtype {dtype} (cuDNN fused attention takes float16/bfloat16)")
    h_max = 256 if cc is not None and cc >= (9, 0) else 128
    for g in geometries:
        if g.head_dim % 8 or g.head_dim > h_max:
            unmet.append(f"head dim {g.head_dim} (must be a multiple of 8 and at most {h_max} on this GPU)")
        if g.explicit_mask:
            unmet.append("an explicit mask (cuDNN takes none or causal)")
        if g.local_window is not None and not g.causal:
            unmet.append("a two-sided local window (cuDNN takes a left-only window)")
    return sorted(set(unmet))


def choose(framework: str, requested: str, device: str, dtype: str, geometries: Iterable[Geometry],
           compute_capability: str | None = None) -> Choice:
    """The implementation ``framework`` runs for ``requested`` here, and why. An explicit
    implementation this framework or device cannot run raises ``Unsupported``."""
    geometries = list(geometries)
    if requested not in CHOICES:
        raise ValueError(f"attention={requested!r}; allowed: {', '.join(CHOICES)}")
    if requested == "naive":
        return Choice(requested, "naive", "spelled out: softmax(QK^T * scale + mask) V")
    if requested == "sdpa":
        return Choice(requested, "sdpa", "the framework's fused entry point with its own default dispatch")
    if requested == "best":
        if framework == "torch":
            return Choice(requested, "sdpa", "PyTorch's SDPA dispatcher picks its fastest kernel whose "
                                             "constraints hold (priority order recorded)")
        unmet = cudnn_unmet(device, dtype, geometries, compute_capability)
        if not unmet:
            return Choice(requested, "cudnn", "cuDNN fused attention: every documented constraint holds")
        return Choice(requested, "xla", "XLA's attention; cuDNN not usable: " + "; ".join(unmet))
    own = IMPLEMENTATIONS[framework]
    if requested not in own:
        raise Unsupported(f"attention={requested} is not a {framework} implementation "
                          f"(its choices: {', '.join(own)}, best, sdpa, naive)")
    if requested == "cudnn" and framework == "jax":
        unmet = cudnn_unmet(device, dtype, geometries, compute_capability)
        if unmet:
            raise Unsupported("attention=cudnn: " + "; ".join(unmet))
    if requested == "cudnn" and device != "cuda":
        raise Unsupported(f"attention=cudnn needs a CUDA device, not {device}")
    return Choice(requested, requested, "requested explicitly")


def resolve(workload: Any, cfg: Any, framework: str, device: str, dtype: str,
            compute_capability: str | None = None) -> tuple[Any, Choice | None]:
    """The config a twin is built with (``attention`` replaced by the chosen implementation)
    and the choice, or ``(cfg, None)`` for a workload without attention."""
    geometries = workload.attention_geometry(cfg)
    if geometries is None:
        return cfg, None
    choice = choose(framework, cfg.attention, device, dtype, geometries, compute_capability)
    return dataclasses.replace(cfg, attention=choice.implementation), choice


# ---- what ran, read from what ran ------------------------------------------------------------

JAX_CUDNN_MARK = "__cudnn$fmha"  # XLA custom-call targets of cuDNN fused attention (forward and backward)

TORCH_OPS = {  # aten operator (profiler event) -> the SDPA kernel it is
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU kernel)",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
}


def jax_ran(hlo_text: str, implementation: str) -> str:
    """From a compiled (or lowered) module's text: ``cudnn`` where cuDNN's fused-attention
    custom call is present, else XLA's own path (or the naive program)."""
    if JAX_CUDNN_MARK in hlo_text:
        return "cudnn"
    return "naive" if implementation == "naive" else "xla"


def torch_ran(event_names: Iterable[str]) -> str | None:
    """From a profiled step's operator names: the SDPA kernel(s) dispatched, or None when the
    trace shows none (naive attention, or a replayed CUDA graph)."""
    seen = sorted({TORCH_OPS[n] for n in event_names if n in TORCH_OPS})
    return " + ".join(seen) if seen else None


TORCH_KERNELS = (  # substrings of CUDA kernel names -> SDPA kernel (a replayed CUDA graph shows kernels only)
    ("flash_fwd", "flash"), ("flash_bwd", "flash"), ("fmha_cutlass", "efficient"),
    ("efficient_attention", "efficient"), ("native_sdpa", "cudnn"),
)  # from the kernels' published names (FlashAttention-2's flash_fwd_kernel, xformers' cutlass fmha,
#    cuDNN's generated *_native_sdpa_* kernels); not yet confirmed on a GPU by this project


def torch_ran_kernels(names: Iterable[str]) -> str | None:
    seen = sorted({label for n in names for mark, label in TORCH_KERNELS if mark in n})
    return " + ".join(seen) if seen else None
