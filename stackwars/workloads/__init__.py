"""Built-in workloads; importing this package registers them."""

from stackwars.workloads import ffn, gemm, mha  # noqa: F401
from stackwars.workloads import models  # noqa: F401,E402  (end-to-end models)
from stackwars.workloads import loops  # noqa: F401,E402  (control flow: rnn, ode, newton, branch)
from stackwars.workloads import vmapped  # noqa: F401,E402  (per-example ops: loop, vmap, batched)
from stackwars.workloads import kernels  # noqa: F401,E402  (softmax, layernorm: Triton and Pallas kernels)
