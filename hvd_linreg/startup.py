"""Start-up workarounds (placeholder until merged)."""

from __future__ import annotations


def horovod_functions_without_autograph() -> None:
    """Trace Horovod's own tf.functions (its gradient allreduce, its variable broadcast) as the
    graph-mode code they are, as Horovod itself runs them under TensorFlow 1.

    Horovod wraps them with a bare tf.function, so AutoGraph rewrote their source on every
    rank's start, for nothing: they branch on tensors only through tf.cond. Should the private
    hook move, this does nothing and the start is only slower."""
    import horovod.tensorflow as hvd
    import tensorflow as tf
    from horovod.tensorflow import functions, util

    def graph_function(f):
        return tf.function(f, autograph=False)

    for module in (hvd, functions):
        if getattr(module, "_make_subgraph", None) is util._make_subgraph:
            module._make_subgraph = graph_function
