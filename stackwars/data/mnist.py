"""MNIST-style datasets: locate, download, verify, decode (with a cache), split.

A dataset directory holds the four standard files. Where they come from, in order:
``--data-dir``, ``$STACKWARS_DATA_DIR``, else a download from the public mirrors into
``mnist`` in stackwars's cache folder (``tmp.cache_root``: ``~/.cache/stackwars`` by
default). Every file is verified by SHA-256: against a ``SHA256SUMS`` file in the directory
when there is one, else against the published checksums of MNIST or Fashion-MNIST. The
decoded arrays are cached as .npz, keyed by the checksums, so later runs skip the gzip and
parsing.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stackwars.data.idx import DataError, read
from stackwars.harness.tmp import cache_root

FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
KNOWN = {  # published SHA-256 of the four files
    "mnist": {
        "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    },
    "fashion-mnist": {
        "train-images-idx3-ubyte.gz": "08dc20ab1689590a0bcd66e874647b6ee8464e2d501b5a3f1f78831db19a3fdc",
        "train-labels-idx1-ubyte.gz": "b0197879cbda89f3dc7b894f9fd52b858e68ea4182b6947c9d8c2b67e5f18dcc",
        "t10k-images-idx3-ubyte.gz": "78dcbbfb5a27efaf1b6c1d616caca68560be8766c5bffcb2791df9273a534229",
        "t10k-labels-idx1-ubyte.gz": "42bd18137a62d5998cdeae52bf3a0676ac6b706f5cf8439b47bb5b151ae3dccf",
    },
}
MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
ENV_DIR = "STACKWARS_DATA_DIR"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _sums_file(directory: Path) -> dict[str, str] | None:
    path = directory / "SHA256SUMS"
    if not path.exists():
        return None
    sums = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            sums[parts[1].lstrip("*")] = parts[0].lower()
    return sums


@dataclass(frozen=True)
class Verified:
    directory: Path
    dataset: str  # "mnist", "fashion-mnist", or "SHA256SUMS" for a directory that vouches for itself
    checksums: dict[str, str]


def verify(directory: Path) -> Verified:
    """Check that the four files exist and match their SHA-256; say exactly what is wrong."""
    directory = Path(directory).expanduser()
    if not directory.exists():
        raise DataError(f"data directory {directory} does not exist")
    if not directory.is_dir():
        raise DataError(f"data directory {directory} is not a directory; give the directory that holds the four "
                        f"MNIST files")
    missing = [f for f in FILES.values() if not (directory / f).is_file()]
    if missing:
        raise DataError(f"{directory} lacks {', '.join(missing)}; an MNIST-style directory holds the four files "
                        f"{', '.join(FILES.values())}")
    actual = {f: sha256(directory / f) for f in FILES.values()}
    declared = _sums_file(directory)
    if declared is not None:
        bad = [f for f in FILES.values() if declared.get(f) != actual[f]]
        if bad:
            raise DataError(f"checksum mismatch in {directory} for {', '.join(bad)} against its SHA256SUMS "
                            f"(got {', '.join(actual[f][:16] + '...' for f in bad)}); the files are corrupt or "
                            f"not the ones SHA256SUMS describes")
        name = next((k for k, sums in KNOWN.items() if sums == actual), "SHA256SUMS")
        return Verified(directory, name, actual)
    for name, sums in KNOWN.items():
        if sums == actual:
            return Verified(directory, name, actual)
    partial = [k for k, sums in KNOWN.items() if any(sums[f] == actual[f] for f in FILES.values())]
    if partial:
        bad = [f for f in FILES.values() if KNOWN[partial[0]][f] != actual[f]]
        raise DataError(f"checksum mismatch in {directory}: {', '.join(bad)} differ from the published "
                        f"{partial[0]} files (corrupt or truncated download?)")
    raise DataError(f"the files in {directory} match neither MNIST nor Fashion-MNIST; to use another dataset "
                    f"in this format, put a SHA256SUMS file (sha256sum output) beside them")


def download(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for fname in FILES.values():
        target = directory / fname
        if target.exists() and sha256(target) == KNOWN["mnist"][fname]:
            continue
        errors = []
        for mirror in MIRRORS:
            tmp = target.with_suffix(".part")
            try:
                with urllib.request.urlopen(mirror + fname, timeout=60) as r, open(tmp, "wb") as f:
                    f.write(r.read())
            except (urllib.error.URLError, OSError) as exc:
                errors.append(f"{mirror}: {getattr(exc, 'reason', exc)}")
                continue
            if sha256(tmp) != KNOWN["mnist"][fname]:
                tmp.unlink()
                errors.append(f"{mirror}: checksum mismatch")
                continue
            os.replace(tmp, target)
            break
        else:
            raise DataError(f"could not download {fname} ({'; '.join(errors)}). Offline? Put the four MNIST files "
                            f"({', '.join(FILES.values())}) in a directory and pass --data-dir DIR or set "
                            f"{ENV_DIR}=DIR")


def locate(data_dir: str | os.PathLike | None = None) -> Verified:
    """The verified dataset directory: option, environment, or a downloaded copy."""
    chosen = data_dir or os.environ.get(ENV_DIR)
    if chosen:
        return verify(Path(chosen))
    directory = cache_root() / "mnist"
    download(directory)
    return verify(directory)


def decoded(ds: Verified) -> Path:
    """Path of the decoded .npz (uint8 images [N, 28, 28], uint8 labels [N]), made once
    per set of checksums, so later runs and workers skip the gzip and the parsing."""
    key = hashlib.sha256("".join(ds.checksums[f] for f in FILES.values()).encode()).hexdigest()[:20]
    cached = cache_root() / "decoded" / f"{ds.dataset}-{key}.npz"
    if cached.exists():
        return cached
    arrays = {k: read(ds.directory / f) for k, f in FILES.items()}
    for part in ("train", "test"):
        images, labels = arrays[f"{part}_images"], arrays[f"{part}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise DataError(f"{ds.directory}: {part} images {images.shape} and labels {labels.shape} do not pair up")
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(f"{cached.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, cached)
    return cached


def load(ds: Verified) -> dict[str, np.ndarray]:
    with np.load(decoded(ds)) as z:
        return {k: z[k] for k in FILES}


@dataclass(frozen=True)
class Split:
    train_x: np.ndarray  # float32 [n, 784] in [0, 1]
    train_y: np.ndarray  # int64 [n]
    val_x: np.ndarray
    val_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    train_index: np.ndarray  # which of the original training images form each part
    val_index: np.ndarray


def split(arrays: dict[str, np.ndarray], n_val: int = 10_000, seed: int = 0) -> Split:
    """Train/validation drawn from the training images by a seeded permutation; the test
    images are kept apart for the final test accuracy only."""
    n = len(arrays["train_images"])
    if not 0 < n_val < n:
        raise DataError(f"validation size {n_val} must be between 1 and {n - 1}")
    order = np.random.default_rng(seed).permutation(n)
    val_index, train_index = np.sort(order[:n_val]), np.sort(order[n_val:])

    def pixels(x: np.ndarray) -> np.ndarray:
        return (x.reshape(len(x), -1).astype(np.float32) / 255.0)

    images, labels = arrays["train_images"], arrays["train_labels"].astype(np.int64)
    return Split(pixels(images[train_index]), labels[train_index], pixels(images[val_index]), labels[val_index],
                 pixels(arrays["test_images"]), arrays["test_labels"].astype(np.int64), train_index, val_index)
