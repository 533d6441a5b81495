"""An output's digest: whether a process's output is, bit for bit, one the run has already
compared with the reference.

Every process of a cell checks its output against the float64 reference. For a model's forward
that meant copying the output to the host and comparing it in float64: in the H200's
`verdict-speed` stage (results/gpu-h200-2026-11-26b/) GPT-2 paper's 412 million logits took
0.5-1.0 s to copy and 0.35-0.65 s to compare in each of its processes, and every process of a
cell, cold or warm, gave the same error to the last digit (as in every GPU run on record): the
same bits, compared again. So an output of at least ``DIGEST_FROM`` elements is first folded on
its device (each framework's ``output_digest``) into a digest; where the run has already compared
an output with that digest against the same reference at the same tolerance
(reference.ReferenceCache.verified), that comparison is this process's, and the copy and the
comparison are skipped. A digest never seen is compared as before, and kept for the next process.

The fold, the same arithmetic in each framework (``fold_words`` is numpy's, the tests'
yardstick): the output's bytes in memory order as unsigned 16-bit words u, in blocks of
``BLOCK`` = 2^16 words (the last padded with zero words); per block, the sum of its words and
the sum of each word times its position in the block (1 to ``BLOCK``), both modulo 2^32 (JAX
computes them in uint32, whose arithmetic wraps; PyTorch exactly in int64, then reduced). The
digest is SHA-256 over the dtype, the shape and those sums: 8 bytes a block, 1/16384 of a
bfloat16 output's bytes. Any one word changed, or any two in a block, changes a block's sums
(two changes d and -d at positions a and b leave the weighted sum moved by (a - b) d, nonzero
modulo 2^32 since both factors are under 2^16); two outputs that differ share a digest only
if, in every block where they differ, three or more words differ so that both sums cancel.

Folded, an output leaves its device's peak memory as it was, or nearly: JAX folds
``jax_common.FOLD_CHUNK`` blocks a step of a loop that slices the output where it lies (a fold
of the whole output at once let XLA copy it as 16-bit words first: 65.7 MB on the H100 for a 64
MiB output), PyTorch ``torch_common.FOLD_BLOCKS`` blocks at a time (4 MiB of int64). On the CPU
the digests match numpy's; the peak is checked on a GPU (test_gpu_paths). No memory figure reads
across the fold anyway: it lies between the first call and the memory phase (harness/measure.py).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Sequence

import numpy as np

BLOCK = 1 << 16  # words a block: any two changed words of a block change its sums
# elements: from here on the copy and the comparison cost tens of milliseconds and more (at the
# H200's GPT-2 rates, 1.2-2.5 s a billion to copy and 0.9-1.6 s to compare); smaller outputs are
# compared as they always were
DIGEST_FROM = 1 << 24
ON_HOST_ENV = "STACKWARS_DIGEST_ON_HOST"  # "1": fold outputs in host memory too (``wanted``)


def dtype_name(dtype: Any) -> str:
    """The same name for the same dtype in either framework ('torch.bfloat16' -> 'bfloat16')."""
    return str(dtype).rsplit(".", 1)[-1]


def fold_words(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fold of unsigned 16-bit ``words`` (1-D): per block of ``BLOCK``, the sum and the
    position-weighted sum, modulo 2^32 (uint32)."""
    words = np.asarray(words, dtype=np.uint16).ravel()
    pad = (-words.size) % BLOCK
    blocks = np.concatenate([words, np.zeros(pad, np.uint16)]).reshape(-1, BLOCK).astype(np.int64)
    weighted = blocks * np.arange(1, BLOCK + 1, dtype=np.int64)  # under 2^32 each, under 2^48 summed
    return (blocks.sum(1) & 0xFFFFFFFF).astype(np.uint32), (weighted.sum(1) & 0xFFFFFFFF).astype(np.uint32)


def finish(dtype: Any, shape: Sequence[int], sums: np.ndarray, weighted: np.ndarray) -> str:
    """The digest of an output of ``dtype`` and ``shape`` from its fold (every block's sums, in
    order, the last padded block's included)."""
    h = hashlib.sha256(f"{dtype_name(dtype)}|{tuple(int(d) for d in shape)}|{BLOCK}".encode())
    h.update(np.ascontiguousarray(sums, dtype="<u4").tobytes())
    h.update(np.ascontiguousarray(weighted, dtype="<u4").tobytes())
    return "sha256:" + h.hexdigest()[:32]


def finish_parts(dtype: Any, shape: Sequence[int], whole: tuple[np.ndarray, np.ndarray],
                 tail_words: np.ndarray) -> str:
    """``finish`` from a device's fold of the whole blocks and the words after them (fewer than
    ``BLOCK``, folded here)."""
    sums, weighted = (np.asarray(a) for a in whole)
    if np.size(tail_words):
        t_sums, t_weighted = fold_words(tail_words)
        sums, weighted = np.concatenate([sums, t_sums]), np.concatenate([weighted, t_weighted])
    return finish(dtype, shape, sums, weighted)


def digest_numpy(x: np.ndarray) -> str:
    """A host array's digest, as the frameworks compute it on their devices (the tests'
    yardstick for theirs)."""
    x = np.ascontiguousarray(x)
    return finish(x.dtype, x.shape, *fold_words(x.reshape(-1).view(np.uint16)))


def wanted(size: int, itemsize: int, floating: bool, on_host: bool) -> bool:
    """Whether an output is folded: a floating-point one of at least 16-bit elements and
    ``DIGEST_FROM`` of them, on a device. An output already in host memory is compared where it
    lies: on the 2-core VM, folding GPT-2 small's 26 million float32 logits took 0.08 s in
    PyTorch and 0.18-0.28 s in JAX (its fold's compile included), comparing them 0.035 s
    (results/harness-cost-cpu/parity-digest-2026-11-26-zen2/). ``STACKWARS_DIGEST_ON_HOST=1``
    folds those too: the tests run the whole path on the CPU that way."""
    if on_host and os.environ.get(ON_HOST_ENV) != "1":
        return False
    return floating and itemsize >= 2 and size >= DIGEST_FROM
