"""The verdict as a reader sees it: the table, the glance, the Markdown, the forest plot.

Every row is built by ``stackwars.verdict`` (choose, decide, plan); this module only draws the
rows it returns, in words defined in ``stackwars/verdict/words.py``, and decides nothing (a test
fails if deciding code comes back here: tests/test_layers.py).

    stackwars verdict                     # the latest run of cells
    stackwars verdict RUN_A RUN_B -f json # these runs; the latest processes of each cell
"""

from __future__ import annotations

import io
import re
import textwrap
from collections import OrderedDict
from typing import Any, Mapping, Sequence

from stackwars import stats
from stackwars.commands import db_flag
from stackwars.report import format as fmt
from stackwars.verdict.beside import BUSY_PAYS, parity_text
from stackwars.verdict.words import FRAMEWORKS, NO_DIFFERENCE, SAME, VERDICTS, inside_band, title


# ---- presentation ----------------------------------------------------------------------------
COLUMNS = ("workload", "best PyTorch", "best JAX", "JAX/PyTorch (CI)", "verdict", "procs · timing", "compile pays "
           "(PyTorch / JAX)", "memory JAX/PyTorch", "parity (PyTorch / JAX)", "why", "energy JAX/PyTorch (CI)")


OPTIONAL = {  # columns that only some runs fill: where every row of a table is a dash, left out with why
    "why": lambda rows: "why: no profile or memory anatomy of the best cells (`stackwars run ... --profile N` adds "
                        "them)",
    "energy JAX/PyTorch (CI)": lambda rows: "energy: not measured (" + (next(
        (str(r["energy_why"]) for r in rows if r.get("energy_why")), "no energy figure in the records")) + ")",
}


def shown(rows: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[str]]:
    """The columns (indices into COLUMNS, as ``cells`` gives them) a table of ``rows`` shows, and a
    line for each optional column left out because it is a dash on every row: a column empty on
    every row says nothing, and its absence is said once instead."""
    keep, absent = [], []
    texts = [cells(r) for r in rows]
    for i, col in enumerate(COLUMNS):
        if col in OPTIONAL and texts and all(t[i] == fmt.DASH for t in texts):
            absent.append(OPTIONAL[col](rows))
        else:
            keep.append(i)
    return keep, absent


STYLE = {"JAX faster": "bold cyan", "PyTorch faster": "bold magenta", SAME: "green", NO_DIFFERENCE: "green",
         "cannot say": "yellow"}


LEGEND = ("every figure from clean processes only: a process is busy, and decides nothing, when others took over "
          "{c:.0%} of its CPUs or the machine's canary read off its run's by more than its noise (at least {f:.0%}); "
          "best: the fastest backend of the framework whose cells ran ok and passed parity, chosen on one process "
          "a candidate (its first clean one), the row decided on the chosen cells' other processes (time: geometric "
          "mean of their medians); JAX/PyTorch < 1: JAX faster; ratio and CI from rounds (one fresh process of each "
          "chosen cell, back to back): the geometric mean of the rounds' ratios, Student's t over rounds, read at "
          "looks ({looks} clean rounds; a busy round is replaced, never counted), each at the level its look may "
          "spend ({a:.0%} over all looks and all rows of the machine, on an O'Brien-Fleming boundary, the rows read "
          "together by Holm's step-down); same speed: two one-sided tests at ±{t} pass (the CI shown, at its look's "
          "equivalence level, lies within ±{t}); no difference found (±x: the largest difference the CI allows): "
          "the CI holds 1 and reaches past ±{t}, within ±{n:.0%}; cannot say: fewer clean rounds than a first "
          "look (busy machine: busy ones left too few, or a backend measured only while busy might be a side's "
          "best), a CI too wide, a side with nothing that ran and passed, two sides timed unlike, or (on CUDA) "
          "no program of the row's kind on a side: not best against best; an undecided row stops at its cap, when "
          "its chance of deciding falls under {fc:.0%} (futility), or where the run's budget ends, and says what it "
          "would need; on CUDA each table has a row for the "
          "programs that replay CUDA graphs (PyTorch's CUDA graphs, XLA's command buffers) and one for those that "
          "do not, so that each ratio sets like against like; compile pays: calls until the "
          "framework's fastest compiled mode has paid for its first call against its eager mode (never: not faster; "
          "within noise: not significantly faster); memory: what each best added, the peak of one call after the "
          "steady window over the worker's baseline before its first call (compile, autotuning and the harness's "
          "copies behind it), median over clean processes (device allocator on a GPU; {mem}; XLA's from its memory "
          "analysis, its allocator's peak having no reset); no difference here: the two sides' processes overlap, "
          "or the difference is under {mb} MiB or {mf:.0%}; "
          "timing: how both sides' steady states were timed, one mode for the pair (throughput: blocks of 2+ "
          "back-to-back calls, one sync a block; latency: one call a sync); "
          "again: the command that measures a row again on this machine.")


