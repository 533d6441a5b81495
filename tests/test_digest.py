"""A large output the run has already compared, bit for bit, is not copied and compared again
(harness/digest.py): each framework's fold on its device is numpy's, a changed bit changes the
digest, the harness's own program is no compile of the cell's, and a run's later processes
take the comparison that their output's bits already got."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from stackwars import runner
from stackwars.backends import jax_common, torch_common
from stackwars.harness import digest
from stackwars.harness import env as envmod
from stackwars.harness import reference as refmod
from stackwars.records import MeasureConfig, Parity
from stackwars.store.results import Store


@pytest.fixture
def small_outputs_folded(monkeypatch):
    monkeypatch.setenv(digest.ON_HOST_ENV, "1")  # these outputs are in host memory
    monkeypatch.setattr(digest, "DIGEST_FROM", 10)
    monkeypatch.setattr(torch_common, "FOLD_BLOCKS", 3)  # several folds and their seams


@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "float16"))
@pytest.mark.parametrize("elements", (65536, 70001, 131))  # whole blocks only, blocks and a padded one, one
def test_each_frameworks_fold_is_numpys(small_outputs_folded, dtype, elements):
    x = np.random.default_rng(elements).standard_normal((elements, 3)).astype(np.float32)
    t = torch.from_numpy(x).to(getattr(torch, dtype))
    j = jnp.asarray(x).astype(getattr(jnp, dtype))
    expected = digest.digest_numpy(torch_common.to_numpy(t))
    assert torch_common.output_digest(t) == expected
    assert jax_common.output_digest(j) == digest.digest_numpy(jax_common.to_numpy(j))
    assert digest.digest_numpy(jax_common.to_numpy(j)) == expected  # the same bits, the same digest


def test_one_changed_bit_or_two_words_of_a_block_change_the_digest(small_outputs_folded):
    x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)  # 3 blocks of words and a part
    base = digest.digest_numpy(x)
    one = x.copy()
    one[77] = np.nextafter(one[77], np.float32(np.inf))  # one unit in the last place
    two = x.copy()
    two[[5, 6]] = two[[6, 5]]  # two words of one block swapped: the same sum, another weighted sum
    nan = x.copy()
    nan[4000] = np.nan
    others = {digest.digest_numpy(v) for v in (one, two, nan, x.reshape(400, 250), x.astype(np.float16))}
    assert base not in others and len(others) == 5  # the shape and the dtype are part of it too
    assert torch_common.output_digest(torch.from_numpy(one)) == digest.digest_numpy(one)


def test_small_integer_or_host_outputs_are_not_folded(monkeypatch):
    monkeypatch.delenv(digest.ON_HOST_ENV, raising=False)
    big = digest.DIGEST_FROM
    assert torch_common.output_digest(torch.zeros(big)) is None  # in host memory: compared where it lies
    assert jax_common.output_digest(jnp.zeros(big)) is None
    assert digest.wanted(big, 2, True, on_host=False) and not digest.wanted(big - 1, 2, True, on_host=False)
    assert not digest.wanted(big, 1, True, on_host=False) and not digest.wanted(big, 4, False, on_host=False)
    monkeypatch.setenv(digest.ON_HOST_ENV, "1")
    monkeypatch.setattr(digest, "DIGEST_FROM", 1000)
    assert torch_common.output_digest(torch.zeros(999)) is None  # under DIGEST_FROM: copied and compared
    assert torch_common.output_digest(torch.zeros(1000, dtype=torch.int32)) is None
    assert torch_common.output_digest(torch.zeros(1000)) == digest.digest_numpy(np.zeros(1000, np.float32))


def test_the_digests_program_is_not_a_compile_or_cache_event_of_the_cell(small_outputs_folded):
    x = jnp.arange(1000.0).reshape(50, 20)  # a shape no other test folds: its fold is compiled below
    x.block_until_ready()
    events = jax_common.CompileEvents()
    events.mark()
    assert jax_common.output_digest(x, events) == digest.digest_numpy(np.asarray(x))
    assert events.events == [] and events.cache == {"hits": 0, "misses": 0}
    assert not events.paused
    jax.jit(lambda v: v * 2)(x).block_until_ready()  # the cell's own compiles are still heard
    assert events.after_first(jax_common.COMPILE_EVENT) == 1


def test_a_comparison_is_kept_for_its_digest_reference_and_tolerance(tmp_path):
    cache = refmod.ReferenceCache(str(tmp_path))
    parity = Parity(max_rel_err=float("inf"), tolerance=1e-3, per_output={"out": float("inf")},
                    failure="out: the output holds NaN or infinity")
    cache.keep_verified("ref", "sha256:a", 1e-3, parity, "torch-eager process #0")
    cache.keep_verified("ref", "sha256:b", 1e-3, Parity(max_rel_err=1e-7, tolerance=1e-3), "jax-jit process #0")
    entry = cache.verified("ref", "sha256:a", 1e-3)
    again, info = refmod.verified_parity(cache, "ref", "sha256:a", entry, "auto")
    assert again == parity and not again.ok  # a failed comparison stands for the same bits too
    assert info["source"] == "reused: the comparison of the same output bits by torch-eager process #0"
    assert cache.verified("ref", "sha256:b", 1e-3)["by"] == "jax-jit process #0"  # both kept
    assert cache.verified("ref", "sha256:a", 1e-2) is None  # another tolerance: compared again
    assert cache.verified("ref", "sha256:c", 1e-3) is None and cache.verified("other", "sha256:a", 1e-3) is None
    assert refmod.ReferenceCache(None).verified("ref", "sha256:a", 1e-3) is None


def test_a_runs_later_processes_take_the_comparison_their_outputs_bits_got(tmp_path, machine_probe, monkeypatch):
    """A 4096 x 4096 GEMM output (16.8M elements, folded at the default DIGEST_FROM) in two
    processes a backend, folded in host memory as a GPU's output is on its device: the first
    comparison is made once, and every later output with the same bits takes it, with the same
    figure; nothing of it is copied to the host (test_gpu_paths runs it on a GPU)."""
    monkeypatch.setenv(digest.ON_HOST_ENV, "1")  # the cells' servers start with it
    specs = runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["torch-eager", "jax-jit"],
                              overrides={"m": 4096, "n": 4096, "k": 16}, repeats=2)
    config = MeasureConfig(warmup=0, min_samples=2, min_time_s=0.0, max_samples=2, timeout_s=300)
    with Store(tmp_path / "r.db") as store:
        run_id = runner.new_run(store, specs, config)
        done = runner.execute(store, run_id, specs, config, envmod.fingerprint(None, machine_probe))
    assert [m.status for m in done] == ["ok"] * 4, [m.error for m in done]
    refs = [m.settings["reference"] for m in done]
    assert refs[0]["source"] == "computed" and len({r["digest"] for r in refs}) <= 2, refs
    for m in done:
        if m.spec.repeat:  # the same program in a later process: the same bits as a compared output
            assert m.settings["reference"]["source"].startswith("reused: the comparison of the same output bits by")
            first = next(f for f in done if f.spec.backend == m.spec.backend and not f.spec.repeat)
            assert m.parity == first.parity and m.parity.ok
            assert m.timeline["digest_s"] > 0 and m.timeline["reference_s"] == 0
    jax_runs = [m for m in done if m.spec.backend == "jax-jit"]
    assert all(m.compile.recompiles == 0 for m in jax_runs)  # the digest's program is not the cell's
