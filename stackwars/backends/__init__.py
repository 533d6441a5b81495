"""Built-in backends: one registry line each. Implementations import their framework
and are loaded only inside workers, so the parent never imports torch or jax."""

from stackwars.backends.base import TORCH_COMPILER, BackendSpec
from stackwars.backends.jax_spec import JaxSpec
from stackwars.backends.torch_xla_spec import TorchXlaSpec
from stackwars.registry import register_backend

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# torch backends' optimizer_impl (torch_common.optimizer_plan): fast (default: what PyTorch's
# experts run: fused eager, the step compiled under torch.compile), PyTorch's own default rule,
# an implementation it names, or its step compiled
OPTIMIZER_IMPLS = ("fast", "default", "for-loop", "foreach", "fused", "compiled")
_OPT = {"optimizer_impl": "fast"}
_COMPILE_CHOICES = {"mode": COMPILE_MODES, "fullgraph": (True, False), "optimizer_impl": OPTIMIZER_IMPLS}

register_backend(BackendSpec(
    "torch-eager", "torch", "stackwars.backends.torch_eager:TorchEager",
    "PyTorch eager mode (op by op; option optimizer_impl)", option_defaults=_OPT,
    option_choices={"optimizer_impl": OPTIMIZER_IMPLS}))
register_backend(BackendSpec(
    "torch-compile", "torch", "stackwars.backends.torch_compile:TorchCompile",
    "torch.compile: Dynamo + AOTAutograd + Inductor (options: mode, fullgraph)",
    option_defaults={"mode": "default", "fullgraph": False, **_OPT}, option_choices=_COMPILE_CHOICES,
    preload_extra=TORCH_COMPILER))
register_backend(BackendSpec(
    "torch-compile-max-autotune", "torch", "stackwars.backends.torch_compile:TorchCompile",
    "torch.compile(mode='max-autotune'): autotuned GEMM templates; slow to compile", default=False,
    option_defaults={"mode": "max-autotune", "fullgraph": False, **_OPT}, option_choices=_COMPILE_CHOICES,
    preload_extra=TORCH_COMPILER))
# default on CUDA (the only device it runs on): XLA replays command buffers (CUDA graphs) by
# default on GPUs, so the like-for-like PyTorch row is always in a GPU table
register_backend(BackendSpec(
    "torch-cudagraphs", "torch", "stackwars.backends.torch_compile:TorchCompile",
    "torch.compile(mode='reduce-overhead'): Inductor + CUDA graphs (default on CUDA)", devices=("cuda",),
    option_defaults={"mode": "reduce-overhead", "fullgraph": False, **_OPT}, option_choices=_COMPILE_CHOICES,
    preload_extra=TORCH_COMPILER))
_JAX_OPTIONS = {"xla_autotune_level": None, "xla_command_buffers": None}
register_backend(JaxSpec(
    "jax-eager", "jax", "stackwars.backends.jax_eager:JaxEager",
    "JAX op by op (no jit); each primitive compiled on first use (options: xla_autotune_level, "
    "xla_command_buffers)",
    option_defaults=_JAX_OPTIONS))
register_backend(JaxSpec(
    "jax-jit", "jax", "stackwars.backends.jax_jit:JaxJit",
    "jax.jit: the whole step compiled by XLA, AOT stages timed (options: xla_autotune_level, xla_command_buffers)",
    option_defaults=_JAX_OPTIONS))
# its twin without graphs, default on CUDA too: the verdict sets the programs that replay CUDA graphs against
# each other (torch-cudagraphs, jax-jit) and those that launch every kernel (torch-compile, this one)
register_backend(JaxSpec(
    "jax-jit-no-graphs", "jax", "stackwars.backends.jax_jit:JaxJit",
    "jax.jit with XLA's command buffers (CUDA graphs) off: every kernel launched by XLA (CUDA; options: "
    "xla_autotune_level)", devices=("cuda",),
    option_defaults={"xla_autotune_level": None, "xla_command_buffers": "off"},
    option_choices={"xla_command_buffers": ("off",)}))
register_backend(TorchXlaSpec(
    "torch-mlir-xla", "torch", "stackwars.backends.torch_xla:TorchXla",
    "the PyTorch program exported to StableHLO by torch-mlir, compiled and run by XLA via jaxlib's PJRT client "
    "(not the torch_xla package; old name: torch-xla); option stablehlo: run an exported file", option_defaults={"stablehlo": None},
    analysis=True, preload_extra=("?torch_mlir",)))
