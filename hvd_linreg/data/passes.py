"""A pass over a rank's rows, as the solvers, the statistics and the scores take it: this rank's
rows in blocks of one size rule, the rows of weight 0 left out (they count for nothing, as in R's
glm), each block's sums added in float64, then one allreduce, so that every rank holds the whole
dataset's sums.

The block size is set here alone, in bytes of the float64 work a block makes: a pass casts its
rows and computes a few arrays of them, and a block that stays in the cache through those steps
is faster than one read from memory again at each step, while NumPy's cost per call stays small
beside a block's work. Passes whose work per block is many calls of a fixed cost (the
elastic net's, the factorisation's) take larger blocks, each by its budget below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from hvd_linreg.data.rows import Rows

if TYPE_CHECKING:
    from hvd_linreg.runtime.ranks import Job

# The bytes of float64 a block of a pass makes of its rows: 1 MB for a pass of products and
# elementwise steps (an IRLS pass over 2,000,000 x 32 rows is about a fifth faster than with
# 16 MB blocks, whose steps each read the block from memory again); more where each block's
# work is many calls whose cost does not grow with its rows: the elastic net's passes, a few
# arrays per model and fold, and the factorisation's, a LAPACK QR per block.
BLOCK_BYTES = 1 << 20
PATH_BLOCK_BYTES = 4 << 20
FACTOR_BLOCK_BYTES = 16 << 20
MIN_BLOCK_ROWS = 1024  # NumPy's cost per call stays small beside a block's

# The rows as the scores take them: a function that gives their blocks afresh at each call, so
# that a score of two passes reads a shard twice instead of holding its blocks
Blocks = Callable[[], Iterable[Rows]]


def block_rows(num_columns: int, itemsize: int = 8, budget: int = BLOCK_BYTES) -> int:
    """Rows of num_columns values of itemsize bytes in a block of about budget bytes."""
    return max(MIN_BLOCK_ROWS, budget // (itemsize * max(num_columns, 1)))


def counted(blocks: Iterable[Rows]) -> Iterator[Rows]:
    """Each block's rows of weight > 0."""
    for rows in blocks:
        yield rows.counted()


def summed(
    job: Job,
    blocks: Iterable[Rows],
    sums: Callable[[Rows], Sequence[float] | np.ndarray],
    size: int,
    name: str,
) -> np.ndarray:
    """Σ over this rank's blocks of sums(rows of weight > 0), size values, then one allreduce
    named name: the whole dataset's sums, the same on every rank."""
    total = np.zeros(size)
    for rows in counted(blocks):
        total += np.asarray(sums(rows), np.float64)
    # Horovod (or MPI): every rank's sums
    return job.allreduce_sum(total, name)
