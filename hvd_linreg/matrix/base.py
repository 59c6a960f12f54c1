"""The design matrix's protocol: the products every kind answers (matrix/__init__.py)."""

from __future__ import annotations

import numpy as np
from scipy import sparse


class DesignMatrix:
    """rows x columns of features; every product in float64."""

    shape: tuple[int, int]

    def __len__(self) -> int:
        return self.shape[0]

    def matvec(self, b: np.ndarray, ordered: bool = False) -> np.ndarray:
        """X b: a value per row for b (columns,), a row of K for b (columns, K). ordered: each
        row's terms summed in column order, the same bytes whatever rows a block holds (a
        prediction's); else by the fastest product (a pass's)."""
        raise NotImplementedError

    def transpose_matvec(self, v: np.ndarray) -> np.ndarray:
        """Xᵀ v: a value per column for v (rows,), a row of K for v (rows, K)."""
        raise NotImplementedError

    def diagonal(self, d: np.ndarray) -> np.ndarray:
        """The diagonal of Xᵀ diag(d) X: Σ d x² per column."""
        raise NotImplementedError

    def weighted(self, d: np.ndarray) -> sparse.csr_matrix | np.ndarray:
        """diag(d) X as a dense array or a SciPy sparse matrix: the right factor of a cross
        product with a kind that does not know this one."""
        raise NotImplementedError

    def cross(self, other: DesignMatrix, d: np.ndarray):
        """Xᵀ diag(d) Y for Y another design matrix of the same rows: a dense array, or a
        SciPy sparse matrix where both are sparse."""
        return self.transpose_product(other.weighted(d))

    def transpose_product(self, Y) -> np.ndarray | sparse.spmatrix:
        """Xᵀ Y for Y a dense array or a SciPy sparse matrix of the same rows."""
        raise NotImplementedError

    def select(self, columns: np.ndarray) -> DesignMatrix:
        """The matrix of these columns alone (indices, increasing), of the same kind."""
        raise NotImplementedError

    def rows(self, index) -> DesignMatrix:
        """The rows index (a slice, a mask or indices), of the same kind."""
        raise NotImplementedError

    def toarray(self) -> np.ndarray:
        """The dense float64 rows: for tests and small predictions, never a solver's pass."""
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float64)

    @property
    def nbytes(self) -> int:
        raise NotImplementedError

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            f"a {type(self).__name__} has no dense form here: a pass takes its products "
            "(matrix/__init__.py)"
        )

    def __getitem__(self, key) -> DesignMatrix:
        """X[a:b]: rows, as the shard's blocks slice them."""
        if isinstance(key, tuple):
            raise TypeError(f"a {type(self).__name__} is sliced by rows only")
        return self.rows(key)


def as_float(values: np.ndarray) -> np.ndarray:
    """values in float64 (no copy where they are)."""
    return np.asarray(values, np.float64)
