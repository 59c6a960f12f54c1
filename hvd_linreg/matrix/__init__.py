"""Design matrices: a block of rows' features as the solvers take them, in kinds that answer the
same products, so that a solver never looks inside one (tabmat's and adelie's idea).

- `DenseMatrix`: columns of numbers, an array;
- `CategoricalMatrix`: a column of levels as its treatment dummies, held as one code a row:
  its Gram block is diagonal and nobody builds the dummies;
- `SparseMatrix`: a SciPy CSR matrix (a libsvm file's rows, fit()'s sparse X);
- `SplitMatrix`: a mix of them, each part's columns at their places among the design's.

Each answers matvec (X b), transpose_matvec (Xᵀ v), cross (Xᵀ diag(d) Y with another part:
the blocks of a weighted Gram), diagonal (the weighted Gram's diagonal), rows (a slice) and
toarray (for tests and small predictions). The products are this rank's: the solvers sum them
over the ranks (solvers/blocks.py). Adding a kind is one module with these methods; its cross
with each other kind is its own (the dense kind's is the fallback). A design matrix refuses
np.asarray: a pass that needs the dense rows must ask for them (toarray) where it may."""

from hvd_linreg.matrix.base import DesignMatrix
from hvd_linreg.matrix.categorical import CategoricalMatrix
from hvd_linreg.matrix.dense import DenseMatrix
from hvd_linreg.matrix.sparse import SparseMatrix
from hvd_linreg.matrix.split import SplitMatrix

__all__ = ["CategoricalMatrix", "DenseMatrix", "DesignMatrix", "SparseMatrix", "SplitMatrix"]
