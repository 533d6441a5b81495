"""A workload whose module takes a while to import and whose FLOPs take a while to count,
as a user's model file can (it imports both frameworks; its FLOPs come from PyTorch's
counter): the cell's timeline must say where those seconds went (``workload_s``,
``counts_s``). Its twins are the fault workload's, behaving."""

from __future__ import annotations

import time

from stackwars.registry import register_workload
from tests.plugins.faults import Fault

SLEEP_S = 0.4
time.sleep(SLEEP_S)  # importing this module: the worker's ``workload_s``


class SlowParts(Fault):
    name = "slow-parts"
    description = "test-only: slow to import and to count"

    def flops(self, cfg, phase):
        time.sleep(SLEEP_S)  # the worker's ``counts_s``
        return super().flops(cfg, phase)


register_workload(SlowParts())
