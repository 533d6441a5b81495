"""Plan: what a run measures next for its verdicts, which rows get it first, and why a row gets no more.

After the first round each row's two chosen cells get the rounds of its first look; after each look,
every row still open gets the rounds that bring its clean rounds to its next look (a busy round is
replaced and never counts: it uses up no look), up to the cap (``wanted``). Under a budget the
looks go first to the rows most likely to decide per second, and a row left out says what it
would need (``allot``); no boundary ever depends on the budget. A row gets nothing once it decided,
reached its cap, stopped as futile (verdict/sequential.futile), or more processes cannot decide it
(``no_top_up``). ``pairs`` says which two cells a round puts next to each other; ``aa_more`` does
the same for ``run --aa``'s checks, whose rounds are pairs of one cell's processes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from stackwars import stats
from stackwars.verdict import sequential
from stackwars.verdict.words import DECIDED, FRAMEWORKS, title


@dataclass(frozen=True)
class Want:
    """One row's next look: ``rounds`` more processes of each of ``cells`` (a round is one process of
    each), what the look is (``why``), its chance of deciding there (the row's estimate and spread
    taken as the truth; 1 for the rounds a first look still lacks) and what it should take."""

    row: str  # the row's title
    cells: tuple[str, ...]
    rounds: int
    why: str
    chance: float
    seconds: float | None
    planned: bool = False  # the rounds a first look still lacks, a busy candidate's judgement: run whatever the budget

    @property
    def worth(self) -> float:
        """The chance of deciding a second: what a budget ranks looks by."""
        return self.chance / max(self.seconds or 0.0, 1e-3)


def _row_want(v: Mapping[str, Any]) -> Want | None:
    """The next look of an open row with a best on both sides, or None."""
    seq = v.get("sequence")
    cells = tuple(v.get(f"{fw}_cell") for fw, _ in FRAMEWORKS)
    if not seq or not all(cells) or v.get("verdict") in DECIDED or v.get("no_top_up"):
        return None
    if any(c in (v.get(f"{fw}_stayed_busy") or {}) for (fw, _), c in zip(FRAMEWORKS, cells)):
        return None
    if seq.get("state") in ("futile", "capped", "decided"):
        return None
    looks, k, measured = seq["looks"], seq["look"] - 1, seq["rounds_measured"]
    if k + 1 >= len(looks):
        return None
    target = looks[k + 1]
    if target > seq.get("allowed", looks[-1]):  # the run planned fewer (one process a cell) and has no cap above
        return None
    # every round after the choice counts against the cap, clean or busy, with the first look's rounds again to
    # replace busy ones: a machine that stays busy does not take rounds for ever
    busy = max(v.get(f"{fw}_processes_busy") or 0 for fw, _ in FRAMEWORKS)
    room = looks[-1] + looks[0] - measured - busy
    add = min(target - measured, room)
    if add <= 0:
        return None
    if k < 0 or not seq.get("paired"):
        chance = 1.0  # a first look's rounds: nothing is read before them
    else:
        chance = sequential.decide_chance(seq["logs"], looks, k + 1, seq["share"],
                                          v.get("tie_threshold") or stats.MARGIN)
    why = (f"its first look ({target} rounds)" if k < 0 else f"look {k + 2} of {len(looks)} ({target} rounds)")
    return Want(title(v), cells, add, why, chance, None if v.get("round_s") is None else add * v["round_s"], k < 0)


def wanted(found: Sequence[Mapping[str, Any]]) -> list[Want]:
    """Every open row's next look (``_row_want``), and one process, to be judged, of each candidate
    measured only while busy that might be a side's best (its side cannot be chosen without it)."""
    out = [w for w in (_row_want(v) for v in found) if w is not None]
    for v in found:
        for fw, _ in FRAMEWORKS:
            stayed = v.get(f"{fw}_stayed_busy") or {}
            for x in v.get(f"{fw}_busy_candidates") or ():
                if x["cell"] not in stayed and x.get("allowed", stats.MIN_PROCESSES) >= stats.MIN_PROCESSES:
                    out.append(Want(title(v), (x["cell"],), 1, f"{x['backend']}, measured only while busy, judged",
                                    1.0, None, True))
    return out


def allot(wants: Sequence[Want], seconds_left: float, fallback_round_s: float = 0.0
          ) -> tuple[list[Want], list[Want]]:
    """The looks a budget of ``seconds_left`` affords, most likely to decide a second first, and
    those left out; what is planned (a first look's rounds, a busy candidate's judgement) runs
    whatever the budget, as the planned processes always have. A look whose cost is unknown is
    reckoned at ``fallback_round_s`` a round. With no budget (inf), every one."""
    if math.isinf(seconds_left):
        return list(wants), []
    cost = {id(w): w.seconds if w.seconds is not None else w.rounds * fallback_round_s for w in wants}
    chosen = [w for w in wants if w.planned]
    spent = sum(cost[id(w)] for w in chosen)
    left = []
    for w in sorted((w for w in wants if not w.planned), key=lambda w: -w.chance / max(cost[id(w)], 1e-3)):
        if w.chance > 0 and spent + cost[id(w)] <= seconds_left:
            chosen.append(w)
            spent += cost[id(w)]
        else:
            left.append(w)
    return chosen, left


