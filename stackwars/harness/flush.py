"""Cache flushing between timed calls (``--flush-l2``), as ``triton.testing.do_bench`` does:
a buffer larger than the last-level cache is written between calls, outside the timed
region, so every call starts with cold caches and its weights come from memory.

On a GPU the backends write a 256 MiB device buffer (do_bench's size; an H100's L2 is
50 MiB); on the CPU this module writes a host buffer of twice the last-level cache.
"""

from __future__ import annotations

import glob
import os
from typing import Any, Callable

import numpy as np

GPU_FLUSH_BYTES = 256 * 2**20
CPU_FALLBACK_BYTES = 256 * 2**20


def _size(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else None


def llc_bytes() -> tuple[int | None, str]:
    """The largest CPU cache of cpu0 (the last level), from sysfs, with where it was read."""
    best, level = None, None
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(os.path.join(index, "size")) as f:
                size = _size(f.read())
            with open(os.path.join(index, "level")) as f:
                lvl = int(f.read())
        except (OSError, ValueError):
            continue
        if size and (best is None or lvl > level or (lvl == level and size > best)):
            best, level = size, lvl
    return best, f"L{level} of cpu0 (sysfs)" if best else "not found in sysfs"


def cpu_flusher() -> tuple[Callable[[], None], dict[str, Any]]:
    llc, where = llc_bytes()
    size = 2 * llc if llc else CPU_FALLBACK_BYTES
    buf = np.zeros(size, dtype=np.uint8)
    counter = [0]

    def flush() -> None:
        counter[0] = (counter[0] + 1) % 251
        buf.fill(counter[0])  # every cache line written, with a value the compiler cannot elide

    return flush, {"bytes": size, "cache_bytes": llc, "cache": where,
                   "how": "numpy fill of a host buffer twice the last-level cache, before every timed call"}
