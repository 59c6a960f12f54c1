"""A mix of kinds: parts side by side, each part's columns at their places among the design's
(a categorical column among numeric ones keeps its dummies where the names have them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hvd_linreg.matrix.base import DesignMatrix, as_float


class SplitMatrix(DesignMatrix):
    def __init__(self, parts: Sequence[DesignMatrix], columns: Sequence[np.ndarray]):
        """columns[i]: the design's columns that parts[i] holds, in its order."""
        self.parts = list(parts)
        self.columns = [np.asarray(c, np.intp) for c in columns]
        width = sum(len(c) for c in self.columns)
        self.shape = (len(self.parts[0]) if self.parts else 0, width)

    def matvec(self, b, ordered=False):
        b = as_float(b)
        out = np.zeros((self.shape[0], *b.shape[1:]))
        for part, at in zip(self.parts, self.columns):
            out += part.matvec(b[at], ordered)
        return out

    def transpose_matvec(self, v):
        v = as_float(v)
        out = np.empty((self.shape[1], *v.shape[1:]))
        for part, at in zip(self.parts, self.columns):
            out[at] = part.transpose_matvec(v)
        return out

    def diagonal(self, d):
        out = np.empty(self.shape[1])
        for part, at in zip(self.parts, self.columns):
            out[at] = part.diagonal(d)
        return out

    def rows(self, index):
        return SplitMatrix([part.rows(index) for part in self.parts], self.columns)

    def toarray(self):
        out = np.empty(self.shape)
        for part, at in zip(self.parts, self.columns):
            out[:, at] = part.toarray()
        return out

    @property
    def nbytes(self):
        return sum(part.nbytes for part in self.parts)
