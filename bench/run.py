"""`make bench`: hvd-linreg next to its floor and its peer, side by side on this machine.

1. Step latency of the seed job at 1, 2 and 4 ranks: the tool (`mpirun -np N hvd-linreg`),
   the floor (NumPy + mpi4py, bench/floor.py) and the peer
   (MultiWorkerMirroredStrategy, bench/peer.py), all from the tool's initial w and b and
   checked to reach the same w and b before their times count. Then, at 2 ranks, the tool
   with one lever set at a time.
2. and 4. The large job (8 M rows x 64 features) at 1, 2 and 4 ranks: samples/s, scaling
   efficiency and peak RSS per rank (bench/watch_tool.py). The 1-rank run is pinned to one
   core, so that every rank in every row has one core: the efficiency measures what
   data-parallel training costs, not how well one rank uses two threads.
3. Allreduce bandwidth of a 16 MB gradient: Horovod as the tool calls it, with the MPI
   controller (also with glibc's malloc on huge pages) and with Gloo, vs mpi4py's
   `Allreduce` (bench/allreduce.py).
5. Across hosts, on the namespaced test cluster (ci/cluster.sh, brought up and down here; root
   only, else skipped with the reason): the seed job at 2 hosts x 2 ranks next to the floor on
   the same hosts, and the 16 MB allreduce between 2 hosts (1 rank each).
6. Time to result, as a user waits for it: whole-process wall time of `horovodrun -np N
   hvd-linreg` from start to exit. The seed job at 4 ranks next to a bare Horovod job
   (`hvd.init(); hvd.join()`); the large job at 1, 2 and 4 ranks next to the bare job's
   start-up plus the run's own training time; the synthetic generator's GB/s on one core next
   to NumPy's sequential float32 normals (bench/generator.py).
7. The 2023 stack against today's (bench/stacks.py): import time, step latency at 1 and 2
   ranks, the seed job's start-up at 4 ranks, the large job end to end at 1 rank, each on
   TensorFlow 2.15 + NumPy 1 and on TensorFlow 2.21 + NumPy 2, the stacks taking turns.
8. The exact solve: `hvd-linreg --solver exact` on the large job's rows at 1 and 2 ranks, the
   solve's own wall time, next to the normal equations (centred, scaled XcᵀXc and Cholesky) in
   NumPy + mpi4py on the same rows (bench/normal_equations.py), the two taking turns.
9. The model families: the seed job's step at 2 ranks with --model linear and --model logistic
   (on its synthetic 0/1 target), the two taking turns.
10. The Poisson exact fit: `hvd-linreg --model poisson --solver exact` on 2,000,000 x 32
   float64 rows (a 520 MB .npz) at 1 and 2 ranks, next to scikit-learn's
   PoissonRegressor(solver="newton-cholesky"), glum's GeneralizedLinearRegressor and
   statsmodels' GLM(Poisson) on the same rows (bench/glm_peers.py), each fitting data already
   loaded, in a process of its own, taking turns: seconds, peak RSS per rank, and the largest
   difference of each from the tool's coefficients. glum is optional (pip install glum).
11. CSV parse and encode: a 1 GB CSV file (20,000,000 rows: two float columns, a region of 12
   words, a product of 30 words, a float target), from the page cache to the rows in memory
   (a word column as its level codes), by the tool's reader at 1 and 2 ranks (load_shard
   between two barriers, bench/csv_parse.py), next to pyarrow.csv.read_csv plus dictionary
   encoding of the two string columns on one core.
12. Whole runs, start to exit, with each rank's peak RSS (bench/whole_runs.py meters every
   process): `hvd-linreg --solver exact` (which starts no TensorFlow) at 1 rank without a
   launcher and at 2 under mpirun, next to a script that loads the same file and fits with
   scikit-learn, or with glum where it is installed, taking turns: least squares, logistic and
   Poisson on 2,000,000 x 32 float64 rows (.npz), and Poisson on a 5,000-row CSV file.
13. The elastic-net path with 5-fold CV (l1_ratio 0.5, 100 strengths, folds from a column) on
   500,000 x 32 correlated rows, gaussian, binomial and Poisson: the tool at 1 and 2 ranks next
   to R's glmnet (cv.glmnet with foldid), glum and scikit-learn, once each (bench/paths.py).
14. The multinomial exact fit: `hvd-linreg --model multinomial --solver exact` on 1,000,000 x 32
   float64 rows of 5 classes (a Parquet file) at 1 and 2 ranks, one BLAS and OpenMP thread a
   rank, next to scikit-learn's multinomial LogisticRegression (lbfgs, newton-cholesky) and
   statsmodels' MNLogit (newton) on the same rows with the machine's cores
   (bench/multinomial_peers.py), each fitting data already loaded, in a process of its own,
   taking turns: seconds, the ratio to the fastest peer whose coefficients are the tool's to
   1e-6, peak RSS per rank, and each one's largest difference from the tool's coefficients.
15. Wide categorical designs: lme4's InstEval (73,421 ratings, 4,120 coefficients: students and
   lecturers of thousands of levels) with a small ridge, gaussian and binomial, by
   `hvd-linreg --solver exact --categorical ...` at 1 and 2 ranks next to glum (tabmat's
   categorical matrices) on the same rows and penalty (bench/wide_peers.py), taking turns: the
   fit's seconds and the whole process's, peak RSS, and each one's gap to the tool's.
16. A sparse logistic lasso path: 200,000 x 50,000 indicator columns, 0.2% of them 1, on
   glmnet's strengths for the rows, by `hvd_linreg.fit` on the CSR matrix at 1 and 2 ranks
   (each rank its own rows) next to R's glmnet on the same rows as a dgCMatrix, on the
   strengths the tool reaches (bench/sparse_peers.py), once each: seconds and each one's gap.
17. A long and wide generated design: 10,000,000 rows, categorical columns of 100,000, 10,000
   and 1,000 levels and 20 dense ones, Poisson with a small ridge, by `hvd-linreg --solver exact
   --categorical ...` at 1 and 2 ranks (bench/generated_wide.py), once each: the fit's and the
   whole process's seconds and each rank's peak RSS (glum's dense sandwich would not fit).
18. A wide dense lasso path: n = p = 10,000 normal features, gaussian, on glmnet's strengths for
   the rows, by `hvd_linreg.fit` on the array at 1 and 2 ranks (each rank its own rows) next to
   R's glmnet on the same matrix, on the strengths the tool reaches (bench/dense_peers.py), once
   each: seconds and each one's gap.
`--sections 1,6` runs only those sections (2 and 4 come from the same runs).

The machine is shared and noisy: every figure is a median of repeated runs, and the targets
are ratios of figures measured in this same invocation. The tool runs with its defaults plus
whatever HOROVOD_* / OMPI_* variables you set, so `HOROVOD_CYCLE_TIME=0 make bench` measures
that setting everywhere. Prints a table; writes everything to bench/results/latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import dense_peers
import generated_wide
import glm_peers
import launch
import multinomial_peers
import numpy as np
import paths
import sparse_peers
import stacks
import table
import wide_peers

RANKS = (1, 2, 4)
SEED_JOB = ["--num_samples", "1000", "--batch_size", "100"]
# A step's cost is timed between Step lines after the first: the first stretch holds the
# one-off tracing of the training loop, which the peer does before its clock starts and the
# floor does not have. So every column is the marginal cost of one more step.
LATENCY_STEPS = ["--num_steps", "4000", "--log_every", "1000"]
LEVER_STEPS = ["--num_steps", "1000", "--log_every", "250"]
LARGE_JOB = ["--num_samples", "8000000", "--num_features", "64", "--batch_size", "65536"]
LARGE_STEPS = ["--num_steps", "400", "--log_every", "50"]  # 8 stretches of 0.2-1 s each
# The large job's rows for the exact solve, which takes no batch and no steps.
EXACT_JOB = ["--num_samples", "8000000", "--num_features", "64"]
EXACT_RANKS = (1, 2)
# The same flags with almost no data: what one rank's process costs before its shard.
EMPTY_JOB = ["--num_samples", "1000", "--num_features", "64", "--batch_size", "100"]
# The framework's own start-up, the baseline of section 6: a job that only starts Horovod.
BARE_JOB = [sys.executable, "-c", "import horovod.tensorflow as hvd; hvd.init(); hvd.join()"]
AGREE_RTOL = 1e-4
PEER_REPEATS = "3"  # MWMS at 4 ranks on 2 cores takes about 5 s a run
# The floors get the MPI setting that helps them most on a shared machine (it is the tool's
# tuned default too): a waiting rank yields its core instead of busy-polling.
FLOOR_ENV = {"OMPI_MCA_mpi_yield_when_idle": "1"}
# The tool's BLAS threads (one per rank unless exported) for the baseline too: same cores each.
BASELINE_ENV = {**FLOOR_ENV, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
CONTROLLERS = ("mpi", "gloo")

# Seed job at 2 ranks with one lever set (environment, controller, flags), next to the tool
# as it runs by default (HOROVOD_CYCLE_TIME=0 and OMPI_MCA_mpi_yield_when_idle=1 when ranks > 1,
# many steps per tf.function call, the MPI controller): each row undoes one of those.
LEVERS = {
    "HOROVOD_CYCLE_TIME=1 (Horovod's default: 1 ms cycles)": (
        {"HOROVOD_CYCLE_TIME": "1"},
        "mpi",
        [],
    ),
    "OMPI_MCA_mpi_yield_when_idle=0 (MPI busy-polls)": (
        {"OMPI_MCA_mpi_yield_when_idle": "0"},
        "mpi",
        [],
    ),
    "Gloo controller (horovodrun --gloo)": ({}, "gloo", []),
    "1 step per tf.function call (--log_every 1)": ({}, "mpi", ["--log_every", "1"]),
}
# The allreduce with glibc's malloc asking for transparent huge pages (glibc >= 2.35): fewer
# page faults on the fresh tensor TensorFlow allocates for each result.
HUGE_PAGES = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
# Across hosts: 2 hosts x 2 ranks for the seed job; 1 rank a host for the allreduce, so that
# every byte crosses between the hosts.
CLUSTER_NODES = 2
SEED_JOB_HOSTS = "node1:2,node2:2"
ALLREDUCE_HOSTS = "node1:1,node2:1"


def params(result: dict) -> np.ndarray:
    return np.append(result["w"], result["b"])


def relative_gap(a: dict, b: dict) -> float:
    """Largest relative difference between two results' [w..., b]."""
    pa, pb = params(a), params(b)
    return float(np.max(np.abs(pa - pb) / np.maximum(np.abs(pb), 1e-12)))


