"""`stackwars reproduce`: the plan per device, resuming where it stopped, the budget, and a
dry run that runs and writes nothing (the steps themselves are the commands tested elsewhere)."""

import pytest
from typer.testing import CliRunner

from stackwars import reproduce as rp
from stackwars.cli import app
from stackwars.records import CellSpec
from stackwars.runner.planning import GiB, preflight


def test_the_plan_sizes_each_study_for_the_device():
    cpu = {s.name: s for s in rp.plan("cpu", "/data/mnist", memory=24 * GiB)}
    cuda = {s.name: s for s in rp.plan("cuda", None, memory=141 * GiB)}
    assert list(cpu) == ["peaks", "micro-ops", "models", "mnist", "recompile", "cache",
                         "control-flow", "stream", "vmap", "scaling", "why", "kernels"]
    assert "models-llama3-8b" not in cuda and "llama3-8b" in cuda["models"].args
    # llama3-8b does not fit 24 GiB at `small`: the CPU plan leaves it out (not run at 2 layers), and says so
    assert "llama3-8b" not in cpu["models"].args and "gpt-neo-1.3b" in cpu["models"].args
    assert "llama3-8b small forward float32 needs about 60.0 GiB" in cpu["models"].note
    assert "left out, not run at 2 of its 32 layers" in cpu["models"].note
    # asked to run smaller, it is a step of its own at the size that fits, with its budget
    reduced = {s.name: s for s in rp.plan("cpu", None, memory=24 * GiB, reduce=True)}
    assert reduced["models-llama3-8b"].args[-6:] == ("--budget", str(rp.CPU_RUN_BUDGET_S["models-"]),
                                                     "--processes", "3", "--max-processes", "9")
    assert "--set" in reduced["models-llama3-8b"].args and "n_layers=2" in reduced["models-llama3-8b"].args
    # each `run` step on the CPU that asks a verdict has its measured budget (no look past it), the CUDA plan none;
    # why's question is where the time goes: one profiled process a cell, no verdict, no look to stop
    for name, s in cpu.items():
        assert ("--budget" in s.args) == (s.args[0] == "run" and name != "why"), name
    for why in (cpu["why"], cuda["why"]):
        assert why.args[why.args.index("--processes") + 1] == "1" and "--profile" in why.args
    assert not any("--budget" in s.args or "--max-processes" in s.args for s in cuda.values())
    # the steps of long processes (models, kernels) look at 3, 5, 7 and 9 rounds on the CPU, the others at run's
    for name, s in cpu.items():
        cap = s.args[s.args.index("--max-processes") + 1] if "--max-processes" in s.args else None
        assert cap == ("9" if name in ("models", "kernels") else None), name
    assert "--profile" in cpu["why"].args and "impl=framework,custom" in cpu["kernels"].args
    assert "small" in cpu["micro-ops"].args and "paper" in cuda["micro-ops"].args
    assert cuda["models"].args[-2:] == ("--dtype", "bfloat16")
    assert cpu["mnist"].args[-2:] == ("--data-dir", "/data/mnist") and "--data-dir" not in cuda["mnist"].args
    for s in cpu.values():  # S4's settings, and every step on the asked device
        assert ("--device", "cpu") == s.args[s.args.index("--device"):s.args.index("--device") + 2]
    assert cpu["mnist"].args[cpu["mnist"].args.index("--lr") + 1] == "0.01"


def test_execute_resumes_and_stops_at_the_budget(tmp_path):
    steps = [rp.Step(n, n, (n,), 1) for n in ("a", "b", "c", "d")]
    state_file = tmp_path / "state.json"
    now = [0.0]
    ran = []

    def run_step(step):
        ran.append(step.name)
        now[0] += 60.0
        return {"a": 0, "b": 1, "c": 3}.get(step.name, 0), 60.0

    state = rp.execute(steps, state_file, 120.0, run_step, clock=lambda: now[0])
    assert ran == ["a", "b"]  # c would start at 120 s: the budget is spent
    assert state["b"]["status"] == "done, some cells failed" and state["c"]["status"] == "not reached (budget)"
    ran.clear()
    state = rp.execute(steps, state_file, None, run_step, clock=lambda: now[0])
    assert ran == ["c", "d"]  # a and b were done; resumed from the file
    assert state["c"]["status"] == "exit 3"
    ran.clear()
    rp.execute(steps, state_file, None, run_step, clock=lambda: now[0])
    assert ran == ["c"]  # only the step that did not finish runs again


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "--dry-run", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "[to do]" in result.output and "stackwars study vmap --batch 1,16,128 --device cpu" in result.output
    assert not (tmp_path / "r").exists()
    bad = CliRunner().invoke(app, ["reproduce", "--budget", "-5", "--out", str(tmp_path / "r")])
    assert bad.exit_code == 2 and "--budget must be a positive number of minutes" in bad.output


@pytest.mark.parametrize("reduce", [True, False])
@pytest.mark.parametrize("gib", [3, 24, 64, 141])
def test_each_model_is_planned_at_a_size_that_fits_or_left_out_by_the_cells_own_rule(gib, reduce):
    """Issue 66: a model that cannot fit is known before it runs, by the estimate and rule the
    cells' pre-flight check holds it to: every cell the plan runs passes pre-flight at that memory,
    and a model planned smaller (``reduce``), or left out, is one the pre-flight would have refused
    at its preset. The step or its note names the size and both figures."""
    memory = gib * GiB
    steps = rp.plan("cpu", None, memory=memory, reduce=reduce)
    planned = {}  # model -> its --set overrides
    for s in steps:
        if s.name == "models" or s.name.startswith("models-"):
            sets = dict(a.split("=") for a in s.args[1:] if "=" in a)
            planned.update({m: {k: int(v) for k, v in sets.items()} for m in s.args[1:] if m in rp.MODELS})
    notes = " ".join(s.note for s in steps)

    def refused(model, overrides):
        return preflight(CellSpec(model, "small", "forward", "torch-eager", overrides=tuple(overrides.items())),
                         host_available=memory) is not None

    for model in rp.MODELS:
        if model in planned:
            assert not refused(model, planned[model]), (model, planned[model])
        else:
            assert refused(model, {}) and f"{model} small forward float32 needs" in notes
            assert refused(model, {"n_layers": rp.FIT_LAYERS}) or not reduce
            assert f"{gib:.1f} GiB it may take here" in notes and "left out" in notes
        if planned.get(model):  # smaller than its preset: the preset itself would not have fitted
            assert refused(model, {}) and f"planned at 2 of its" in notes and "--set n_layers=2" in notes
        elif model in planned:
            assert not refused(model, {})
    if reduce:
        assert ("llama3-8b" in planned) == (gib >= 24) and (planned.get("llama3-8b") == {}) == (gib >= 141)
        assert planned.get("gpt-neo-1.3b") == ({} if gib >= 24 else {"n_layers": 2})
    else:  # nothing smaller than its preset: what does not fit is left out
        assert not any(planned.values()) and ("llama3-8b" in planned) == (gib >= 141)
        assert ("gpt-neo-1.3b" in planned) == (gib >= 24)


def test_a_step_s_note_is_kept_in_the_state_file(tmp_path):
    steps = [rp.Step("models", "m", ("run",), 1, "llama3-8b ... left out")]
    state = rp.execute(steps, tmp_path / "state.json", None, lambda step: (0, 1.0))
    assert state["models"]["note"] == "llama3-8b ... left out" and state["models"]["seconds"] == 1.0
