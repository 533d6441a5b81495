"""A small generated MNIST-style dataset: the four IDX .gz files with correct headers and a
SHA256SUMS beside them, so the loader, both trainers and the study always run, with or
without the real MNIST copy.

Each class is a fixed random 28x28 stroke pattern with pixel noise: an MLP separates them
within an epoch, so "a short training learns" is a real test here too. 12,000 training
images (the study holds 10,000 out for validation) and 2,000 test images; a few seconds
to write.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np

FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
         "t10k-labels-idx1-ubyte.gz")


def idx_bytes(array: np.ndarray) -> bytes:
    """IDX: two zero bytes, type 0x08 (uint8), the number of dimensions, big-endian sizes."""
    header = b"\x00\x00\x08" + bytes([array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def make(directory: Path, n_train: int = 12_000, n_test: int = 2_000, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    prototypes = (rng.random((10, 28, 28)) < 0.18).astype(np.float64)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, 10, n).astype(np.uint8)
        noise = rng.normal(0.0, 40.0, (n, 28, 28))
        images = np.clip(prototypes[labels] * 200.0 + 20.0 + noise, 0, 255).astype(np.uint8)
        return images, labels

    directory.mkdir(parents=True, exist_ok=True)
    train, test = draw(n_train), draw(n_test)
    contents = dict(zip(FILES, (train[0], train[1], test[0], test[1])))
    sums = []
    for name, array in contents.items():
        data = gzip.compress(idx_bytes(array), compresslevel=1, mtime=0)
        (directory / name).write_bytes(data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  {name}")
    (directory / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    return directory


def rewrite_sums(directory: Path) -> None:
    """Make SHA256SUMS vouch for whatever the files now hold (a corrupt file it vouches for)."""
    lines = [f"{hashlib.sha256((directory / n).read_bytes()).hexdigest()}  {n}" for n in FILES]
    (directory / "SHA256SUMS").write_text("\n".join(lines) + "\n")
