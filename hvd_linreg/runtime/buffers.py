"""Arrays whose memory TensorFlow can take as a tensor's without a copy, and whose pages are
mapped in one call. A leaf: the readers, the layout and the collectives (ranks.as_tensor) all
allocate through it."""

from __future__ import annotations

import ctypes
import mmap
import sys

import numpy as np


def aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """np.empty on a 64-byte boundary: TensorFlow can then use the array's memory as a tensor's
    without copying it (ranks.as_tensor). A large one's pages are mapped at once (populate)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    if nbytes >= POPULATE_BYTES:
        populate(raw)
    start = -raw.ctypes.data % 64
    return raw[start : start + nbytes].view(dtype).reshape(shape)


# An array at least this large is mapped in one call before it is written (populate).
POPULATE_BYTES = 64 << 20
_MADV_POPULATE_WRITE = 23  # Linux 5.14; Python's mmap module names it from 3.13 only


def populate(a: np.ndarray) -> None:
    """Map the pages of a fresh array in one madvise call, as writing it would map them one
    fault at a time: a 6.7 GB shard's first pass took 2 to 7 s here, 2.6 s so. Where the
    kernel cannot (older than 5.14, not Linux), the pages are mapped as they are written."""
    if sys.platform != "linux":  # the advice's number is Linux's
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        page = mmap.PAGESIZE
        start = -a.ctypes.data % page
        length = (a.nbytes - start) // page * page
        libc.madvise(
            ctypes.c_void_p(a.ctypes.data + start), ctypes.c_size_t(length), _MADV_POPULATE_WRITE
        )
    except (OSError, AttributeError):
        pass
