"""The recipe, top to bottom: start Horovod, load this rank's shard, build the model, broadcast
rank 0's start, train with averaged gradients, report."""

from __future__ import annotations

import math
import time

import horovod.tensorflow as hvd
import horovod.tensorflow.keras as hvd_keras
import numpy as np
import tensorflow as tf

from hvd_linreg import checkpoint, exact
from hvd_linreg import ranks as ranks_mod
from hvd_linreg.config import Config, UsageError
from hvd_linreg.data import Shard, aligned_empty, load_shard
from hvd_linreg.model import LinearModel, initial_params
from hvd_linreg.monitor import Monitor
from hvd_linreg.plot import save_plot
from hvd_linreg.ranks import Ranks, Watchdog
from hvd_linreg.report import Result, check_writable, metrics, summary_lines, write_json


def run(cfg: Config) -> int:
    ranks = ranks_mod.init(verbose=cfg.verbose)

    # Each rank reads only its own rows, and rank 0 checks the paths it will write, before any
    # training: a problem any rank sees stops all of them together, with one message.
    shard, ckpt_dir, error = None, None, None
    try:
        shard = load_shard(cfg, ranks.rank, ranks.size)
        if ranks.is_root:
            check_writable("--metrics_json", cfg.metrics_json)
            check_writable("--plot", cfg.plot)
            ckpt_dir = checkpoint.prepare_dir(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
    except UsageError as e:
        error = e
    ranks.agree(error)
    if shard.num_dropped:
        ranks.warn(
            f"{shard.num_samples + shard.num_dropped} samples do not split evenly over "
            f"{ranks.size} ranks; the last {shard.num_dropped} are not used"
        )
    header = (
        f"hvd-linreg: {ranks.size} rank{'s' * (ranks.size > 1)} ({ranks.controller}), "
        f"{shard.num_samples} samples x {shard.num_features} feature"
        f"{'s' * (shard.num_features > 1)} from {shard.source}, "
        + (
            "exact least squares"
            if cfg.solver == "exact"
            else f"batch {cfg.batch_size} per rank ({cfg.batch_size * ranks.size} global), "
            f"{cfg.num_steps} steps, {cfg.optimizer}, learning rate {cfg.learning_rate}"
        )
    )
    if not cfg.quiet:
        ranks.log(header)

    # The exact optimum costs one pass and one allreduce: SGD's result is measured against it.
    start = time.perf_counter()
    optimum = exact.solve(ranks, shard) if shard.num_features <= exact.MAX_FEATURES else None
    exact_loss = global_mse(optimum, shard) if optimum is not None else None
    if cfg.solver == "exact":
        if optimum is None:
            raise UsageError(f"--solver exact handles up to {exact.MAX_FEATURES} features")
        result = Result(None, optimum, exact_loss, 0, 0, time.perf_counter() - start)
    else:
        result = train_sgd(cfg, ranks, shard, ckpt_dir)

    m = metrics(cfg, ranks, shard, result, exact_loss)
    if ranks.is_root:  # only rank 0 writes, so ranks never race on the same file
        for line in summary_lines(m):
            ranks.log(line)
        if cfg.metrics_json:
            write_json(cfg.metrics_json, m)
        if cfg.plot:
            save_plot(cfg.plot, m, result.history, shard.X, shard.y)
    return 0


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
    # Horovod's wrapper allreduces the gradients inside minimize(); every rank then applies the
    # same update. Calling apply_gradients() on raw gradients would skip it. It SUMS them: each
    # rank's loss is already divided by the rank count (fit), which makes the sum the average
    # for free. op=Average would divide after the allreduce, one more pass over the gradient
    # (bench/: 16 MB gradient, 2 ranks, about 2 ms of 18).
    # horovod.tensorflow.keras's wrapper: horovod.tensorflow's drops op= for Keras optimizers
    # (0.28.1) and would average these already divided gradients a second time.
    return hvd_keras.DistributedOptimizer(
        base,
        compression=hvd.Compression.fp16 if cfg.fp16_allreduce else hvd.Compression.none,
        op=hvd.Sum,
        # K local passes are accumulated and averaged before one allreduce and one update.
        backward_passes_per_step=cfg.backward_passes_per_step,
        average_aggregated_gradients=True,
    )


def train_sgd(cfg: Config, ranks: Ranks, shard: Shard, ckpt_dir) -> Result:
    model = LinearModel(initial_params(cfg.seed, ranks.rank, shard.num_features))
    optimizer = make_optimizer(cfg, ranks.size)
    optimizer.build([model.params])  # create its variables now: they are broadcast below

    # Rank 0 alone reads the newest checkpoint, if any, into its model and optimizer...
    initial, first_step, error = model.numpy_params(), 0, None
    if ckpt_dir is not None:
        try:
            initial, first_step = restore(ckpt_dir, cfg, ranks, shard, model, optimizer)
        except UsageError as e:
            error = e
    ranks.agree(error)
    # ...and every rank starts from rank 0's values (fresh or restored), so that identical
    # averaged updates keep all ranks equal from here on.
    hvd.broadcast_variables([model.params, *optimizer.variables], root_rank=0)
    initial, first_step = ranks.share((initial, first_step))

    return fit(cfg, ranks, shard, model, optimizer, initial, first_step, ckpt_dir)


def restore(ckpt_dir, cfg: Config, ranks: Ranks, shard: Shard, model, optimizer):
    """Load the newest loadable checkpoint into rank 0's model and optimizer.

    Returns (the run's initial params, the step to continue from); (current, 0) if none.
    """
    ckpt, warnings = checkpoint.load_latest(ckpt_dir)
    for w in warnings:
        ranks.warn(w)
    if ckpt is None:
        return model.numpy_params(), 0
    if ckpt.num_features != shard.num_features:
        raise UsageError(
            f"the checkpoint in {cfg.checkpoint_dir} is for {ckpt.num_features} features, "
            f"this data has {shard.num_features}; use another --checkpoint_dir"
        )
    current = [v.numpy() for v in optimizer.variables]
    if [a.shape for a in ckpt.optimizer] != [a.shape for a in current]:
        raise UsageError(
            f"the checkpoint in {cfg.checkpoint_dir} holds another optimizer's state "
            f"({ckpt.header.get('optimizer')}); use another --checkpoint_dir"
        )
    model.params.assign(ckpt.params.reshape(model.params.shape))
    for var, value in zip(optimizer.variables, ckpt.optimizer):
        var.assign(value)
    saved_batch = ckpt.header.get("global_batch_size")
    if saved_batch != cfg.batch_size * ranks.size:
        ranks.warn(
            f"the checkpoint was trained with a global batch of {saved_batch}, this run uses "
            f"{cfg.batch_size * ranks.size}: the result will differ from an uninterrupted run"
        )
    ranks.log(f"Resuming from {ckpt_dir / f'ckpt-{ckpt.step:010d}.npz'} at step {ckpt.step}")
    return np.asarray(ckpt.header["initial_params"], np.float64), ckpt.step


def fit(
    cfg: Config,
    ranks: Ranks,
    shard: Shard,
    model: LinearModel,
    optimizer,
    initial: np.ndarray,
    first_step: int,
    ckpt_dir,
) -> Result:
    """Train from first_step to cfg.num_steps; log the loss, averaged over ranks, every
    cfg.log_every steps; rank 0 saves a checkpoint every cfg.checkpoint_every steps."""
    X = as_tensor(shard.X)
    y = as_tensor(shard.y)
    n = tf.constant(len(shard.y), tf.int64)
    batch = tf.range(cfg.batch_size, dtype=tf.int64)

    @tf.function
    def train_steps(first: tf.Tensor, count: tf.Tensor):
        # Many steps per call: one Python round trip per log interval, not per step.
        loss, ran = tf.constant(0.0), tf.constant(0, tf.int64)
        for step in tf.range(first, first + count):
            # The README's batching contract: rows (i*B + j) mod n. Unless they wrap around the
            # shard's end they are one block, and a slice of it shares the shard's memory where
            # gather would copy it (bench/: 8 M x 64, batch 65536, 1.6x the samples/s).
            first_row = (step * cfg.batch_size) % n
            if first_row + cfg.batch_size <= n:
                Xb = X[first_row : first_row + cfg.batch_size]
                yb = y[first_row : first_row + cfg.batch_size]
            else:
                rows = (first_row + batch) % n
                Xb, yb = tf.gather(X, rows), tf.gather(y, rows)
            with tf.GradientTape() as tape:
                loss = model.loss(Xb, yb)
                # Summed over ranks by the optimizer, these gradients average. For 1, 2, 4...
                # ranks the division is exact: the update is bit for bit op=Average's.
                share = loss / ranks.size
            optimizer.minimize(share, [model.params], tape=tape)
            ran += 1
            # Every rank applied the same averaged update, so every rank stops at this step.
            if not tf.reduce_all(tf.math.is_finite(model.params)):
                break
        return loss, ran

    # Trace the loop now, so that compiling is not counted as training time.
    train_steps.get_concrete_function(tf.constant(0, tf.int64), tf.constant(1, tf.int64))
    hvd.join()  # and start the clock when every rank is ready, not when the fastest one is

    monitor = Monitor(cfg, ranks, first_step)
    every = [cfg.log_every] + ([cfg.checkpoint_every] if ckpt_dir is not None else [])
    start = time.perf_counter()
    done = first_step
    with Watchdog(ranks.rank) as watchdog:
        while done < cfg.num_steps:
            count = min([k - done % k for k in every] + [cfg.num_steps - done])
            loss, ran = train_steps(tf.constant(done, tf.int64), tf.constant(count, tf.int64))
            done += int(ran)
            watchdog.progress()
            if not np.isfinite(model.numpy_params()).all():
                raise UsageError(
                    f"training diverged at step {done}: w and b became NaN or inf. "
                    f"--learning_rate {cfg.learning_rate} is too large for this data; "
                    f"try {cfg.learning_rate / 10:g} or less"
                )
            if done % cfg.log_every == 0 or done == cfg.num_steps:
                # Each rank's last batch loss, averaged: the loss of the global batch at this step.
                mean_loss = float(hvd.allreduce(loss, op=hvd.Average, name="log_loss"))
                elapsed = time.perf_counter() - start
                monitor.record(
                    done,
                    mean_loss,
                    float(optimizer.learning_rate),
                    (done - first_step) / elapsed,
                    model.params.numpy(),
                )
            if ckpt_dir is not None and ranks.is_root:
                if done % cfg.checkpoint_every == 0 or done == cfg.num_steps:
                    save_checkpoint(ckpt_dir, cfg, ranks, model, optimizer, initial, done)
    wall_s = time.perf_counter() - start
    monitor.close()

    return Result(
        initial_params=initial,
        params=model.numpy_params(),
        loss=global_mse(model.numpy_params(), shard),
        steps=done,
        first_step=first_step,
        wall_s=wall_s,
        history=monitor.history,
    )


def save_checkpoint(ckpt_dir, cfg, ranks, model, optimizer, initial, step) -> None:
    header = {
        "num_features": model.num_features,
        "optimizer": type(optimizer).__name__,
        "global_batch_size": cfg.batch_size * ranks.size,
        "initial_params": [float(v) for v in initial],
        "config": cfg.as_dict(),
    }
    params = model.params.numpy().reshape(-1)
    state = [v.numpy() for v in optimizer.variables]
    checkpoint.save(
        ckpt_dir, checkpoint.Checkpoint(step, params, state, header), cfg.keep_checkpoints
    )


def as_tensor(a: np.ndarray) -> tf.Tensor:
    """A tensor on the array's memory: tf.constant would copy it, twice over while converting
    (bench/: peak RSS 6.4 GB for a 2 GB shard). DLPack shares memory that is C-ordered,
    writable and 64-byte aligned; anything else is first copied once into such a buffer.
    Nothing writes to a shard after loading, so sharing is safe."""
    if not (a.flags.c_contiguous and a.flags.writeable and a.ctypes.data % 64 == 0):
        a, unaligned = aligned_empty(a.shape, a.dtype), a
        a[...] = unaligned
    return tf.experimental.dlpack.from_dlpack(a.__dlpack__())


def global_mse(theta: np.ndarray, shard: Shard) -> float:
    """Mean squared error of [w..., b] over the whole dataset: float64 sums, allreduced."""
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
