"""--elastic: training that goes on when ranks are lost or hosts come and go.

Under horovodrun's elastic driver the training runs inside hvd.elastic.run. Every
--commit_every steps each rank commits a snapshot to its own memory: w and b, the optimizer's
variables, the step, the rank count of the segment and the resets so far. When a rank is lost
(a collective fails) or the hosts change (noticed at a commit), the remaining ranks go back to
their last commit, Horovod re-forms the job, rank 0's snapshot is broadcast to every rank (new
ones included), each rank loads its shard for the new rank count, and training goes on.

The reset contract (docs/elastic.md): the per-rank batch stays, so the global batch follows the
rank count; the data follow the sharding and batching contract at the new count from the
snapshot's step on; the steps after the last commit are done again. The result is then a pure
function of the data, the flags and the resets, (step, ranks before, ranks after), which the
metrics JSON lists.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import NamedTuple

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf
from horovod.common.elastic import State, run_fn
from horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

from hvd_linreg import families, pipeline
from hvd_linreg.config import Config
from hvd_linreg.runtime import ranks
from hvd_linreg.sgd.trainer import Trainer, make_trainer

Reset = tuple[int, int, int]  # (step training went on from, ranks before, ranks after)


@dataclass(frozen=True)
class Snapshot:
    """A commit: what every rank goes back to after a reset, and what new ranks receive."""

    step: int
    size: int  # the rank count of the segment that reached this step
    params: np.ndarray  # [w..., b] as the model holds them
    optimizer: tuple[np.ndarray, ...]  # the optimizer's variables, in its own order
    initial: np.ndarray  # the run's start, for the report
    first_step: int  # 0, or the checkpoint's step the run resumed from
    resets: tuple[Reset, ...]


class Values(NamedTuple):
    params: np.ndarray  # [w..., b] as the model holds them
    optimizer: tuple[np.ndarray, ...]  # the optimizer's variables, in its own order


def _values(trainer: Trainer) -> Values:
    return Values(
        trainer.model.params.numpy().copy(),
        tuple(v.numpy().copy() for v in trainer.optimizer.variables),
    )


class TrainingState(State):
    """Horovod's elastic state for the tool: one Snapshot, broadcast as one object under one
    name on old and new ranks alike (Horovod stalled on names that differed between them, in
    TensorFlow 1's graph mode: https://github.com/horovod/horovod/issues/2285). The trainer,
    whose optimizer variables exist before any snapshot is loaded
    (https://github.com/horovod/horovod/issues/2652), is built at a rank's first entry."""

    def __init__(self):
        self.trainer: Trainer | None = None
        self.committed: Snapshot | None = None  # None until the run has started
        super().__init__(bcast_object=self._broadcast_updates, get_rank=hvd.rank)

    @staticmethod
    def _broadcast_updates(obj):
        return ranks.broadcast_object(obj, "hvd_linreg.host_updates")

    def begin(self, size: int) -> None:
        """The run's first commit: the trainer's start, fresh or from a checkpoint."""
        t = self.trainer
        self.committed = Snapshot(
            t.first_step, size, *_values(t), np.asarray(t.initial), t.first_step, ()
        )

    def commit_at(self, step: int) -> None:
        """Commit the trainer's values at this step; then see whether the hosts changed."""
        self.committed = replace(self.committed, step=step, **_values(self.trainer)._asdict())
        self.check_host_updates()

    def save(self) -> None:
        pass  # commit_at takes the snapshot: it knows the step

    def restore(self) -> None:
        """After a lost rank, before Horovod re-forms the job: back to the last commit."""
        if self.committed is not None:
            self._say(
                f"hvd-linreg: the job lost a rank; going back to step {self.committed.step} "
                "and waiting for horovodrun to re-form the job (at least --min-np ranks, "
                "within --elastic-timeout)"
            )
        self.load()

    def load(self) -> None:
        """Put the committed values into this rank's model and optimizer."""
        s, t = self.committed, self.trainer
        if s is None or t is None:
            return
        t.model.params.assign(s.params)
        for var, value in zip(t.optimizer.variables, s.optimizer):
            var.assign(value)

    def _say(self, line: str) -> None:
        """Rank 0 of the job that is ending speaks (there is no new job yet)."""
        if self.trainer is not None and self.trainer.job.is_root:
            ranks.say(line)

    def sync(self) -> None:
        """Rank 0's commit on every rank (ranks that just joined have none)."""
        self.committed = ranks.broadcast_object(self.committed, "hvd_linreg.snapshot")
        self.load()

    def check_host_updates(self) -> None:
        try:
            super().check_host_updates()
        except HostsUpdatedInterrupt:
            self._say("hvd-linreg: the hosts changed; re-forming the job at the last commit")
            # Always synchronise after the reset, also when hosts were only removed: Horovod
            # would skip it then, and if the job fell below --min-np and hosts then joined, the
            # new ranks would wait in the synchronisation the old ones skipped:
            # https://github.com/horovod/horovod/issues/3494
            raise HostsUpdatedInterrupt(skip_sync=False) from None


def run_elastic(func):
    """hvd.elastic.run, except that a TensorFlow error of anything but a collective stays an
    error: Horovod 0.28.1's wrapper returns None for it, and the job then goes on without the
    result."""

    def lost_rank_as_internal_error(state, *args):
        try:
            return func(state, *args)
        except tf.errors.UnknownError as e:
            if ranks.is_collective_failure(e):
                raise HorovodInternalError(e) from e
            raise

    return run_fn(lost_rank_as_internal_error, ranks.restart)


def run(cfg: Config) -> int:
    """The elastic recipe: pipeline's steps, with nothing collective before hvd.elastic.run (a
    rank that joins a running job meets the others only in its synchronisation), everything
    else inside it."""
    ranks.init(verbose=cfg.verbose, elastic=True)
    family = families.for_config(cfg)
    steps = pipeline.steps_for(family)
    steps.check(cfg)
    state = TrainingState()
    began = time.perf_counter()
    job, family, shard, result, optimum = run_elastic(_train)(state, cfg, family, steps)
    result = replace(result, wall_s=time.perf_counter() - began)
    steps.finish(cfg, family, job, shard, result, optimum, began)
    return 0


def _train(state: TrainingState, cfg: Config, family, steps: type[pipeline.Steps]):
    """One segment: from the last commit (or the start) with the ranks there are now. The
    family is made again for each segment's rows (a target's classes are those its ranks
    agree on)."""
    job = ranks.current_job(cfg.verbose)
    family, shard, ckpt_dir = steps.prepare(cfg, family, job)
    if state.trainer is None:
        state.trainer = make_trainer(cfg, family, job, shard)
        state.trainer.use(job, shard, ckpt_dir)
        state.load()
    else:
        state.trainer.use(job, shard, ckpt_dir)
    trainer = state.trainer
    if state.committed is None:  # the run's start (or a reset before its first commit)
        steps.announce(cfg, family, job, shard)
        trainer.start()
        state.begin(job.size)
    else:
        s = state.committed
        event = (s.step, s.size, job.size)
        job.log(f"hvd-linreg: elastic reset: {s.size} -> {job.size} ranks, from step {s.step}")
        state.committed = replace(s, size=job.size, resets=(*s.resets, event))
    trainer.first_step = state.committed.step
    result, optimum = steps.train(cfg, family, job, shard, trainer, state.commit_at)
    result = replace(
        result,
        initial_params=state.committed.initial,
        first_step=state.committed.first_step,
        resets=list(state.committed.resets),
    )
    return job, family, shard, result, optimum
