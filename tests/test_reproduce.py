"""`stackwars reproduce`: the plan per device, resuming where it stopped, the budget, and a
dry run that runs and writes nothing (the steps themselves are the commands tested elsewhere)."""

from typer.testing import CliRunner

from stackwars import reproduce as rp
from stackwars.cli import app


def test_the_plan_sizes_each_study_for_the_device():
    cpu = {s.name: s for s in rp.plan("cpu", "/data/mnist")}
    cuda = {s.name: s for s in rp.plan("cuda", None)}
    assert list(cpu) == ["peaks", "micro-ops", "models", "mnist", "recompile", "cache", "control-flow", "stream",
                         "vmap", "scaling", "why", "kernels"]
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
