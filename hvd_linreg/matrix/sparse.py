"""A SciPy sparse matrix of rows (CSR): a libsvm file's, or fit()'s sparse X."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from hvd_linreg.matrix.base import DesignMatrix, as_float


class SparseMatrix(DesignMatrix):
    def __init__(self, values):
        self.values = sparse.csr_matrix(values)
        self.shape = self.values.shape
        self._columns = None  # Xᵀ as CSR (X's columns), made by the first cross product

    def _transposed(self) -> sparse.csr_matrix:
        """Xᵀ in CSR, kept: a cross product's left factor. A working set's Gram is summed at
        each step from the same columns, and the conversion cost as much as the product."""
        if self._columns is None:
            self._columns = self.values.T.tocsr()
        return self._columns

    def matvec(self, b, ordered=False):
        return self.values @ as_float(b)  # each row's stored values in order, either way

    def transpose_matvec(self, v):
        return self.values.T @ as_float(v)

    def diagonal(self, d):
        squares = self.values.multiply(self.values)
        return np.asarray(squares.T @ as_float(d)).ravel()

    def weighted(self, d):
        v = self.values  # each stored value times its row's d: no product of matrices
        scaled = as_float(v.data) * np.repeat(as_float(d), np.diff(v.indptr))
        return sparse.csr_matrix((scaled, v.indices, v.indptr), shape=v.shape)

    def transpose_product(self, Y):
        out = (self._transposed() if sparse.issparse(Y) else self.values.T) @ Y
        return out.tocsr() if sparse.issparse(out) else np.asarray(out)

    def cross(self, other, d):
        return self.transpose_product(other.weighted(d))

    def select(self, columns):
        return SparseMatrix(self.values[:, columns])

    def rows(self, index):
        return SparseMatrix(self.values[index])

    def toarray(self):
        return as_float(self.values.toarray())

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def nbytes(self):
        v = self.values
        return v.data.nbytes + v.indices.nbytes + v.indptr.nbytes
