"""The GPU check fits the remote runner it is run through: stages that each end inside one
10-minute command, everything written under $OUT (read, never assigned), a clear exit 3
without a GPU. The stages' GPU work itself runs only on a GPU (scripts/gpu-check.sh)."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from stackwars import gpucheck

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def _has_gpu() -> bool:
    return gpucheck.gpu_name() is not None


def _script(*args, out=None, timeout=120):
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env["PYTHON"] = sys.executable
    if out is not None:
        env["OUT"] = str(out)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_without_a_gpu_it_says_so_exits_3_and_writes_nothing(tmp_path):
    if _has_gpu():
        pytest.skip("a GPU is visible: the refusal does not apply (run scripts/gpu-check.sh itself)")
    before = sorted(p.name for p in (ROOT / "results").iterdir())
    out = tmp_path / "out"
    out.mkdir()
    done = _script("--proof", out=out)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no NVIDIA GPU visible" in done.stderr and "nothing was run" in done.stderr
    assert list(out.iterdir()) == []
    assert sorted(p.name for p in (ROOT / "results").iterdir()) == before
    assert os.access(SCRIPT, os.X_OK)


def test_the_script_never_assigns_out():
    for path in (SCRIPT, ROOT / "stackwars" / "gpucheck.py"):
        text = path.read_text()
        assert "OUT=" not in text.replace("$OUT", "").replace("STACKWARS_", ""), path
        assert "os.environ[\"OUT\"] =" not in text and "environ.setdefault(\"OUT\"" not in text


def test_list_prints_every_stage_with_its_cells_and_each_fits_one_command():
    done = _script("--list")
    assert done.returncode == 0, done.stderr
    for stage in gpucheck.STAGES:
        assert f"| {stage.name} | {stage.cell_count} | {stage.estimate_s} s |" in done.stdout
        assert 0 < stage.estimate_s <= gpucheck.STAGE_LIMIT_S < 600, stage
    proof = [s for s in gpucheck.STAGES if s.proof]
    # the documented sequence: under 50 minutes of GPU time (45 before the micro-op and model tables measured
    # each framework's program with and without graph replay, the matched pairs a CUDA verdict sets apart)
    assert sum(s.estimate_s for s in proof) < 50 * 60
    assert "--proof:" in done.stdout


def test_every_stage_writes_only_under_out(tmp_path):
    """Every path a stage's command names lies in $OUT/<stage> (the database, the JSON, the
    traces, the MNIST and scaling outputs); nothing goes to results/ or the working tree."""
    out = tmp_path / "runner-out"
    done = _script("--dry-run", out=out)
    assert done.returncode == 0, done.stderr
    lines = [l for l in done.stdout.splitlines() if l.strip()]
    assert [l.split(":", 1)[0] for l in lines] == [s.name for s in gpucheck.STAGES]
    for line in lines:
        name, command = line.split(": ", 1)
        argv = shlex.split(command)
        inputs = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--data-dir"}  # read, not written
        paths = [a.split("=", 1)[-1] for a in argv if "/" in a and not a.startswith("tests/") and a not in inputs]
        paths = [p for p in paths if p != sys.executable and "impl=" not in p]
        assert paths, line
        for p in paths:
            assert Path(p).is_relative_to(out / name), (name, p)
        pytest_stage = "pytest" in argv
        assert pytest_stage or "--db" in argv, line
    assert not out.exists()  # a dry run writes nothing


def test_a_stage_writes_its_summary_environment_and_output_and_a_stage_past_its_limit_is_named(tmp_path,
                                                                                                monkeypatch):
    monkeypatch.setenv("OUT", str(tmp_path))
    quick = gpucheck.Stage("quick", "writes a file", ((1, "tiny-eager"),),
                           lambda d: [sys.executable, "-c", f"open({str(d / 'made.txt')!r}, 'w').write('x'); "
                                                            "print('| cell | ok |')"])
    slow = gpucheck.Stage("slow", "sleeps", ((1, "tiny-eager"),),
                          lambda d: [sys.executable, "-c", "import time; time.sleep(30)"])
    root = gpucheck.out_root("NVIDIA H100 80GB HBM3")
    assert root == tmp_path  # $OUT wins over results/gpu-<device>
    row = gpucheck.run_stage(quick, root)
    assert row["status"] == "ok"
    # under $OUT a stage is one archive (the remote runner returns few files, two folders deep)
    import tarfile

    assert not (tmp_path / "quick").exists() and row["archive"] == "quick.tar.gz"
    with tarfile.open(tmp_path / "quick.tar.gz") as tar:
        assert {n for n in tar.getnames() if n != "quick"} == {f"quick/{n}" for n in (
            "made.txt", "output.txt", "log.txt", "env.json", "SUMMARY.md")}
        assert "| cell | ok |" in tar.extractfile("quick/SUMMARY.md").read().decode()
    row = gpucheck.run_stage(slow, root, limit_s=1)
    assert row["status"].startswith("stage time limit") and row["seconds"] < 10
    text = gpucheck.summary([row], "test")
    assert "| slow | stage time limit (1 s) |" in text
    monkeypatch.delenv("OUT")
    assert gpucheck.out_root("NVIDIA H100 80GB HBM3") == ROOT / "results" / "gpu-nvidia-h100-80gb-hbm3"


def test_an_unknown_stage_is_refused_with_the_allowed_ones():
    done = _script("--stage", "everything")
    assert done.returncode == 2
    assert "unknown stage 'everything'" in done.stderr and "tests-eager" in done.stderr


def test_the_documented_proof_sequence_is_the_proof_stages_with_their_counts():
    import re

    text = (ROOT / "docs" / "how-to" / "gpu.md").read_text()
    blocks = {title: text.split(title, 1)[1].split("```", 2)[1] for title in
              ("The sequence that proves the GPU paths", "the stages that the open issues' GPU checks need")}
    line = r"scripts/gpu-check\.sh --stage (\S+)\s+#\s+(\d+) cells, (?:~|<= )(\d+) s"
    proof_block, issues_block = (re.findall(line, b) for b in blocks.values())
    proof = [s for s in gpucheck.STAGES if s.proof]
    assert [d[0] for d in proof_block] == [s.name for s in proof]
    assert len(issues_block) == 5 and len(re.findall(r"--stage", blocks[list(blocks)[1]])) == 5
    for name, cells, seconds in proof_block + issues_block:  # each line's counts are its stage's
        stage = gpucheck.BY_NAME[name]
        assert int(cells) == stage.cell_count and abs(int(seconds) - stage.estimate_s) <= 10, name
    minutes = re.search(r"about (\d+) minutes of GPU time on an H100", text)
    assert minutes and abs(int(minutes.group(1)) - sum(s.estimate_s for s in proof) / 60) < 1.5
    issues = re.search(r"in this order \(about\s+(\d+)\s+minutes", text)
    total = sum(gpucheck.BY_NAME[n].estimate_s for n, _, _ in issues_block) / 60
    assert issues and abs(int(issues.group(1)) - total) < 1.5 and total < 30  # one lending: 30 minutes


def test_the_test_stages_bring_their_own_pytest_where_the_gpu_image_has_none(tmp_path, monkeypatch):
    """The GPU image lists no pytest and reaches no registry: setup.sh --tests builds .gpu-site (pytest for its
    Python 3.12), which the remote command carries and the check puts on PYTHONPATH."""
    site = tmp_path / ".gpu-site"
    site.mkdir()
    monkeypatch.setattr(gpucheck, "GPU_SITE", site)
    monkeypatch.setattr(gpucheck, "has_pytest", lambda: False)
    assert gpucheck.stage_env()["PYTHONPATH"].split(os.pathsep)[-1] == str(site)
    monkeypatch.setattr(gpucheck, "has_pytest", lambda: True)
    assert str(site) not in gpucheck.stage_env()["PYTHONPATH"]
    monkeypatch.setattr(gpucheck, "has_pytest", lambda: False)
    monkeypatch.setattr(gpucheck, "GPU_SITE", tmp_path / "absent")
    row = gpucheck.run_stage(gpucheck.BY_NAME["tests-eager"], tmp_path / "out")
    assert row["status"].startswith("not run: no pytest here") and row["seconds"] == 0.0
    assert (tmp_path / "out" / "tests-eager" / "SUMMARY.md").exists()


def test_each_run_stage_counts_the_cells_its_command_plans(tmp_path):
    """The stage table's cell counts are what the commands plan (stackwars run's own planner),
    so the estimates that keep a stage inside one command count the right cells."""
    from stackwars import runner

    repeated = {"--preset": "presets", "-p": "presets", "--phase": "phases", "-b": "backends", "--backend": "backends",
                "--device": "devices", "--dtype": "dtypes", "--set": "sets"}
    checked = 0
    for stage in gpucheck.STAGES:
        argv = stage.argv(tmp_path / stage.name)
        if argv[1:4] != ["-m", "stackwars", "run"]:
            continue
        got = {k: [] for k in set(repeated.values())}
        workloads, i = [], 4
        while i < len(argv) and not argv[i].startswith("-"):
            workloads.append(argv[i])
            i += 1
        while i < len(argv):
            if argv[i] in repeated:
                got[repeated[argv[i]]].append(argv[i + 1])
                i += 2
            else:
                i += 1
        overrides = dict(s.split("=", 1) for s in got["sets"])
        # the last --processes wins, as in typer (COMMON's 1 where the stage names none)
        processes = int([argv[j + 1] for j in range(len(argv) - 1) if argv[j] == "--processes"][-1])
        # a stage that names no backend gets run's defaults on its device: on the GPU image (no torch-mlir)
        gpu_image = {"torch": {"importable": True, "cuda": True}, "jax": {"importable": True, "cuda": True}}
        specs = runner.plan_cells(workloads, got["presets"] or ["small"], got["phases"] or ["forward"],
                                  got["backends"] or runner.default_backends(gpu_image, got["devices"] or ["cpu"]),
                                  got["devices"] or ["cpu"], got["dtypes"] or ["float32"], overrides,
                                  repeats=processes)
        assert len(specs) == stage.cell_count, (stage.name, len(specs), stage.cell_count)
        checked += 1
    assert checked >= 9


def test_the_sensitivity_stage_gives_its_knobs_what_the_run_left_of_its_time(tmp_path, monkeypatch):
    """The sensitivity stages run the verdict, then `verdict --sensitivity` with every knob of
    the stage and a --budget of what the run left of SENSITIVITY_WITHIN_S, so a stage that runs
    long names the knobs it could not measure instead of being cut off at the command's limit
    with nothing stored."""
    clock, calls = [100.0], []

    def fake_run(argv, cwd=None, stdout=None):
        calls.append(argv)
        clock[0] += 130.0 if "run" in argv else 1.0  # the verdict's run took 130 s
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(gpucheck.subprocess, "run", fake_run)
    monkeypatch.setattr(gpucheck, "_now", lambda: clock[0])
    stage = gpucheck.BY_NAME["sensitivity"]
    argv = stage.argv(tmp_path)
    assert gpucheck.sensitivity_stage(argv[3:]) == 0
    run, sens = calls
    assert run[3:] == list(gpucheck.SENSITIVITY_BASE) + ["--db", str(tmp_path / "stackwars.db"), "--json",
                                                         str(tmp_path / "cells.json")]
    assert sens[3:5] == ["verdict", "--sensitivity"]
    assert [sens[i + 1] for i, a in enumerate(sens) if a == "-k"] == list(gpucheck.SENSITIVITY_KNOBS)
    assert sens[sens.index("--budget") + 1] == str(gpucheck.SENSITIVITY_WITHIN_S - 130)
    # its estimate: its cells', capped by the time it gives itself (--budget)
    assert stage.estimate_s == min(gpucheck.SENSITIVITY_WITHIN_S, stage.cell_count * gpucheck.ESTIMATE_S["verdict-model"])
    assert stage.within_s == gpucheck.SENSITIVITY_WITHIN_S
    assert (tmp_path / "sensitivity.json").exists()
