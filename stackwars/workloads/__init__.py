"""Built-in workloads; importing this package registers them."""

from stackwars.workloads import ffn, gemm, mha  # noqa: F401
