"""The main job in a terminal (issue 65): a live progress line while it runs, then the verdict on
one screen at 100 columns, the last thing on stdout; every mode's table is `stackwars show`'s.
Run in a real pseudo-terminal (the standard library's ``pty``), as a user's shell runs it."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.conftest import ROOT

GOLDEN = Path(__file__).parent / "golden" / "main_job_tty.txt"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
VERDICTS = ("JAX faster", "PyTorch faster", "same speed", "no difference found", "cannot say")


def in_a_terminal(args: list[str], cwd: Path, columns: int = 100, rows: int = 50,
                  timeout_s: float = 300) -> tuple[int, str]:
    """``python -m stackwars ARGS`` with stdout and stderr on one pseudo-terminal of ``columns`` x
    ``rows``; its exit status and everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "LINES": str(rows), "TERM": "xterm-256color",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "stackwars", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=env, cwd=cwd, close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            data = os.read(master, 65536)
        except OSError:  # the other side closed: the command ended
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=max(1.0, deadline - time.monotonic())), b"".join(chunks).decode("utf-8", "replace")


def screen_after_progress(raw: str) -> list[str]:
    """What stays on the screen once the live progress line is gone: the text after the cursor is
    shown again (the live display hides it while it redraws), without colour codes."""
    shown = raw.rfind("\x1b[?25h")
    assert shown >= 0, "no live progress display: " + raw[-2000:]
    text = ANSI.sub("", raw[shown:]).replace("\r", "")
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def masked(lines: list[str]) -> list[str]:
    """The screen with what varies from run to run masked: the machine, the summary's counts, each
    row's figures and verdict (its workload kept), the footnotes a busy or undecided row adds, the
    run's id and the numbers; the legend and the spent line as one paragraph each (where a number's
    width moves their line breaks)."""
    out: list[str] = []
    for line in lines:
        if re.match(r"\s+\([a-z+]\) ", line) or re.match(r"\s{6}\S", line):
            continue  # a row's footnote and its continuation lines: which rows have one varies
        line = re.sub(r"\d{8}-\d{6}-[0-9a-f]{4}", "RUN", line)
        line = re.sub(r"^Verdict · .*", "Verdict · MACHINE", line)
        line = re.sub(r"^  \d+ verdict\(s\): .*", "  N verdict(s): COUNTS", line)
        line = re.sub(r"^(  gemm tiny \S+) .*", r"\1 FIGURES VERDICT", line)
        for word in VERDICTS:
            line = line.replace(word, "VERDICT")
        line = re.sub(r"^spent: .*", "spent: WORKER TIME; ENERGY", line)  # energy where a counter is readable
        line = re.sub(r"\d+(\.\d+)?", "9", line)
        line = re.sub(r"\s+", " ", line).rstrip()
        starts = ("JAX/PyTorch < ", "every row's", "as JSON", "every mode's", "spent: ")
        if out and not line.startswith(starts) and not out[-1].startswith(("Verdict", " ")):
            if not out[-1].startswith("spent: "):  # masked whole
                out[-1] += " " + line.strip()  # a wrapped paragraph's next line
        else:
            out.append(line)
    # the legend's levels: one a distinct level its rows were read at; a verdict's words once the paragraph is
    # whole (a line break may fall inside "no difference found", where the levels' widths put it)
    out = [re.sub(r"level \([^)]*\)", "level (LEVELS)", line) for line in out]
    for word in VERDICTS:
        out = [line.replace(word, "VERDICT") for line in out]
    return out


def test_the_main_job_in_a_terminal_ends_with_the_verdict_on_one_screen(tmp_path):
    """At COLUMNS=100 in a terminal: after the progress display, at most 40 lines, none over 100
    columns; the verdict's rows one line each, under its header; its legend at most 5 lines; and,
    numbers masked, the screen as tests/golden/main_job_tty.txt keeps it. No second look
    (--max-processes 3): a look's processes change figures and verdicts, which are masked, not the
    screen's lines; a round judged busy took one (the command alone on the 2-CPU AMD EPYC VM: 16
    processes and 46 s of CPU, against 12 and 26 s capped); the looks are tested in test_verdict.py."""
    db = tmp_path / "r.db"
    code, raw = in_a_terminal(["run", "gemm", "-p", "tiny", "-b", "torch-eager", "-b", "jax-jit", "--phase",
                               "forward", "--phase", "train-step", "--processes", "3", "--max-processes", "3",
                               "--min-time", "0", "--db", "r.db"], cwd=tmp_path)
    assert code == 0, raw[-3000:]
    assert "Traceback" not in raw
    # while it ran: the live line held the cell, done of planned, elapsed and the time left
    assert re.search(r"gemm/tiny/\S+ .* \d+/\d+ \d:\d\d:\d\d left", ANSI.sub("", raw)), ANSI.sub("", raw)[:3000]
    assert "ok  " not in ANSI.sub("", raw)  # no line a cell-process in a terminal (that is -v's)
    lines = screen_after_progress(raw)
    assert len(lines) <= 40, "\n".join(lines)
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["workload", "best"])
    rows = [line for line in lines[head + 1:] if line.startswith("  gemm tiny ")]
    assert [r.split()[2] for r in rows] == ["forward", "train-step"], lines  # one line a row
    assert all(any(v in r for v in VERDICTS) for r in rows), rows
    legend = [i for i, line in enumerate(lines) if line.startswith("JAX/PyTorch < 1")]
    details = next(i for i, line in enumerate(lines) if line.startswith("every row's details"))
    assert legend and details - legend[0] <= 5, lines
    assert f"every mode's table (or run with -v): stackwars show" in " ".join(lines)
    got = masked(lines)
    if os.environ.get("STACKWARS_REGENERATE_GOLDEN"):
        GOLDEN.write_text("\n".join(got) + "\n")
    assert got == GOLDEN.read_text().splitlines(), "\n".join(got)
    # every mode's table is one command away, and -v gives it in the log
    r = subprocess.run([sys.executable, "-m", "stackwars", "show", "--db", str(db)], capture_output=True, text=True,
                       cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0 and "torch-eager" in r.stdout and "Avg Steady State" in r.stdout


def test_a_run_of_one_framework_shows_its_modes_table_in_a_terminal(tmp_path):
    """A run of one framework's modes has no verdict between frameworks to give: its answer is the
    table of its modes, which the terminal shows after the live line."""
    code, raw = in_a_terminal(["run", "gemm", "-p", "tiny", "-b", "torch-eager", "--processes", "1", "--min-time",
                               "0", "--db", "r.db"], cwd=tmp_path)
    assert code == 0, raw[-3000:]
    screen = "\n".join(screen_after_progress(raw))
    assert "Avg Steady State" in screen and "torch-eager" in screen, screen
    assert "every mode's table (or run with -v)" not in screen
