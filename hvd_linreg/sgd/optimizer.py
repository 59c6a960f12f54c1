"""The optimizer of --optimizer, wrapped by Horovod so that minimize() averages the gradients."""

from __future__ import annotations

import horovod.tensorflow as hvd
import horovod.tensorflow.keras as hvd_keras
import tensorflow as tf

from hvd_linreg.config import Config


def make_optimizer(cfg: Config, size: int):
    """The Keras optimizer of --optimizer, wrapped so that minimize() averages gradients."""
    lr = cfg.learning_rate * (size if cfg.scale_lr else 1)  # Horovod's linear scaling rule
    if cfg.lr_warmup_steps:
        # Linear ramp from lr / W to lr over the first W updates, then lr.
        lr = tf.keras.optimizers.schedules.PolynomialDecay(
            lr / cfg.lr_warmup_steps, cfg.lr_warmup_steps, end_learning_rate=lr, power=1.0
        )
    if cfg.optimizer == "adam":
        base = tf.keras.optimizers.Adam(lr)
    else:
        base = tf.keras.optimizers.SGD(
            lr, momentum=cfg.momentum if cfg.optimizer == "momentum" else 0.0
        )
    # Horovod: the wrapper allreduces the gradients inside minimize(); every rank then applies
    # the same update. Calling apply_gradients() on raw gradients would skip it. It sums them
    # (op=Sum): the trainer divides each rank's loss by the rank count, so the sum is the
    # average. horovod.tensorflow.keras's wrapper: horovod.tensorflow's drops op= for Keras
    # optimizers (0.28.1) and would average these already divided gradients a second time.
    return hvd_keras.DistributedOptimizer(
        base,
        compression=hvd.Compression.fp16 if cfg.fp16_allreduce else hvd.Compression.none,
        op=hvd.Sum,
        # K local passes are accumulated and averaged before one allreduce and one update.
        backward_passes_per_step=cfg.backward_passes_per_step,
        average_aggregated_gradients=True,
    )
