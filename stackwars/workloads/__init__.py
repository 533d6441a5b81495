"""Built-in workloads; importing this package registers them."""

from stackwars.workloads import ffn, gemm, mha  # noqa: F401
from stackwars.workloads import models  # noqa: F401,E402  (end-to-end models)