def us_per_step(seconds: float, steps: int) -> float:
    return seconds / steps * 1e6


def tool_us_per_step(
    np_: int,
    args: list[str],
    env: dict | None = None,
    controller: str = "mpi",
    hosts: str | None = None,
    python: str = sys.executable,
) -> tuple[float, dict]:
    """The tool's microseconds per step, from the median stretch between its Step lines (the
    last --log_every in args counts), and its metrics."""
    watched = launch.watched_tool(
        np_, args, env=env, controller=controller, hosts=hosts, python=python
    )
    every = int(args[len(args) - 1 - args[::-1].index("--log_every") + 1])
    stretch = statistics.median(np.diff(watched["step_log_s"]))
    return us_per_step(stretch, every), watched["metrics"]


def step_latency(np_: int, rounds: int) -> dict:
    """The seed job at np_ ranks: the tool `rounds` times (one launch each), the floor and the
    peer once (each times several runs in-process), all from the tool's initial w and b."""
    steps = int(LATENCY_STEPS[1])
    timed = [tool_us_per_step(np_, SEED_JOB + LATENCY_STEPS)]
    start = [*timed[0][1]["initial_w"], timed[0][1]["initial_b"]]
    job = SEED_JOB + LATENCY_STEPS + ["--initial", *map(str, start)]
    floor = launch.script(np_, "floor.py", job, env=FLOOR_ENV)
    peer = launch.workers(np_, "peer.py", job + ["--repeats", PEER_REPEATS])
    timed += [tool_us_per_step(np_, SEED_JOB + LATENCY_STEPS) for _ in range(rounds - 1)]
    tool_us, tool_runs = [us for us, _ in timed], [m for _, m in timed]
    floor_us = [us_per_step(t, steps) for t in floor["times_s"]]
    peer_us = [us_per_step(t, steps) for t in peer["times_s"]]
    gaps = {
        "tool_runs": max(relative_gap(m, tool_runs[0]) for m in tool_runs),
        "floor": relative_gap(floor, tool_runs[0]),
        "peer": relative_gap(peer, tool_runs[0]),
    }
    return {
        "ranks": np_,
        "tool_us": statistics.median(tool_us),
        "floor_us": statistics.median(floor_us),
        "peer_us": statistics.median(peer_us),
        "runs_us": {"tool": tool_us, "floor": floor_us, "peer": peer_us},
        "w_b": {
            "tool": params(tool_runs[0]).tolist(),
            "floor": params(floor).tolist(),
            "peer": params(peer).tolist(),
        },
        "relative_gap": gaps,
        "agree": bool(max(gaps.values()) <= AGREE_RTOL),
        "controller": tool_runs[0]["controller"],
        "versions": tool_runs[0]["versions"],
    }


