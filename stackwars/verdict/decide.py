"""Decide: the ratio JAX / PyTorch of each row, read at the level its look may spend, and its word.

``verdicts`` builds every row in named steps: its sides (``choose.py``), the command that measures it
again, its deciding rounds (the chosen cells' other processes, paired by round: one fresh process of
each, back to back), then every machine's rows read together (``_read_together``: Holm's step-down
over a family fixed as every row with a best on both sides, each row on its own group-sequential
boundary, ``sequential.py``), and each row's word, the gates that may withhold it and what stands
beside it (``beside.py``).

A row is read at its latest look: the first ``looks[k]`` of its clean rounds, k the last look whose
rounds it has (a busy round is replaced and never counts). Its word:

* ``same speed`` where two one-sided tests at the run's declared margin (+-10% by default) show it:
  the interval at the look's equivalence level lies within 1/(1+x) .. 1+x (with the direction
  said where the difference interval also excludes 1);
* ``JAX faster`` / ``PyTorch faster`` where the interval at the row's Holm level excludes 1;
* otherwise ``no difference found`` (the interval holds 1 and allows no difference beyond +-20%)
  or ``cannot say``; such a row is open while its run may add rounds (``plan.py``), and it says
  what it would need, and whether it stopped as futile.
"""

from __future__ import annotations

import math
import statistics
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Sequence

from stackwars import commands, stats
from stackwars.report import format as fmt
from stackwars.verdict import figures, gate, sequential
from stackwars.verdict.beside import bound, eager_of, energy, memory, why
from stackwars.verdict.choose import latest_processes, replay_kinds
from stackwars.verdict.choose import sides as choose_sides
from stackwars.verdict.plan import said_no_top_up
from stackwars.verdict.words import DECIDED, FRAMEWORKS, NO_DIFFERENCE, REPLAY_KINDS, SAME, inside_band, title


