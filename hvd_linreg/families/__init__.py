"""Model families: what a run fits, and how the fit is judged.

A family is a subclass of family.Family: its link and its variance, and what follows from them
(family.py says what each member is, and which are optional). links.py has the links,
coefficients.py the coefficients' layout; no module here imports TensorFlow (SGD's model, in
sgd/, hands a family its tensors). The exact solvers (solvers/) are handed a
family and know it only through Family; the recipe (pipeline.py) pairs the two by the family's
SOLVER.

Adding a family is its module and one line in FAMILIES ("module:class"); its name in prose
goes in report.DISTRIBUTION_NAMES where that is not its --model name's words. The modules are
imported only when asked for, so that a run loads only the family it fits.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from hvd_linreg.errors import UsageError

if TYPE_CHECKING:
    from hvd_linreg.families.family import Family

FAMILIES = {
    "linear": "hvd_linreg.families.linear:Linear",
    "gaussian": "hvd_linreg.families.gaussian:Gaussian",
    "logistic": "hvd_linreg.families.logistic:Logistic",
    "binomial": "hvd_linreg.families.logistic:Binomial",
    "poisson": "hvd_linreg.families.poisson:Poisson",
    "gamma": "hvd_linreg.families.gamma:Gamma",
    "tweedie": "hvd_linreg.families.tweedie:Tweedie",
    "inverse_gaussian": "hvd_linreg.families.inverse_gaussian:InverseGaussian",
    "negative_binomial": "hvd_linreg.families.negative_binomial:NegativeBinomial",
    "multinomial": "hvd_linreg.families.multinomial:Multinomial",
}
# The families of one linear predictor, a GLM each: all but multinomial, whose coefficients are
# a matrix with a column per class and whose recipe is its own (multinomial.py)
GLMS = tuple(name for name in FAMILIES if name != "multinomial")
# A family's one parameter: the setting that gives it (config.py), by family. families.get
# hands it to the family, and the export stores it (as "power") for predict and evaluate.
PARAMETERS = {"tweedie": "tweedie_power", "negative_binomial": "nb_alpha"}


def get(name: str, link: str | None = None, parameter: float | None = None) -> Family:
    """The family registered under name, with its default link or the one named (and its
    parameter: tweedie's power, negative_binomial's alpha)."""
    module, cls = FAMILIES[name].split(":")
    family = getattr(importlib.import_module(module), cls)
    family = family(link) if parameter is None else family(link, parameter)
    return family.as_fitted()


def for_config(cfg) -> Family:
    """The family a run's settings ask for; UsageError for a model, link or power it does not
    take, and for an exposure without the log link. Config knows no family: its callers ask
    this as soon as they have one."""
    if cfg.model not in FAMILIES:
        raise UsageError(f"--model must be one of {', '.join(FAMILIES)}, got {cfg.model!r}")
    for model, setting in PARAMETERS.items():
        if getattr(cfg, setting) is not None and cfg.model != model:
            raise UsageError(f"--{setting} is for --model {model}")
    parameter = getattr(cfg, PARAMETERS[cfg.model]) if cfg.model in PARAMETERS else None
    family = get(cfg.model, cfg.link, parameter)
    if cfg.exposure is not None and family.link.name != "log":
        instead = "add --link log, or pass" if "log" in family.LINKS else "pass"
        raise UsageError(
            f"--exposure multiplies the mean only under the log link, and --model "
            f"{cfg.model} has the {family.link.name} link here: {instead} log(exposure) with "
            "--offset"
        )
    return family