def margins(rows: Sequence[Mapping[str, Any]], threshold: float | None = None) -> str:
    """The margin(s) of "same speed" the rows were read at, in words ("10%"; "5% or 10%")."""
    if threshold is not None:
        return f"{threshold:.0%}"
    found = sorted({float(r["tie_threshold"]) for r in rows if r.get("tie_threshold") is not None}) or [stats.MARGIN]
    return " or ".join(f"{m:.0%}" for m in found)


def looks_text(looks: Sequence[int] | None) -> str:
    """'4, 6, ..., 16' (the rounds of a run's looks)."""
    looks = list(looks or ())
    return ", ".join(map(str, looks)) if len(looks) <= 3 else f"{looks[0]}, {looks[1]}, ..., {looks[-1]}"


def _side(r: Mapping[str, Any], fw: str) -> str:
    if r.get(f"best_{fw}") is None:
        return fmt.DASH
    text = f"{r[f'{fw}_label']} {fmt.seconds(r[f'{fw}_s'])}"
    for x in r.get(f"{fw}_excluded") or ():
        text += f" (faster but out: {x['backend']} {fmt.seconds(x['seconds'])}, {x['why']})"
    return text


SHORT_PAYS = {"never pays: its steady state is not faster": "never",
              **{BUSY_PAYS.format(which=w): "cannot say (busy machine)" for w in ("the compiled", "the eager",
                                                                                         "the compiled and the eager")},
              "cannot say: the steady states differ by less than the noise": "within noise",
              "from the first call": "from call 1"}


def _pays_text(p: Mapping[str, Any]) -> str:
    if not p.get("compiled"):
        return p.get("verdict", fmt.DASH)
    verdict = p["verdict"]
    short = f"{p['calls']:,} calls" if p.get("calls") and p["calls"] > 1 else SHORT_PAYS.get(verdict, verdict)
    if verdict.endswith("was not measured"):  # "jax-jit cannot say (jax-eager not measured)"
        short = f"cannot say ({verdict.split(': ', 1)[1].split(',')[0]} not measured)"
    return f"{p['compiled']} {short}"


def cells(r: Mapping[str, Any]) -> list[str]:
    """The row's table cells as text (terminal, Markdown and the report page show these)."""
    ratio = fmt.interval(r.get("ratio"), r.get("ci_low"), r.get("ci_high"), r.get("confidence"))
    differs = ("" if r.get("memory_differs") else " (no difference here)" if r.get("memory_differs") is False
               else " (?)")
    mt, mj = r.get("torch_memory_added_bytes"), r.get("jax_memory_added_bytes")
    if r.get("memory_ratio") is not None:
        mem = f"{r['memory_ratio']:.2f}x" + differs
    elif mt is not None and mj is not None:  # no ratio (PyTorch's side added 0 B): the two figures, JAX's first
        mem = f"+{fmt.nbytes(mj)} / +{fmt.nbytes(mt)}" + differs
    else:
        mem = fmt.DASH
    parity = " / ".join(fmt.DASH if r.get(f"{fw}_one_sided") else parity_text(r.get(f"{fw}_parity"))
                        for fw, _ in FRAMEWORKS)
    verdict = r["verdict"] + (f" ({r['reason_tag']})" if r.get("reason_tag") else tie_text(r))
    procs = (str(r["processes"]) + (f" ({r['processes_busy']} busy left out)" if r.get("processes_busy") else "")
             + (f" · {r['timing']}" if r.get("timing") else "")
             + (" · paired rounds" if r.get("design") == "paired (rounds)" else ""))
    return [title(r), _side(r, "torch"), _side(r, "jax"), ratio, verdict, procs,
            " / ".join(fmt.DASH if r.get(f"{fw}_one_sided") else _pays_text(r[f"{fw}_pays"]) for fw, _ in FRAMEWORKS),
            mem, parity, r.get("why") or fmt.DASH, energy_text(r)]


