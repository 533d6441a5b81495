"""MNIST study: the IDX parser, checksums, the split, identical losses in both frameworks,
a short training that learns, and the CLI's outputs."""

import gzip
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stackwars.data import idx, mnist
from stackwars.studies import mnist as study
from stackwars.studies.mnist.common import TrainConfig, epoch_order, init_params

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared MNIST copy not found at {DATA}")


@pytest.fixture(scope="module")
def arrays():
    return mnist.load(mnist.verify(DATA))


@pytest.fixture(scope="module")
def split(arrays):
    return mnist.split(arrays, seed=0)


def test_idx_headers_of_the_real_files():
    images = idx.read(DATA / "train-images-idx3-ubyte.gz")
    labels = idx.read(DATA / "t10k-labels-idx1-ubyte.gz")
    assert images.shape == (60000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,) and set(np.unique(labels)) == set(range(10))
    raw = gzip.decompress((DATA / "train-labels-idx1-ubyte.gz").read_bytes())
    assert raw[:4] == b"\x00\x00\x08\x01" and struct.unpack(">I", raw[4:8])[0] == 60000


@pytest.mark.parametrize("raw,message", [
    (b"\x00\x00\x08\x01\x00\x00\x00\x05abc", "truncated"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x02abc", "trailing bytes"),
    (b"\x12\x34\x08\x01\x00\x00\x00\x01a", "not an IDX file"),
    (b"\x00\x00\x08\x03\x00\x00", "truncated header"),
    (b"\x00\x00", "too short"),
])
def test_idx_rejects_corrupt_bytes(raw, message):
    with pytest.raises(idx.DataError, match=message):
        idx.parse(raw, "x")


def test_truncated_gzip_is_a_clear_error(tmp_path):
    data = (DATA / "t10k-labels-idx1-ubyte.gz").read_bytes()
    bad = tmp_path / "t10k-labels-idx1-ubyte.gz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(idx.DataError, match="corrupt gzip|truncated"):
        idx.read(bad)


def _copy(tmp_path, with_sums=True):
    d = tmp_path / "mnist"
    d.mkdir()
    for f in mnist.FILES.values():
        shutil.copy(DATA / f, d / f)
    if with_sums:
        shutil.copy(DATA / "SHA256SUMS", d / "SHA256SUMS")
    return d


def test_verify_identifies_mnist_with_or_without_sums_file(tmp_path):
    assert mnist.verify(DATA).dataset == "mnist"
    assert mnist.verify(_copy(tmp_path, with_sums=False)).dataset == "mnist"


def test_checksum_mismatch_and_missing_files(tmp_path):
    d = _copy(tmp_path)
    target = d / "t10k-labels-idx1-ubyte.gz"
    data = bytearray(target.read_bytes())
    data[-10] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(idx.DataError, match="checksum mismatch.*t10k-labels"):
        mnist.verify(d)
    (d / "SHA256SUMS").unlink()
    with pytest.raises(idx.DataError, match="checksum mismatch.*t10k-labels"):
        mnist.verify(d)
    target.unlink()
    with pytest.raises(idx.DataError, match="lacks t10k-labels-idx1-ubyte.gz"):
        mnist.verify(d)
    with pytest.raises(idx.DataError, match="does not exist"):
        mnist.verify(tmp_path / "nowhere")


def test_offline_without_files_says_where_to_put_them(tmp_path, monkeypatch):
    monkeypatch.delenv(mnist.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(mnist, "MIRRORS", ("http://127.0.0.1:9/",))  # nothing listens: refused at once
    with pytest.raises(idx.DataError, match="--data-dir DIR or set STACKWARS_DATA_DIR"):
        mnist.locate(None)
    monkeypatch.setenv(mnist.ENV_DIR, str(DATA))
    assert mnist.locate(None).directory == DATA


def test_split_is_deterministic_and_disjoint(arrays):
    a, b, c = mnist.split(arrays, seed=0), mnist.split(arrays, seed=0), mnist.split(arrays, seed=1)
    assert len(a.train_index) == 50_000 and len(a.val_index) == 10_000
    assert not set(a.train_index) & set(a.val_index)
    assert set(a.train_index) | set(a.val_index) == set(range(60_000))
    assert np.array_equal(a.val_index, b.val_index) and not np.array_equal(a.val_index, c.val_index)
    assert a.train_x.dtype == np.float32 and 0.0 <= a.train_x.min() and a.train_x.max() == 1.0
    assert a.test_x.shape == (10_000, 784)


def test_batch_order_is_identical_per_seed_and_full_batches_only():
    o1, o2 = epoch_order(0, 1, 1000, 64), epoch_order(0, 1, 1000, 64)
    assert np.array_equal(o1, o2) and len(o1) == 15 * 64 and len(set(o1)) == len(o1)
    assert not np.array_equal(o1, epoch_order(0, 2, 1000, 64))


def _trainer(framework, lr=0.1, batch=64, limit=640, placement="device"):
    cfg = TrainConfig(framework, batch, epochs=1, lr=lr, limit_train=limit, placement=placement)
    if framework == "jax":
        from stackwars.studies.mnist.jax_train import JaxTrainer
        return cfg, JaxTrainer(cfg, init_params(0))
    from stackwars.studies.mnist.torch_train import TorchTrainer
    return cfg, TorchTrainer(cfg, init_params(0))


@pytest.mark.parametrize("placement", ("device", "host"))
def test_same_weights_same_batches_same_losses(split, placement):
    """Ten SGD steps from the same initial weights and batches: the frameworks agree,
    whether the split lives on the device or every batch is copied from the host."""
    losses = {}
    for fw in ("torch", "jax"):
        cfg, t = _trainer(fw, placement=placement)
        t.put_data("train", split.train_x[:640], split.train_y[:640])
        losses[fw] = np.array(t.run_epoch(1, epoch_order(0, 1, 640, 64)).step_losses)
    assert len(losses["torch"]) == 10
    assert losses["torch"][0] == pytest.approx(losses["jax"][0], rel=1e-6)
    np.testing.assert_allclose(losses["torch"], losses["jax"], rtol=2e-5)
    assert losses["torch"][-1] < losses["torch"][0]  # and they are learning


def test_a_short_training_learns(split, tmp_path):
    configs = study.plan(["torch", "jax"], [64], epochs=2, lr=0.1)
    stored = []
    ds = mnist.verify(DATA)
    rows = study.run(configs, ds, 0, None, 600, None, lambda cfg, rs: stored.append((cfg.key, rs)),
                     limits={"limit_train": 5000, "limit_eval": 2000})
    assert [k for k, _ in stored] == ["torch-eager/b64", "jax-jit/b64"]
    for r in rows:
        assert r["status"] == "ok", r.get("error")
    final = [r for r in rows if r["epoch"] == 2]
    for r in final:
        assert r["val_acc"] > 0.75 and r["test_acc"] > 0.75  # chance is 0.10
        assert r["train_loss"] < 1.0  # chance: ln(10) = 2.30
    first = [r for r in rows if r["epoch"] == 1]
    assert all(f["train_loss"] > l["train_loss"] for f, l in zip(first, final))
    assert rows[0]["compile_s"] is None and rows[2]["compile_s"] > 0  # eager vs jit, epoch 1
    assert rows[0]["split_digest"] == rows[2]["split_digest"]


@pytest.mark.slow
def test_cli_writes_csv_png_and_database(tmp_path):
    from stackwars.report.training import CSV_COLUMNS
    out, db = tmp_path / "out", tmp_path / "r.db"
    done = subprocess.run([sys.executable, "-m", "stackwars", "train", "mnist", "--epochs", "2", "--batch-size",
                           "1024", "--data-dir", str(DATA), "--out", str(out), "--db", str(db)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "epoch  2/2" in done.stderr
    import csv
    rows = list(csv.DictReader((out / "benchmark_results.csv").open()))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [(r["framework"], r["epoch"]) for r in rows] == [("torch", "1"), ("torch", "2"), ("jax", "1"), ("jax", "2")]
    assert rows[1]["test_acc"] and not rows[0]["test_acc"]  # test accuracy on the last row only
    assert rows[2]["includes_compile"] == "True" and float(rows[2]["compile_s"]) > 0
    png = (out / "training_curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    from stackwars.store.results import Store
    with Store(db, create=False) as s:
        run_id = s.latest_run_id("train:mnist")
        assert len(s.study_rows(run_id, "mnist")) == 4


@pytest.mark.parametrize("args,message", [
    (["--batch-size", "0"], "batch size must be between 1"),
    (["--framework", "tensorflow"], "unknown framework 'tensorflow'"),
    (["--epochs", "0"], "epochs must be >= 1"),
    (["--placement", "disk"], "unknown placement"),
    (["--data-dir", "/nonexistent"], "does not exist"),
])
def test_cli_bad_input_exits_2(tmp_path, monkeypatch, args, message):
    from typer.testing import CliRunner

    from stackwars.cli import app
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["train", "mnist", "--data-dir", str(DATA), *args, "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert list(tmp_path.iterdir()) == []


def test_cli_corrupt_data_exits_2(tmp_path):
    from typer.testing import CliRunner

    from stackwars.cli import app
    d = _copy(tmp_path)
    (d / "train-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8b broken")
    result = CliRunner().invoke(app, ["train", "mnist", "--data-dir", str(d), "--out", str(tmp_path / "o"),
                                      "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2 and "checksum mismatch" in " ".join(result.output.split())
    assert not (tmp_path / "o").exists() and not (tmp_path / "x.db").exists()
