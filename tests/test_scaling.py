"""The scaling study: every data-parallel strategy's N-device step equals its framework's
one-device step (JAX on simulated CPU devices, PyTorch DDP / FSDP2 under torchrun with
gloo), sharding divides the state a device keeps, the collectives a step issues are counted
with their bytes, two processes standing for two hosts give one cell with both ranks'
figures, and the JAX and PyTorch single-device steps agree with each other."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stackwars.errors import SpecError
from stackwars.ir.stats import collectives
from stackwars.studies import scaling
from stackwars.studies.scaling import launch, models

ROOT = Path(__file__).resolve().parents[1]


def _item(framework, strategy, n, model="mlp-mnist", hosts=1, batch=8):
    return {"model": model, "preset": "tiny", "framework": framework, "strategy": strategy, "devices": n,
            "hosts": hosts, "scaling": "strong", "global_batch": batch, "per_device_batch": batch // n,
            "device": "cpu", "seed": 0, "warmup": 1, "steps": 3}


def _run(item):
    o = (launch.torch_cell if item["framework"] == "torch" else launch.jax_cell)(item, 300)
    assert o.status == "ok", o.error
    return o.result


# ---- pure parts ------------------------------------------------------------------------------------

def test_collectives_are_read_from_optimized_hlo_with_their_bytes():
    text = """HloModule m
