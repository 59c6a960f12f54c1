"""Synthetic data, as in the seed: y = X w_true + 2 + 0.1 noise.

Every value is a pure function of (seed, row, column): a counter-based generator. A rank
computes exactly its own rows, and the global dataset is the same for any number of ranks.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from hvd_linreg.runtime.buffers import aligned_empty

TRUE_BIAS = 2.0
NOISE_STDDEV = 0.1

_GOLDEN = np.uint32(0x9E3779B9)  # 2**32 / golden ratio: spreads consecutive integers apart


def _mix32(x: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """A bijective 32-bit hash (lowbias32) of every element of x, in place: each output bit
    depends on every input bit, so consecutive counters give unrelated values."""
    np.right_shift(x, np.uint32(16), out=scratch)
    x ^= scratch
    x *= np.uint32(0x7FEB352D)
    np.right_shift(x, np.uint32(15), out=scratch)
    x ^= scratch
    x *= np.uint32(0x846CA68B)
    np.right_shift(x, np.uint32(16), out=scratch)
    x ^= scratch
    return x


def _hash32(x: np.ndarray) -> np.ndarray:
    return _mix32(x.astype(np.uint32), np.empty(x.shape, np.uint32))


def _row_keys(seed: int, rows: np.ndarray) -> np.ndarray:
    """One 32-bit key per row id (int64): a hash of the seed and both halves of the id."""
    key = _hash32(np.array([seed & 0xFFFFFFFF], np.uint32) ^ _GOLDEN)
    low = rows.astype(np.uint32)  # the id's low 32 bits
    return _hash32(_hash32(low ^ key) ^ (rows >> 32).astype(np.uint32))


# Keys of a second stream per row, apart from the features' and the noise's draws.
_UNIFORM_STREAM = np.uint32(0xB5297A4D)


def uniforms(seed: int, rows: np.ndarray) -> np.ndarray:
    """One uniform draw in (0, 1) per row id, float64: a pure function of (seed, row), drawn
    apart from the row's features and noise (a model family's synthetic target draws it)."""
    h = _hash32(_row_keys(seed, np.asarray(rows, np.int64)) ^ _UNIFORM_STREAM)
    return (h.astype(np.float64) + 0.5) / 2.0**32


def true_weights(num_features: int) -> np.ndarray:
    """w_true[j] = 5 / (j + 1): 5 for the seed's single feature, distinct for every feature."""
    return 5.0 / np.arange(1, num_features + 1, dtype=np.float64)


def synthetic_rows(
    seed: int, rows: np.ndarray, num_features: int, dtype="float32", threads: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of y = X w_true + 2 + 0.1 noise, x ~ N(0, 1) per feature, for the given row ids.

    Row r's 2h draws (h = (num_features + 2) // 2: its features, then its noise) come from 2h
    uniform 32-bit hashes of (row key, column), paired by Box-Muller: hash k gives a radius,
    hash h + k an angle, and draws k and h + k are the radius times the angle's cosine and sine.
    Computed in float32 (the precision x has in the file-less seed job), one chunk of rows at a
    time, column by column so that every NumPy loop runs over contiguous memory; threads > 1
    share the chunks out (a row's values never depend on which rows are computed with it).
    """
    X = aligned_empty((len(rows), num_features), dtype)
    y = aligned_empty((len(rows),), dtype)
    half = (num_features + 2) // 2
    chunk = max(1, min(len(rows), max(256, _CHUNK_VALUES // (2 * half))))
    starts = range(0, len(rows), chunk)
    # Feature weights, then the noise's: y is one weighted sum of a row's first F + 1 draws.
    weights = np.append(true_weights(num_features), NOISE_STDDEV).astype(np.float32)[:, None]
    columns = (np.arange(2 * half, dtype=np.uint32) * _GOLDEN)[:, None]  # column c's key
    workers = max(1, min(threads, len(starts)))

    def fill(first: int) -> None:
        work = _Work(2 * half, chunk)  # reused chunk after chunk: no fresh memory to fault in
        for start in starts[first::workers]:
            keys = _row_keys(seed, rows[start : start + chunk])
            z = _standard_normal(keys, columns, work)
            n = len(keys)
            for at in range(0, n, _TRANSPOSE_ROWS):  # blocks that stay in the L1 cache
                X[start + at : start + min(at + _TRANSPOSE_ROWS, n)] = z[
                    :num_features, at : at + _TRANSPOSE_ROWS
                ].T
            # Summed over the draws in one fixed order (np.add.reduce along the outer axis
            # adds row after row), the same for every row: a BLAS dot's order depends on a
            # row's place in the chunk, and a row's y must not.
            terms = work.spare(num_features + 1, n).view(np.float32)
            np.multiply(z[: num_features + 1], weights, out=terms)
            target = np.add.reduce(terms, axis=0, out=work.target[:n])
            target += np.float32(TRUE_BIAS)
            y[start : start + n] = target

    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fill, range(workers)))  # list(): raises what a thread raised
    else:
        fill(0)
    return X, y


# Chunks of this many draws: the working arrays (two of 2 MB) stay in the CPU's cache.
_CHUNK_VALUES = 1 << 19
_TRANSPOSE_ROWS = 256


class _Work:
    """One thread's arrays for chunks of up to `rows` rows of `draws` draws."""

    def __init__(self, draws: int, rows: int):
        self.draws = draws
        self.bits = np.empty(draws * rows, np.uint32)
        self.scratch = np.empty(draws * rows, np.uint32)
        self.target = np.empty(rows, np.float32)

    def hashes(self, n: int) -> np.ndarray:
        return self.bits[: self.draws * n].reshape(self.draws, n)

    def spare(self, draws: int, n: int) -> np.ndarray:
        return self.scratch[: draws * n].reshape(draws, n)


def _standard_normal(keys: np.ndarray, columns: np.ndarray, work: _Work) -> np.ndarray:
    """N(0, 1) float32 draws, shape (len(columns), len(keys)): column-major, row keys inner,
    in work's memory (valid until its next chunk)."""
    half = len(columns) // 2
    u = np.bitwise_xor(keys, columns, out=work.hashes(len(keys)))  # one counter per draw
    _mix32(u, work.spare(len(columns), len(keys)))
    # The hash's top 23 bits as the mantissa of a float32 f = 1 + bits / 2**23 in [1, 2):
    # uniform, and made without a conversion.
    u >>= np.uint32(9)
    u |= np.uint32(0x3F800000)
    z = u.view(np.float32)
    radius, angle = z[:half], z[half:]
    np.subtract(np.float32(2.0), radius, out=radius)  # in (0, 1], exactly: its log is finite
    np.log(radius, out=radius)
    radius *= np.float32(-2.0)
    np.sqrt(radius, out=radius)
    angle *= np.float32(2.0 * np.pi)  # a uniform angle, in [2 pi, 4 pi)
    cosine = np.cos(angle, out=work.spare(half, len(keys)).view(np.float32))
    np.sin(angle, out=angle)
    angle *= radius
    np.multiply(cosine, radius, out=radius)
    return z
