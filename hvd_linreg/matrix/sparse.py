"""A SciPy sparse matrix of rows (CSR): a libsvm file's, or fit()'s sparse X."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from hvd_linreg.matrix.base import DesignMatrix, as_float


class SparseMatrix(DesignMatrix):
    def __init__(self, values):
        self.values = sparse.csr_matrix(values)
        self.shape = self.values.shape

    def matvec(self, b, ordered=False):
        return self.values @ as_float(b)  # each row's stored values in order, either way

    def transpose_matvec(self, v):
        return self.values.T @ as_float(v)

    def diagonal(self, d):
        squares = self.values.multiply(self.values)
        return np.asarray(squares.T @ as_float(d)).ravel()

    def weighted(self, d):
        return sparse.diags(as_float(d)) @ self.values

    def transpose_product(self, Y):
        out = self.values.T @ Y
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