def levers(default_us: float) -> list[dict]:
    """The seed job at 2 ranks with one lever set, as a ratio to the tool by default."""
    rows = []
    for name, (env, controller, flags) in LEVERS.items():
        us, _ = tool_us_per_step(2, SEED_JOB + LEVER_STEPS + flags, env, controller)
        rows.append({"lever": name, "env": env, "tool_us": us, "vs_default": us / default_us})
    return rows


def small_allreduce() -> dict:
    """The seed job's gradient (w and b: 2 floats) allreduced by Horovod, as the tool's loop
    calls it, and by mpi4py, at 2 ranks: what one step's collective alone costs each."""
    args = ["--num_floats", "2", "--per_block", "1000", "--repeats", "5"]
    floor = launch.script(2, "allreduce.py", ["--program", "mpi4py", *args], env=FLOOR_ENV)
    horovod = launch.script(2, "allreduce.py", ["--program", "horovod", *args])
    return {
        "mpi4py_us": floor["median_s"]["mpi4py"] * 1e6,
        "horovod_us": horovod["median_s"]["sum"] * 1e6,
    }


def large_job(np_: int, cpus: str | None = None) -> dict:
    """Samples/s from the median stretch of --log_every steps, and peak RSS per rank."""
    watched = launch.watched_tool(np_, LARGE_JOB + LARGE_STEPS, cpus)
    m = watched["metrics"]
    stretches = np.diff(watched["step_log_s"])
    samples = int(LARGE_STEPS[3]) * m["global_batch_size"]
    return {
        "ranks": np_,
        "cpus": cpus or "all",
        "samples_per_s": samples / statistics.median(stretches),
        "samples_per_s_whole_run": m["samples_per_s"],
        "stretch_s": stretches.tolist(),
        "peak_rss_mib": max(watched["peak_rss_mib"]),
        "peak_rss_mib_per_rank": watched["peak_rss_mib"],
        "peak_pss_mib": max(watched["peak_pss_mib"]),
    }


