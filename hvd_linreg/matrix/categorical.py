"""A column of levels as its treatment dummies (a column per level but the first, the
reference), held as one code a row: the level's index among the levels. Its Gram block is
diagonal, the weighted count of each level, and its cross products with other columns are
each level's weighted sums of them: nothing is ever as wide as its levels times its rows."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from hvd_linreg.matrix.base import DesignMatrix, as_float


class CategoricalMatrix(DesignMatrix):
    def __init__(self, codes: np.ndarray, levels: int):
        """codes: each row's level, 0 .. levels - 1 (0 the reference, no column of its own)."""
        self.codes = np.asarray(codes, np.intp)
        self.levels = int(levels)
        self.shape = (len(self.codes), self.levels - 1)

    def _padded(self, b: np.ndarray) -> np.ndarray:
        """b with the reference level's 0 before it: b[code] is each row's value."""
        b = as_float(b)
        return np.concatenate([np.zeros((1, *b.shape[1:])), b])

    def matvec(self, b, ordered=False):
        return self._padded(b)[self.codes]

    def transpose_matvec(self, v):
        v = as_float(v)
        if v.ndim == 1:
            return np.bincount(self.codes, v, self.levels)[1:]
        return np.stack([self.transpose_matvec(v[:, k]) for k in range(v.shape[1])], axis=1)

    def diagonal(self, d):
        return np.bincount(self.codes, as_float(d), self.levels)[1:]

    def indicator(self, d: np.ndarray | None = None) -> sparse.csr_matrix:
        """The dummies (rows x levels - 1) as a CSR matrix, each row's 1 (or d) in its level's
        column, none for the reference."""
        n, rows = len(self.codes), np.arange(len(self.codes))
        data = np.ones(n) if d is None else as_float(d)
        keep = self.codes > 0
        return sparse.csr_matrix(
            (data[keep], (rows[keep], self.codes[keep] - 1)), shape=(n, self.levels - 1)
        )

    def weighted(self, d):
        return self.indicator(d)

    def transpose_product(self, Y):
        """Each level's sums of Y's rows (the reference's left out)."""
        out = self.indicator().T @ Y
        return out.tocsr() if sparse.issparse(out) else np.asarray(out)

    def cross(self, other, d):
        if isinstance(other, CategoricalMatrix):  # a contingency table of the two codes
            table = sparse.coo_matrix(
                (as_float(d), (self.codes, other.codes)), shape=(self.levels, other.levels)
            )
            return table.tocsr()[1:, 1:]
        return self.transpose_product(other.weighted(d))

    def select(self, columns):
        """The dummies `columns` alone: a row of a level not among them is as the reference's,
        zero in each."""
        at = np.zeros(self.levels, np.intp)
        at[np.asarray(columns) + 1] = np.arange(1, len(columns) + 1)
        return CategoricalMatrix(at[self.codes], len(columns) + 1)

    def rows(self, index):
        return CategoricalMatrix(self.codes[index], self.levels)

    def toarray(self):
        return self.indicator().toarray()

    @property
    def nbytes(self):
        return self.codes.nbytes