ENTRY %main {
  %all-reduce.3 = (f32[512]{0}, f32[512,784]{1,0}, f32[]) all-reduce(%a, %b, %c), channel_id=1
  %gte = f32[512]{0} get-tuple-element(%all-reduce.3), index=0
  %ag = f32[784,512]{1,0} all-gather(f32[196,512]{1,0} %p), dimensions={0}
  %rs = bf16[16]{0} reduce-scatter(bf16[64]{0} %g), dimensions={0}
  %s = ((bf16[8]{0}), bf16[32]{0}) all-gather-start(bf16[8]{0} %q)
  %d = bf16[32]{0} all-gather-done(%s)
  ROOT %t = (f32[]) tuple(%x)
}"""
    got = collectives(text)
    assert got["all-reduce"] == {"count": 1, "bytes": 4 * (512 + 512 * 784 + 1)}
    assert got["all-gather"] == {"count": 2, "bytes": 4 * 784 * 512 + 2 * 32}  # the async pair counts once
    assert got["reduce-scatter"] == {"count": 1, "bytes": 2 * 16}
    assert set(got) == {"all-reduce", "all-gather", "reduce-scatter"}


def test_plan_splits_the_global_batch_for_strong_and_keeps_it_per_device_for_weak():
    items = scaling.plan("mlp-mnist", "tiny", [1, 2, 4], ["dp"], ["jax"], ["strong", "weak"], 4)
    strong = {i["devices"]: (i["global_batch"], i["per_device_batch"]) for i in items if i["scaling"] == "strong"}
    weak = {i["devices"]: (i["global_batch"], i["per_device_batch"]) for i in items if i["scaling"] == "weak"}
    assert strong == {1: (16, 16), 2: (16, 8), 4: (16, 4)}
    assert weak == {1: (4, 4), 2: (8, 4), 4: (16, 4)}
    with pytest.raises(SpecError, match="which 2 device"):  # 3 x 1 examples cannot split over 2
        scaling.plan("mlp-mnist", "tiny", [1, 2, 3], ["dp"], ["jax"], ["strong"], 1)
    assert len(scaling.plan("mlp-mnist", "tiny", [1, 2, 3], ["dp"], ["jax"], ["weak"], 1)) == 3
    with pytest.raises(SpecError, match="multiple of the host count"):
        scaling.plan("gpt2", "tiny", [1, 2], ["dp"], ["jax"], ["strong"], None, hosts=2)
    with pytest.raises(SpecError, match="allowed: dp, fsdp, shard_map, pmap"):
        scaling.plan("gpt2", "tiny", [2], ["zero"], ["jax"], ["strong"], None)
    with pytest.raises(SpecError, match="trains gpt2, mlp-mnist"):
        scaling.plan("resnet50", "tiny", [2], ["dp"], ["jax"], ["strong"], None)


def test_efficiency_and_the_slowest_rank():
    assert scaling.slowest([{"step_samples_s": [1.0, 5.0]}, {"step_samples_s": [2.0, 3.0]}]) == [2.0, 5.0]
    rows = [{"framework": "jax", "strategy": "dp", "scaling": s, "devices": n, "status": "ok", "step_median_s": t}
            for s, n, t in (("strong", 1, 1.0), ("strong", 4, 0.5), ("weak", 1, 1.0), ("weak", 4, 2.0))]
    scaling.efficiency(rows)
    by = {(r["scaling"], r["devices"]): (r["speedup"], r["efficiency"]) for r in rows}
    assert by[("strong", 4)] == (2.0, 0.5)  # same batch, twice as fast on four devices
    assert by[("weak", 4)] == (2.0, 0.5)  # four times the batch in twice the time


def test_parity_leaves_out_gradients_at_rounding_level_and_fails_a_wrong_one():
    ref_mu = {"w": np.array([0.1, -0.2, 1e-9]), "b": np.array([1e-10, -1e-10])}  # b: zero up to rounding
    ref_p = {"w": np.array([1.0, -2.0, 0.5]), "b": np.array([0.01, 0.02])}
    # the N-device step: the same up to rounding, but the noise-level gradients flipped sign,
    # so Adam moved those elements the other way (by 2 lr)
    mu = {"w": ref_mu["w"] * (1 + 1e-7), "b": -ref_mu["b"]}
    p = {"w": ref_p["w"] + np.array([1e-8, 1e-8, 6e-4]), "b": ref_p["b"] + 6e-4}
    got = scaling.parity(p, ref_p, mu, ref_mu, 1e-4)
    assert got["ok"], got
    assert got["params_left_out"] == 3  # w[2] and both b
    doubled = {"w": ref_mu["w"] * 2, "b": ref_mu["b"]}  # gradients summed where they should be averaged
    got = scaling.parity(p, ref_p, doubled, ref_mu, 1e-4)
    assert not got["ok"] and got["grads_worst"] == "w" and got["grads_rel_err"] == pytest.approx(1.0)
    moved = {**p, "w": ref_p["w"] * 1.01}  # a parameter with a real gradient moved wrongly
    got = scaling.parity(moved, ref_p, mu, ref_mu, 1e-4)
    assert not got["ok"] and got["params_worst"] == "w"
    with pytest.raises(ValueError, match="different tensors"):
        scaling.parity({"w": ref_p["w"]}, ref_p, mu, ref_mu, 1e-4)


# ---- the frameworks ------------------------------------------------------------------------------

def test_jax_and_torch_single_device_steps_agree():
    """The two frameworks' steps are one computation: the same updated parameters and first
    moments from the same weights and batch (the study compares each with itself, this ties
    them together; GPT-2's twins are tied together by tests/test_models.py)."""
    model = "mlp-mnist"
    import jax
    import optax
    import torch

    from stackwars.backends.jax_common import make_optimizer as jax_opt
    from stackwars.backends.torch_common import make_optimizer as torch_opt

    pb = models.problem(model, "tiny", 4)
    params, loss, host_batch = models.jax_model(pb, jax.devices("cpu")[0])
    tx = jax_opt(models.OPTIMIZER)
    opt = tx.init(params)
    grads = jax.jit(jax.grad(loss))(params, host_batch(pb.batch))
    updates, opt = tx.update(grads, opt, params)
    jp, jmu = optax.apply_updates(params, updates), optax.tree_utils.tree_get(opt, "mu")
    module, tloss, tensors = models.torch_model(pb, torch.device("cpu"))
    topt = torch_opt(models.OPTIMIZER, module.parameters())
    tloss(module, tensors(pb.batch)).backward()
    topt.step()
    named = dict(module.named_parameters())
    got = scaling.parity(models.jax_canonical(pb, jp), models.torch_canonical(pb, named),
                         models.jax_canonical(pb, jmu),
                         models.torch_canonical(pb, {k: topt.state[p]["exp_avg"] for k, p in named.items()}),
                         pb.tolerance)
    assert got["ok"], got
    assert got["grads_rel_err"] < 1e-4


@pytest.mark.parametrize("strategy, model", [("fsdp", "mlp-mnist"), ("shard_map", "mlp-mnist"),
                                             ("pmap", "mlp-mnist"), ("fsdp", "gpt2")])
def test_jax_strategies_on_two_devices_are_the_one_device_step(strategy, model):
    """(dp is in the CLI test below.)"""
    res = _run(_item("jax", strategy, 2, model=model))
    p = res["parity"]
    assert p["ok"] and p["grads_rel_err"] < 1e-5 and p["loss_rel_err"] < 1e-6, p
    assert len(res["step_samples_s"]) == 3 and min(res["step_samples_s"]) > 0
    assert res["first_step_s"] >= res["compile_s"] > 0
    if model == "gpt2":
        return
    pb = models.problem(model, "tiny", 8)
    replicated = 12 * pb.parameter_count + 4  # weights and two moments, float32; Adam's step count
    if strategy == "fsdp":  # every MLP array's first axis divides by 2
        assert res["state_bytes_per_device"] == pytest.approx(replicated / 2, abs=8)
        assert "all-gather" in res["collectives"]
    else:  # the explicit pmean: one all-reduce of every gradient and the loss
        assert res["state_bytes_per_device"] == pytest.approx(replicated, abs=8)
        assert res["collectives"] == {"all-reduce": {"count": 1, "bytes": 4 * pb.parameter_count + 4}}


def test_torch_fsdp2_on_two_ranks_is_the_one_device_step():
    """(DDP is in the CLI test below.)"""
    res = _run(_item("torch", "fsdp", 2))
    p = res["parity"]
    assert p["ok"] and p["grads_rel_err"] < 1e-5 and p["loss_rel_err"] < 1e-6, p
    pb = models.problem("mlp-mnist", "tiny", 8)
    assert len(res["per_rank"]) == 2 and res["process_count"] == 2
    c = res["collectives"]  # FSDP2 gathers the parameters (forward and backward), reduce-scatters the gradients
    assert c["all-gather"]["count"] >= 2
    assert c["reduce-scatter"]["bytes"] == pytest.approx(4 * pb.parameter_count / 2, rel=0.01)
    assert res["state_bytes_per_device"] < 7 * pb.parameter_count  # half of 12 bytes per parameter, and a little


@pytest.mark.parametrize("framework, model, strategy", [("jax", "mlp-mnist", "dp"), ("torch", "gpt2", "fsdp")])
def test_two_processes_standing_for_two_hosts_give_one_cell(framework, model, strategy):
    """jax.distributed.initialize / torchrun --nnodes 2, over 127.0.0.1."""
    res = _run(_item(framework, strategy, 2, model=model, hosts=2, batch=4))
    assert res["parity"]["ok"], res["parity"]
    assert res["process_count"] == 2 and len(res["per_rank"]) == 2
    if framework == "torch":
        assert sorted(r["node_rank"] for r in res["per_rank"]) == [0, 1]


def test_the_study_runs_from_the_cli(tmp_path):
    # the run's temporary folder: each cell's files (torchrun's logs among them) are gone with the cell
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch)}
    done = subprocess.run([sys.executable, "-m", "stackwars", "study", "scaling", "mlp-mnist", "--devices", "1,2",
                           "-s", "dp", "--scaling", "strong", "--steps", "3", "--warmup", "1",
                           "--db", str(tmp_path / "s.db"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(scratch.iterdir()), list(scratch.iterdir())
    assert "say nothing of a speed-up on real devices" in done.stdout
    data = json.loads((tmp_path / "out" / "scaling-mlp-mnist-tiny.json").read_text())
    rows = {(r["framework"], r["strategy"], r["devices"]): r for r in data["rows"]}
    assert {k: r["status"] for k, r in rows.items()} == {
        ("jax", "dp", 1): "ok", ("jax", "dp", 2): "ok", ("torch", "dp", 1): "ok", ("torch", "dp", 2): "ok"}
    P = rows["jax", "dp", 1]["parameters"]
    for fw in ("jax", "torch"):  # data parallel: the state replicated, one all-reduce of every gradient
        r = rows[fw, "dp", 2]
        assert r["parity"]["ok"] and r["parity"]["grads_rel_err"] < 1e-5
        assert 12 * P <= r["state_bytes_per_device"] <= 12 * P + 64
        assert r["collectives"]["all-reduce"]["bytes"] >= 4 * P and r["efficiency"] is not None
        assert len(r["step_samples_s"]) == 3
    assert rows["torch", "dp", 2]["collectives"]["all-reduce"]["bytes"] == 4 * P  # DDP's buckets: the gradients
    assert (tmp_path / "out" / "scaling-mlp-mnist-tiny.png").read_bytes()[:4] == b"\x89PNG"
    from typer.testing import CliRunner

    from stackwars.cli import app
    shown = CliRunner().invoke(app, ["show", "--db", str(tmp_path / "s.db")])
    assert shown.exit_code == 0 and "collectives per step" in shown.output


END = """
import atexit, os, sys, threading, time
from stackwars.studies.scaling.torch_rank import end_process
out = sys.argv[1]
def mark(name):
    open(os.path.join(out, name), "w").close()
class Teardown:
    def __del__(self, _open=open, _path=os.path.join(out, "teardown")):  # builtins are gone by then
        _open(_path, "w").close()
kept = Teardown()  # a module global: destroyed by the interpreter's teardown only
atexit.register(mark, "atexit")
threading.Thread(target=lambda: (time.sleep(0.3), mark("thread"))).start()
print("said", end="")
end_process(int(sys.argv[2]))
"""


@pytest.mark.parametrize("code", (0, 1))
def test_a_rank_ends_with_its_status_after_what_python_does_first_and_without_the_teardown(tmp_path, code):
    """torch_rank.end_process: a rank whose gloo group's threads outlive destroy_process_group
    ends without the interpreter's teardown (it aborted a rank once in about forty suite runs)."""
    done = subprocess.run([sys.executable, "-c", END, str(tmp_path), str(code)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == code and done.stdout == "said", done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atexit", "thread"]


def test_an_existing_process_group_is_used_and_rank_0_stores_one_run(tmp_path):
    """--launcher external: torchrun starts the command twice; both join the group, rank 0 stores."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           str(launch.free_port()), "--log-dir", str(tmp_path / "elastic"), "-m", "stackwars", "study",
                           "scaling", "mlp-mnist", "--framework", "torch", "--launcher", "external", "-s", "fsdp",
                           "--scaling", "weak", "--steps", "2",
                           "--db", str(tmp_path / "s.db"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert done.stdout.count("launched externally") == 1  # one rank reports
    (row,) = json.loads((tmp_path / "out" / "scaling-mlp-mnist-tiny.json").read_text())["rows"]
    assert row["status"] == "ok" and row["devices"] == 2 and row["parity"]["ok"]
    assert len(row["per_rank"]) == 2 and row["global_batch"] == 2 * row["per_device_batch"]


@pytest.mark.parametrize("args, message", [
    (["--devices", "1,0"], "'0' is not allowed; give positive integers (device counts)"),
    (["--hosts", "2", "--devices", "1,2"], "multiple of the host count"),
    (["--strategy", "zero"], "allowed: dp, fsdp, shard_map, pmap"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--device", "tpu"], "allowed: cpu, cuda"),
])
def test_bad_scaling_input_exits_2_and_writes_nothing(tmp_path, args, message):
    from typer.testing import CliRunner

    from stackwars.cli import app
    result = CliRunner().invoke(app, ["study", "scaling", "gpt2", *args, "--db", str(tmp_path / "s.db"),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "out").exists()


def test_a_rank_of_an_external_job_leaves_its_process_group_when_its_cells_are_done():
    """A gloo group left to the interpreter's exit can abort the rank after its result is printed
    ("terminate called without an active exception"), failing the whole torchrun job."""
    code = """
import torch.distributed as dist
from stackwars.studies import scaling
from stackwars.studies.scaling import sweep
(item,) = scaling.plan("mlp-mnist", "tiny", [1], ["dp"], ["torch"], ["weak"], None)
item = {**item, "device": "cpu", "seed": 0, "steps": 1, "warmup": 0, "launcher": "external", "rank": 0}
rows = sweep.measure([item], 120, None, [])
print("status", rows[0]["status"], "joined", "device" in sweep._GROUP, "initialized", dist.is_initialized())
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
           "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(launch.free_port())}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "status ok joined False initialized False" in done.stdout, done.stdout + done.stderr[-2000:]
