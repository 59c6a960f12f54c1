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

    def select(self, columns):
        """The columns (of the design, increasing) alone: each part's of them, in order."""
        columns = np.asarray(columns, np.intp)
        parts, places = [], []
        for part, at in zip(self.parts, self.columns):
            mine = np.flatnonzero(np.isin(columns, at))  # their places among the selected
            if len(mine):  # a part's columns are increasing: their positions by a search
                parts.append(part.select(np.searchsorted(at, columns[mine])))
                places.append(mine)
        return SplitMatrix(parts, places) if parts else SplitMatrix([], [])

    def joined(self, other: DesignMatrix) -> SplitMatrix:
        """This design with other's columns after its own (as one more part)."""
        width = self.shape[1]
        at = np.arange(width, width + other.shape[1])
        joined = SplitMatrix([*self.parts, other], [*self.columns, at])
        joined.shape = (len(other), width + other.shape[1])
        return joined

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


def as_split(X: DesignMatrix) -> SplitMatrix:
    """X as a split matrix (of one part where it is not one)."""
    return X if isinstance(X, SplitMatrix) else SplitMatrix([X], [np.arange(X.shape[1])])