def allreduce() -> dict:
    """mpi4py, Horovod with MPI, Horovod with Gloo, mpi4py again: the floor on both sides."""
    args = ["--program", "mpi4py"]
    floor = [launch.script(2, "allreduce.py", args, env=FLOOR_ENV)]
    horovod = {
        c: launch.script(2, "allreduce.py", ["--program", "horovod"], c) for c in CONTROLLERS
    }
    horovod["mpi-huge-pages"] = launch.script(
        2, "allreduce.py", ["--program", "horovod"], "mpi", env=HUGE_PAGES
    )
    floor.append(launch.script(2, "allreduce.py", args, env=FLOOR_ENV))
    return {
        "bytes": floor[0]["bytes"],
        "mpi4py_s": statistics.median(f["median_s"]["mpi4py"] for f in floor),
        "horovod_s": {c: r["median_s"] for c, r in horovod.items()},
        "runs": {"mpi4py": floor, **horovod},
    }


def across_hosts(rounds: int) -> dict:
    """Section 5 on the test cluster, or why it was skipped."""
    reason = launch.cluster_unavailable()
    if reason:
        return {"skipped": reason}
    try:
        with launch.cluster(CLUSTER_NODES):
            return {
                "latency": step_latency_across_hosts(rounds),
                "allreduce": allreduce_across_hosts(),
            }
    except launch.LaunchError as e:
        if "cluster.sh up" not in str(e):
            raise
        return {"skipped": str(e)}


def step_latency_across_hosts(rounds: int) -> dict:
    """The seed job at 2 hosts x 2 ranks: the tool `rounds` times, then the floor (which
    times several runs itself), both from the tool's initial w and b."""
    ranks, steps = 4, int(LATENCY_STEPS[1])
    timed = [
        tool_us_per_step(ranks, SEED_JOB + LATENCY_STEPS, hosts=SEED_JOB_HOSTS)
        for _ in range(rounds)
    ]
    tool_us, tool_runs = [us for us, _ in timed], [m for _, m in timed]
    start = [*tool_runs[0]["initial_w"], tool_runs[0]["initial_b"]]
    job = SEED_JOB + LATENCY_STEPS + ["--initial", *map(str, start)]
    floor = launch.script(ranks, "floor.py", job, env=FLOOR_ENV, hosts=SEED_JOB_HOSTS)
    floor_us = [us_per_step(t, steps) for t in floor["times_s"]]
    gap = relative_gap(floor, tool_runs[0])
    return {
        "hosts": SEED_JOB_HOSTS,
        "tool_us": statistics.median(tool_us),
        "floor_us": statistics.median(floor_us),
        "runs_us": {"tool": tool_us, "floor": floor_us},
        "tool_hosts": tool_runs[0]["hosts"],
        "relative_gap": gap,
        "agree": bool(gap <= AGREE_RTOL),
    }


