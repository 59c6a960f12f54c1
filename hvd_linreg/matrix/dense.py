"""Columns of numbers: a NumPy array of rows."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from hvd_linreg.matrix.base import DesignMatrix, as_float


class DenseMatrix(DesignMatrix):
    def __init__(self, values: np.ndarray):
        self.values = values if values.ndim == 2 else values.reshape(len(values), -1)
        self.shape = self.values.shape

    def matvec(self, b, ordered=False):
        b = as_float(b)
        if not ordered:
            return as_float(self.values) @ b
        out = np.zeros((self.shape[0], *b.shape[1:]))
        for j in range(self.shape[1]):  # BLAS's order of summation depends on the rows
            out += np.multiply.outer(as_float(self.values[:, j]), b[j])
        return out

    def transpose_matvec(self, v):
        return as_float(self.values).T @ as_float(v)

    def diagonal(self, d):
        X = as_float(self.values)
        return np.einsum("ij,ij,i->j", X, X, d)

    def weighted(self, d):
        return as_float(self.values) * d[:, None]

    def cross(self, other, d):
        if isinstance(other, DenseMatrix):  # BLAS's product, X scaled once
            return as_float(self.values).T @ (as_float(other.values) * d[:, None])
        return other.cross(self, d).T

    def transpose_product(self, Y):
        if sparse.issparse(Y):
            return (Y.T @ as_float(self.values)).T
        return as_float(self.values).T @ Y

    def select(self, columns):
        return DenseMatrix(self.values[:, columns])

    def rows(self, index):
        return DenseMatrix(self.values[index])

    def toarray(self):
        return as_float(self.values)

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def nbytes(self):
        return self.values.nbytes
