"""Link functions, as statsmodels' `genmod.families.links` has them: a link g maps the mean μ to
the linear predictor η = g(μ) = x·w + b; the model predicts μ = g⁻¹(η).

Each link is an object with g, g⁻¹ and their derivatives in NumPy (float64, the solvers' and the
scores'); g⁻¹ is written once in maths.namespace's functions, so that it is SGD's and the
serving signature's on TensorFlow tensors too. The bottom of the family seam: it imports only
maths.py, and SciPy only where the probit link computes.
"""

from __future__ import annotations

import math

import numpy as np

from hvd_linreg.families.maths import namespace

# The normal CDF's tails, where erfc would round Φ(η) to 0 or 1
_PROBIT_CLIP = 38.0


class Link:
    """g, its inverse and derivatives; `name` as --link spells it."""

    name = ""

    def __call__(self, mu: np.ndarray) -> np.ndarray:
        """η = g(μ)."""
        raise NotImplementedError

    def inverse(self, eta: np.ndarray) -> np.ndarray:
        """μ = g⁻¹(η), on NumPy arrays or TensorFlow tensors (maths.namespace)."""
        raise NotImplementedError

    def derivative(self, mu: np.ndarray) -> np.ndarray:
        """g'(μ) = dη/dμ."""
        raise NotImplementedError

    def second_derivative(self, mu: np.ndarray) -> np.ndarray:
        """g''(μ): the observed information's term (Family.newton_weights)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Identity(Link):
    name = "identity"

    def __call__(self, mu):
        return mu

    def inverse(self, eta):
        return eta

    def derivative(self, mu):
        return np.ones_like(mu)

    def second_derivative(self, mu):
        return np.zeros_like(mu)


class Log(Link):
    name = "log"

    def __call__(self, mu):
        return np.log(mu)

    def inverse(self, eta):
        return namespace(eta).exp(eta)

    def derivative(self, mu):
        return 1.0 / mu

    def second_derivative(self, mu):
        return -1.0 / (mu * mu)


class Logit(Link):
    name = "logit"

    def __call__(self, mu):
        return np.log(mu) - np.log1p(-mu)

    def inverse(self, eta):
        """1 / (1 + e^-η) without overflow for any η."""
        return namespace(eta).sigmoid(eta)

    def derivative(self, mu):
        return 1.0 / (mu * (1.0 - mu))

    def second_derivative(self, mu):
        v = mu * (1.0 - mu)
        return (2.0 * mu - 1.0) / (v * v)


class Probit(Link):
    name = "probit"

    def __call__(self, mu):
        """Φ⁻¹(μ), by SciPy's ndtri (NumPy has none): vectorised, to 1e-15."""
        return _special("ndtri", mu)

    def inverse(self, eta):
        """Φ(η), the standard normal CDF, by erfc: exact in both tails."""
        xp = namespace(eta)
        return 0.5 * xp.erfc(-xp.clip(eta, -_PROBIT_CLIP, _PROBIT_CLIP) / math.sqrt(2.0))

    def derivative(self, mu):
        eta = self(mu)
        return 1.0 / (np.exp(-0.5 * eta * eta) / math.sqrt(2.0 * math.pi))

    def second_derivative(self, mu):
        """η / φ(η)²: the derivative of 1 / φ(η) along μ."""
        eta = self(mu)
        density = np.exp(-0.5 * eta * eta) / math.sqrt(2.0 * math.pi)
        return eta / (density * density)


class CLogLog(Link):
    """The complementary log-log: η = log(-log(1 - μ))."""

    name = "cloglog"

    def __call__(self, mu):
        return np.log(-np.log1p(-mu))

    def inverse(self, eta):
        xp = namespace(eta)
        return -xp.expm1(-xp.exp(eta))

    def derivative(self, mu):
        return 1.0 / ((mu - 1.0) * np.log1p(-mu))

    def second_derivative(self, mu):
        """(L - 1) / ((1 - μ) L)², L = -log(1 - μ)."""
        L = -np.log1p(-mu)
        d = (1.0 - mu) * L
        return (L - 1.0) / (d * d)


class Power(Link):
    """η = μ^power; the inverse (-1) and the square root (1/2) are its cases."""

    def __init__(self, power: float, name: str):
        self.power, self.name = power, name

    def __call__(self, mu):
        return np.power(mu, self.power)

    def inverse(self, eta):
        return namespace(eta).power(eta, 1.0 / self.power)

    def derivative(self, mu):
        return self.power * np.power(mu, self.power - 1.0)

    def second_derivative(self, mu):
        return self.power * (self.power - 1.0) * np.power(mu, self.power - 2.0)

    def __repr__(self) -> str:
        return f"Power({self.power})"


def inverse_power() -> Power:
    """η = 1/μ, the Gamma family's canonical link."""
    return Power(-1.0, "inverse")


def inverse_squared() -> Power:
    """η = 1/μ², the inverse Gaussian family's canonical link."""
    return Power(-2.0, "inverse_squared")


def sqrt() -> Power:
    """η = √μ."""
    return Power(0.5, "sqrt")


LINKS = {
    "identity": Identity,
    "log": Log,
    "logit": Logit,
    "probit": Probit,
    "cloglog": CLogLog,
    "inverse": inverse_power,
    "inverse_squared": inverse_squared,
    "sqrt": sqrt,
}


def named(name: str) -> Link:
    """The link --link names."""
    return LINKS[name]()


def _special(name: str, x) -> np.ndarray:
    """scipy.special.NAME of x in float64: the special functions NumPy lacks, vectorised (a
    Python loop over math's would take a second per million rows)."""
    import scipy.special

    return getattr(scipy.special, name)(np.asarray(x, np.float64))
