"""One gate for every claim: which processes of a cell may decide anything.

A process decides only when it was measured on a quiet machine: no other process (or the
hypervisor) took more than ``stats.CONTENTION_THRESHOLD`` of its CPUs while it was timed
(``contended``, harness/contention.py), and the machine's canary read what the rest of its run read
(``slowed``, stackwars/canary.py). Every figure that ranks or judges (the tables' steady
state, first and second call, memory, "vs best"; the verdict's ratio, compile break-even
and memory ratio; ``compare``; the report's claims) is computed from the clean processes
alone, by ``tables.combine_repeats``, which asks this module. A cell none of whose
processes is clean keeps its busy figures apart, for display only (``busy_figures``), and
says that it cannot decide.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

TIMED = ("ok", "parity_fail")  # statuses whose samples are timings (a parity failure keeps its times)


def busy_reason(row: Mapping[str, Any]) -> str | None:
    """Why this process may not decide, or None when it was measured on a quiet machine."""
    if row.get("contended"):
        share = row.get("contention")
        return "others took " + (f"{share:.0%} of its CPUs" if share is not None else "its CPUs")
    if row.get("slowed"):
        ratio = row.get("canary_ratio")
        return "the machine's canary ran " + (f"{ratio:.2f}x its run's" if ratio else "off its run's")
    return None


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
    """The busy processes' reasons, counted: "2 contended, 1 slowed"."""
    contended = sum(1 for r in busy if r.get("contended"))
    slowed = sum(1 for r in busy if not r.get("contended") and r.get("slowed"))
    return ", ".join(p for p in (f"{contended} contended" if contended else "",
                                 f"{slowed} slowed (canary)" if slowed else "") if p)
