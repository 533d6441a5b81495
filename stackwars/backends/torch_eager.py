"""torch-eager: PyTorch op by op, no compiler."""

from stackwars.backends.torch_common import TorchBackend


class TorchEager(TorchBackend):
    pass
