"""The Python API (issue 89): ``stackwars.run`` is ``stackwars run`` (its options, its defaults, its
engine), ``stackwars.verdict`` is ``stackwars verdict``, and a model made in the session (a notebook
cell) runs in worker processes, sent by value; bad input, an unsendable factory and an interrupt
end as the command line's do: a clear error, nothing lost, the run resumable."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
from typer.testing import CliRunner

import stackwars
from stackwars import api, orchestrate
from stackwars import verdict as vd
from stackwars.cli import app
from stackwars.errors import SpecError
from stackwars.store.results import Store, rows

runner = CliRunner()
QUICK = dict(preset="tiny", backend=["torch-eager", "jax-jit"], processes=2, max_processes=2, min_time=0.05)


def _cli_args(options):
    args = []
    for k, v in options.items():
        for one in (v if isinstance(v, list) else [v]):
            args += [f"--{k.replace('_', '-')}", str(one)]
    return args


def test_the_api_and_the_command_store_the_same_rows_and_read_the_same_verdict(tmp_path):
    """One database: `stackwars run` and `stackwars.run(...)` with the same workloads and options
    store the same kinds of rows, and `stackwars verdict RUN -f json` reads from each run what the
    Result of that run holds; `stackwars.verdict(RUN, db=...)` is that Result again."""
    db = tmp_path / "one.db"
    done = runner.invoke(app, ["run", "gemm", *_cli_args(QUICK), "--inline", "--db", str(db)])
    assert done.exit_code == 0, done.output
    result = stackwars.run("gemm", inline=True, db=db, progress=False, **QUICK)
    with Store(db) as store:
        cli_run, api_run = store.run_ids()[::-1] if store.run_ids()[0] == result.run_id else store.run_ids()
        assert api_run == result.run_id and cli_run != api_run
        by_run = {rid: rows(store, rid) for rid in (cli_run, api_run)}
        assert store.run(api_run).command.startswith("stackwars.run('gemm'")
        # the same measure configuration: every option at the command's default but those given
        assert store.run(api_run).measure_config == store.run(cli_run).measure_config
    keys = {rid: sorted(r["cell_key"] for r in found) for rid, found in by_run.items()}
    assert keys[cli_run] == keys[api_run] and len(keys[api_run]) >= 4
    assert {tuple(sorted(r)) for r in by_run[cli_run]} == {tuple(sorted(r)) for r in by_run[api_run]}
    for rid, mine in ((cli_run, stackwars.verdict(cli_run, db=db)), (api_run, result)):
        said = runner.invoke(app, ["verdict", rid, "-f", "json", "--db", str(db)])
        assert said.exit_code == 0, said.output
        assert json.loads(said.stdout) == json.loads(mine.to_json())
    again = stackwars.verdict(api_run, db=db)
    assert again.verdict == result.verdict and again.run_ids == [api_run]
    (row,) = result.verdict
    assert (row.workload, row.preset, row.phase) == ("gemm", "tiny", "forward")
    assert row.verdict in ("JAX faster", "PyTorch faster", "same speed", "no difference found", "cannot say")
    assert row.again.startswith("stackwars run gemm --preset tiny") and row.details["verdict"] == row.verdict
    assert set(result.cells["cell_key"]) == set(keys[api_run])
    assert list(result.to_pandas()["workload"]) == ["gemm"]
    assert row.reason in " ".join(result.explain().split()) or row.verdict != "cannot say"
    page = result._repr_html_()
    assert page.startswith('<div class="stackwars-result"><pre>Verdict · ') and "gemm tiny forward" in page
    # kept as torch.utils.benchmark's Measurement is: pickled and read back whole
    kept = pickle.loads(pickle.dumps(result))
    assert kept == result and kept.verdict == result.verdict and kept.brief() == result.brief()
    assert kept.to_json() == result.to_json() and kept.cells.equals(result.cells)


def test_bad_options_are_refused_as_the_command_refuses_them_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "none.db"
    cases = [
        (dict(processes="3"), "processes= (--processes) takes a whole number, got '3'"),
        (dict(nope=1), "stackwars.run takes no option nope; it takes those of `stackwars run`"),
        (dict(preset=3), "preset= (--preset) takes a str or a list of str, got 3"),
        (dict(processes=0), "--processes must be >= 1, got 0"),
        (dict(phase="backward"), "backward"),
        (dict(margin=float("nan")), "margin must be a fraction between 0 and 1"),
    ]
    for options, message in cases:
        with pytest.raises(SpecError) as caught:
            stackwars.run("gemm", db=db, progress=False, **options)
        assert message in str(caught.value), (options, str(caught.value))
    with pytest.raises(SpecError, match="unknown workload 'nosuch'"):
        stackwars.run("nosuch", db=db)
    with pytest.raises(SpecError, match="a workload is a name"):
        stackwars.run(3.5, db=db)
    assert not db.exists() and os.listdir(tmp_path) == []
    from stackwars.cli.run_cmd import DEFAULT_PROCESSES
    assert api.options()["processes"] == DEFAULT_PROCESSES and api.options()["preset"] == ["small"]  # the command's defaults


def _cell_model(name="cellnet", width=16):
    """A model as a notebook cell defines it: its classes exist only in this function's frame, so no
    worker could import them; they go by value."""
    import flax.nnx as nnx
    import torch

    class Net(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = torch.nn.Linear(n, 4)

        def forward(self, x):
            return self.fc(x)

    class JNet(nnx.Module):
        def __init__(self, n, rngs):
            self.fc = nnx.Linear(n, 4, rngs=rngs)

        def __call__(self, x):
            return self.fc(x)

    return stackwars.Model(
        name=name, presets={"tiny": {"batch": 8, "n": width}},
        batch=lambda s, rng: {"x": rng.standard_normal((s.batch, s.n)).astype(np.float32),
                              "target": rng.integers(0, 4, s.batch)},
        torch=lambda s: Net(s.n), jax=lambda s, rngs: JNet(s.n, rngs))


def test_a_model_made_in_the_session_runs_in_workers_stops_and_resumes(tmp_path, monkeypatch, capsys):
    """A Model whose classes no module defines: sent by value, checked by the float64 twin check in a
    worker, measured in fork-server workers; stopped by an interrupt after its first cells (the
    kernel's stop button), it keeps them and `stackwars.run(resume=...)` measures the rest, reloading
    the sent model; a redefinition under the same name is another model, checked again and kept apart."""
    monkeypatch.setenv("STACKWARS_CACHE_DIR", str(tmp_path / "cache"))
    db = tmp_path / "cell.db"
    execute, calls = orchestrate.Run._execute, []

    def stop_after_the_first_batch(self, specs, hooks, unsaved):
        calls.append(len(specs))
        if len(calls) == 2:  # the first processes are stored; Ctrl-C as the rounds start
            raise KeyboardInterrupt
        return execute(self, specs, hooks, unsaved)

    monkeypatch.setattr(orchestrate.Run, "_execute", stop_after_the_first_batch)
    with pytest.raises(api.RunInterrupted) as stopped:
        stackwars.run(_cell_model(), db=db, progress=False, **QUICK)
    assert isinstance(stopped.value, KeyboardInterrupt) and stopped.value.db == db
    assert stopped.value.resume == f"stackwars.run(resume={stopped.value.run_id!r}, db={str(db)!r})"
    with Store(db) as store:
        kept = rows(store, stopped.value.run_id)
    assert len(kept) == 2 and all(r["status"] == "ok" for r in kept)  # the first process of each cell
    monkeypatch.setattr(orchestrate.Run, "_execute", execute)
    with pytest.raises(SpecError, match="give no workloads with it"):
        stackwars.run(_cell_model(), resume=stopped.value.run_id, db=db)
    result = stackwars.run(resume=stopped.value.run_id, db=db, progress=False)
    assert result.run_id == stopped.value.run_id
    cells = result.cells
    assert len(cells) >= 4 and set(cells["status"]) == {"ok"} and set(cells["workload"]) == {"cellnet"}
    with Store(db) as store:
        measured = [m for _, m in store.cells(result.run_id)]
    # each in a worker forked from a server, none in this process
    assert all(m.settings["process"]["origin"]["pid"] != os.getpid() for m in measured)
    assert {m.settings["origin"]["workload"].split("/sent-models/")[1].split("/")[0] for m in measured} == \
        {os.path.basename(os.path.dirname(stackwars.discovery.send_model(_cell_model()).rsplit(":", 1)[0]))}
    (row,) = result.verdict
    # a row of both sides (each side's best may be None where a loaded machine left every process busy)
    assert (row.workload, row.phase) == ("cellnet", "forward") and row.verdict in vd.VERDICTS, row
    # the same definition sent again is the same model; another under the name is another, refused beside it
    wider = _cell_model(width=32)
    assert stackwars.discovery.send_model(wider) != stackwars.discovery.send_model(_cell_model())
    capsys.readouterr()
    with pytest.raises(SpecError, match="has the name of another model"):
        stackwars.run(wider, db=db, progress=False, **QUICK)
    # the edited definition was checked again, not taken for the one checked under its name before
    assert "model cellnet: the twins agree" in " ".join(capsys.readouterr().err.split())


def test_a_factory_that_cannot_be_sent_is_named_and_nothing_is_written(tmp_path, monkeypatch):
    import threading

    import torch

    monkeypatch.setenv("STACKWARS_CACHE_DIR", str(tmp_path / "cache"))
    lock = threading.Lock()
    locked = stackwars.Model(name="locked", presets={"tiny": {"batch": 2, "n": 4}},
                             batch=lambda s, rng: {"x": np.zeros((s.batch, s.n), np.float32)},
                             torch=lambda s: (lock, torch.nn.Linear(s.n, 2))[1])
    with pytest.raises(SpecError) as caught:
        stackwars.run(locked, db=tmp_path / "none.db", progress=False)
    said = str(caught.value)
    assert "model 'locked' cannot be sent to the worker processes: its torch= holds something that cannot be " \
           "pickled (TypeError: cannot pickle '_thread.lock' object)" in said
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "cache").exists()
