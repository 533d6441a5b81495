"""Why a cell's processes disagree: where the per-process medians of a cell differ by more
than ``SPREAD_THRESHOLD``, what the records of its fastest and slowest process say, side
by side. Launch-bound GPU cells spread up to 2x between processes; a reader must be able
to tell a different program from a slower host from a busy machine.

The evidence, each where the records hold it:

* **the program**: the compiled program's fingerprint (jax-jit: the optimized HLO with its
  autotuned choices; torch-compile: the code Inductor generated or read back from its cache),
  equal or not; eager modes run the same operators in every process;
* **host against device**: on CUDA, the calls' time on the device's own clock (CUDA events)
  beside the wall clock: the same device time under different wall times is host time
  (launches, Python, the driver);
* **caches**: a cold process beside a warm one;
* **the machine**: others' share of the process's CPUs, the canary before and after, the
  hypervisor's steal;
* **the process itself**: a slowest process whose own samples spread (a slowed phase).
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from stackwars.report import format as fmt

SPREAD_THRESHOLD = 0.10  # process medians further apart than this are explained in the row


def _pct(x: float) -> str:
    return f"{x:+.0%}"


def explain(procs: Sequence[Mapping[str, Any]], threshold: float = SPREAD_THRESHOLD) -> dict[str, Any] | None:
    """The explanation for one cell's processes, or None where they agree within ``threshold``."""
    timed = [r for r in procs if r.get("steady_samples")]
    if len(timed) < 2:
        return None
    med = {id(r): statistics.median(r["steady_samples"]) for r in timed}
    fast = min(timed, key=lambda r: med[id(r)])
    slow = max(timed, key=lambda r: med[id(r)])
    spread = med[id(slow)] / med[id(fast)] - 1.0
    if spread <= threshold:
        return None
    why: list[str] = []
    a, b = fast.get("program_sha"), slow.get("program_sha")
    if a and b:
        why.append("the same compiled program in both" if a == b else
                   f"different compiled programs ({a} vs {b}): the compiler chose other kernels")
    elif not str(fast.get("backend", "")).endswith(("jit", "compile", "cudagraphs", "autotune", "xla")):
        why.append("eager: the same operators in both")
    da, db = fast.get("device_time_median_s"), slow.get("device_time_median_s")
    if da and db:
        device = db / da - 1.0
        where = ("the device ran the same work; the difference is host time (launches, Python, the driver)"
                 if abs(device) < spread / 2 else "the device itself ran slower")
        why.append(f"device time a call {fmt.seconds(da)} vs {fmt.seconds(db)} ({_pct(device)}): {where}")
    if fast.get("cache") and slow.get("cache") and fast["cache"] != slow["cache"]:
        why.append(f"caches: fastest {fast['cache']}, slowest {slow['cache']}")
    machine = []
    ca, cb = fast.get("contention"), slow.get("contention")
    if ca is not None and cb is not None and max(ca, cb) >= 0.01:
        machine.append(f"others took {ca:.0%} / {cb:.0%} of its CPUs")
    ka, kb = fast.get("canary_before_s"), slow.get("canary_before_s")
    if ka and kb and abs(kb / ka - 1.0) >= 0.05:
        machine.append(f"canary {fmt.seconds(ka)} / {fmt.seconds(kb)}")
    sa, sb = fast.get("cpu_steal_s"), slow.get("cpu_steal_s")
    if sa is not None and sb is not None and max(sa, sb) >= 0.01:
        machine.append(f"hypervisor steal {sa:.2f} / {sb:.2f} s")
    why.append("machine: " + (", ".join(machine) if machine else "quiet in both (contention, canary, steal)"))
    iqr = slow.get("steady_iqr_s")
    if iqr and iqr / med[id(slow)] > 0.10:
        why.append(f"the slowest process's own samples spread (IQR {iqr / med[id(slow)]:.0%} of its median): "
                   "part of it ran slowed")
    return {"spread": float(spread), "fastest": fast.get("repeat"), "slowest": slow.get("repeat"),
            "fastest_s": float(med[id(fast)]), "slowest_s": float(med[id(slow)]), "why": "; ".join(why)}


def line(label: str, e: Mapping[str, Any]) -> str:
    """One line for a table's notes."""
    return (f"{label}: process medians {fmt.seconds(e['fastest_s'])} (#{e['fastest']}) to "
            f"{fmt.seconds(e['slowest_s'])} (#{e['slowest']}), {_pct(e['spread'])}: {e['why']}")