def as_cells(wants: Sequence[Want]) -> dict[str, int]:
    """The processes each cell gets from these looks (a cell in two rows: the larger)."""
    out: dict[str, int] = {}
    for w in wants:
        for c in w.cells:
            out[c] = max(out.get(c, 0), w.rounds)
    return out


def would_need(v: Mapping[str, Any]) -> str | None:
    """What an open row would need to decide, in words ("about 6 more round(s), about 25 s"), its
    estimate and spread taken as the truth; None for a row that is not open."""
    seq = v.get("sequence") or {}
    if seq.get("state") != "open":
        return None
    need = seq.get("would_need")
    if need is None:
        return f"more rounds than its cap of {seq['looks'][-1]} allows at its spread"
    seconds = f", about {need['seconds']:.0f} s" if need.get("seconds") is not None else ""
    return f"about {need['rounds']} more round(s){seconds}"


def aa_more(checks: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``run --aa``: the processes each open check's cell needs for its next look (two a pair: its
    pairs are back-to-back processes of the cell), up to its cap with the first look's pairs again
    for busy ones."""
    out: dict[str, int] = {}
    for c in checks:
        if c.get("state") != "open":
            continue
        # the next look's pairs that count (busy, failed or split ones do not), and all the cell's measured pairs
        # within its cap and the first look's pairs again
        looks, k, counted, measured = c["looks"], c["look"] - 1, c["pairs_counted"], c["pairs_measured"]
        if k + 1 >= len(looks):
            continue
        add = min(looks[k + 1] - counted, looks[-1] + looks[0] - measured)
        if add > 0:
            out[c["cell"]] = max(out.get(c["cell"], 0), 2 * add)
    return out


def pairs(found: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The (PyTorch, JAX) chosen cells of every row with both: the pairs whose processes a round
    puts next to each other, in random order (runner.more_rounds)."""
    return [(v["torch_cell"], v["jax_cell"]) for v in found if v.get("torch_cell") and v.get("jax_cell")
            and v.get("best_torch") is not None and v.get("best_jax") is not None]


def said_no_top_up(row: dict[str, Any]) -> None:
    """An undecided row that a run would not measure further says why (``no_top_up``)."""
    why = no_top_up(row) if row["verdict"] not in DECIDED else None
    if why:
        row["no_top_up"] = why
        row["reason"] += "; " + why
        if row.get("sequence"):
            row["sequence"]["state"] = "held"


def no_top_up(v: Mapping[str, Any]) -> str | None:
    """Why more processes cannot decide this row, or None: a side's fastest candidate failed
    parity (more processes would not make it pass, nor the row's best the fastest program), or
    every cell a look would add to stayed busy through its latest processes (the machine it would
    measure again is the one that left them all out)."""
    failed = [f"{name}'s {x['backend']}" for fw, name in FRAMEWORKS for x in v.get(f"{fw}_excluded") or ()]
    if failed:
        return (f"no more processes: {' and '.join(failed)}, faster than the side's best, failed parity, which more "
                f"processes would not change")
    if v.get("reason_tag") != "busy machine":
        return None
    stuck = []
    first = ((v.get("sequence") or {}).get("looks") or [stats.MIN_PROCESSES])[0]
    for fw, name in FRAMEWORKS:
        # what the side needs clean processes of to decide: its best, where it has too few; every
        # candidate measured only while busy (it has no best, or they might beat it)
        best = v.get(f"{fw}_cell")
        need = [x["cell"] for x in v.get(f"{fw}_busy_candidates") or ()]
        if best and v.get(f"{fw}_processes", 0) < first:
            need.append(best)
        stayed = v.get(f"{fw}_stayed_busy") or {}
        if need and all(c in stayed for c in need):
            stuck.append((name, ", ".join(f"{stayed[c]['backend']} (its last {stayed[c]['processes']} process(es), "
                                          f"none clean)" for c in need)))
    if not stuck:
        return None
    sides = " and ".join(f"{name}'s" for name, _ in stuck)  # every side that is stuck, not the first found
    return (f"no more processes: {sides} side{'s' if len(stuck) > 1 else ''} cannot get the clean ones "
            f"{'they need' if len(stuck) > 1 else 'it needs'} here, the machine having stayed busy through the latest "
            f"processes of " + ", ".join(what for _, what in stuck)
            + "; more would be measured on the same busy machine: run it again when the machine is quiet")
