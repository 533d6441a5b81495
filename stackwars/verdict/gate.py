"""One gate for every claim: which processes of a cell may decide anything.

A process decides only when it was measured on a quiet machine: no other process (or the
hypervisor) took more than ``stats.CONTENTION_THRESHOLD`` of its CPUs while it was timed
(``contended``, harness/contention.py), its window was long enough for that to be read (a
judgement that could not be made is never a pass), and the machine's canary read what the rest
of its run read (``slowed``, stackwars/canary.py). Except where the host's state could not touch
the figure: a CUDA process whose host issued its calls in a fraction of their time
(``device_bound``, from the same timed calls) decides all the same, and says why (``kept_reason``).
On the H100 three of gpt2 jax-jit's six processes were left out as slowed (canary 1.86-2.05)
while their medians matched the clean ones'. Every figure that ranks or judges (the tables' steady
state, first and second call, memory, "vs best"; the verdict's ratio, compile break-even
and memory ratio; ``compare``; the report's claims) is computed from the clean processes
alone, by ``tables.combine_repeats``, which asks this module. A cell none of whose
processes is clean keeps its busy figures apart, for display only (``busy_figures``), and
says that it cannot decide.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from stackwars.stats import CONTENTION_MIN_WINDOW_S, DEVICE_BOUND_SHARE

TIMED = ("ok", "parity_fail")  # statuses whose samples are timings (a parity failure keeps its times)


def host_reason(row: Mapping[str, Any]) -> str | None:
    """What was wrong with the host while this process was timed, or None: others took its
    CPUs (``contended``), the machine's canary read off its run's (``slowed``), or its window was
    too short for the kernel's 10 ms ticks to say what others took (never judged: never clean)."""
    if row.get("contended"):
        share = row.get("contention")
        return "others took " + (f"{share:.0%} of its CPUs" if share is not None else "its CPUs")
    if row.get("slowed"):
        ratio = row.get("canary_ratio")
        return "the machine's canary ran " + (f"{ratio:.2f}x its run's" if ratio else "off its run's")
    if unjudged(row):
        return (f"not judged: its timed window of {row['contention_window_s'] * 1e3:.0f} ms was under "
                f"{CONTENTION_MIN_WINDOW_S:g} s, too short to read what others took")
    return None


def unjudged(row: Mapping[str, Any]) -> bool:
    """A timed window too short for others' share of its CPUs to be read (the kernel counts
    in 10 ms ticks). The harness lengthens every window to CONTENTION_MIN_WINDOW_S; a record
    made before, or a window cut short by --max-samples, was never judged."""
    window = row.get("contention_window_s")
    return window is not None and window < CONTENTION_MIN_WINDOW_S


def device_bound(row: Mapping[str, Any]) -> bool:
    """A CUDA process whose host issued its calls in under DEVICE_BOUND_SHARE of their time,
    both read from the same timed calls (harness/window.py): the device's work set the pace,
    so a slower or busier host, which the issue time already holds, could not move its figure.
    On a CPU the host is the device: never."""
    if row.get("device") != "cuda" or (row.get("readout_windows") or {}).get("issue") != "steady":
        return False
    issue, wall = row.get("issue_median_s"), row.get("steady_median_s")
    return bool(issue and wall and issue / wall < DEVICE_BOUND_SHARE)


def busy_reason(row: Mapping[str, Any]) -> str | None:
    """Why this process may not decide, or None when it may: measured on a quiet machine, or
    device-bound, where the host's state could not touch its figure (``kept_reason`` says so)."""
    reason = host_reason(row)
    return None if reason is None or device_bound(row) else reason


def kept_reason(row: Mapping[str, Any]) -> str | None:
    """Why a process the host's state would have left out decides all the same, or None."""
    reason = host_reason(row)
    if reason is None or not device_bound(row):
        return None
    return (f"kept though {reason}: device-bound, the host issued a call in "
            f"{row['issue_median_s'] / row['steady_median_s']:.0%} of its time, so the host could not set its pace")


def timed(group: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The processes with steady-state samples."""
    return [r for r in group if r["status"] in TIMED and r.get("steady_samples")]


def split(group: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(clean, busy) among a cell's timed processes."""
    clean, busy = [], []
    for r in timed(group):
        (clean if busy_reason(r) is None else busy).append(r)
    return clean, busy


def reasons(busy: Iterable[Mapping[str, Any]]) -> str:
    """The busy processes' reasons, counted: "2 contended, 1 slowed, 1 not judged"."""
    busy = list(busy)
    contended = sum(1 for r in busy if r.get("contended"))
    slowed = sum(1 for r in busy if not r.get("contended") and r.get("slowed"))
    short = sum(1 for r in busy if not r.get("contended") and not r.get("slowed") and unjudged(r))
    return ", ".join(p for p in (f"{contended} contended" if contended else "",
                                 f"{slowed} slowed (canary)" if slowed else "",
                                 f"{short} not judged (window too short)" if short else "") if p)
