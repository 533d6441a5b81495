"""A CUDA driver faked onto the CPU build of PyTorch, for the fork server's tests.

PyTorch's ``torch._C._cuda_getDeviceCount`` (what ``torch.cuda.is_available()`` calls)
initialises the CUDA driver without making a context: ``torch.cuda.is_initialized()``
stays False, yet a child forked afterwards finds CUDA unusable ("Cannot re-initialize CUDA
in forked subprocess"; every torch-compile cell of the first forked run on an H200).
Imported, this module gives the CPU build the same behaviour: a device-count query that
marks the process, ``torch.cuda._is_in_bad_fork`` reading the mark (a forked child inherits
it), ``torch.cuda._is_compiled`` answering True and NVML counting one device.
"""

from __future__ import annotations

import torch

DRIVER_TOUCHED = False


def _cuda_get_device_count() -> int:
    global DRIVER_TOUCHED
    DRIVER_TOUCHED = True
    return 1


torch._C._cuda_getDeviceCount = _cuda_get_device_count
torch.cuda._is_compiled = lambda: True
torch.cuda._is_in_bad_fork = lambda: DRIVER_TOUCHED
torch.cuda._device_count_nvml = lambda: 1
