"""The training engine: one rank's SGD run, handed its model and its Horovod-wrapped optimizer.

It keeps rank 0's start on every rank, steps through the layout contract's batches, logs the
loss averaged over the ranks, saves rank 0's checkpoints and commits an elastic run's state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf

from hvd_linreg import scoring
from hvd_linreg.config import Config
from hvd_linreg.data import Shard
from hvd_linreg.errors import UsageError
from hvd_linreg.report import TrainingResult
from hvd_linreg.runtime.collectives import as_tensor
from hvd_linreg.runtime.ranks import Job, Watchdog
from hvd_linreg.sgd import checkpoint
from hvd_linreg.sgd.model import Model
from hvd_linreg.sgd.monitor import Monitor

# A window of a shard read from its file as training uses it (see Trainer._rows).
_WINDOW_BYTES = 64 << 20


class Trainer:
    """One rank's SGD run: the model, the wrapped optimizer, this rank's shard as tensors, where
    the run started, and rank 0's checkpoint directory."""

    def __init__(self, cfg: Config, family, model, optimizer):
        self.cfg, self.family, self.model, self.optimizer = cfg, family, model, optimizer
        # Its variables exist now: start() broadcasts them, an elastic reset restores them.
        self.optimizer.build([self.model.params])
        self.initial, self.first_step = self.model.numpy_params(), 0

    def use(self, job: Job, shard: Shard, ckpt_dir: Path | None) -> None:
        """Train with these ranks on this shard (again after an elastic reset)."""
        self.job, self.shard, self.ckpt_dir = job, shard, ckpt_dir
        if shard.table is None:  # SGD's rows and the copy of their first, as tensors
            held = shard.num_train + shard.layout.num_wrap
            C = None if shard.carried is None else shard.carried[:held]
            self.rows = self._tensors(shard.X[:held], shard.y[:held], C)
        # Traced anew for each job: the rank count is a constant inside the loop. One trace
        # for every window of a shard read from its file: their row counts differ. Without
        # AutoGraph (the loop is a tf.while_loop of its own): its rewrite of the loop and of
        # every function it calls would add about a second to each rank's start.
        self._train_steps = tf.function(self._steps, reduce_retracing=True, autograph=False)

    def start(self) -> None:
        """Rank 0's start on every rank: its fresh parameters, or its newest checkpoint (sets
        initial and first_step)."""
        initial, first_step, error = self.model.numpy_params(), 0, None
        if self.ckpt_dir is not None:  # rank 0 only
            try:
                initial, first_step = self._restore()
            except UsageError as e:
                error = e
        self.job.agree(error)
        # Horovod: every rank starts from rank 0's values (fresh or restored), so that identical
        # averaged updates keep all ranks equal from here on.
        self.job.broadcast_variables([self.model.params, *self.optimizer.variables])
        self.initial, self.first_step = self.job.broadcast((initial, first_step))

    def _restore(self) -> tuple[np.ndarray, int]:
        """Load the newest loadable checkpoint into rank 0's model and optimizer.

        Returns (the run's initial params, the step to continue from); (current, 0) if none.
        """
        ckpt, warnings = checkpoint.load_latest(self.ckpt_dir)
        self._warn(warnings)
        if ckpt is None:
            return self.model.numpy_params(), 0
        slots = [v.shape for v in self.optimizer.variables]
        checkpoint.check_resumable(
            ckpt,
            self.cfg.checkpoint_dir,
            self.shard.num_features,
            self.cfg.optimizer,
            slots,
            self.shard.feature_names,
            self.cfg.no_intercept,
            self.family.labels,
        )
        self.model.params.assign(ckpt.params.reshape(self.model.params.shape))
        for var, value in zip(self.optimizer.variables, ckpt.optimizer):
            var.assign(value)
        global_batch = self.shard.layout.global_batch
        self._warn(
            checkpoint.trajectory_warnings(
                ckpt, self.cfg.as_dict(), global_batch, self.shard.layout.num_batched
            )
        )
        self.job.log(
            f"Resuming from {self.ckpt_dir / f'ckpt-{ckpt.step:010d}.npz'} at step {ckpt.step}"
        )
        return np.asarray(ckpt.initial_params, np.float64), ckpt.step

    def _warn(self, warnings: list[str]) -> None:
        for w in warnings:
            self.job.warn(w)

    def _tensors(self, X: np.ndarray, y: np.ndarray, C: np.ndarray | None) -> tuple:
        """(X, y, weight, offset) as tensors of the model's dtype; weight and offset None
        without --weights and --offset/--exposure."""
        rows = self.shard.carried_columns.rows(X, y, C)
        more = [None if a is None else as_tensor(a.astype(X.dtype)) for a in rows[2:]]
        return (as_tensor(X), as_tensor(y), *more)

    def _rows(self, first: int, count: int) -> tuple[tuple, int, int]:
        """((X, y, weight, offset), start, count): rows holding the batches of count steps
        from step first; step i's batch is the rows from (i * B - start) mod n on. The shard
        in memory, or else a window read from the file, for fewer steps: no more than
        _WINDOW_BYTES, and no more than n rows, so that no row is read twice (a window wraps
        as batches do)."""
        if self.shard.table is None:
            return self.rows, 0, count
        layout, k = self.shard.layout, len(self.shard.carried_columns)
        n, B = layout.num_train, layout.batch_size
        row_bytes = (self.shard.num_features + 1 + k) * self.shard.X.itemsize
        count = min(count, max(1, _WINDOW_BYTES // (B * row_bytes)), n // B)
        start = first * B % n
        rows = range(start, start + count * B)
        return (
            self._tensors(*self.shard.take(rows)),
            start,
            count,
        )

    def _steps(self, X, y, weight, offset, first: tf.Tensor, count: tf.Tensor, start: tf.Tensor):
        """count steps from step first, in one call: one Python round trip per log interval."""
        batch_size, n, end = self.cfg.batch_size, self.shard.num_train, first + count

        def going(step, loss, ran, finite):
            # Every rank applied the same averaged update, so every rank stops at the same step.
            return tf.logical_and(step < end, finite)

        def one_step(step, loss, ran, finite):
            # The layout contract: step i's rows are the shard's rows from i*B on, mod n (a
            # window of the shard starts at row start). A batch that runs past the n-th row
            # goes on in the copy of the first rows held after it: so every batch is one
            # block, and a slice shares the shard's memory where a gather would copy it.
            first_row = (step * batch_size - start) % n
            batch = slice(first_row, first_row + batch_size)
            wb = None if weight is None else weight[batch]
            ob = None if offset is None else offset[batch]
            loss = self._update(X[batch], y[batch], wb, ob)
            finite = tf.reduce_all(tf.math.is_finite(self.model.params))
            return step + 1, loss, ran + 1, finite

        start_values = (first, tf.constant(0.0, self.model.params.dtype), tf.constant(0, tf.int64))
        _, loss, ran, _ = tf.while_loop(going, one_step, (*start_values, tf.constant(True)))
        return loss, ran

    def _update(self, Xb: tf.Tensor, yb: tf.Tensor, wb=None, ob=None) -> tf.Tensor:
        """One averaged SGD update on this rank's batch; returns the batch loss."""
        with tf.GradientTape() as tape:
            loss = self.model.loss(Xb, yb, wb, ob)
            # Horovod: the optimizer sums the ranks' gradients; of this loss they sum to the
            # average. For 1, 2, 4... ranks the division is exact: bit for bit op=Average's.
            loss_over_ranks = loss / self.job.size
        self.optimizer.minimize(loss_over_ranks, [self.model.params], tape=tape)
        return loss

    def _trace(self) -> None:
        """Trace the loop now, so that compiling is not counted as training time."""
        rows = tf.TensorSpec([None, self.shard.num_features], self.shard.dtype)
        column, step = tf.TensorSpec([None], rows.dtype), tf.TensorSpec([], tf.int64)
        carried = self.shard.carried_columns
        weight = column if carried.weight else None
        offset = column if carried.offset_given else None
        self._train_steps.get_concrete_function(rows, column, weight, offset, *[step] * 3)

    def fit(self, commit: Callable[[int], None] | None = None) -> TrainingResult:
        """Train from first_step to num_steps; log the loss, averaged over ranks, every
        log_every steps; rank 0 saves a checkpoint every checkpoint_every steps; an elastic
        run commits its state (commit(step)) every commit_interval steps and at the end."""
        cfg = self.cfg
        self._trace()
        # Horovod: start the clock when every rank is ready, not when the fastest one is.
        self.job.barrier("all_ready")
        monitor = Monitor(cfg, self.job, self.first_step)
        every = [cfg.log_every] + ([cfg.checkpoint_every] if self.ckpt_dir is not None else [])
        every += [cfg.commit_interval] if commit else []
        start = time.perf_counter()
        done = self.first_step
        with Watchdog(self.job.rank, self.job.stall_limit_s) as watchdog:
            while done < cfg.num_steps:
                count = min([k - done % k for k in every] + [cfg.num_steps - done])
                rows, first_row, count = self._rows(done, count)
                loss, ran = self._train_steps(
                    *rows, *[tf.constant(v, tf.int64) for v in (done, count, first_row)]
                )
                done += int(ran)
                watchdog.progress()
                self._check_finite(done)
                self._at(done, loss, monitor, start, commit)
        wall_s = time.perf_counter() - start
        monitor.close()
        return self._result(done, wall_s, monitor)

    def _check_finite(self, done: int) -> None:
        if not np.isfinite(self.model.numpy_params()).all():
            lr = self.cfg.learning_rate
            raise UsageError(
                f"training diverged at step {done}: w and b became NaN or inf. "
                f"--learning_rate {lr} is too large for this data; try {lr / 10:g} or less"
            )

    def _at(self, done: int, loss, monitor: Monitor, start: float, commit) -> None:
        """What happens at step done, where the loop stopped: log, checkpoint, commit."""
        cfg = self.cfg
        last = done == cfg.num_steps
        if done % cfg.log_every == 0 or last:
            # Horovod: each rank's last batch loss, averaged: the global batch's loss.
            mean_loss = self.job.mean(loss, "log_loss")
            params = self.model.numpy_params()
            monitor.record(
                done,
                mean_loss,
                float(self.optimizer.learning_rate),
                (done - self.first_step) / (time.perf_counter() - start),
                params,
                self.validation_scores(params),
            )
        if self.ckpt_dir is not None and (done % cfg.checkpoint_every == 0 or last):
            self.save_checkpoint(done)
        if commit and (done % cfg.commit_interval == 0 or last):
            commit(done)

    def validation_scores(self, params: np.ndarray):
        """The family's scores of params on the held-out rows (every rank's); None without."""
        if not self.shard.num_validation:
            return None
        return scoring.scores(self.job, self.family, params, self.shard.validation_blocks)

    def _result(self, done: int, wall_s: float, monitor: Monitor) -> TrainingResult:
        params = self.model.numpy_params()
        return TrainingResult(
            initial_params=self.initial,
            params=params,
            loss=scoring.loss(self.job, self.shard, self.family, params),
            steps=done,
            first_step=self.first_step,
            wall_s=wall_s,
            history=monitor.history,
            validation_history=monitor.validation_history,
        )

    def save_checkpoint(self, step: int) -> None:
        """Rank 0's checkpoint of this step (only rank 0 has a checkpoint directory)."""
        checkpoint.save(
            self.ckpt_dir,
            checkpoint.Checkpoint(
                step=step,
                params=self.model.stored(),
                optimizer=[v.numpy() for v in self.optimizer.variables],
                global_batch_size=self.shard.layout.global_batch,
                batched_rows=self.shard.layout.num_batched,
                initial_params=np.asarray(self.initial, np.float64).tolist(),
                config=self.cfg.as_dict(),
                feature_names=self.shard.feature_names,
                classes=self.family.labels,
            ),
            self.cfg.keep_checkpoints,
        )


def make_trainer(cfg: Config, family, job: Job, shard: Shard) -> Trainer:
    """The trainer, handed the family's model and the Horovod-wrapped optimizer."""
    from hvd_linreg.sgd.optimizer import make_optimizer

    start = family.initial_params(cfg.seed, job.rank, shard.num_features)
    if cfg.no_intercept:
        start[-1] = 0.0  # b starts at 0 and, out of the linear predictor, stays there
    model = Model(start, shard.dtype, cfg.l2, family, intercept=not cfg.no_intercept)
    # Keras keeps the learning rate in its float type: float32 would round a float64 run's.
    tf.keras.backend.set_floatx(shard.dtype)
    return Trainer(cfg, family, model, make_optimizer(cfg, job.size))
