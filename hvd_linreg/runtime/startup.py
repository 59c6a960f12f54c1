"""Work-arounds for the noise and the cost of starting TensorFlow and Horovod on every rank.

Each keeps the job's output and its start-up time the tool's own; none changes a result:

- `quiet_tensorflow`: TF_CPP_MIN_LOG_LEVEL=3 before TensorFlow loads, since its C++ start-up
  chatter, on every rank, would bury the log.
- `without_pandas`: Keras imports pandas only to recognise DataFrames, which the tool never
  gives it, and pandas drags pyarrow and parts of SciPy along into every rank's start.
- `import_tensorflow`: TensorFlow >= 2.19 logs its start-up through absl before any log level
  applies, so the import itself runs with stderr sent to /dev/null (`_stderr_muted`).
- `horovod_functions_without_autograph`: Horovod wraps its own graph-mode tf.functions (the
  gradient allreduce, the variable broadcast) with a bare tf.function, so AutoGraph rewrote
  their source on every rank's start; tracing them without it only saves that time.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


def quiet_tensorflow() -> None:
    """Call before importing TensorFlow: its start-up chatter on every rank buries the log.

    3, not 2: TensorFlow >= 2.16 also logs, at error level, on every CPU-only start, that cuDNN
    and cuBLAS factories were registered twice; they are not errors of the run, and what
    fails in it fails as a Python exception."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@contextlib.contextmanager
def without_pandas() -> Iterator[None]:
    """Import TensorFlow inside this: Keras (imported by TensorFlow) imports pandas whenever it is
    installed, only to recognise DataFrames given to Model.fit, which the tool never does, and
    pandas brings pyarrow and parts of SciPy with it into every rank's start.
    Within this block `import pandas` fails, so Keras goes on without it; after it, pandas
    imports as usual."""
    if "pandas" in sys.modules:  # already imported (in a test process, say): nothing to save
        yield
        return
    sys.modules["pandas"] = None  # type: ignore[assignment]  # makes `import pandas` fail
    try:
        yield
    finally:
        if sys.modules.get("pandas", 0) is None:
            del sys.modules["pandas"]


@contextlib.contextmanager
def _stderr_muted() -> Iterator[None]:
    """File descriptor 2 to /dev/null, C++ libraries' writes included."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def import_tensorflow() -> None:
    """Import TensorFlow once, quietly, before anything of the tool's imports it.

    TensorFlow >= 2.19 logs its start-up (oneDNN, the CPU's instructions) through absl before
    any log level applies, TF_CPP_MIN_LOG_LEVEL included: on every rank, before the job's first
    line. Those writes go to /dev/null; an import that fails still raises, and says why once
    stderr is back."""
    if "tensorflow" in sys.modules:
        return
    quiet_tensorflow()
    with without_pandas(), _stderr_muted():
        import tensorflow  # noqa: F401


def horovod_functions_without_autograph() -> None:
    """Trace Horovod's own tf.functions (its gradient allreduce, its variable broadcast) as the
    graph-mode code they are, as Horovod itself runs them under TensorFlow 1.

    Horovod wraps them with a bare tf.function, so AutoGraph rewrote their source on every
    rank's start, a large share of its work after the imports. They
    branch on tensors only through tf.cond, so nothing changes but the time. Horovod 0.28.1 is
    its last release; should the private hook move, this does nothing and the start is only
    slower."""
    import horovod.tensorflow as hvd
    import tensorflow as tf
    from horovod.tensorflow import functions, util

    def graph_function(f):
        return tf.function(f, autograph=False)

    for module in (hvd, functions):
        if getattr(module, "_make_subgraph", None) is util._make_subgraph:
            module._make_subgraph = graph_function
