"""Why a cell's processes disagree: where the per-process medians of a cell differ by more
than ``SPREAD_THRESHOLD``, what the records of its fastest and slowest process say, side
by side. Launch-bound GPU cells spread up to 2x between processes; a reader must be able
to tell a different program from a slower host from a busy machine.

The evidence, each where the records hold it:

* **the program**: the compiled program's fingerprint (jax-jit: the optimized HLO with its
  autotuned choices; torch-compile: the code Inductor generated or read back from its cache),
  equal or not; eager modes run the same operators in every process;
* **host against device**: on CUDA, the calls' time on the device's own clock (CUDA events
  around the timed calls themselves) beside the wall clock: the same device time under
  different wall times is host time (launches, Python, the driver). Device time that rose with
  the wall time is not by itself a slower device: the events span the gaps in which the device
  waits for the host. So the host's time to issue a call (``issue_median_s``, the timed
  samples' first calls: most of the call's time means the device waited for it) and the GPU's
  SM clock with NVML's slowdown reasons (read through the timed window, harness/issue.py) say
  which; so do the energy counter's marks where the slowest ran at two speeds within its timed
  window (whether NVML read the SM clock move with its calls, harness/energy.py). Every one of
  these comes from the same calls as the wall time (harness/window.py); a record whose readouts
  came from windows of their own is not compared. A clock is said to change only where NVML
  read it change;
* **the kernels**: with ``run --profile N``, each process's profiled steps: the same kernel
  mix or not (which kernels only one ran, which ran a different number of times), and the
  kernels' busy time a step. The profiled steps run slower than the timed ones (the note says
  how much), so the gaps between kernels are the profiler's too and are not compared; without
  profiles the row says how to get them;
* **caches**: a cold process beside a warm one;
* **the machine**: others' share of the process's CPUs, the canary before and after, the
  hypervisor's steal, and the share its own child processes took (Inductor starts its compile
  pool, a sidecar and a worker per CPU, at the first compile, whether or not a warm cache
  leaves anything to compile: on a 16-CPU GPU host it may still be starting while the calls
  are timed);
* **the process itself**: a slowest process whose own samples spread (a slowed phase).
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from stackwars.records import SLOWING
from stackwars.report import format as fmt
from stackwars.verdict import gate
from stackwars.stats import CONTENTION_MIN_WINDOW_S as MIN_WINDOW_S
from stackwars.stats import DEVICE_BOUND_SHARE, HOST_BOUND_SHARE

SPREAD_THRESHOLD = 0.10  # process medians further apart than this are explained in the row
CLOCK_DROP = 0.05  # an SM clock this much lower in the slowest process: a slowed device
DESCENDANTS_SHARE = 0.05  # the cell's own child processes' share of its CPUs worth naming


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
    why += _device_and_host(fast, slow, med[id(fast)], med[id(slow)], spread)
    why.append(_kernels(fast, slow))
    if fast.get("cache") and slow.get("cache") and fast["cache"] != slow["cache"]:
        why.append(f"caches: fastest {fast['cache']}, slowest {slow['cache']}")
    machine = []
    ca, cb = fast.get("contention"), slow.get("contention")
    short = [f"#{r.get('repeat')}" for r in (fast, slow) if gate.unjudged(r)]
    if short:  # the kernel's 10 ms tick makes a share over a few ticks meaningless
        machine.append(f"others' share of the CPUs not judged: the timed window of {' and '.join(short)} "
                       f"was under {MIN_WINDOW_S:g} s")
    elif ca is not None and cb is not None and max(ca, cb) >= 0.01:
        machine.append(f"others took {ca:.0%} / {cb:.0%} of its CPUs")
    ka, kb = fast.get("canary_before_s"), slow.get("canary_before_s")
    if ka and kb and abs(kb / ka - 1.0) >= 0.05:
        machine.append(f"canary {fmt.seconds(ka)} / {fmt.seconds(kb)}")
    oa, ob = fast.get("descendants_share"), slow.get("descendants_share")
    if oa is not None and ob is not None and max(oa, ob) >= DESCENDANTS_SHARE:
        machine.append(f"its own child processes (Inductor's compile pool) took {oa:.0%} / {ob:.0%} of its CPUs")
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


def _same_window(row: Mapping[str, Any], name: str) -> bool:
    """Whether a process's readout ``name`` was read from its timed calls (the steady window),
    not from calls of its own after them (records made before: they can disagree with the wall
    time by the host's change of speed between windows, so no note draws on them)."""
    return (row.get("readout_windows") or {}).get(name) == "steady"


def _device_and_host(fast: Mapping[str, Any], slow: Mapping[str, Any], fast_s: float, slow_s: float,
                     spread: float) -> list[str]:
    """The device's clock (CUDA events), the host's time to issue a call and the GPU's SM clock
    of the two processes, each from the calls whose wall time it is set against (the steady
    window). Events span the gaps in which the device waits for the host, so device time that
    rose with the wall time is a slower device only where the host issued its calls well inside
    their time (or NVML read the SM clock fall); where it took most of a call to issue it, the
    device waited on the host. A clock is said to have changed only where NVML read it change."""
    out = []
    stale = [f"#{r.get('repeat')}" for r in (fast, slow)
             if any(r.get(k) is not None for k in ("issue_median_s", "device_time_median_s"))
             and not (_same_window(r, "issue") or _same_window(r, "device_time"))]
    if stale:  # a record from before the readouts came from the timed calls
        return [f"the device time and issue time of {' and '.join(stale)} were read in windows of their own after "
                f"the timed one (a record made before they came from the timed calls): not set against its wall time"]
    ia, ib = fast.get("issue_median_s"), slow.get("issue_median_s")
    share = ib / slow_s if ib and slow_s else None
    host_bound = share is not None and share >= HOST_BOUND_SHARE
    device_bound = share is not None and share < DEVICE_BOUND_SHARE
    ca, cb = fast.get("gpu_sm_mhz"), slow.get("gpu_sm_mhz")
    slowed_clock = bool(ca and cb and cb < (1.0 - CLOCK_DROP) * ca)
    da, db = fast.get("device_time_median_s"), slow.get("device_time_median_s")
    if da and db:
        device = db / da - 1.0
        if abs(device) < spread / 2:
            where = "the device ran the same work; the difference is host time (launches, Python, the driver)"
        elif host_bound and not slowed_clock:
            where = ("the device time rose with the wall time, as it does when the device waits for the host's "
                     "launches (the events span the gaps between kernels)")
        elif device_bound or slowed_clock:
            where = "the device itself ran slower"
        else:
            where = ("the device time rose with the wall time: slower kernels, or a device waiting for a slower host "
                     "(the events span the gaps between kernels)"
                     + ("; the host's issue time or a profile would tell which" if share is None else ""))
        out.append(f"device time a call (CUDA events over the timed calls) {fmt.seconds(da)} vs {fmt.seconds(db)} "
                   f"({_pct(device)}): {where}")
    if share is not None:
        pace = ("host-bound: the device waited for its launches" if host_bound else
                "the device's work set the pace" if device_bound else "partly host-bound")
        also = f"; the fastest {fmt.seconds(ia)} of {fmt.seconds(fast_s)}" if ia else ""
        out.append(f"the host took {fmt.seconds(ib)} to issue a call of {fmt.seconds(slow_s)} in the slowest "
                   f"({share:.0%}): {pace}{also}")
    rates, clocks = slow.get("energy_calls_per_s"), slow.get("energy_sm_mhz")
    if rates and rates[0] > 0 and rates[1] / rates[0] - 1.0 >= spread / 2:
        # the slowest process's timed window ran at two speeds too (its energy counter's marks every
        # 0.1 s): whether NVML read the SM clock move with them says which reading holds
        moved = bool(clocks and clocks[0] < (1.0 - CLOCK_DROP) * clocks[1])
        line = f"within its timed window the slowest made {rates[0]:,.0f}-{rates[1]:,.0f} calls a second"
        if clocks:
            line += (f", NVML read its SM clock at {clocks[0]}-{clocks[1]} MHz: the clock moved with its calls" if moved
                     else f" while NVML read its SM clock at {clocks[0]}-{clocks[1]} MHz: not a slowed device")
        out.append(line)
    if ca and cb:
        held = [r for r in slow.get("gpu_clock_reasons") or () if r in SLOWING]
        ra, rb = fast.get("gpu_sm_mhz_range") or [ca, ca], slow.get("gpu_sm_mhz_range") or [cb, cb]
        changed = ca != cb or ra[0] != ra[1] or rb[0] != rb[1]
        if changed or held:
            out.append(f"NVML read the SM clock at {_mhz(ra)} vs {_mhz(rb)} MHz" + (f" ({', '.join(held)})" if held else "")
                       + (": the device was slowed" if slowed_clock else ""))
        else:
            out.append(f"NVML read the SM clock at {ca} MHz throughout, in both")
    return out


def _mhz(r: Sequence[int]) -> str:
    return f"{r[0]}" if r[0] == r[1] else f"{r[0]}-{r[1]}"


def _kernels(fast: Mapping[str, Any], slow: Mapping[str, Any]) -> str:
    """What the two processes' profiled steps say about their kernels: the same kernels or not,
    and the kernels' busy time a step. The profiled steps run under the profiler, after the
    timed ones, slower than them (CUPTI's buffers and callbacks sit in the gaps between kernels):
    the note says how much slower, and compares the kernels, never the gaps, which are the
    profiler's as much as the host's."""
    pf, ps = fast.get("profile_wall_s"), slow.get("profile_wall_s")
    if not pf or not ps:
        missing = " and ".join(f"#{r.get('repeat')}" for r in (fast, slow) if not r.get("profile_wall_s"))
        return f"no profile of {missing} (run --profile 3 to compare the kernels they ran)"
    ma, mb = fast.get("profile_kernel_mix") or {}, slow.get("profile_kernel_mix") or {}
    sa, sb = fast.get("profile_kernel_mix_sha"), slow.get("profile_kernel_mix_sha")
    if not sa or not sb:  # a profile stored before profiles kept their kernel mix
        mix = "their profiles hold no kernel mix to compare (recorded before it was kept)"
    elif sa == sb:
        mix = f"the same kernels in both profiles ({fast.get('profile_kernels'):g} a step)"
    else:
        diff = []
        # a name missing from a mix cut at its MIX longest kernels may still have run there
        whole_a, whole_b = (len(m) == r.get("profile_distinct_kernels") for m, r in ((ma, fast), (mb, slow)))
        only_a = sorted(set(ma) - set(mb)) if whole_b else []
        only_b = sorted(set(mb) - set(ma)) if whole_a else []
        if only_a:
            diff.append("only the fastest ran " + _names(only_a))
        if only_b:
            diff.append("only the slowest ran " + _names(only_b))
        counts = [f"{k} {ma[k][0]:g} vs {mb[k][0]:g}" for k in sorted(set(ma) & set(mb)) if ma[k][0] != mb[k][0]]
        if counts:
            diff.append("a step ran " + ", ".join(counts[:3]) + (f" and {len(counts) - 3} more" if len(counts) > 3 else ""))
        mix = (f"different kernels in their profiles ({fast.get('profile_kernels'):g} vs "
               f"{slow.get('profile_kernels'):g} a step" + (": " + "; ".join(diff) if diff else "") + ")")
    ba, bb = fast.get("profile_busy_s") or 0.0, slow.get("profile_busy_s") or 0.0
    slower = [f"#{r.get('repeat')} {r['profile_wall_s'] / r['steady_median_s']:.2g}x"
              for r in (fast, slow) if r.get("steady_median_s")]
    under = (f"a profiled step took {', '.join(slower)} its timed call: under the profiler the gaps between "
             "kernels are the profiler's as much as the host's, so only the kernels are compared")
    if bb and ba and abs(bb / ba - 1.0) < CLOCK_DROP:
        where = "the kernels were as busy in both: the difference is not in the kernels"
    elif bb and ba:
        where = f"the kernels were busy {_pct(bb / ba - 1.0)} longer a step in the slowest"
    else:
        where = "no kernel busy time to compare"
    return f"{mix}; kernels busy {fmt.seconds(ba)} vs {fmt.seconds(bb)} a step: {where} ({under})"


def _names(names: Sequence[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def line(label: str, e: Mapping[str, Any]) -> str:
    """One line for a table's notes."""
    return (f"{label}: process medians {fmt.seconds(e['fastest_s'])} (#{e['fastest']}) to "
            f"{fmt.seconds(e['slowest_s'])} (#{e['slowest']}), {_pct(e['spread'])}: {e['why']}")