def verdicts(rows: Iterable[Mapping[str, Any]], profiles: Sequence[Mapping[str, Any]] = (),
             anatomy: Sequence[Mapping[str, Any]] = (), threshold: float | None = None,
             min_processes: int = stats.MIN_PROCESSES, lean: bool = False, db: str | None = None
             ) -> list[dict[str, Any]]:
    """One verdict per machine x workload x preset x phase x device x dtype (x overrides that
    change the computation, x matmul precision; on CUDA x graph replay, ``replay_kinds``), from
    flat cell rows (``store.results.rows``), one row per process. ``profiles`` / ``anatomy``:
    rows of report/profiles.py, for the why. ``threshold``: the margin of "same speed" (None: the
    one each run declared, ``run --margin``). Each row is built in named steps: its sides (each
    framework's best, chosen on one process a candidate), the command that measures it again, its
    deciding rounds (the chosen cells' other processes); then every machine's rows are read
    together (``_read_together``), and each row's decision, the gates that may withhold it and
    what stands beside it follow. ``lean``: every word and level as the full rows have them, without
    the figures shown beside (the bootstraps of each cell's interval and of the unpaired ratio): what
    a run's next look reads, many times a run. ``db``: where the runs are stored, named in the command
    that resumes a run whose row is still open (None: the default database)."""
    rows = latest_processes(rows)
    prof = {str(p["cell"]).split("#r")[0]: p for p in profiles}
    anat = {str(a["cell"]).split("#r")[0]: a for a in anatomy}
    groups: OrderedDict[tuple, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        groups.setdefault(row_key(r), []).append(r)
    built: list[tuple[dict[str, Any], dict]] = []
    for key, group in groups.items():
        combined = figures.combine_repeats(group, lean=lean)
        by_backend = {(r["backend"], figures.variant(r)[1]): r for r in combined}
        for kind, cells in replay_kinds(combined, key[3]):
            row = _base_row(key, group, kind)
            best, sides, shadowed, missing = choose_sides(row, cells, by_backend, kind)
            _command(row, best, sides, shadowed, by_backend, min_processes)
            _beside_always(row, best, cells, prof, anat)
            if missing:
                _cannot_say(row, missing, combined, kind)
            else:
                row["_deciding"] = _deciding(row, best, min_processes, lean)
            built.append((row, best))
    _read_together([row for row, _ in built])
    for row, best in built:
        if "_deciding" in row:
            margin = threshold if threshold is not None else _margin(best)
            _decided(row, best, margin, min_processes, db)
        said_no_top_up(row)
    return [row for row, _ in built]


def _margin(best: Mapping[str, Mapping[str, Any]]) -> float:
    """The margin of "same speed" the row's run declared (the narrower of the two cells' runs)."""
    given = [float(best[fw]["margin"]) for fw, _ in FRAMEWORKS if best[fw].get("margin") is not None]
    return min(given) if given else stats.MARGIN


def looks_of(cells: Sequence[Mapping[str, Any]], min_processes: int = stats.MIN_PROCESSES) -> tuple[int, ...]:
    """The looks of the run the cells were measured in: its --processes rounds (never fewer than a
    verdict needs), then every sequential.LOOK_STEP more, up to its --max-processes."""
    first = max([int(c.get("processes_planned") or 0) for c in cells] + [min_processes])
    caps = [int(c["max_processes"]) for c in cells if c.get("max_processes")]
    return sequential.schedule(first, max(caps) if caps else None)


def _deciding(row: dict[str, Any], best: Mapping[str, Mapping[str, Any]], min_processes: int,
              lean: bool = False) -> dict[str, Any]:
    """What decides a row with a best on each side: each chosen cell's clean processes that did not
    choose, paired by round (the same process number of one run: one fresh process of each, adjacent
    in time) where both cells come from one run; the look those rounds reach (its first ``looks[k]``
    rounds are read; one beyond waits for the next look), and both figures' comparisons at any
    confidence (``compare_at``)."""
    deciding = {fw: _deciding_processes(best[fw], row.get(f"{fw}_chosen_on")) for fw, _ in FRAMEWORKS}
    same_run = best["torch"].get("run_id") == best["jax"].get("run_id")
    looks = looks_of([best["torch"], best["jax"]], min_processes)
    measured = sorted(set(deciding["torch"]) & set(deciding["jax"])) if same_run else []
    n_all = len(measured) if same_run else min(len(deciding["torch"]), len(deciding["jax"]))
    look = sequential.look_at(n_all, looks)
    use = looks[look] if look >= 0 else n_all
    rounds = measured[:use]
    # a round whose two processes were measured in different sessions of the run (an interruption, then a
    # resume, between them): still a pair of fresh processes, no longer adjacent in time (said in its words)
    sessions = {fw: _process_sessions(best[fw]) for fw, _ in FRAMEWORKS}
    split = [k for k in rounds if None not in (a := sessions["torch"].get(k), b := sessions["jax"].get(k)) and a != b]
    ratios = [statistics.median(deciding["jax"][k]) / statistics.median(deciding["torch"][k]) for k in rounds]
    read = {fw: dict(sorted(deciding[fw].items())[:use]) for fw, _ in FRAMEWORKS}
    if same_run:
        read = {fw: {k: deciding[fw][k] for k in rounds} for fw, _ in FRAMEWORKS}
    torch_p, jax_p = (list(read[fw].values()) for fw, _ in FRAMEWORKS)
    for fw, _ in FRAMEWORKS:  # the side's figure: what decided it, not the choice
        if lean and read[fw]:
            h = stats.Hierarchical(stats.geometric_mean([statistics.median(x) for x in read[fw].values()]), None, None,
                                   len(read[fw]), (), 0.0)
        else:
            h = stats.hierarchical(list(read[fw].values())) if read[fw] else None
        row.update({f"{fw}_s": h.estimate if h else None, f"{fw}_ci_low_s": h.ci_low if h else None,
                    f"{fw}_ci_high_s": h.ci_high if h else None, f"{fw}_processes": len(read[fw]),
                    f"{fw}_decided_on": sorted(read[fw])})
    row["processes"] = row["processes_used"] = len(rounds) if same_run else min(len(torch_p), len(jax_p))
    row["rounds_measured"] = n_all
    row["chosen_on"] = {"design": "choose on one process a candidate (its first clean one), decide on the chosen "
                                  "cells' other processes",
                        **{fw: row.get(f"{fw}_chosen_on") for fw, _ in FRAMEWORKS},
                        "decided_on": {"rounds": rounds if same_run else None,
                                       "rounds_split": split if same_run else None,
                                       **{fw: sorted(read[fw]) for fw, _ in FRAMEWORKS}}}
    # what a round of the two costs: the median wall time of each chosen cell's processes, summed
    walls = [statistics.median(best[fw]["process_walls"]) for fw, _ in FRAMEWORKS if best[fw].get("process_walls")]
    row["round_s"] = sum(walls) if len(walls) == 2 else None

    def unpaired(confidence: float) -> stats.Comparison | None:
        if lean and same_run:  # shown beside the paired figure, never deciding it
            return None
        return stats.compare(torch_p, jax_p, confidence) if torch_p and jax_p else None

    def paired(confidence: float) -> stats.Comparison | None:
        return stats.compare_paired(ratios, confidence) if ratios else None

    return {"design": "rounds" if same_run else "separate runs", "rounds": rounds, "ratios": ratios, "split": split,
            "n": n_all, "look": look, "looks": looks, "paired": same_run,
            "allowed": figures.rounds_allowed([best["torch"], best["jax"]]),
            "unpaired": unpaired, "paired_at": paired, "compare_at": paired if same_run else unpaired}


def _read_together(rows: Sequence[dict[str, Any]]) -> None:
    """Every machine's rows with a best on both sides read together (sequential.step_down: Holm's
    step-down over that fixed family, each row on its own group-sequential boundary), so that naming
    any false winner among a table's rows, over all their looks, stays within 5%; each row keeps the
    level it was read at. A row before its first look is in the family and never shown to differ."""
    for machine in dict.fromkeys(r["machine"] for r in rows):
        family = [r for r in rows if r["machine"] == machine and "_deciding" in r]
        reads = [sequential.Read(r["_deciding"]["look"], r["_deciding"]["looks"], r["_deciding"]["paired"])
                 for r in family]
        found = sequential.step_down(reads, lambda i, confidence: family[i]["_deciding"]["compare_at"](confidence))
        for r, (confidence, c, step) in zip(family, found):
            r["_read"] = {"confidence": confidence, "c": c, "step": step, "family": len(family),
                          "share": stats.VERDICT_ALPHA / max(1, len(family) - (step or 0))}


def _decided(row: dict[str, Any], best: Mapping[str, Any], margin: float, min_processes: int,
             db: str | None = None) -> None:
    """A row with a best on each side: the decision at the level it was read at, the gates that
    may withhold it, what it would need where it stays open, and what stands beside it."""
    c, verdict, reason, tag = _decide(row, best, margin)
    verdict, reason, tag = _gates(row, c, verdict, reason, tag, margin)
    row["tie_threshold"] = margin
    if c is not None and verdict in (SAME, NO_DIFFERENCE):
        row["tie_within"] = stats.tie_bound(c)
    if c is not None:
        _beside_decided(row, best, c, margin, min_processes)
    row.update(verdict=verdict, reason=reason, reason_tag=tag)
    _open(row, db)


def _decide(row: dict[str, Any], best: Mapping[str, Any], margin: float
            ) -> tuple[stats.Comparison | None, str, str, str | None]:
    """The row's ratio and CI at the level it was read at (``_read_together``), and its word: the
    same speed where both one-sided tests at ``margin`` pass (the interval at the look's
    equivalence level within the margin), a winner where the interval at the row's level excludes
    1, else no difference found or cannot say. From its rounds (paired: each round's ratio of the
    two chosen cells' process medians, Student's t over rounds) where both cells come from one run,
    else from the two sets of processes (unpaired); the other figure beside it, at the same level."""
    d, read = row.pop("_deciding"), row.pop("_read")
    confidence, c = read["confidence"], read["c"]
    # both sides timed in one mode (harness/timer.py): a ratio of a latency to a throughput figure
    # compares two ways of timing, not two programs
    modes_of = {fw: best[fw].get("timing_modes") or ["throughput"] for fw, _ in FRAMEWORKS}
    modes = sorted(set(modes_of["torch"]) | set(modes_of["jax"]))
    row["timing"] = modes[0] if len(modes) == 1 else "unlike: " + " / ".join(
        "+".join(modes_of[fw]) for fw, _ in FRAMEWORKS)
    row["_modes"] = modes_of
    u, p = d["unpaired"](confidence), d["paired_at"](confidence) if d["paired"] else None
    row["unpaired"] = (None if u is None else
                       {"ratio": u.ratio, "ci_low": u.ci_low, "ci_high": u.ci_high, "confidence": confidence,
                        "processes": [row["torch_processes"], row["jax_processes"]]})
    row["paired"] = (None if p is None else
                     {"design": "rounds", "rounds": len(d["rounds"]), "ratio": p.ratio, "ci_low": p.ci_low,
                      "ci_high": p.ci_high, "confidence": confidence})
    looks, k = d["looks"], d["look"]
    e_conf = sequential.equivalence_confidence(max(k, 0), looks, paired=d["paired"])
    e = d["compare_at"](e_conf)
    row["sequence"] = {"looks": list(looks), "look": k + 1,
                       "rounds": len(d["rounds"]) if d["paired"] else row["processes"],
                       "rounds_split": len(d["split"]) if d["paired"] else None,
                       "rounds_measured": d["n"], "share": read["share"], "logs": [math.log(x) for x in d["ratios"]],
                       "equivalence": None if e is None else {"ratio": e.ratio, "ci_low": e.ci_low,
                                                               "ci_high": e.ci_high, "confidence": e_conf},
                       "difference": None if c is None else {"ratio": c.ratio, "ci_low": c.ci_low,
                                                             "ci_high": c.ci_high, "confidence": confidence},
                       "paired": d["paired"], "allowed": d["allowed"]}
    # the look counted from 1, as the text says it ("look 2 of at most 7")
    row.update(confidence=confidence, look=k + 1, looks=len(looks),
               design="paired (rounds)" if d["paired"] else "unpaired (separate runs)",
               read_with={"rows": read["family"], "step": read["step"]})
    if c is None:
        row.update(ratio=None, ci_low=None, ci_high=None)
        return None, "cannot say", "no process of a chosen cell is left to decide on", None
    adjacent = ("adjacent in time" if not d["split"] else
                f"adjacent in time but {len(d['split'])} split by an interruption (measured before and after a resume)"
                if len(d["split"]) < len(d["rounds"]) else "each split by an interruption (before and after a resume)")
    how = (f" (paired: {len(d['rounds'])} rounds of separate processes, one of each chosen cell {adjacent}"
           if d["paired"] else
           f" (unpaired: the two cells come from different runs, so their processes pair no rounds: {row['processes']} "
           f"processes a side")
    how += (f"; read with {read['family']} row(s) of this machine, Holm's step-down" if read["family"] > 1
            and read["step"] is not None else "")
    how += (f"; look {k + 1} of at most {len(looks)} ({_rounds_text(looks)} rounds), {stats.VERDICT_ALPHA:.0%} "
            f"spent over them on an O'Brien-Fleming boundary" if len(looks) > 1 and k >= 0 else "") + ")"
    same = e is not None and k >= 0 and sequential.within(e, margin)
    if same:
        row.update(ratio=e.ratio, ci_low=e.ci_low, ci_high=e.ci_high, confidence=e_conf)
        shown = inside_band(c) if (c.ci_low > 1.0 or c.ci_high < 1.0) else None
        return e, SAME, (f"{fmt.level(e_conf)} CI {e.ci_low:.3f}-{e.ci_high:.3f} lies within ±{margin:.0%}: both "
                         f"one-sided tests pass, the same speed within ±{margin:.0%}"
                         + (f" ({shown}, {fmt.level(confidence)} CI {c.ci_low:.3f}-{c.ci_high:.3f})" if shown else "")
                         + how), None
    row.update(ratio=c.ratio, ci_low=c.ci_low, ci_high=c.ci_high)
    ci = f"{fmt.level(confidence)} CI {c.ci_low:.3f}-{c.ci_high:.3f}"
    if c.ci_high < 1.0 or c.ci_low > 1.0:
        winner = "JAX faster" if c.ci_high < 1.0 else "PyTorch faster"
        faster = 1 / c.ratio if c.ci_high < 1.0 else c.ratio
        return c, winner, f"{ci}; {faster:.2f}x" + how, None
    if stats.tie_bound(c) <= stats.NOISY_BOUND:
        return c, NO_DIFFERENCE, (f"{ci} holds 1 but reaches past ±{margin:.0%}: no difference found, and none larger "
                                  f"than {stats.tie_bound(c):.0%} either way" + how), None
    return c, "cannot say", (f"{ci} holds 1 but allows a difference of {stats.tie_bound(c):.0%} (more than "
                             f"{stats.NOISY_BOUND:.0%}): too wide to decide (noisy)" + how), "noisy"


def _rounds_text(looks: Sequence[int]) -> str:
    """'4, 6, ..., 16' for the looks' rounds."""
    looks = list(looks)
    return ", ".join(map(str, looks)) if len(looks) <= 3 else f"{looks[0]}, {looks[1]}, ..., {looks[-1]}"


def _gates(row: dict[str, Any], c: stats.Comparison | None, verdict: str, reason: str, tag: str | None,
           margin: float) -> tuple[str, str, str | None]:
    """What withholds a decision the ratio alone would make: a candidate measured only while busy
    that might be a side's best (the side's best is not known yet), fewer clean rounds than the
    row's first look, the two sides timed unlike."""
    modes_of = row.pop("_modes")
    shadows = [x for fw, _ in FRAMEWORKS for x in row[f"{fw}_busy_candidates"]]
    if shadows:
        return "cannot say", (
            "; ".join(f"{x['backend']} was measured only while the machine was busy ({x['why']}) and its "
                      f"fastest process, {fmt.seconds(x['fastest_busy_s'])}, beat the side's best"
                      for x in shadows)
            + f"; it would read without it: {verdict} ({reason})"), "busy machine"
    seq = row.get("sequence") or {}
    first = (seq.get("looks") or [stats.MIN_PROCESSES])[0]
    if seq.get("look", 0) < 1:
        excluded = row["processes_busy"]
        paired = row.get("design", "").startswith("paired")
        return "cannot say", (
            (f"{row['processes']} clean round(s) of the two chosen cells" if paired else
             f"{row['torch_processes']} PyTorch / {row['jax_processes']} JAX clean process(es)")
            + (" after the processes that chose them" if row.get("torch_chosen_on") or row.get("jax_chosen_on")
               else "")
            + (f" ({excluded} measured while the machine was busy, left out)" if excluded else "")
            + f"; a verdict needs {first} clean {'rounds' if paired else 'ones a side'}, its first look (run "
              f"--processes {max(first, row['processes'] + excluded + 1)}): fewer understate the spread between "
              f"launches"
            + (f"; it would read: {verdict} ({reason})" if c is not None and tag != "noisy" else "")), \
            "busy machine" if excluded else "too few processes"
    if row["timing"].startswith("unlike"):
        return "cannot say", (
            f"the two sides were not timed alike: PyTorch's processes in {' and '.join(modes_of['torch'])}, "
            f"JAX's in {' and '.join(modes_of['jax'])} mode (latency: one call a sync; throughput: blocks "
            f"of back-to-back calls); measure them again in one run (its --timing applies to every cell)"
            f"; it would read: {verdict} ({reason})"), "unlike timing"
    return verdict, reason, tag


def _open(row: dict[str, Any], db: str | None = None) -> None:
    """Where an undecided row stands in its run's design: ``open`` (its next look may add rounds),
    ``futile`` (its chance of deciding a 15% difference by the cap, and of showing the same speed,
    are both under 10%: it may stop, sequential.futile), ``capped`` (its last look is read); and,
    for an open row, what it would need: the rounds at which, its estimate and spread taken as the
    truth, it would decide half the time, about how long they take (its two cells' processes so far,
    a round each), and the command that measures them (``more``: a run stopped by its budget or
    interrupted goes on with ``--resume``, on the same boundaries)."""
    seq = row.get("sequence")
    if not seq or row["verdict"] in DECIDED:
        if seq:
            seq["state"] = "decided"
        return
    looks, k, logs = seq["looks"], seq["look"] - 1, seq["logs"]
    if not seq["paired"] or row.get("reason_tag") in ("busy machine", "unlike timing"):
        seq["state"] = "open" if k < len(looks) - 1 else "capped"
        return
    ch = sequential.chances(logs, looks, seq["share"], row["tie_threshold"]) if k >= 0 else None
    seq["chances"] = ch
    if k >= len(looks) - 1 or (k + 1 < len(looks) and looks[k + 1] > seq.get("allowed", looks[-1])):
        seq["state"] = "capped"
    elif sequential.futile(ch, seq["rounds"]):
        seq["state"] = "futile"
        row["reason"] += (f"; its chance of deciding a {sequential.FUTILITY_DIFFERENCE:.0%} difference by {looks[-1]} "
                          f"rounds is {ch['difference']:.0%}, and of showing the same speed {ch['same']:.0%}: no more "
                          f"rounds (futility)")
    else:
        seq["state"] = "open"
    need = sequential.rounds_needed(logs, looks, seq["share"], row["tie_threshold"], after=k) if k >= 0 else looks[0]
    rounds = max(0, (need if need is not None else looks[-1]) - seq["rounds_measured"])
    seconds = None if row.get("round_s") is None else rounds * row["round_s"]
    seq["would_need"] = None if need is None else {"rounds": rounds, "seconds": seconds}
    if seq["state"] != "open" or len(row.get("runs") or ()) != 1:
        return
    # a budget for the resumed session: the rounds, and the half minute a session takes to start its servers
    budget = 10 * math.ceil(((seconds or 60.0) * 1.2 + 30) / 10)
    command = f"stackwars run --resume {row['runs'][0]} --budget {budget}" + commands.db_flag(db)
    row["more"] = {"rounds": rounds, "seconds": seconds, "command": command}
    took = f", about {seconds:.0f} s" if seconds is not None else ""
    row["reason"] += ("; still open: " + (f"it would need about {rounds} more round(s){took}, its estimate and spread "
                                          f"taken as the truth" if need is not None else
                      f"at its estimate and spread no look up to its cap of {looks[-1]} rounds would decide half "
                      f"the time; its {rounds} round(s) left{took}") + f": {command}")


def _command(row: dict[str, Any], best: Mapping[str, Any], sides: Mapping[str, list], shadowed: Mapping[str, list],
             by_backend: Mapping[tuple, Mapping[str, Any]], min_processes: int) -> None:
    """The command that measures this row again, on this machine: the backends that decided it
    (or, where a side has no best, every one that side measured), with their options (the eager
    counterpart of a compiled best too: the row's compile break-even is drawn against it), and
    the looks a fresh run of it reads its verdict at."""
    deciding = [r for fw, _ in FRAMEWORKS
                for r in ([best[fw], *shadowed[fw], *eager_of(best[fw], by_backend)] if best[fw] is not None
                          else sides[fw])]
    # the rounds the run that measured it planned after its choice (a stored row without them: its processes)
    planned = max((r.get("processes_planned") or 0 for r in deciding), default=0)
    n = max(min_processes, planned or max((r.get("processes") or 1 for r in deciding), default=1))
    row["command"] = commands.run_command(deciding, n) if deciding else None
    # the looks that command's own verdicts would read at: a fresh run starts its error budget again
    row["command_looks"] = list(sequential.schedule(n, stats.default_max_processes(n))) if deciding else None


def self_check(rows: Iterable[Mapping[str, Any]], threshold: float | None = None) -> list[dict[str, Any]]:
    """An A/A check of the verdict's deciding design on this machine's own data, the same program on
    both sides: each cell's clean processes after its first (the one a verdict's choice reads), in
    pairs of neighbours in time (2 and 3, 4 and 5, ...: ``run --aa`` measures them back to back, as a
    verdict's round measures its two cells), each pair's ratio one round, read as a verdict reads its
    rounds: at the latest look the pairs reach, on the run's boundary, with the same speed by the
    two one-sided tests at its margin; alone (no other row shares its error, so the check is not made
    easier by Holm's step-down). A cell whose pairs reach no look yet is ``open`` with "cannot say";
    one still undecided before its cap is ``open`` too (``run --aa`` measures more pairs of it:
    plan.aa_more). Anything but the same speed is a false verdict, no difference found, or (noisy) no
    verdict."""
    out = []
    by_run: OrderedDict[Any, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:  # each run on its own: its processes were interleaved with each other
        by_run.setdefault(r.get("run_id"), []).append(r)
    for run_rows in by_run.values():
        for group in figures.group_rows(run_rows, by_machine=True).values():
            by: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
            for r in group:
                by.setdefault(figures.label(r), []).append(r)
            for label, procs in by.items():
                pairs_, measured, left = aa_pairs(procs)
                if not measured:
                    continue
                looks = looks_of(procs)
                margin = threshold if threshold is not None else min(
                    [float(r["margin"]) for r in procs if r.get("margin") is not None] or [stats.MARGIN])
                k = sequential.look_at(len(pairs_), looks)
                used = pairs_[:looks[k]] if k >= 0 else pairs_
                ratios = [statistics.median(b["steady_samples"]) / statistics.median(a["steady_samples"])
                          for a, b in used]
                confidence = sequential.confidence(max(k, 0), looks)
                e_conf = sequential.equivalence_confidence(max(k, 0), looks)
                nothing = stats.Comparison(math.nan, math.nan, math.nan, False) if not ratios else None
                c = nothing or stats.compare_paired(ratios, confidence)
                e = nothing or stats.compare_paired(ratios, e_conf)
                if k < 0 or len(ratios) < 2:
                    word, shown, shown_conf = "cannot say", c, confidence
                elif sequential.within(e, margin):
                    word, shown, shown_conf = SAME, e, e_conf
                elif c.ci_low > 1.0 or c.ci_high < 1.0:
                    word, shown, shown_conf = ("JAX faster" if c.ci_high < 1.0 else "PyTorch faster"), c, confidence
                else:
                    word = NO_DIFFERENCE if stats.tie_bound(c) <= stats.NOISY_BOUND else "cannot say"
                    shown, shown_conf = c, confidence
                logs = [math.log(x) for x in ratios]
                ch = sequential.chances(logs, looks, stats.VERDICT_ALPHA, margin) if k >= 0 else None
                state = ("decided" if word in DECIDED else "capped" if k >= len(looks) - 1
                         else "futile" if sequential.futile(ch, len(ratios)) else "open")
                out.append({"run": group[0].get("run_id"), "machine": group[0].get("machine"),
                            "design": "paired (rounds)", "cell": str(procs[0]["cell_key"]).split("#r")[0],
                            "table": title({**group[0], "matmul_precision": None, "overrides": ""}),
                            "backend": label, "processes": [len(used), len(used)], "pairs_measured": measured,
                            "pairs_counted": len(pairs_), "pairs_left_out": left,
                            **({"ratio": shown.ratio, "ci_low": shown.ci_low, "ci_high": shown.ci_high} if ratios
                               else {"ratio": None, "ci_low": None, "ci_high": None}),
                            "confidence": shown_conf, "look": k + 1, "looks": list(looks), "margin": margin,
                            "word": word, "state": state})
    return out


AA_LEFT_OUT = ("busy", "failed", "split by an interruption")


def aa_pairs(procs: Sequence[Mapping[str, Any]]) -> tuple[list[tuple[Mapping[str, Any], Mapping[str, Any]]], int,
                                                          dict[str, int]]:
    """A cell's back-to-back pairs as ``run --aa`` measured them (orchestrate._back_to_back): process
    numbers 2 and 3, 4 and 5, ... (repeats 1 and 2, 3 and 4, ...) after its first, the one its choice
    read. A pair counts where both of its processes are clean and were measured in one session of the
    run; never a pair made up of neighbours in a list from which a busy process was dropped (2 and 3
    would be one pair's second and the next pair's first, another cell's pair between them). Returns
    the pairs that count, the pairs measured (both processes stored), and those left out by reason
    (``AA_LEFT_OUT``)."""
    clean = {id(r) for r in gate.split(procs)[0] if r["status"] == "ok"}
    by_repeat = {int(r.get("repeat") or 0): r for r in procs}
    out, measured, left = [], 0, dict.fromkeys(AA_LEFT_OUT, 0)
    for j in range(1, max(by_repeat, default=0) + 1, 2):
        a, b = by_repeat.get(j), by_repeat.get(j + 1)
        if a is None or b is None:
            continue
        measured += 1
        if any(r["status"] != "ok" for r in (a, b)):
            left["failed"] += 1
        elif id(a) not in clean or id(b) not in clean:
            left["busy"] += 1
        elif None not in (a.get("session"), b.get("session")) and a.get("session") != b.get("session"):
            left["split by an interruption"] += 1
        else:
            out.append((a, b))
    return out, measured, {k: n for k, n in left.items() if n}


def row_key(row: Mapping[str, Any]) -> tuple:
    return (*figures.group_key(row, machine=True), row.get("matmul_precision"))


def _cannot_say(row: dict[str, Any], missing: Sequence[str], combined: Sequence[Mapping[str, Any]],
                kind: bool | None) -> None:
    """A row with a side that has no best: no ratio, and the reason's tag says which gap it is."""
    busy_side = any(row[f"{fw}_busy_candidates"] for fw, _ in FRAMEWORKS if row.get(f"best_{fw}") is None)
    kind_gap = kind is not None and not busy_side and any(
        row.get(f"best_{fw}") is None and any(r.get("framework") == fw for r in combined) for fw, _ in FRAMEWORKS)
    row.update(ratio=None, ci_low=None, ci_high=None, verdict="cannot say", reason="; ".join(missing),
               reason_tag="busy machine" if busy_side else "not best against best" if kind_gap else "one side missing")


def _process_sessions(cell: Mapping[str, Any]) -> dict[int, Any]:
    """A cell's clean processes by process number -> the session each was measured in (None: not known)."""
    return {int(k if k is not None else i): sid for i, (k, sid) in
            enumerate(zip(cell.get("process_repeats") or [], cell.get("process_sessions") or []))}


def _deciding_processes(cell: Mapping[str, Any], chosen_on: Mapping[str, Any] | None) -> dict[int, list[float]]:
    """A chosen cell's clean processes that decide, by process number: all of them where its side
    chose nothing (one candidate), else all but the one that chose it."""
    chose = (chosen_on or {}).get("process")
    return {int(k if k is not None else i): list(s)
            for i, (k, s) in enumerate(zip(cell.get("process_repeats") or [], cell.get("process_samples") or []))
            if chose is None or k != chose}


def _base_row(key: tuple, group: Sequence[Mapping[str, Any]], kind: bool | None) -> dict[str, Any]:
    workload, preset, phase, device, dtype, over, machine, precision = key
    return {"machine": machine, "workload": workload, "preset": preset, "phase": phase, "device": device,
            "dtype": dtype, "overrides": over, "matmul_precision": precision,
            "replay": REPLAY_KINDS.get(kind) if kind is not None else None,
            "runs": sorted({str(r.get("run_id")) for r in group})}


def _beside_always(row: dict[str, Any], best: Mapping[str, Any], combined: Sequence[Mapping[str, Any]],
                   prof: Mapping[str, Any], anat: Mapping[str, Any]) -> None:
    """What stands beside a row whether or not it decides: the why from profiles or the memory
    anatomy, and the memory ratio (with whether it clears the noise: ``memory``)."""
    row["why"] = why(best, prof, anat)
    row.update(memory(best.get("torch"), best.get("jax")))
    row["memory_counter"] = next((r.get("peak_memory_counter") for r in combined if r.get("peak_memory_counter")),
                                 None)


def _beside_decided(row: dict[str, Any], best: Mapping[str, Any], c: stats.Comparison, threshold: float,
                    min_processes: int) -> None:
    """Beside a row with a ratio: on CUDA the device's own clock where both sides have one
    (where it disagrees with the wall clock, host time is part of the verdict, and the row says
    so), why a best cell's processes disagree (verdict/spread.py), and the energy ratio."""
    dt, dj = best["torch"].get("device_time_s"), best["jax"].get("device_time_s")
    if dt and dj:
        row["device_ratio"] = dj / dt
        if abs(math.log(row["device_ratio"]) - math.log(c.ratio)) > math.log1p(threshold):
            row["why"] = "; ".join(filter(None, (
                f"device time JAX/PyTorch {row['device_ratio']:.3f} ({fmt.seconds(dj)} / {fmt.seconds(dt)}) "
                f"against {c.ratio:.3f} on the wall clock: host time (launches, Python) differs",
                row.get("why"))))
    for fw, _ in FRAMEWORKS:  # where a best cell's processes disagree, why (verdict/spread.py)
        row[f"{fw}_spread_why"] = best[fw].get("spread_why")
    row.update(bound(best, row.get("replay")))
    row.update(energy(best["torch"], best["jax"], row["confidence"], min_processes))
