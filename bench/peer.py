"""The peer: the seed job on `tf.distribute.MultiWorkerMirroredStrategy`, one worker process
per rank on localhost, with its best settings (see `--help`).

run.py starts N copies with TF_CONFIG naming N local ports. The contract is the tool's: same
shards, same batches, same start; the loss is scaled by the GLOBAL batch, because the strategy
sums the replicas' gradients: sum over ranks of (per-rank sum / (B * size)) = the average.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
from contract import job_parser, shard, write_result

from hvd_linreg.runtime.resources import thread_budget


def main() -> None:
    p = job_parser(__doc__)
    p.add_argument(
        "--implementation",
        choices=("RING", "AUTO"),
        default="RING",
        help="collective implementation (on CPU, AUTO picks RING too)",
    )
    args = p.parse_args()
    cluster = json.loads(os.environ["TF_CONFIG"])
    rank = cluster["task"]["index"]
    size = len(cluster["cluster"]["worker"])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    # Same thread budget as the tool gives each rank (all workers are on this machine).
    threads = thread_budget(size)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=getattr(
            tf.distribute.experimental.CommunicationImplementation, args.implementation
        )
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)

    X_np, y_np = shard(args, rank, size)
    X, y = tf.constant(X_np), tf.constant(y_np)
    n = tf.constant(len(y_np), tf.int64)
    offsets = tf.range(args.batch_size, dtype=tf.int64)
    start = np.asarray(args.initial, np.float32).reshape(-1, 1)
    global_batch = args.batch_size * size
    with strategy.scope():
        params = tf.Variable(start)  # w and b in one variable: one all-reduce per step
        optimizer = tf.keras.optimizers.SGD(args.learning_rate)

    def step_fn(step: tf.Tensor) -> tf.Tensor:
        rows = (step * args.batch_size + offsets) % n  # the batching contract
        Xb, yb = tf.gather(X, rows), tf.gather(y, rows)
        with tf.GradientTape() as tape:
            residual = tf.squeeze(tf.matmul(Xb, params[:-1]), axis=1) + params[-1] - yb
            loss = tf.reduce_sum(tf.square(residual)) / global_batch
        # Inside the replica context apply_gradients all-reduces (sums) the gradients.
        optimizer.apply_gradients(zip(tape.gradient(loss, [params]), [params]))
        return loss

    @tf.function
    def train_steps(first: tf.Tensor, count: tf.Tensor) -> tf.Tensor:
        # Many steps per call, as in the tool: one Python round trip per call, not per step.
        loss = tf.constant(0.0)
        for step in tf.range(first, first + count):
            loss = strategy.run(step_fn, args=(step,))
        # Each replica's last batch loss, summed: the loss of the global batch, as the tool logs.
        return strategy.reduce("SUM", loss, axis=None)

    def run_once() -> float:
        params.assign(start)
        strategy.reduce("SUM", tf.constant(1.0), axis=None)  # a barrier: start together
        t0 = time.perf_counter()
        done = 0
        while done < args.num_steps:
            count = min(args.log_every, args.num_steps - done)
            float(train_steps(tf.constant(done, tf.int64), tf.constant(count, tf.int64)))
            done += count
        return time.perf_counter() - t0

    train_steps(tf.constant(0, tf.int64), tf.constant(1, tf.int64))  # trace before timing
    times, final = [], None
    for _ in range(args.repeats):
        times.append(run_once())
        final = params.numpy().reshape(-1) if final is None else final
    if rank == 0:
        write_result(args.out, size, final, times)


if __name__ == "__main__":
    main()
