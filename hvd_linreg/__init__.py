"""Data-parallel linear regression on Horovod and MPI."""

import os
from importlib.util import find_spec

__version__ = "0.1.0"

# TensorFlow >= 2.16 makes tf.keras Keras 3, whose optimizers Horovod 0.28.1 cannot wrap. Where
# tf-keras (Keras 2) is installed, as in ci/setup.sh's stack, this makes tf.keras that one;
# it must be set before TensorFlow loads Keras. Without tf-keras the variable would break
# tf.keras, and TensorFlow <= 2.15 has Keras 2 built in. Set here, where every entry point
# starts, so that no launcher, remote host or user has to export it.
if find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# NumPy's BLAS (OpenBLAS) starts one thread per core in every rank, and ranks, not threads, are
# the tool's parallelism: the exact solver's many small QRs then spent most of their time in
# the threads' hand-offs (docs/performance.md has the figures). Set before NumPy loads, which
# reads it once; an exported value still wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


# The library (library.py): hvd_linreg.fit and load, imported when first used, so that
# `import hvd_linreg` starts neither TensorFlow nor Horovod.
__all__ = ["FitResult", "UsageError", "fit", "load"]


def __getattr__(name: str):
    if name in ("fit", "load", "FitResult"):
        from hvd_linreg import library

        return getattr(library, name)
    if name == "UsageError":
        from hvd_linreg.errors import UsageError

        return UsageError
    raise AttributeError(f"module 'hvd_linreg' has no attribute {name!r}")