def allreduce_across_hosts() -> dict:
    """The 16 MB allreduce between 2 hosts: mpi4py, then Horovod (MPI controller, as the tool
    calls it)."""
    floor = launch.script(
        2, "allreduce.py", ["--program", "mpi4py"], env=FLOOR_ENV, hosts=ALLREDUCE_HOSTS
    )
    horovod = launch.script(2, "allreduce.py", ["--program", "horovod"], hosts=ALLREDUCE_HOSTS)
    return {
        "hosts": ALLREDUCE_HOSTS,
        "bytes": floor["bytes"],
        "mpi4py_s": floor["median_s"]["mpi4py"],
        "horovod_s": horovod["median_s"],
    }


def time_to_result(rounds: int) -> dict:
    """Section 6: whole-process wall times, medians of `rounds`; in each round the tool's runs
    and the bare job's alternate, so that both see the same machine."""
    generator = launch.json_output(
        ["taskset", "-c", "0", sys.executable, str(launch.BENCH / "generator.py")]
    )
    seed_s, bare_s = [], {n: [] for n in RANKS}
    large_s = {n: [] for n in RANKS}
    training_s = {n: [] for n in RANKS}
    for _ in range(rounds):
        seed_s.append(launch.wall_s([*launch.horovodrun(4), "hvd-linreg"]))
        for n in RANKS:
            bare_s[n].append(launch.wall_s([*launch.horovodrun(n), *BARE_JOB]))
            with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
                metrics = Path(tmp) / "metrics.json"
                args = [*LARGE_JOB, *LARGE_STEPS, "--quiet", "--metrics_json", str(metrics)]
                large_s[n].append(launch.wall_s([*launch.horovodrun(n), "hvd-linreg", *args]))
                training_s[n].append(json.loads(metrics.read_text())["wall_s"])
    bare = {n: statistics.median(times) for n, times in bare_s.items()}
    large = [
        {
            "ranks": n,
            "end_to_end_s": statistics.median(large_s[n]),
            "training_s": statistics.median(training_s[n]),
            "bare_s": bare[n],
        }
        for n in RANKS
    ]
    return {
        "generator": generator,
        "seed_job_s": statistics.median(seed_s),
        "bare_s": bare,
        "runs_s": {"seed_job": seed_s, "bare": bare_s, "large_job": large_s},
        "large_job": large,
    }


def stack_round(python: str) -> dict[str, float]:
    """Section 7's figures once, on the stack whose python this is (its venv first on PATH)."""
    large = [*LARGE_JOB, *LARGE_STEPS, "--quiet"]
    return {
        "import_s": launch.wall_s([python, "-c", stacks.IMPORT]),
        **{
            f"step_us_{n}": tool_us_per_step(n, SEED_JOB + LATENCY_STEPS, python=python)[0]
            for n in (1, 2)
        },
        "seed_job_4_ranks_s": launch.wall_s([*launch.horovodrun(4), "hvd-linreg"]),
        "large_job_1_rank_s": launch.wall_s([*launch.horovodrun(1), "hvd-linreg", *large]),
    }


def stacks_side_by_side(rounds: int, progress) -> dict:
    """Section 7: every figure on the old and the new stack, medians of `rounds` rounds in
    which the stacks take turns (first one, then the other)."""
    for stack, venv in stacks.STACKS.values():
        stacks.ensure_venv(stack, venv)
    progress("both stacks set up")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in stacks.STACKS}
    for i in range(rounds):
        order = list(stacks.STACKS) if i % 2 == 0 else list(reversed(stacks.STACKS))
        for name in order:
            with stacks.using(stacks.STACKS[name][1]) as python:
                runs[name].append(stack_round(python))
        progress(f"stacks, round {i + 1} of {rounds}")
    return {
        "medians": {
            name: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
            for name, rs in runs.items()
        },
        "runs": runs,
        "versions": {name: stacks.versions(venv) for name, (_, venv) in stacks.STACKS.items()},
    }


def machine() -> dict:
    return {
        "cores": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "environment": {k: v for k, v in os.environ.items() if k.startswith(("HOROVOD_", "OMPI_"))},
    }


