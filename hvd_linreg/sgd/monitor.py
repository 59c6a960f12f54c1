"""What rank 0 shows while training: log lines or a progress bar, TensorBoard scalars, and the
loss history that the plot draws."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework.summary_pb2 import DATA_CLASS_SCALAR, SummaryMetadata

from hvd_linreg.config import Config
from hvd_linreg.runtime.ranks import Job

_MAX_SCALAR_WEIGHTS = 8  # TensorBoard gets w_j for at most this many features
# What TensorBoard's scalar dashboard looks for. tf.summary.scalar needs the tensorboard package,
# which TensorFlow does not install; tf.summary.write with this metadata writes the same event,
# so TensorBoard is needed only where the files are viewed.
_SCALAR = SummaryMetadata(
    plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"), data_class=DATA_CLASS_SCALAR
)


def _scalar(tag: str, value: float) -> None:
    tf.summary.write(tag, tf.constant(value, tf.float32), metadata=_SCALAR)


def _weights(params) -> None:
    """w_j and b as scalars; a model of classes' under weights/class_k, k = 1 .. K - 1."""
    theta = np.asarray(params).reshape(len(params), -1)  # a column per class
    for k, column in enumerate(theta.T):
        where = "weights" if theta.shape[1] == 1 else f"weights/class_{k + 1}"
        for j, w in enumerate(column[:-1][:_MAX_SCALAR_WEIGHTS]):
            _scalar(f"{where}/w_{j}", float(w))
        _scalar(f"{where}/b", float(column[-1]))


class Monitor:
    def __init__(self, cfg: Config, job: Job, first_step: int):
        self.job = job
        self.quiet = cfg.quiet
        self.history: list[tuple[int, float]] = []
        self.validation_history: list[tuple[int, Any]] = []  # the family's Scores
        speaks = job.is_root
        self.bar = None
        if speaks and not cfg.quiet and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=cfg.num_steps, initial=first_step, unit="step", file=sys.stderr)
        self.writer = tf.summary.create_file_writer(cfg.logdir) if speaks and cfg.logdir else None

    def record(
        self,
        step: int,
        loss: float,
        lr: float,
        steps_per_s: float,
        params,
        validation=None,
    ) -> None:
        """One log point: the loss averaged over ranks at this step, and what goes with it
        (with --validation_fraction, the scores on the held-out rows)."""
        self.history.append((step, loss))
        scored = ""
        if validation is not None:
            self.validation_history.append((step, validation))
            scored = f" Validation: {validation.line()}"
        if self.bar is not None:
            self.bar.update(step - self.bar.n)
            self.bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
        elif not self.quiet:
            self.job.log(f"Step: {step} Loss: {loss:.6g}{scored}")
        if self.writer is not None:
            with self.writer.as_default(step=step):
                _scalar("loss", loss)
                for name, value in validation.values().items() if validation is not None else ():
                    _scalar(f"validation/{name}", value)
                _scalar("learning_rate", lr)
                _scalar("steps_per_s", steps_per_s)
                _weights(params)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()
