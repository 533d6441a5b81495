"""Recompile and cache studies: compile counts from the frameworks' own signals."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from stackwars import runner
from stackwars.cli import app
from stackwars.records import CellSpec, MeasureConfig
from stackwars.studies import cache as cache_study
from stackwars.studies import recompile as study


def _rows(workload, key, values, backend, variant, phase="forward"):
    [item] = study.plan(workload, "tiny", phase, key, values, [backend], [variant])
    return study.run_item(item)["rows"]


def _compiled(rows):
    return [r["compiled"] for r in rows]


def test_jax_jit_compiles_once_per_distinct_shape():
    rows = _rows("mha", "seq", [16, 32, 16, 48], "jax-jit", "as-is")
    assert _compiled(rows) == [True, True, False, True]
    assert rows[-1]["compile_count"] == 3
    assert "now f32[2,32,32] and before f32[2,16,32]" in rows[1]["reason"]


def test_torch_dynamic_false_compiles_once_per_distinct_shape():
    rows = _rows("mha", "seq", [16, 32, 16, 48], "torch-compile", "dynamic=False")
    assert _compiled(rows) == [True, True, False, True]
    assert rows[-1]["compile_count"] == 3
    assert "size mismatch at index 1. expected 16, actual 32" in rows[1]["reason"]


def test_torch_automatic_dynamic_stops_after_the_second_shape():
    rows = _rows("mha", "seq", [16, 32, 48, 64, 96], "torch-compile", "dynamic=None")
    assert _compiled(rows) == [True, True, False, False, False]
    for variant in ("dynamic=True", "mark_dynamic"):
        assert _compiled(_rows("mha", "seq", [16, 32, 48], "torch-compile", variant)) == [True, False, False]


def test_jax_buckets_compile_once_per_bucket_and_stay_exact():
    rows = _rows("mha", "seq", [16, 32, 48, 64], "jax-jit", "buckets")
    assert [r["padded_to"] for r in rows] == [16, 32, 64, 64]
    assert _compiled(rows) == [True, True, True, False]
    assert rows[2]["helper_compiles"] >= 1  # the slice back from 64 to 48 is its own small executable
    assert rows[0]["exact"]  # causal attention: padding at the end changes no earlier position


def test_python_scalars_and_dtypes():
    # JAX traces a Python float as a weakly typed value: no recompile when it changes
    assert _compiled(_rows("ffn", "scale", [0.5, 1.0, 2.0], "jax-jit", "as-is")) == [True, False, False]
    # a new dtype is a new program in both frameworks
    for backend, variant in (("jax-jit", "as-is"), ("torch-compile", "dynamic=None")):
        assert _compiled(_rows("gemm", "dtype", ["float32", "bfloat16"], backend, variant)) == [True, True]


@pytest.mark.parametrize("vary,message", [
    ("heads=2,4", "can vary batch, seq, d_model"),
    ("seq", "--vary expects KEY=V1,V2"),
    ("seq=16", "at least two values"),
    ("seq=a,b", "'a' is not allowed; give positive integers"),
    ("dtype=float32,float16", "'float16' is not allowed; give dtypes (float32, bfloat16)"),
    ("seq=0,16", "positive"),
])
def test_bad_vary_exits_2(vary, message, tmp_path):
    result = CliRunner().invoke(app, ["study", "recompile", "mha", "--vary", vary, "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "x.db").exists()


def test_cache_study_shows_hits_only_when_warm(machine_probe):
    probe = machine_probe
    cfg = MeasureConfig(warmup=1, min_samples=2, min_time_s=0.0, timeout_s=600)
    for backend, hit_key in (("jax-jit", "hits"), ("torch-compile", "fxgraph_cache_hit")):
        rows = cache_study.run(CellSpec("ffn", "tiny", "forward", backend), cfg, probe, runner.measure_one)
        cold, warm = rows
        assert (cold["run"], warm["run"]) == ("cold", "warm")
        assert cold["status"] == warm["status"] == "ok"
        assert cold["cache_entries_before"] == 0 and warm["cache_entries_before"] > 0
        assert cold["cache_hits"].get(hit_key, 0) == 0
        assert warm["cache_hits"].get(hit_key, 0) >= 1


@pytest.mark.slow
def test_recompile_cli_json_and_store(tmp_path):
    out, db = tmp_path / "rows.json", tmp_path / "r.db"
    done = subprocess.run([sys.executable, "-m", "stackwars", "study", "recompile", "gemm", "--vary", "m=8,16,8",
                           "-p", "tiny", "--json", str(out), "--db", str(db)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert len(rows) == 2 * 3 + 4 * 3  # jax-jit as-is, buckets; torch-compile 4 variants; 3 calls each
    for r in rows:
        assert set(study.ROW_KEYS) <= set(r)
    from stackwars.store.results import Store
    with Store(db, create=False) as s:
        assert len(s.study_rows(s.latest_run_id("study:recompile"))) == len(rows)


def test_a_study_variant_runs_in_a_fresh_fork_of_a_preloading_server_with_its_own_cold_cache():
    """A study's worker is made as a cell's: forked from a server that preloaded the backend's
    framework (a spawned interpreter imported PyTorch and Inductor again for each of a study's
    variants: 71 s for the recompile command below on the Zen 3 VM, 27 s forked), its cache
    folder its own and empty."""
    import os

    [item] = study.plan("gemm", "tiny", "forward", "m", [8, 16], ["jax-jit"], ["as-is"])
    folders = []

    def task(cache):
        folders.append(cache)
        return {"target": "stackwars.studies.recompile:run_item", "kwargs": {"item": item, "cache_dir": cache},
                "process": runner.study_process("jax-jit", "cpu", cache)}

    o = runner.run_cold(task, 120, None)
    assert o.status == "ok", o.error
    origin = o.result["process_settings"]["origin"]
    assert origin["how"] == "forked from a preloading server" and "jax" in origin["preloaded"]
    assert origin["pid"] not in (os.getpid(), origin["server_pid"])
    assert origin["before_fork"]["jax_backends"] == []  # the device was made in the child
    assert o.result["process_settings"]["cache_dir"] == folders[0] and not os.path.exists(folders[0])
    assert [r["compiled"] for r in o.result["rows"]] == [True, True]