def latency_and_levers(rounds: int, progress) -> dict:
    """Section 1."""
    results: dict = {"latency": []}
    for np_ in RANKS:
        results["latency"].append(step_latency(np_, rounds))
        progress(f"step latency, {np_} rank(s)")
        if np_ == 2:  # the levers right after, so that they see the same machine
            results["levers"] = levers(results["latency"][-1]["tool_us"])
            results["small_allreduce"] = small_allreduce()
            progress("levers, and the 2-float allreduce")
    return results


def large_jobs() -> dict:
    """Sections 2 and 4, and the NumPy loop (the floor's program) on the large job at 1 rank
    on the same one core."""
    empty = launch.watched_tool(1, EMPTY_JOB)
    rows = [large_job(1, cpus="0"), large_job(2), large_job(4)]
    features = int(LARGE_JOB[LARGE_JOB.index("--num_features") + 1])
    start = ["--initial", *["0"] * (features + 1), "--repeats", "2"]
    floor = launch.script(1, "floor.py", [*LARGE_JOB, *LARGE_STEPS, *start], cpus="0")
    samples = int(LARGE_STEPS[1]) * int(LARGE_JOB[LARGE_JOB.index("--batch_size") + 1])
    return {
        "empty_rss_mib": max(empty["peak_rss_mib"]),
        "empty_pss_mib": max(empty["peak_pss_mib"]),
        "large_job": rows,
        "large_job_numpy_samples_per_s": samples / min(floor["times_s"]),
    }


def exact_solve(np_: int, rounds: int) -> dict:
    """Section 8 at np_ ranks: the tool's solve (its metrics' wall_s: the QR, the solve and its
    refinement, from the loaded shard to the optimum) and the NumPy normal equations' (from
    the loaded shard to [w..., b]), `rounds` launches each, taking turns."""
    tool_s, baseline_s, gaps = [], [], []
    for _ in range(rounds):
        tool = launch.watched_tool(np_, [*EXACT_JOB, "--solver", "exact"])["metrics"]
        baseline = launch.script(np_, "normal_equations.py", EXACT_JOB, env=BASELINE_ENV)
        tool_s.append(tool["wall_s"])
        baseline_s.append(min(baseline["times_s"]))
        gaps.append(relative_gap(baseline, tool))
    return {
        "ranks": np_,
        "tool_s": statistics.median(tool_s),
        "baseline_s": statistics.median(baseline_s),
        "runs_s": {"tool": tool_s, "baseline": baseline_s},
        "relative_gap": max(gaps),
        "agree": bool(max(gaps) <= AGREE_RTOL),
    }


def family_steps(rounds: int) -> dict:
    """Section 9: the seed job's step at 2 ranks for each model family, `rounds` launches
    each, taking turns (the logistic family on its own synthetic 0/1 target)."""
    timed: dict[str, list[float]] = {"linear": [], "logistic": []}
    for _ in range(rounds):
        for model in timed:
            us, _ = tool_us_per_step(2, SEED_JOB + LATENCY_STEPS + ["--model", model])
            timed[model].append(us)
    return {"ranks": 2, "us": {m: statistics.median(t) for m, t in timed.items()}, "runs_us": timed}


POISSON_ROWS, POISSON_FEATURES = 2_000_000, 32
POISSON_RANKS = (1, 2)
POISSON_PEERS = ("sklearn", "glum", "statsmodels")
POISSON_AGREE = 1e-6  # the issue's: the same coefficients to 1e-6


def poisson_fits(rounds: int, progress) -> dict:
    """Section 10: the tool's Poisson IRLS at 1 and 2 ranks (its metrics' wall_s: from the
    loaded shard to the optimum) and each peer's fit, `rounds` times each, taking turns;
    statsmodels, ten times slower, once."""
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        data = str(Path(tmp) / "poisson.npz")
        launch.run_python(["glm_peers.py", "--write", data, "--rows", str(POISSON_ROWS),
                           "--features", str(POISSON_FEATURES)])  # fmt: skip
        peers = [p for p in POISSON_PEERS if launch.importable(PEER_MODULES[p])]
        runs: dict[str, list[dict]] = {f"tool_{n}": [] for n in POISSON_RANKS}
        runs.update({p: [] for p in peers})
        for i in range(rounds):
            for n in POISSON_RANKS:
                args = ["--model", "poisson", "--data", data, "--solver", "exact"]
                watched = launch.watched_tool(n, args, env=BASELINE_ENV)
                runs[f"tool_{n}"].append(
                    {"fit_s": watched["metrics"]["wall_s"], "params": params(watched["metrics"]),
                     "peak_rss_mib": max(watched["peak_rss_mib"])}
                )  # fmt: skip
            for peer in peers:
                if peer == "statsmodels" and i > 0:
                    continue
                runs[peer].append(launch.peer_fit("glm_peers.py", peer, data, env=BASELINE_ENV))
            progress(f"Poisson fits, round {i + 1} of {rounds}")
    rows = glm_peers.summarised(runs, np.asarray(runs["tool_1"][0]["params"]), POISSON_AGREE)
    missing = [p for p in POISSON_PEERS if p not in peers]
    return {"rows": POISSON_ROWS, "features": POISSON_FEATURES, "fits": rows, "missing": missing}


