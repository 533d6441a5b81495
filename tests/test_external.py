"""Every model against an independent implementation (Hugging Face transformers), with the
same weights: forward output, loss and every parameter's gradient, in float64 and float32,
for both twins (tests/external_refs.py does the work in its own process).

Two twins agreeing prove nothing about either: both BERT twins once dropped BERT's padding
index together (the embedding row of token 0 got a gradient through the lookup that HF's
BertForPreTraining keeps out: 7% of that gradient's largest value at the default seed) and
every twin-against-twin test passed. This check would have failed.

transformers is the `reference` extra (scripts/setup.sh --tests installs it). Without it the test
skips and says so; CI sets STACKWARS_REQUIRE_REFERENCE=1, so there a missing package fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.external_refs import FLOAT32_IN_HF

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("gpt2", "bert-base", "gpt-neo-1.3b", "llama3-8b", "vit-b16", "resnet50")
FLOAT64 = 1e-10  # the order of operations alone
FLOAT64_HF_ROUNDS = 5e-6  # where HF computes part of the model in float32 (FLOAT32_IN_HF)
FLOAT32 = 1e-4  # two float32 programs, different operation orders (worst seen: 2.4e-5, BERT's NSP bias)


def _transformers() -> None:
    try:
        import transformers  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - absent or broken: the same outcome
        if os.environ.get("STACKWARS_REQUIRE_REFERENCE") == "1":
            pytest.fail(f"transformers is required here (STACKWARS_REQUIRE_REFERENCE=1) and does not import: {exc}")
        pytest.skip(f"transformers (the `reference` extra) is not installed ({exc}); scripts/setup.sh --tests installs it "
                    "and CI requires it")


@pytest.fixture(scope="module")
def results():
    _transformers()
    # XLA compiles the twins without most optimisations: this checks what the twins compute (the
    # model parity tests check the optimised jax-jit cells), and compiling was most of its time
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "TRANSFORMERS_VERBOSITY": "error",
           "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "external_refs.py"), *MODELS], capture_output=True,
                          text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("twin", ("torch", "jax"))
@pytest.mark.parametrize("dtype", ("float64", "float32"))
@pytest.mark.parametrize("model", MODELS)
def test_each_twin_matches_transformers(results, model, dtype, twin):
    from stackwars import registry

    errs = results[model][dtype][twin]
    cfg = registry.workload(model).config("tiny", {})
    grads = {k[5:] for k in errs if k.startswith("grad.")}
    params = {k for k in registry.workload(model).shapes(cfg)[0] if not k.endswith(("running_mean", "running_var"))}
    assert grads == params  # every parameter's gradient was compared, nothing else
    assert "out" in errs and "loss" in errs
    limit = FLOAT32 if dtype == "float32" else FLOAT64_HF_ROUNDS if model in FLOAT32_IN_HF else FLOAT64
    worst = max(errs.items(), key=lambda kv: kv[1])
    assert worst[1] <= limit, (model, dtype, twin, worst)


@pytest.mark.parametrize("model", MODELS)
def test_the_twins_are_one_model_in_float64(results, model):
    """In float64 the JAX twin and the PyTorch twin may differ only in the order of operations:
    ~1e-13 on the forward output, the loss and every gradient, so a wrong epsilon, scale or
    mask shows by orders of magnitude even where HF itself rounds to float32 (FLOAT32_IN_HF).
    The naive attention variants and BatchNorm's new running statistics: test_models.py's
    float64 check."""
    errs = results[model]["float64"]["jax-vs-torch"]
    assert "out" in errs and "loss" in errs and any(k.startswith("grad.") for k in errs)
    worst = max(errs.items(), key=lambda kv: kv[1])
    assert worst[1] < FLOAT64, (model, worst)


def test_the_default_inputs_exercise_bert_padding():
    """The check above is only as sharp as its inputs: at the default seed BERT's tokens
    include its padding id, so a twin that let that row learn through the lookup fails."""
    from stackwars import registry

    wl = registry.workload("bert-base")
    cfg = wl.config("tiny", {})
    _, batch = wl.init(cfg, 0)
    assert cfg.pad_id == 0 and (batch["ids"] == cfg.pad_id).any()
