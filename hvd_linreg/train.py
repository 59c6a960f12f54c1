"""The recipe, top to bottom: start Horovod, load this rank's shard, build the model, broadcast
rank 0's start, train with averaged gradients, report."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import horovod.tensorflow as hvd
import horovod.tensorflow.keras as hvd_keras
import numpy as np
import tensorflow as tf

from hvd_linreg import checkpoint, exact, export, ranks
from hvd_linreg.config import Config, UsageError
from hvd_linreg.data import Shard, aligned_empty, load_shard
from hvd_linreg.model import LinearModel, initial_params
from hvd_linreg.monitor import Monitor
from hvd_linreg.plot import save_plot
from hvd_linreg.ranks import Job, Watchdog
from hvd_linreg.report import Report, TrainingResult, check_writable, header_line, write_json
from hvd_linreg.scores import Scores, scores


def _horovod_functions_without_autograph() -> None:
    """Trace Horovod's own tf.functions (its gradient allreduce, its variable broadcast) as the
    graph-mode code they are, as Horovod itself runs them under TensorFlow 1.

    Horovod wraps them with a bare tf.function, so AutoGraph rewrote their source on every
    rank's start: 0.35-0.4 s of CPU per rank (of 0.7-0.8 s for everything after the imports on
    the seed job); `horovodrun -np 4 hvd-linreg` took 23.5 s of CPU with this, 29.7 s without
    (medians of 3 paired runs). They branch on tensors only through tf.cond, so nothing changes
    but the time. Horovod 0.28.1 is its last release; should the private hook move, this does
    nothing and the start is only slower."""
    from horovod.tensorflow import functions, util

    def graph_function(f):
        return tf.function(f, autograph=False)

    for module in (hvd, functions):
        if getattr(module, "_make_subgraph", None) is util._make_subgraph:
            module._make_subgraph = graph_function


_horovod_functions_without_autograph()


def run(cfg: Config) -> int:
    job = ranks.init(verbose=cfg.verbose, elastic=cfg.elastic)
    if cfg.elastic:
        from hvd_linreg import elastic

        return elastic.run(cfg, job)

    shard, ckpt_dir = prepare(cfg, job)
    if not cfg.quiet:
        job.log(header_line(cfg, job, shard))

    # The exact optimum costs two passes, an allreduce and an allgather: SGD's result is
    # measured against it.
    start = time.perf_counter()
    optimum = solve_exactly(cfg, job, shard)
    if cfg.solver == "exact":
        if optimum is None:
            raise UsageError(f"--solver exact handles up to {exact.MAX_FEATURES} features")
        wall_s = time.perf_counter() - start
        result = TrainingResult(None, optimum.params, optimum.loss, 0, 0, wall_s)
    else:
        trainer = Trainer(cfg, job, shard, ckpt_dir)
        trainer.start()
        result = trainer.fit()
    result = replace(result, validation=validation_scores(job, shard, result.params))
    report(cfg, job, shard, result, optimum)
    return 0


def prepare(cfg: Config, job: Job) -> tuple[Shard, Path | None]:
    """This rank's shard, and rank 0's checked output paths and checkpoint directory."""
    # Each rank reads only its own rows, and rank 0 checks the paths it will write, before any
    # training: a problem any rank sees stops all of them together, with one message.
    shard, ckpt_dir, error = None, None, None
    try:
        shard = load_shard(cfg, job.rank, job.size, job)
        if job.is_root:
            check_writable("--metrics_json", cfg.metrics_json)
            check_writable("--plot", cfg.plot)
            export.check_target(cfg.export)
            ckpt_dir = checkpoint.prepare_dir(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
    except UsageError as e:
        error = e
    job.agree(error)
    layout = shard.layout
    if shard.oversized_reads:
        job.warn(
            f"{cfg.data} has row groups of up to {shard.oversized_reads} rows, more than a "
            f"batch of {layout.run_length}: each rank reads and decodes every row group that holds "
            "any of its rows, so the ranks read much of the file each, not 1/ranks of it. "
            f"Write it with row groups of at most {layout.run_length} rows (pyarrow: "
            f"pq.write_table(table, path, row_group_size={layout.run_length}))"
        )
    unbatched = shard.num_samples - layout.num_batched
    if unbatched and cfg.solver == "sgd":
        g = layout.run_length
        runs = f"{layout.size} ranks x runs of {g} row{'s' * (g > 1)}"
        job.warn(
            f"{shard.num_samples} samples are not a multiple of {layout.stride} ({runs}): "
            f"SGD uses the first {layout.num_batched} and leaves out the last {unbatched}, "
            "which count only in the final loss and the exact solution"
        )
    return shard, ckpt_dir


def solve_exactly(cfg: Config, job: Job, shard: Shard) -> exact.Optimum | None:
    """The exact optimum (of --l2's ridge objective) over the whole dataset, the same on every
    rank; None above exact.MAX_FEATURES features, or for an SGD run that does not want it
    (Report.exact_skipped says why)."""
    if shard.num_features > exact.MAX_FEATURES or not wants_optimum(cfg, shard, job.size):
        return None
    return exact.optimum(job, shard, cfg.l2, shard.feature_names)


def validation_scores(job: Job, shard: Shard, params: np.ndarray) -> Scores | None:
    """The scores of params on the held-out rows (every rank's piece); None without them."""
    return scores(job, params, shard.validation_blocks()) if shard.num_validation else None


def wants_optimum(cfg: Config, shard: Shard, size: int) -> bool:
    """Whether an SGD run also solves least squares exactly, for its optimality gap: the QR
    costs about N (F+1)^2 multiply-adds, the steps about 2 x steps x G (F+1); by default only
    when that is the smaller part of the run."""
    if cfg.solver == "exact" or cfg.optimality_gap == "always":
        return True
    if cfg.optimality_gap == "never":
        return False
    cost = shard.num_samples * (shard.num_features + 1)
    return cost <= 2 * cfg.num_steps * shard.layout.global_batch


def report(
    cfg: Config, job: Job, shard: Shard, result: TrainingResult, optimum: exact.Optimum | None
) -> None:
    error = None
    if job.is_root:  # only rank 0 writes, so ranks never race on the same file
        summary = Report(cfg, job, shard, result, optimum)
        for line in summary.summary_lines():
            job.log(line)
        metrics = summary.metrics()
        if cfg.metrics_json:
            write_json(cfg.metrics_json, metrics)
        if cfg.plot:
            save_plot(cfg.plot, summary)
        if cfg.export:
            try:
                export.save(cfg, shard, result.params, metrics)
            except UsageError as e:  # --export was taken while training ran
                error = e
    if cfg.export:
        job.agree(error)  # every rank exits as rank 0 does


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
    # same update. Calling apply_gradients() on raw gradients would skip it. It sums them (op=Sum):
    # Trainer._train_steps divides each rank's loss by the rank count, so the sum is the average.
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


class Trainer:
    """One rank's SGD run: the model, the wrapped optimizer, this rank's shard as tensors, where
    the run started, and rank 0's checkpoint directory."""

    def __init__(self, cfg: Config, job: Job, shard: Shard, ckpt_dir: Path | None):
        self.cfg = cfg
        self.model = LinearModel(
            initial_params(cfg.seed, job.rank, shard.num_features), shard.dtype, cfg.l2
        )
        # Keras keeps the learning rate in its float type: float32 would round a float64 run's.
        tf.keras.backend.set_floatx(shard.dtype)
        self.optimizer = make_optimizer(cfg, job.size)
        # Its variables exist now: start() broadcasts them, an elastic reset restores them.
        self.optimizer.build([self.model.params])
        self.initial, self.first_step = self.model.numpy_params(), 0
        self.use(job, shard, ckpt_dir)

    def use(self, job: Job, shard: Shard, ckpt_dir: Path | None) -> None:
        """Train with these ranks on this shard (again after an elastic reset)."""
        self.job, self.shard, self.ckpt_dir = job, shard, ckpt_dir
        if shard.table is None:  # SGD's rows and the copy of their first, as tensors
            held = shard.num_train + shard.layout.num_wrap
            self.X, self.y = as_tensor(shard.X[:held]), as_tensor(shard.y[:held])
        # Traced anew for each job: the rank count is a constant inside the loop. One trace
        # for every window of a shard read from its file: their row counts differ.
        self._train_steps = tf.function(self._steps, reduce_retracing=True)

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
        # Every rank starts from rank 0's values (fresh or restored), so that identical averaged
        # updates keep all ranks equal from here on.
        hvd.broadcast_variables([self.model.params, *self.optimizer.variables], root_rank=0)
        self.initial, self.first_step = self.job.broadcast((initial, first_step))

    def _restore(self) -> tuple[np.ndarray, int]:
        """Load the newest loadable checkpoint into rank 0's model and optimizer.

        Returns (the run's initial params, the step to continue from); (current, 0) if none.
        """
        ckpt, warnings = checkpoint.load_latest(self.ckpt_dir)
        for w in warnings:
            self.job.warn(w)
        if ckpt is None:
            return self.model.numpy_params(), 0
        where = self.cfg.checkpoint_dir
        if ckpt.num_features != self.shard.num_features:
            raise UsageError(
                f"the checkpoint in {where} is for {ckpt.num_features} features, "
                f"this data has {self.shard.num_features}; use another --checkpoint_dir"
            )
        # By the flag, not the state's shapes: plain SGD and momentum are one Keras class
        # with the same slots, and momentum would take SGD's last update for its velocity.
        saved = ckpt.config.get("optimizer")
        current = [v.numpy() for v in self.optimizer.variables]
        if saved != self.cfg.optimizer or [a.shape for a in ckpt.optimizer] != [
            a.shape for a in current
        ]:
            raise UsageError(
                f"the checkpoint in {where} holds another optimizer's state ({saved}, this run "
                f"uses {self.cfg.optimizer}); use another --checkpoint_dir"
            )
        self.model.params.assign(ckpt.params.reshape(self.model.params.shape))
        for var, value in zip(self.optimizer.variables, ckpt.optimizer):
            var.assign(value)
        self._warn_of_other_batches(ckpt)
        self.job.log(
            f"Resuming from {self.ckpt_dir / f'ckpt-{ckpt.step:010d}.npz'} at step {ckpt.step}"
        )
        return np.asarray(ckpt.initial_params, np.float64), ckpt.step

    def _warn_of_other_batches(self, ckpt: checkpoint.Checkpoint) -> None:
        """The same global batch over the same first N_sgd rows is the same trajectory,
        whatever the rank count (layout contract); anything else is not."""
        global_batch, batched = self.shard.layout.global_batch, self.shard.layout.num_batched
        differ = "the result will differ from an uninterrupted run"
        if ckpt.global_batch_size != global_batch:
            self.job.warn(
                f"the checkpoint was trained with a global batch of {ckpt.global_batch_size}, "
                f"this run uses {global_batch}: {differ}"
            )
        elif ckpt.batched_rows is None:
            self.job.warn(
                "the checkpoint does not record which rows its batches used (an older version "
                f"wrote it); this run's use the first {batched}: {differ.replace('will', 'may')}"
            )
        elif ckpt.batched_rows != batched:
            self.job.warn(
                f"the checkpoint was trained on batches of the first {ckpt.batched_rows} rows, "
                f"this run's use the first {batched}: {differ}"
            )
        # As many rows can still be other rows: the hold-out split picks them, and the seed
        # draws the synthetic rows and the split. (Checkpoints from before the split had none.)
        cfg, saved = self.cfg, ckpt.config
        fraction = saved.get("validation_fraction", 0.0)
        if fraction != cfg.validation_fraction:
            self.job.warn(
                f"the checkpoint was trained with --validation_fraction {fraction:g}, this run "
                f"uses {cfg.validation_fraction:g}: other rows train, and {differ}"
            )
        elif saved.get("seed", cfg.seed) != cfg.seed and (cfg.synthetic or fraction):
            drawn = "synthetic rows" if cfg.synthetic else "held-out rows"
            self.job.warn(
                f"the checkpoint was trained with --seed {saved['seed']}, this run uses "
                f"{cfg.seed}: the seed draws the {drawn}, so other rows train, and {differ}"
            )

    def _rows(self, first: int, count: int) -> tuple[tf.Tensor, tf.Tensor, int, int]:
        """(X, y, offset, count): rows holding the batches of count steps from step first;
        step i's batch is the rows from (i * B - offset) mod n on. The shard in memory, or
        else a window read from the file, for fewer steps: no more than _WINDOW_BYTES, and
        no more than n rows, so that no row is read twice (a window wraps as batches do)."""
        if self.shard.table is None:
            return self.X, self.y, 0, count
        layout = self.shard.layout
        n, B = layout.num_train, layout.batch_size
        row_bytes = (self.shard.num_features + 1) * self.shard.X.itemsize
        count = min(count, max(1, _WINDOW_BYTES // (B * row_bytes)), n // B)
        start = first * B % n
        X, y = layout.take(self.shard.table, self.shard.dtype, range(start, start + count * B))
        return as_tensor(X), as_tensor(y), start, count

    def _steps(self, X, y, first: tf.Tensor, count: tf.Tensor, offset: tf.Tensor):
        """count steps from step first, in one call: one Python round trip per log interval."""
        batch_size, n = self.cfg.batch_size, self.shard.num_train
        loss, ran = tf.constant(0.0, self.model.params.dtype), tf.constant(0, tf.int64)
        for step in tf.range(first, first + count):
            # The README's layout contract: step i's rows are the shard's rows from i*B on,
            # mod n (a window of the shard starts at row offset). A batch that runs past the
            # n-th row goes on in the copy of the first rows held after it: so every batch is
            # one block, and a slice shares the shard's memory where a gather would copy it.
            first_row = (step * batch_size - offset) % n
            Xb = X[first_row : first_row + batch_size]
            yb = y[first_row : first_row + batch_size]
            loss = self._update(Xb, yb)
            ran += 1
            # Every rank applied the same averaged update, so every rank stops at this step.
            if not tf.reduce_all(tf.math.is_finite(self.model.params)):
                break
        return loss, ran

    def _update(self, Xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        """One averaged SGD update on this rank's batch; returns the batch loss."""
        with tf.GradientTape() as tape:
            loss = self.model.loss(Xb, yb)
            # The optimizer sums the ranks' gradients; of this loss they sum to the average.
            # For 1, 2, 4... ranks the division is exact: bit for bit op=Average's update.
            loss_over_ranks = loss / self.job.size
        self.optimizer.minimize(loss_over_ranks, [self.model.params], tape=tape)
        return loss

    def fit(self, commit: Callable[[int], None] | None = None) -> TrainingResult:
        """Train from first_step to num_steps; log the loss, averaged over ranks, every
        log_every steps; rank 0 saves a checkpoint every checkpoint_every steps; an elastic
        run commits its state (commit(step)) every commit_interval steps and at the end."""
        cfg = self.cfg
        # Trace the loop now, so that compiling is not counted as training time.
        rows = tf.TensorSpec([None, self.shard.num_features], self.shard.dtype)
        step = tf.TensorSpec([], tf.int64)
        self._train_steps.get_concrete_function(
            rows, tf.TensorSpec([None], rows.dtype), *[step] * 3
        )
        # And start the clock when every rank is ready, not when the fastest one is. An allreduce,
        # not hvd.join(): after an elastic reset, ranks that passed a join ran on without a rank
        # that had not (joined ranks count as zeros) and then failed in the next broadcast.
        hvd.allreduce(tf.constant(0.0), op=hvd.Sum, name="all_ready")

        monitor = Monitor(cfg, self.job, self.first_step)
        every = [cfg.log_every] + ([cfg.checkpoint_every] if self.ckpt_dir is not None else [])
        every += [cfg.commit_interval] if commit else []
        start = time.perf_counter()
        done = self.first_step
        with Watchdog(self.job.rank, self.job.stall_limit_s) as watchdog:
            while done < cfg.num_steps:
                count = min([k - done % k for k in every] + [cfg.num_steps - done])
                X, y, offset, count = self._rows(done, count)
                loss, ran = self._train_steps(
                    X, y, *[tf.constant(v, tf.int64) for v in (done, count, offset)]
                )
                done += int(ran)
                watchdog.progress()
                if not np.isfinite(self.model.numpy_params()).all():
                    raise UsageError(
                        f"training diverged at step {done}: w and b became NaN or inf. "
                        f"--learning_rate {cfg.learning_rate} is too large for this data; "
                        f"try {cfg.learning_rate / 10:g} or less"
                    )
                if done % cfg.log_every == 0 or done == cfg.num_steps:
                    # Each rank's last batch loss, averaged: the global batch's loss at this step.
                    mean_loss = float(hvd.allreduce(loss, op=hvd.Average, name="log_loss"))
                    params = self.model.numpy_params()
                    monitor.record(
                        done,
                        mean_loss,
                        float(self.optimizer.learning_rate),
                        (done - self.first_step) / (time.perf_counter() - start),
                        params,
                        validation_scores(self.job, self.shard, params),
                    )
                if self.ckpt_dir is not None and (
                    done % cfg.checkpoint_every == 0 or done == cfg.num_steps
                ):
                    self.save_checkpoint(done)
                if commit and (done % cfg.commit_interval == 0 or done == cfg.num_steps):
                    commit(done)
        wall_s = time.perf_counter() - start
        monitor.close()

        params = self.model.numpy_params()
        return TrainingResult(
            initial_params=self.initial,
            params=params,
            loss=global_mse(params, self.shard),
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
                params=self.model.params.numpy().reshape(-1),
                optimizer=[v.numpy() for v in self.optimizer.variables],
                global_batch_size=self.shard.layout.global_batch,
                batched_rows=self.shard.layout.num_batched,
                initial_params=[float(v) for v in self.initial],
                config=self.cfg.as_dict(),
            ),
            self.cfg.keep_checkpoints,
        )


# A window of a shard read from its file as training uses it (see Trainer._rows).
_WINDOW_BYTES = 64 << 20


def as_tensor(a: np.ndarray) -> tf.Tensor:
    """A tensor on the array's memory: tf.constant would copy it, twice over while converting.
    DLPack shares memory that is C-ordered, writable and 64-byte aligned; anything else is
    first copied once into such a buffer. Nothing writes to a shard after loading, so sharing
    is safe."""
    if not (a.flags.c_contiguous and a.flags.writeable and a.ctypes.data % 64 == 0):
        a, unaligned = aligned_empty(a.shape, a.dtype), a
        a[...] = unaligned
    return tf.experimental.dlpack.from_dlpack(a.__dlpack__())


def global_mse(theta: np.ndarray, shard: Shard) -> float:
    """Mean squared error of [w..., b] over the whole dataset: float64 sums, allreduced."""
    # In blocks, not a float64 copy of the shard; of about 16 MB, which the allocator keeps for
    # the next block, where larger ones would each be fresh memory from the kernel (1 s more
    # at 8 M x 64 in blocks of 64 K rows). One thread: the pass is bound by memory, and a
    # second thread made it slower.
    sse, count = 0.0, 0
    for X, y in shard.blocks(max(1024, (16 << 20) // (8 * (shard.num_features + 1)))):
        residual = X.astype(np.float64) @ theta[:-1] + theta[-1] - y
        sse, count = sse + float(np.dot(residual, residual)), count + len(y)
    sums = hvd.allreduce(
        tf.constant([sse, count], tf.float64),
        op=hvd.Sum,
        name="global_mse",
    ).numpy()
    return float(sums[0] / sums[1]) if sums[1] else math.nan