PEER_MODULES = {"sklearn": "sklearn", "glum": "glum", "statsmodels": "statsmodels"}

CSV_ROWS = 20_000_000  # 1.05 GB of CSV text (bench/csv_parse.py)
CSV_RANKS = (1, 2)


def csv_parse(rounds: int, progress) -> dict:
    """Section 11: a CSV file of CSV_ROWS rows with two string columns, from the page cache to
    the encoded rows in memory: the tool's reader at 1 and 2 ranks, pyarrow's read_csv with
    dictionary encoding on one core, taking turns, `rounds` times each."""
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        data = str(Path(tmp) / "rows.csv")
        launch.run_python(["csv_parse.py", "--write", data, "--rows", str(CSV_ROWS)])
        size = Path(data).stat().st_size
        runs: dict[str, list[float]] = {**{f"tool_{n}": [] for n in CSV_RANKS}, "pyarrow": []}
        for i in range(rounds):
            for n in CSV_RANKS:
                cmd = [*launch.launcher(n), sys.executable, str(launch.BENCH / "csv_parse.py")]
                result = launch.json_output([*cmd, "--tool", data])
                runs[f"tool_{n}"].append(result["seconds"])
            arrow = [sys.executable, str(launch.BENCH / "csv_parse.py"), "--arrow", data]
            runs["pyarrow"].append(launch.json_output(arrow)["seconds"])
            progress(f"CSV parse, round {i + 1} of {rounds}")
    seconds = {name: statistics.median(t) for name, t in runs.items()}
    return {"rows": CSV_ROWS, "bytes": size, "seconds": seconds, "runs_s": runs}


WHOLE_ROWS, WHOLE_FEATURES = 2_000_000, 32
WHOLE_MODELS = ("linear", "logistic", "poisson")
WHOLE_RANKS = (1, 2)
SMALL_CSV_ROWS, SMALL_CSV_FEATURES = 5_000, 8
WHOLE_PEERS = ("sklearn", "glum")
WHOLE_AGREE = 1e-6


def whole_run(command: list[str], np_: int = 1) -> dict:
    """command from start to exit (under mpirun at np_ > 1), each process metered by
    bench/whole_runs.py: wall seconds, every rank's peak RSS, and what it printed last."""
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        metered = [sys.executable, str(launch.BENCH / "whole_runs.py"), "--meter", tmp, "--"]
        full = [*(launch.launcher(np_) if np_ > 1 else []), *metered, *command]
        start = time.perf_counter()
        out = launch.output(full, BASELINE_ENV)
        wall = time.perf_counter() - start
        peaks = [json.loads(f.read_text())["peak_rss_mib"] for f in Path(tmp).glob("*.json")]
    return {"wall_s": wall, "peak_rss_mib": peaks, "output": out}