def tie_text(r: Mapping[str, Any]) -> str:
    """" (within ±5%)" beside "same speed" (" (PyTorch 1-4% faster: within ±5%)" where the CI
    excludes 1); " (the CI allows ±8%)" beside "no difference found"."""
    if r.get("verdict") == SAME:
        shown = (inside_band(stats.Comparison(r["ratio"], r["ci_low"], r["ci_high"], True))
                 if r.get("ci_low") is not None else None)
        return f" ({shown + ': ' if shown else ''}within ±{r.get('tie_threshold', stats.MARGIN):.0%})"
    if r.get("verdict") == NO_DIFFERENCE and r.get("tie_within") is not None:
        return f" (the CI allows ±{r['tie_within']:.0%})"
    return ""


def energy_text(r: Mapping[str, Any]) -> str:
    """'0.912 (0.880-0.945, 96%): 1.21 mJ / 1.10 mJ a call', or a dash (the JSON says why)."""
    if r.get("energy_ratio") is None:
        return fmt.DASH
    joules = " / ".join(fmt.joules(r.get(f"{fw}_energy_j")) for fw, _ in FRAMEWORKS)
    return (f"{fmt.interval(r['energy_ratio'], r['energy_ci_low'], r['energy_ci_high'], r.get('confidence'))}: "
            f"{joules} a call")


def notes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the table cells abbreviate: why a row cannot decide, what was kept aside, and the
    processes a busy host would have left out that decided because it could not touch them."""
    out = []
    for r in rows:
        if r["verdict"] == "cannot say" or r.get("reason_tag") == "noisy":
            out.append(f"{title(r)}: {r['verdict']}: {r['reason']}")
        if r.get("measured"):
            out.append(f"{title(r)}: {r['measured']}")
        for fw, name in FRAMEWORKS:
            if r.get(f"{fw}_processes_kept"):
                out.append(f"{title(r)}: {r[f'{fw}_processes_kept']} of {name}'s processes {r[f'{fw}_kept_why']}")
    for fw, name in FRAMEWORKS:
        aside = [(r, x) for r in rows for x in r.get(f"{fw}_aside") or ()]
        if aside:
            which = "; ".join(f"{title(r)} {x['backend']} {fmt.seconds(x['seconds'])}" for r, x in aside)
            out.append(f"ran faster than {name}'s best own mode, but an analysis path ({name}'s program compiled by "
                       f"XLA: it compares programs, not frameworks), so not in the verdict: {which}")
        stand_in = [title(r) for r in rows if r.get(f"{fw}_analysis_path")]
        if stand_in:
            out.append(f"no own mode of {name} was measured, so its analysis path stands in (two programs on one "
                       f"compiler): {'; '.join(stand_in)}")
    return out


def fresh_levels_text(looks: Sequence[int] | None) -> str:
    """Where a row's "again" command reads its verdict: a fresh run starts its error budget again,
    whatever look this row was read at."""
    if not looks:
        return ""
    if len(looks) == 1:
        return f"a fresh run of it reads its verdict once, after {looks[0]} rounds, at {stats.VERDICT_ALPHA:.0%}"
    return (f"a fresh run of it reads its verdict at looks of {looks_text(looks)} rounds while undecided, "
            f"spending {stats.VERDICT_ALPHA:.0%} over them")


def shared_levels(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The level sentence of the rows' commands where it is the same for all of them (said once
    under the table, not on every row), else None."""
    texts = {fresh_levels_text(r.get("command_looks")) for r in rows if r.get("command")}
    return next(iter(texts)) if len(texts) == 1 and None not in texts else None


