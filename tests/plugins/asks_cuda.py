"""A module that asks the CUDA driver for its device count as it is imported, as Inductor's
modules do through ``torch.cuda.is_available()`` (preloaded after tests.plugins.fake_cuda)."""

import torch

DEVICES = torch._C._cuda_getDeviceCount()
