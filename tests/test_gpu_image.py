"""The GPU image's frameworks (torch 2.11.0, jax 0.11.2, flax 0.12.10, optax 0.2.8; see
docs/how-to/gpu.md) have every name of their API stackwars uses. jax 0.11.2 needs Python 3.12
and this machine has 3.11; torch 2.11 has no CPU wheel on PyPI: so they are read from their
wheels (scripts/setup.sh --tests downloads them; torch's stubs name what its extension binds), not
imported: a renamed or removed function shows here before a GPU run finds it. Required in CI
(STACKWARS_REQUIRE_GPU_IMAGE=1): without the wheels the test fails there, not skips."""

import os
from pathlib import Path

import pytest

from tests.api_surface import Source, missing, uses

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".whl" / "gpu-image"
IMAGE = {"jax": "0.11.2", "flax": "0.12.10", "optax": "0.2.8", "torch": "2.11.0"}


def _wheel(pkg: str) -> Path:
    found = sorted(WHEELS.glob(f"{pkg}-{IMAGE[pkg]}-*.whl"))
    if not found:
        message = f"no {pkg} {IMAGE[pkg]} wheel in {WHEELS} (scripts/setup.sh --tests downloads it)"
        if os.environ.get("STACKWARS_REQUIRE_GPU_IMAGE"):
            pytest.fail(message)
        pytest.skip(message)
    return found[0]


@pytest.fixture(scope="module")
def used():
    return uses(sorted((ROOT / "stackwars").rglob("*.py")), tuple(IMAGE), ROOT)


@pytest.mark.parametrize("pkg", sorted(IMAGE))
def test_every_name_stackwars_uses_exists_in_the_gpu_images_release(pkg, used):
    source = Source.wheel(_wheel(pkg))
    gone = missing(source, used, pkg)
    assert not gone, "\n".join(f"{u.chain} (used at {u.where})" for u in gone)
    assert sum(1 for u in used if u.chain.startswith(pkg + ".")) > 5  # the reader found the uses


def test_the_reader_tells_a_present_name_from_an_absent_one():
    jax = Source.wheel(_wheel("jax"))
    assert jax.has("jax.nn.dot_product_attention") and jax.has("jax.tree.map") and jax.has("jax.numpy.ones")
    assert jax.has("jax.monitoring.register_event_duration_secs_listener")
    assert not jax.has("jax.nn.no_such_function") and not jax.has("jax.no_such_module.x")
    # jax 0.11.2's source is Python 3.12 (type parameters): read as text where 3.11 cannot parse it
    assert any("class Tracer[" in text for text in jax.files.values())
    torch = Source.wheel(_wheel("torch"))
    assert torch.has("torch._C._get_tracing_state") and not torch.has("torch._C._no_such_binding")  # stubs
    assert torch.has("torch._dynamo.utils.counters") and torch.has("torch.compiler.cudagraph_mark_step_begin")