def command_cell(r: Mapping[str, Any], shared: str | None = None) -> str:
    """The row's command, as a table cell shows it, with the level a fresh run of it reads at
    (left out where it is ``shared``, said once for the table)."""
    if not r.get("command"):
        return fmt.DASH
    levels = fresh_levels_text(r.get("command_looks"))
    return f"`{r['command']}`" + (f" ({levels})" if levels and levels != shared else "")


def again(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Each row's command, under its title: what measures it again on this machine, and the
    level a fresh run of it reads its verdict at (once, after them, where every row's is one):
    (the title and the command, the words after it)."""
    out = []
    shared = shared_levels(rows)
    for r in rows:
        if r.get("command"):
            levels = fresh_levels_text(r.get("command_looks"))
            out.append((f"{title(r)}: {r['command']}", f"({levels})" if levels and levels != shared else ""))
    if out and shared:
        out.append(("", f"each command above: {shared}"))
    return out


def mixed_machines(cell_rows: Sequence[Mapping[str, Any]]) -> str | None:
    """A warning for each run whose cells ran on more than one kind of machine (an executor
    placed them on nodes of different CPUs or GPUs): its verdicts are kept apart, one per kind."""
    kinds: dict[str, set[str]] = {}
    for r in cell_rows:
        if r.get("machine"):
            kinds.setdefault(str(r.get("run_id")), set()).add(r["machine"])
    mixed = {run: sorted(k) for run, k in kinds.items() if len(k) > 1}
    if not mixed:
        return None
    return "; ".join(f"run {run}'s cells ran on {len(k)} kinds of machine ({' | '.join(k)}): their figures are "
                     f"not comparable, so each kind has its own tables and verdicts" for run, k in mixed.items())


def by_machine(rows: Sequence[Mapping[str, Any]]) -> "OrderedDict[str, list[Mapping[str, Any]]]":
    out: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        out.setdefault(r["machine"], []).append(r)
    return out


def legend(rows: Sequence[Mapping[str, Any]], threshold: float | None = None) -> str:
    counters = sorted({r["memory_counter"] for r in rows if r.get("memory_counter")})
    from stackwars.rules import RULES
    from stackwars.verdict.sequential import FUTILITY_CHANCE

    looks = next((r["sequence"]["looks"] for r in rows if (r.get("sequence") or {}).get("looks")), None)
    return LEGEND.format(t=margins(rows, threshold), n=stats.NOISY_BOUND, a=stats.VERDICT_ALPHA,
                         mb=stats.MEMORY_MIN_BYTES >> 20, mf=stats.MEMORY_MIN_FRACTION, fc=FUTILITY_CHANCE,
                         looks=looks_text(looks) if looks else looks_text(
                             range(stats.FIRST_LOOK, stats.MAX_ROUNDS + 1, stats.LOOK_STEP)),
                         c=RULES["contention_threshold"].value, f=RULES["canary_floor"].value,
                         mem="; ".join(counters) or "not measured")


def summary(rows: Sequence[Mapping[str, Any]]) -> str:
    counts = OrderedDict((v, sum(r["verdict"] == v for r in rows)) for v in VERDICTS)
    return f"{len(rows)} verdict(s): " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)


NARROW = 160  # below this many columns, a block of lines per verdict instead of the table


BRIEF_WIDTH = 100  # the brief verdict's lines are at most this wide, whatever the terminal
BRIEF_STACKED = 60  # narrower than this, a block of lines a row instead of the table's one line
BRIEF_MIN_WIDTH = 20  # the narrowest it lays out for (cli/common.MIN_COLUMNS: a narrower $COLUMNS is set aside)


BRIEF_HEADER = ("workload", "best PyTorch", "best JAX", "JAX/PyTorch (CI)", "verdict")


def _brief_workload(r: Mapping[str, Any]) -> str:
    """The row's workload in words, without what the machine heading says (device)."""
    extra = [r["dtype"]] if r.get("dtype") not in (None, "float32") else []
    extra += [str(r["overrides"])] if r.get("overrides") else []
    extra += [f"{r['matmul_precision']} matmuls"] if r.get("matmul_precision") not in (None, "float32") else []
    extra += [str(r["replay"])] if r.get("replay") else []
    return " ".join([str(r["workload"]), str(r["preset"]), str(r["phase"]), *extra])


def _brief_side(r: Mapping[str, Any], fw: str) -> str:
    """'compile 22.84 ms': the side's best mode (its column names the framework) and its time."""
    best = r.get(f"best_{fw}")
    if best is None:
        return fmt.DASH
    mode = best.split("-", 1)[1] if best.startswith(("torch-", "jax-")) else best
    return f"{mode} {fmt.seconds(r[f'{fw}_s'])}"


def _brief_note(r: Mapping[str, Any]) -> str | None:
    """A row's short note: why it cannot decide, what a tie allows, a faster mode kept out; None
    where the verdict's words say it all."""
    parts = []
    reason = str(r.get("reason") or "")
    by_design = re.search(r"\S+ is written in \w+ only: there is no other side to compare", reason)
    if by_design and (r.get("torch_one_sided") or r.get("jax_one_sided")):  # the structural reason first
        parts.append(f"{r['verdict']} (one side missing): {by_design.group(0)}")
    elif r["verdict"] == "cannot say" or r.get("reason_tag"):
        first = reason.split("; ")[0].rstrip(".")
        # the glance states no rule's bound: --explain and the docs do (words the tag repeats, cut)
        first = re.sub(r" \(more than [^)]*\)| \((noisy|busy machine)\)$", "", first)
        first = first.replace(" holds 1 but allows a difference of ", " spans 1 and a difference of ")
        parts.append(r["verdict"] + (f" ({r['reason_tag']})" if r.get("reason_tag") else "") + f": {first}")
    elif tie_text(r):
        parts.append(r["verdict"] + tie_text(r))
    out = [f"{x['backend']} ({x['why']})" for fw, _ in FRAMEWORKS for x in r.get(f"{fw}_excluded") or ()]
    if out:
        parts.append("faster but out: " + ", ".join(out))
    return "; ".join(parts) or None


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def brief(rows: Sequence[Mapping[str, Any]], run_ids: Sequence[str] = (), width: int = BRIEF_WIDTH,
          threshold: float | None = None, db: str | None = None) -> list[str]:
    """The verdict at a glance, as hyperfine or pyperf's compare_to end: for each machine a heading,
    one line a row (its workload, each side's best with its time, JAX/PyTorch with its CI, the
    verdict in words), short notes marked a, b, ... below, and a legend of at most five lines that
    names the page explaining every word and ends with the command of the details. No line is wider
    than ``width`` (at most 100) but that command, never broken (pasted, its first line would run
    alone). Every row's details (compile pays, memory, parity, why, its command again) are
    ``verdict --explain``'s, whose command names ``db`` where the runs are not in the default database."""
    width = max(BRIEF_MIN_WIDTH, min(width, BRIEF_WIDTH))
    out: list[str] = []
    marks = iter("abcdefghijklmnopqrstuvwxyz")
    for machine, group in by_machine(rows).items():
        stacked = width < BRIEF_STACKED  # a phone's terminal, a split pane: a block of lines a row
        out += (_wrap(f"Verdict · {machine}", width, subsequent_indent="  ") if stacked
                else [_fit(f"Verdict · {machine}", width)])
        out += (_wrap(f"  {summary(group)}", width, subsequent_indent="  ") if stacked
                else [_fit(f"  {summary(group)}", width)])
        table = [BRIEF_HEADER]
        noted = []
        for r in group:
            note = _brief_note(r)
            mark = next(marks, "+") if note else ""
            if note:
                noted.append((mark, note))
            if r.get("ratio") is None or r.get("ci_low") is None:
                ratio = fmt.DASH
            elif r["ci_low"] == r["ci_high"]:  # one round: a ratio, no spread to make an interval of
                ratio = f"{r['ratio']:.2f} (one round)"
            else:
                ratio = f"{r['ratio']:.2f} ({r['ci_low']:.2f}-{r['ci_high']:.2f}, {fmt.level(r['confidence'])})"
            table.append((_brief_workload(r), _brief_side(r, "torch"), _brief_side(r, "jax"), ratio,
                          r["verdict"] + (f" ({mark})" if mark else "")))
        if stacked:
            for row in table[1:]:
                # each part on its own line, a word never cut: what does not fit wraps (the CI, a long name)
                for i, part in enumerate((row[0], f"PyTorch {row[1]}", f"JAX {row[2]}", f"JAX/PyTorch {row[3]}",
                                          row[4])):
                    lead = "  " if i == 0 else "    "
                    out += _wrap(f"{lead}{part}", width, subsequent_indent=lead + "  ")
            for mark, note in noted:
                out += _wrap(f"  ({mark}) {note}", width, subsequent_indent="      ", max_lines=3)
            continue
        widths = [max(len(row[i]) for row in table) for i in range(5)]
        # the workload and the sides give way, widest first; the CI and the verdict's words never
        while 2 + sum(widths) + 4 > width and max(widths[:3]) > 8:
            widest = max(range(3), key=lambda i: widths[i])
            widths[widest] -= 1
        sep = "  " if 2 + sum(widths) + 8 <= width else " "
        for row in table:
            line = "  " + sep.join(_fit(c, w).ljust(w) for c, w in zip(row, widths))
            out.append(_fit(line.rstrip(), width))
        for mark, note in noted:
            out += _wrap(f"  ({mark}) {note}", width, subsequent_indent="      ", max_lines=2)
    if rows:
        levels = ", ".join(dict.fromkeys(fmt.level(r["confidence"]) for r in rows if r.get("confidence")))
        explain = (f"stackwars verdict {' '.join(run_ids)} --explain".replace("  ", " ") if run_ids else
                   "stackwars verdict --explain") + db_flag(db)
        at = levels + "; " if levels else ""
        legend_text = (f"JAX/PyTorch < 1: JAX faster; best mode of each side, rounds of fresh processes, CI at the "
                       f"row's level ({at}{stats.VERDICT_ALPHA:.0%} shared by a machine's rows and looks). same "
                       f"speed: within ±{margins(rows, threshold)} by two one-sided tests; no difference found: CI "
                       f"holds 1; busy processes decide nothing.")
        words, details = "Words: docs/getting-started/verdict.md", f"details: {explain}"
        # the page and the command end the legend, never cut (a narrow terminal cuts the words above);
        # the command on a line of its own, whole however narrow (copied, pasted)
        if len(f"{words}; {details}") <= width:
            out += _wrap(legend_text, width, max_lines=4) + [f"{words}; {details}"]
        elif len(_wrap(f"{legend_text} {words}", width)) <= 4:
            out += _wrap(f"{legend_text} {words}", width) + [details]
        else:
            out += _wrap(legend_text, width, max_lines=3) + _wrap(words, width) + [details]
    return out


def _wrap(text: str, width: int, **kwargs) -> list[str]:
    """Prose at ``width``, never breaking a word: a path, a flag, a run id (its hyphens) stay whole."""
    return textwrap.wrap(text, width, placeholder=" …", break_long_words=False, break_on_hyphens=False, **kwargs)


def render(rows: Sequence[Mapping[str, Any]], width: int | None = None, threshold: float | None = None):
    """One table per machine (or stacked blocks on a narrow terminal), then the legend. Print it
    with ``crop=False``: its commands are lines longer than the width, whole."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = []
    for machine, group in by_machine(rows).items():
        heading = f"Verdict · {machine} · {summary(group)}"
        if width is not None and width < NARROW:
            parts.append(Text(heading, style="bold"))
            for r in group:
                c = cells(r)
                line = Text(f"  {c[0]}: ")
                line.append(c[4], style=STYLE[r["verdict"]])  # with its reason's tag, as the table and Markdown
                parts.append(line)
                parts.append(Text(f"      PyTorch {c[1]} | JAX {c[2]} | JAX/PyTorch {c[3]} | procs {c[5]}"))
                parts.append(Text(f"      {r.get('reason') or ''}", style="dim"))
                parts.append(Text(f"      compile pays {c[6]} | memory {c[7]} | parity {c[8]}"
                                  + (f" | energy {c[10]}" if r.get("energy_ratio") is not None else ""), style="dim"))
                if r.get("why"):
                    parts.append(Text(f"      why: {r['why']}", style="dim"))
                if r.get("command"):
                    levels = fresh_levels_text(r.get("command_looks"))
                    parts.append(_whole(Text(f"      again: {r['command']}", style="dim")))
                    if levels:
                        parts.append(Text(f"        ({levels})", style="dim"))
            continue
        table = Table(title=heading, title_justify="left")
        keep, absent = shown(group)
        for i in keep:
            table.add_column(COLUMNS[i], overflow="fold", justify="right" if COLUMNS[i] == "procs · timing" else "left")
        for r in group:
            c = cells(r)
            c[4] = Text(c[4], style=STYLE[r["verdict"]])
            table.add_row(*[c[i] if isinstance(c[i], Text) else Text(c[i]) for i in keep])
        parts.append(table)
        parts += [Text(f"  {n}", style="dim") for n in absent]
        parts += [Text(f"  {n}", style="yellow") for n in notes(group)]
        for command, words in again(group):
            if command:
                parts.append(_whole(Text(f"  again: {command}", style="dim")))
            if words:
                parts.append(Text(f"    {words}" if command else f"  again: {words}", style="dim"))
    if rows:
        parts.append(Text(legend(rows, threshold), style="dim"))
    return Group(*parts)


def _whole(line):
    """A line that holds a command: never broken nor cut at the width, so that it is copied whole (a
    terminal wraps it for the eye). Printed with ``crop=False``, as ``render``'s printers do."""
    line.no_wrap, line.overflow = True, "ignore"
    return line


def markdown(rows: Sequence[Mapping[str, Any]], threshold: float | None = None) -> str:
    lines = []
    for machine, group in by_machine(rows).items():
        keep, absent = shown(group)
        lines += [f"**Verdict · {machine}** ({summary(group)})", "",
                  "| " + " | ".join(COLUMNS[i] for i in keep) + " | command |", "|" + "---|" * (len(keep) + 1)]
        shared = shared_levels(group)
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in [*(cells(r)[i] for i in keep),
                                                                    command_cell(r, shared)])
                  + " |" for r in group]
        lines.append("")
        if shared:
            lines += [f"Each command: {shared}.", ""]
        lines += [f"- {n}" for n in absent] + ([""] if absent else [])
        lines += [f"- {n}" for n in notes(group)] + ([""] if notes(group) else [])
    if rows:
        lines.append(legend(rows, threshold))
    return "\n".join(lines) + "\n"


