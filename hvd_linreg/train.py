"""The recipe, top to bottom: start Horovod, load this rank's shard, build the model, broadcast
rank 0's start, train with averaged gradients, report."""

from __future__ import annotations

import math
import time

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from hvd_linreg import ranks as ranks_mod
from hvd_linreg.config import Config, UsageError
from hvd_linreg.data import Shard, load_shard
from hvd_linreg.model import LinearModel, initial_params
from hvd_linreg.ranks import Ranks
from hvd_linreg.report import Result, metrics, summary_lines, write_json


def run(cfg: Config) -> int:
    ranks = ranks_mod.init(verbose=cfg.verbose)

    # Each rank reads only its own rows; a problem any rank sees stops all of them together.
    shard, error = None, None
    try:
        shard = load_shard(cfg, ranks.rank, ranks.size)
    except UsageError as e:
        error = e
    ranks.agree(error)
    if shard.num_dropped:
        ranks.warn(
            f"{shard.num_samples + shard.num_dropped} samples do not split evenly over "
            f"{ranks.size} ranks; the last {shard.num_dropped} are not used"
        )
    ranks.log(
        f"hvd-linreg: {ranks.size} rank{'s' * (ranks.size > 1)} ({ranks.controller}), "
        f"{shard.num_samples} samples x {shard.num_features} feature"
        f"{'s' * (shard.num_features > 1)} from {shard.source}, "
        f"batch {cfg.batch_size} per rank ({cfg.batch_size * ranks.size} global), "
        f"{cfg.num_steps} steps, learning rate {cfg.learning_rate}"
    )

    model = LinearModel(initial_params(cfg.seed, ranks.rank, shard.num_features))
    # Horovod's wrapper allreduces (averages) the gradients inside minimize(); every rank then
    # applies the same update. Calling apply_gradients() on raw gradients would skip it.
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(cfg.learning_rate))
    optimizer.build([model.params])
    # Start every rank from rank 0's values, so that identical averaged updates keep them equal.
    hvd.broadcast_variables([model.params], root_rank=0)
    initial = model.numpy_params()

    result = fit(cfg, ranks, shard, model, optimizer, initial)

    m = metrics(cfg, ranks, shard, result)
    if ranks.is_root:  # only rank 0 writes, so ranks never race on the same file
        for line in summary_lines(m):
            ranks.log(line)
        if cfg.metrics_json:
            write_json(cfg.metrics_json, m)
    return 0


def fit(
    cfg: Config,
    ranks: Ranks,
    shard: Shard,
    model: LinearModel,
    optimizer,
    initial: np.ndarray,
) -> Result:
    """Run cfg.num_steps steps; log the loss, averaged over ranks, every cfg.log_every steps."""
    X = tf.constant(shard.X)
    y = tf.constant(shard.y)
    n = tf.constant(len(shard.y), tf.int64)
    batch = tf.range(cfg.batch_size, dtype=tf.int64)

    @tf.function
    def train_steps(first: tf.Tensor, count: tf.Tensor) -> tf.Tensor:
        # Many steps per call: one Python round trip per log interval, not per step.
        loss = tf.constant(0.0)
        for step in tf.range(first, first + count):
            rows = (step * cfg.batch_size + batch) % n  # the README's batching contract
            Xb, yb = tf.gather(X, rows), tf.gather(y, rows)
            with tf.GradientTape() as tape:
                loss = model.loss(Xb, yb)
            optimizer.minimize(loss, [model.params], tape=tape)
        return loss

    # Trace the loop now, so that compiling is not counted as training time.
    train_steps.get_concrete_function(tf.constant(0, tf.int64), tf.constant(1, tf.int64))
    hvd.join()  # and start the clock when every rank is ready, not when the fastest one is

    start = time.perf_counter()
    done = 0
    while done < cfg.num_steps:
        count = min(cfg.log_every - done % cfg.log_every, cfg.num_steps - done)
        loss = train_steps(tf.constant(done, tf.int64), tf.constant(count, tf.int64))
        done += count
        # Each rank's last batch loss, averaged: the loss of the global batch at this step.
        mean_loss = float(hvd.allreduce(loss, op=hvd.Average, name="log_loss"))
        ranks.log(f"Step: {done} Loss: {mean_loss:.6g}")
    wall_s = time.perf_counter() - start

    return Result(
        initial_params=initial,
        params=model.numpy_params(),
        loss=global_mse(model, shard),
        steps=cfg.num_steps,
        wall_s=wall_s,
    )


def global_mse(model: LinearModel, shard: Shard) -> float:
    """Mean squared error over the whole dataset: float64 sums from every rank, allreduced."""
    theta = model.numpy_params()
    sse = 0.0
    for start in range(0, len(shard.y), 1 << 16):  # in blocks: no float64 copy of the shard
        rows = slice(start, start + (1 << 16))
        residual = shard.X[rows].astype(np.float64) @ theta[:-1] + theta[-1] - shard.y[rows]
        sse += float(np.dot(residual, residual))
    sums = hvd.allreduce(
        tf.constant([sse, len(shard.y)], tf.float64),
        op=hvd.Sum,
        name="global_mse",
    ).numpy()
    return float(sums[0] / sums[1]) if sums[1] else math.nan
