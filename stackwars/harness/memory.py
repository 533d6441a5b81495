"""Process memory: current RSS and peak RSS over a window.

Preferred counter: the kernel's own high-water mark (VmHWM in /proc/self/status),
reset to the current RSS by writing "5" to /proc/self/clear_refs (Linux >= 4.0). It is
exact and costs nothing while the measured code runs. Where the reset is not allowed,
a background thread samples RSS every millisecond instead (it shares the CPU with the
measured code, so the record names which counter was used).
"""

from __future__ import annotations

import threading
import time

import psutil

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def current_rss() -> int:
    return psutil.Process().memory_info().rss


def read_hwm() -> int | None:
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class PeakRSS:
    """``reset()`` opens a window; ``peak()`` returns the largest RSS seen since."""

    def __init__(self, sample_interval_s: float = 1e-3):
        self._interval = sample_interval_s
        self._sampler: threading.Thread | None = None
        self._stop = threading.Event()
        self._max = 0
        self.counter = "VmHWM (kernel high-water mark, reset via /proc/self/clear_refs)"
        self._use_hwm = self._try_reset_hwm()
        if not self._use_hwm:
            self.counter = f"RSS sampled every {sample_interval_s * 1e3:g} ms by a thread (psutil)"

    @staticmethod
    def _try_reset_hwm() -> bool:
        if read_hwm() is None:
            return False
        try:
            with open(_CLEAR_REFS, "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def reset(self) -> None:
        if self._use_hwm:
            self._try_reset_hwm()
            return
        self.stop()
        self._max = current_rss()
        self._stop.clear()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        proc = psutil.Process()
        while not self._stop.is_set():
            self._max = max(self._max, proc.memory_info().rss)
            time.sleep(self._interval)

    def peak(self) -> int:
        if self._use_hwm:
            return read_hwm() or 0
        return max(self._max, current_rss())

    def stop(self) -> None:
        if self._sampler is not None:
            self._stop.set()
            self._sampler.join()
            self._sampler = None
