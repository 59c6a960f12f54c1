"""Multinomial logistic regression (--model multinomial): a target of K classes, the first the
reference, each other class's log-odds against it linear in x. Its exact fit is Newton's method
on the whole log-likelihood (solvers/multinomial.py), and its recipe is multinomial.py: the
coefficients are a matrix, a column per class but the first."""

from __future__ import annotations

from hvd_linreg.families.family import Family


class Multinomial(Family):
    NAME = "multinomial"
    LOSS = "mean log-loss"
    LINKS = ("logit",)
    CANONICAL_LINK = "logit"
    SOLVER = "multinomial"
    SOLVER_NAME = "exact maximum likelihood (Newton)"
    SOLVER_COST = "a pass and an allreduce per Newton iteration"