def time_to_whole_results(rounds: int, progress) -> dict:
    """Section 12: whole runs, as a user waits for them: the tool's exact fit (no TensorFlow)
    at 1 rank without a launcher and at 2 under mpirun, next to scikit-learn's and glum's
    scripts that load the same file and fit, taking turns, `rounds` times each; on the
    2,000,000 x 32 rows of each model (.npz) and on a 5,000-row CSV (Poisson)."""
    peers = [p for p in WHOLE_PEERS if launch.importable(PEER_MODULES[p])]
    tool = shutil.which("hvd-linreg") or "hvd-linreg"
    results = {}
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        cases = []
        for model in WHOLE_MODELS:
            data = str(Path(tmp) / f"{model}.npz")
            launch.run_python(["whole_runs.py", "--write", model, data, "--rows", str(WHOLE_ROWS),
                               "--features", str(WHOLE_FEATURES)])  # fmt: skip
            cases.append((model, model, data, WHOLE_RANKS))
        small = str(Path(tmp) / "small.csv")
        launch.run_python(["whole_runs.py", "--write", "poisson", small, "--rows",
                           str(SMALL_CSV_ROWS), "--features", str(SMALL_CSV_FEATURES)])  # fmt: skip
        cases.append(("poisson, 5,000-row CSV", "poisson", small, (1,)))
        runs = {case[0]: {} for case in cases}
        for i in range(rounds):
            for name, model, data, ranks in cases:
                for n in ranks:
                    metrics = str(Path(tmp) / "metrics.json")
                    args = ["--data", data, "--model", model, "--solver", "exact", "--quiet"]
                    done = whole_run([tool, *args, "--metrics_json", metrics], n)
                    done["params"] = params(json.loads(Path(metrics).read_text()))
                    runs[name].setdefault(f"tool_{n}", []).append(done)
                for peer in peers:
                    script = [sys.executable, str(launch.BENCH / "whole_runs.py"), "--peer", peer]
                    done = whole_run([*script, "--model", model, "--data", data])
                    done["params"] = np.array(json.loads(done["output"].splitlines()[-1])["params"])
                    runs[name].setdefault(peer, []).append(done)
            progress(f"whole runs, round {i + 1} of {rounds}")
    for name, by in runs.items():
        reference = by["tool_1"][0]["params"]
        results[name] = {
            who: {
                "wall_s": statistics.median(r["wall_s"] for r in done),
                "peak_rss_mib": max(max(r["peak_rss_mib"]) for r in done),
                "max_gap": max(
                    float(
                        np.max(np.abs(r["params"] - reference) / np.maximum(np.abs(reference), 1))
                    )
                    for r in done
                ),
                "runs_s": [r["wall_s"] for r in done],
            }
            for who, done in by.items()
        }
    missing = [p for p in WHOLE_PEERS if p not in peers]
    return {"rows": WHOLE_ROWS, "features": WHOLE_FEATURES, "cases": results, "missing": missing}


# Each section's name for --sections, and what it runs (rounds, progress) -> results to merge.
SECTIONS = {
    "1": latency_and_levers,
    "2": lambda rounds, progress: large_jobs(),  # and section 4, from the same runs
    "3": lambda rounds, progress: {"allreduce": allreduce()},
    "5": lambda rounds, progress: {"hosts": across_hosts(rounds)},
    "6": lambda rounds, progress: {"time_to_result": time_to_result(rounds)},
    "7": lambda rounds, progress: {"stacks": stacks_side_by_side(rounds, progress)},
    "8": lambda rounds, progress: {"exact": [exact_solve(n, rounds) for n in EXACT_RANKS]},
    "9": lambda rounds, progress: {"families": family_steps(rounds)},
    "10": lambda rounds, progress: {"poisson": poisson_fits(rounds, progress)},
    "11": lambda rounds, progress: {"csv": csv_parse(rounds, progress)},
    "12": lambda rounds, progress: {"whole_runs": time_to_whole_results(rounds, progress)},
    "13": lambda rounds, progress: {"paths": paths.section(progress)},
    "14": lambda rounds, progress: {"multinomial": multinomial_peers.section(rounds, progress)},
    "15": lambda rounds, progress: {"wide": wide_peers.section(rounds, progress)},
    "16": lambda rounds, progress: {"sparse": sparse_peers.section(rounds, progress)},
    "17": lambda rounds, progress: {"generated_wide": generated_wide.section(rounds, progress)},
    "18": lambda rounds, progress: {"dense": dense_peers.section(rounds, progress)},
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="tool launches per rank count (latency)")
    p.add_argument("--out", default=str(launch.BENCH / "results" / "latest.json"))
    p.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help="the sections to run, e.g. 5 or 1,6 (default: all; 2 includes 4)",
    )
    args = p.parse_args()
    sections = args.sections.split(",")
    if not set(sections) <= set(SECTIONS):
        p.error(f"--sections: choose from {', '.join(SECTIONS)}")
    started = time.monotonic()
    results: dict = {"machine": machine()}

    def progress(what: str) -> None:
        print(f"  {time.monotonic() - started:4.0f} s  {what}", flush=True)

    print("hvd-linreg benchmark: about 20 minutes on 2 cores for every section", flush=True)
    for name in sections:
        results.update(SECTIONS[name](args.rounds, progress))
        progress(f"section {name}")
    results["machine"]["load_average_at_end"] = os.getloadavg()
    results["wall_s"] = time.monotonic() - started
    results["targets"] = table.targets(results)

    print("\n".join(table.render(results)))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten: {out} ({results['wall_s']:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
