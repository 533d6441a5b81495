"""The tutorial notebook (docs/tutorials/notebook.ipynb), executed headless as a reader would run it
(nbclient, a fresh IPython kernel in a folder of its own): a model defined in a cell ran in worker
processes, passed the float64 twin check and produced a verdict row; its progress was a bar the
notebook renders, updated in place, and its answer an HTML view.

nbclient and ipykernel are the `notebook` extra (scripts/setup.sh --tests installs it). Without them
the test skips and says so; CI sets STACKWARS_REQUIRE_DOCS=1, so there a missing package fails."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "tutorials" / "notebook.ipynb"


def _nbclient():
    try:
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - absent or broken: the same outcome
        if os.environ.get("STACKWARS_REQUIRE_DOCS") == "1":
            pytest.fail(f"nbclient and ipykernel are required here (STACKWARS_REQUIRE_DOCS=1): {exc}")
        pytest.skip(f"the notebook extra (nbclient, ipykernel) is not installed ({exc}); scripts/setup.sh --tests "
                    "installs it and CI requires it")


def _text(output) -> str:
    if output.get("output_type") == "stream":
        return output["text"]
    return "".join(output.get("data", {}).get("text/plain", "")) + "".join(output.get("data", {}).get("text/html", ""))


def test_the_tutorial_notebook_runs_headless_and_its_model_reaches_a_verdict(tmp_path):
    _nbclient()
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # what the run may spend, changed, nothing else: the tutorial's budget of 120 s (a row decided on the 2-CPU VM,
    # its committed outputs) took 170 s to 380 s of the suite there; here 20 s and at most the first look's 4 rounds
    # (they always run; a busy one is replaced, up to the cap): a verdict row all the same. Under the suite's load
    # every process may be busy, and the rows then say so (below); 32 processes in 250 s without the cap
    runs = [c for c in nb.cells if c.cell_type == "code" and "stackwars.run(" in c.source]
    assert len(runs) == 1 and runs[0].source.count("budget=120") == 1, [c.source for c in runs]
    runs[0].source = runs[0].source.replace("budget=120", "budget=20, max_processes=4")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "STACKWARS_CACHE_DIR": str(tmp_path / "cache")}
    saved = dict(os.environ)
    os.environ.update(env)  # the kernel inherits this process's environment
    stopped = resumed = None
    try:
        client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                         resources={"metadata": {"path": str(tmp_path)}})
        with client.setup_kernel():
            for i, cell in enumerate(nb.cells):
                client.execute_cell(cell, i)
            # then the kernel's stop button in the middle of a run's rounds, and the resume it names
            stopped, resumed = _interrupted_then_resumed(client, nb, tmp_path / "stopped.db")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    code = [c for c in nb.cells if c.cell_type == "code" and c is not stopped and c is not resumed]  # the tutorial's
    assert all(not any(o.get("output_type") == "error" for o in c.outputs) for c in code)
    run_cell = next(c for c in code if "stackwars.run(" in c.source)
    # the progress: one display, updated in place (its display id), not a stream of lines; it ends at
    # every cell-process the run planned, measured
    bars = [o for o in run_cell.outputs if "stackwars-progress" in _text(o)]
    assert len(bars) == 1 and bars[0]["output_type"] == "display_data", run_cell.outputs
    done = re.search(r'<progress value="(\d+)" max="(\d+)">', _text(bars[0]))
    assert done and done.group(1) == done.group(2) and int(done.group(1)) >= 8, _text(bars[0])
    # the answer, inline: the brief verdict and the forest plot
    shown = next(o for o in run_cell.outputs if o.get("output_type") == "execute_result")
    page = shown["data"]["text/html"]
    # a line a row (at 100 columns a long CI, on a loaded machine, makes the workload's name give way: its start stays)
    assert len(re.findall(r"^  notebook-mlp tiny ", page, re.M)) == 2, page
    assert "data:image/png;base64," in page
    said = "".join(_text(o) for c in code for o in c.outputs)
    assert "model notebook-mlp: the twins agree" in said  # the float64 twin check passed before any cell ran
    for phase in ("forward", "train-step"):  # a verdict row a phase: both sides' bests, or why there are none
        row = re.search(rf"^notebook-mlp {phase} (torch-eager|None) (jax-jit|None) ", said, re.M)
        assert row and ("None" not in row.groups() or "cannot say (busy machine)" in said), said
    # the cells: in worker processes forked from servers, none in the kernel, each in parity
    conn = sqlite3.connect(tmp_path / "notebook.db")
    records = [json.loads(r) for (r,) in conn.execute("SELECT record_json FROM cells")]
    conn.close()
    assert len(records) >= 8 and {r["status"] for r in records} == {"ok"}
    origins = [r["settings"]["process"]["origin"] for r in records]
    assert all(o["how"] == "forked from a preloading server" and o["pid"] != o["server_pid"] for o in origins)
    assert {r["settings"]["origin"]["workload"].split("/sent-models/")[0] for r in records} == \
        {f"file {tmp_path / 'cache'}"}  # sent by value: no file of the reader's held it
    explained = next(c for c in code if "explain(" in c.source)
    assert "compile pays" in "".join(_text(o) for o in explained.outputs)
    # the interrupt: a RunInterrupted naming the call that resumes, what was measured kept; the resume
    # measured the rest of the plan and read the verdict
    error = next(o for o in stopped.outputs if o.get("output_type") == "error")
    assert error["ename"] == "RunInterrupted", error
    call = re.search(r"stackwars\.run\(resume='([0-9a-f-]+)', db='[^']+stopped\.db'\)", error["evalue"])
    assert call and "finished cells are stored" in error["evalue"], error["evalue"]
    assert f"{call.group(1)} cells: " in "".join(_text(o) for o in resumed.outputs), resumed.outputs
    before, after = stopped.metadata["cells_stored"], resumed.metadata["cells_stored"]
    # kept at the stop, the rest measured after: the plan's 6 processes (forward, 2 cells, 3 each), more only where
    # a busy one was replaced
    assert 3 <= before < after and after >= 6, (before, after)
    assert f"{call.group(1)} cells: {after}" in "".join(_text(o) for o in resumed.outputs), resumed.outputs


def _interrupted_then_resumed(client, nb, db):
    """A run in the kernel, interrupted as the stop button does (SIGINT to the kernel) once its first
    processes are stored, then the cell the interrupt names, run: the two cells, as executed."""
    import threading
    import time

    import nbformat
    from nbclient.exceptions import CellExecutionError

    run = nbformat.v4.new_code_cell(f"stackwars.run(mlp, preset='tiny', backend=['torch-eager', 'jax-jit'], "
                                    f"processes=3, max_processes=3, min_time=0.3, db={str(db)!r})")
    nb.cells.append(run)
    gone = threading.Event()

    def stop_when_measuring():
        while not gone.is_set():
            try:
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
                (n,) = conn.execute("SELECT COUNT(*) FROM cells").fetchone()
                conn.close()
            except sqlite3.Error:
                n = 0
            if n >= 3:  # past each cell's first process: in the rounds; the stop button's SIGINT to the kernel
                os.kill(client.km.provisioner.pid, signal.SIGINT)
                return
            time.sleep(0.2)

    def stored() -> int:
        conn = sqlite3.connect(db)
        (n,) = conn.execute("SELECT COUNT(*) FROM cells").fetchone()
        conn.close()
        return n

    watcher = threading.Thread(target=stop_when_measuring, daemon=True)
    watcher.start()
    try:
        client.execute_cell(run, len(nb.cells) - 1)
    except CellExecutionError:
        pass
    finally:
        gone.set()
        watcher.join()
    run.metadata["cells_stored"] = stored()
    error = next(o for o in run.outputs if o.get("output_type") == "error")
    call = re.search(r"stackwars\.run\(resume='[^']+', db='[^']+'\)", error.get("evalue", ""))
    resume = nbformat.v4.new_code_cell(f"resumed = {call.group(0) if call else 'None'}\n"
                                       f"print(resumed.run_id, 'cells:', len(resumed.cells))")
    nb.cells.append(resume)
    client.execute_cell(resume, len(nb.cells) - 1)
    resume.metadata["cells_stored"] = stored()
    return run, resume