def to_text(rows: Sequence[Mapping[str, Any]], width: int = 250) -> str:
    console = fmt.text_console(width)
    console.print(render(rows, width), crop=False)
    return console.export_text()


def forest_png(rows: Sequence[Mapping[str, Any]], threshold: float | None = None) -> bytes | None:
    """The verdicts of one machine as a forest plot: JAX/PyTorch on a log axis, one row per
    workload, the point estimate with its CI (at the level its look spends), the same-speed margin shaded, coloured
    by verdict."""
    shown = [r for r in rows if r.get("ratio")]
    # rows with no ratio to draw (a side measured only while the machine was busy, or missing): listed apart
    apart = [r for r in rows if not r.get("ratio")]
    if not shown and not apart:
        return None
    import math

    from stackwars.report.plots import plt_agg, to_png
    plt = plt_agg()
    colour = {"JAX faster": "tab:blue", "PyTorch faster": "tab:red", SAME: "tab:green", NO_DIFFERENCE: "tab:olive",
              "cannot say": "tab:gray"}
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.32 * (len(shown) + len(apart))))
    if threshold is None:  # the margin the rows were read at (the narrowest, where they differ)
        threshold = min([float(r["tie_threshold"]) for r in rows if r.get("tie_threshold") is not None]
                        or [stats.MARGIN])
    ax.axvspan(1 / (1 + threshold), 1 + threshold, color="tab:green", alpha=0.12, lw=0,
               label=f"same-speed margin (±{threshold:.0%})")
    ax.axvline(1.0, color="black", lw=0.8)
    for i, r in enumerate(shown):
        c = colour[r["verdict"]]
        # a verdict that cannot decide (too few clean processes, a busy machine) is hollow and grey
        decided = (r.get("sequence") or {}).get("look", 0) >= 1 and r.get("reason_tag") != "busy machine"
        ax.errorbar(r["ratio"], i, xerr=[[r["ratio"] - r["ci_low"]], [r["ci_high"] - r["ratio"]]], fmt="o", color=c,
                    ms=4, capsize=2, lw=1.2, mfc=c if decided else "white")
    energy_shown = False
    for i, r in enumerate(shown):  # where measured: the energy ratio of the same two bests, a diamond below
        if r.get("energy_ratio") is not None:
            e = r["energy_ratio"]
            ax.errorbar(e, i + 0.25, xerr=[[e - r["energy_ci_low"]], [r["energy_ci_high"] - e]], fmt="D",
                        color="tab:orange", ms=3, capsize=2, lw=0.8)
            energy_shown = True
    for j, r in enumerate(apart):
        ax.text(1.0, len(shown) + j, f"not drawn: {r['verdict']} ({r.get('reason_tag') or 'no ratio'})",
                ha="center", va="center", fontsize=7, color="tab:gray")
    labels = [f"{title(r)} ({r['best_torch']} vs {r['best_jax']}, {fmt.level(r['confidence'])} CI)" for r in shown]
    labels += [title(r) + (f" ({r.get('best_torch') or 'no PyTorch best'} vs {r.get('best_jax') or 'no JAX best'})"
                           if r.get("best_torch") or r.get("best_jax") else "") for r in apart]
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xscale("log")
    lo = min([r["ci_low"] for r in shown] + [r["energy_ci_low"] for r in shown if r.get("energy_ratio")]
             + [1 / (1 + threshold)])
    hi = max([r["ci_high"] for r in shown] + [r["energy_ci_high"] for r in shown if r.get("energy_ratio")]
             + [1 + threshold])
    pad = math.exp(0.08 * (math.log(hi) - math.log(lo)) + 0.02)
    ax.set_xlim(lo / pad, hi * pad)
    levels = ", ".join(dict.fromkeys(fmt.level(r["confidence"]) for r in shown))
    ax.set_xlabel("JAX time / PyTorch time, best backend of each (log; < 1: JAX faster); "
                  + (f"CI over rounds at {levels}, the level each row was read at" if shown
                     else "no row has a ratio to draw: each says why"))
    for v, c in colour.items():
        ax.plot([], [], "o", color=c, label=v)
    ax.plot([], [], "o", color="tab:gray", mfc="white",
            label="fewer clean rounds than a first look, or a busy machine")
    if energy_shown:
        ax.plot([], [], "D", color="tab:orange", ms=3, label="energy JAX/PyTorch (J a call), CI over processes")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(alpha=0.3, axis="x", which="both")
    fig.tight_layout()
    return to_png(fig)
