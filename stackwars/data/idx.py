"""The IDX file format (LeCun's MNIST format), gzip-compressed or raw.

Header: two zero bytes, a type code (0x08 = unsigned byte), the number of dimensions,
then one big-endian uint32 per dimension; the data follows, row-major. Anything else
(wrong magic, a truncated body, trailing bytes) is a ``DataError`` naming the file.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np

from stackwars.errors import SpecError

TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
         0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


class DataError(SpecError):
    """The data on disk is missing, corrupt or not what it claims to be (exit code 2)."""


def parse(raw: bytes, name: str = "<bytes>") -> np.ndarray:
    if len(raw) < 4:
        raise DataError(f"{name}: {len(raw)} bytes is too short for an IDX header")
    zero, dtype_code, ndim = raw[0:2], raw[2], raw[3]
    if zero != b"\x00\x00" or dtype_code not in TYPES or ndim == 0:
        raise DataError(f"{name}: not an IDX file (magic bytes {raw[:4].hex()}; expected 0000 + type + ndim)")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{name}: truncated header ({len(raw)} of {header} bytes)")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = np.dtype(TYPES[dtype_code])
    expected = int(np.prod(dims)) * dtype.itemsize
    body = len(raw) - header
    if body != expected:
        what = "truncated" if body < expected else "has trailing bytes"
        raise DataError(f"{name}: body {what}: {body} bytes for dimensions {dims} ({expected} expected)")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)


def read(path: Path) -> np.ndarray:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"{path}: corrupt gzip stream ({exc})") from None
    return parse(data, str(path))
