"""The exact solvers, one per method, each handed a family: least squares by the distributed QR
(least_squares.py, on the factor of qr.py), and IRLS for every other family (irls.py), whose
steps least squares solves; and the robust covariance at either's optimum (sandwich.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace


def optimum(
    job,
    shard,
    family,
    penalty,
    names: Sequence[str] | None = None,
    cov_type: str = "nonrobust",
    intercept: bool = True,
    limits=None,
    start=None,
):
    """The exact optimum of the family's objective over the whole dataset, the same on every rank,
    by the solver the family names, with the penalty (penalty.Penalty: --l2's ridge is
    Penalty.ridge; an L1 part is the elastic net's path's); with cov_type HC0, HC1 or cluster, and
    no penalty, its robust covariance too (sandwich.py: one more pass); cluster's is robust to
    correlation within the clusters that the shard's group column gives. intercept False: the model
    without one, b = 0. limits (irls.Limits: --tol, --max_iter) and start ([w..., b]) are IRLS's:
    least squares is one factorisation, with no iterations to limit or start."""
    if cov_type == "cluster" and shard.carried_columns.group is None:
        from hvd_linreg.errors import UsageError

        raise UsageError(
            "--cov_type cluster needs --groups COL (groups= from Python): each row's cluster"
        )
    if family.SOLVER == "least_squares":
        from hvd_linreg.solvers import least_squares

        best = least_squares.optimum(job, shard, penalty, names, intercept)
    else:
        from hvd_linreg.solvers import irls

        best = irls.optimum(job, shard, family, penalty, intercept, limits or irls.Limits(), start)
    if cov_type == "nonrobust" or penalty.penalized or best.dependent:
        return best
    from hvd_linreg.solvers import sandwich

    information = best.factor.information()
    robust, clusters = sandwich.covariance(job, shard, family, best.params, information, cov_type)
    return replace(best, robust=robust, cov_type=cov_type, clusters=clusters)


def solver_words(family, solve: str = "the distributed QR") -> tuple[str, str]:
    """What the header line calls the family's exact solver, and what the summary says it
    costs (solve: how its factor solves a system, the factor's METHOD). IRLS under the
    canonical link is Newton's method; under another, Fisher scoring."""
    if family.SOLVER == "least_squares":
        return "exact least squares", solve
    method = "Newton's method" if family.canonical else "IRLS, Fisher scoring"
    per = "Newton" if family.canonical else "IRLS"
    cost = f"a pass and an allreduce per {per} iteration"
    if solve != "the distributed QR":
        cost += f", each step by {solve}"
    return f"exact maximum likelihood ({method})", cost


def wants_optimum(cfg, shard) -> bool:
    """Whether an SGD run also solves least squares exactly, for its optimality gap: the QR
    costs about N (F+1)^2 multiply-adds, the steps about 2 x steps x G (F+1); by default only
    when that is the smaller part of the run."""
    if cfg.solver == "exact" or cfg.optimality_gap == "always":
        return True
    if cfg.optimality_gap == "never":
        return False
    cost = shard.num_samples * (shard.num_features + 1)
    return cost <= 2 * cfg.num_steps * shard.layout.global_batch


def check_wide(cfg, shard) -> None:
    """A wide design (categorical columns of many levels, or sparse ones: matrix/) is fitted by
    the exact solvers, which never form its dense rows; what would is refused first."""
    from hvd_linreg.data.shard import DENSE_MAX_COLUMNS
    from hvd_linreg.errors import UsageError

    wide = f"a design of {shard.num_features} columns"
    if cfg.solver == "sgd":
        raise UsageError(
            f"{wide} (categorical or sparse columns, more than {DENSE_MAX_COLUMNS} in all) is "
            "fitted by --solver exact: SGD's batches would be its dense rows"
        )
    if cfg.cov_type != "nonrobust":
        raise UsageError(
            f"--cov_type {cfg.cov_type} takes a design of at most {DENSE_MAX_COLUMNS} "
            f"columns; this is {wide}: use the default nonrobust errors"
        )
