"""The family seam: what a model family is (Family), and what every family shares.

A family is its link and its variance, as statsmodels' and scikit-learn's GLMs have it: the
model predicts μ = g⁻¹(x·w + b) and weighs a row's residual by 1 / V(μ). From those two, and the
unit deviance they imply, come the loss SGD minimises, the whole dataset's loss, the IRLS
weights of the exact solver (solvers/irls.py), the prediction and the serving signature. A family
declares which solver fits it (SOLVER) and which scores judge it (SCORES); the recipe
(pipeline.py) pairs them, so that no family imports a solver. A family reads no rows and
speaks to no other rank: the passes over the rows are the solvers', scoring/'s and
data/targets.py's, each handed the family.

Every member is declared here, the optional ones with their default: a family overrides what
differs. Adding one with its canonical link is a module with a subclass and one line in
families.FAMILIES (families/poisson.py is one).
"""

from __future__ import annotations

import numpy as np

from hvd_linreg.errors import UsageError
from hvd_linreg.families import links
from hvd_linreg.families.domain import Interval
from hvd_linreg.families.maths import linear_predictor, namespace

# The least share of the Fisher information that a row's observed information may be in a
# penalized Newton step (newton_weights); below it, the row takes Fisher's.
OBSERVED_FLOOR = 0.01


class Family:
    """A model family: y's distribution given the linear predictor η = x·w + b."""

    NAME = ""  # as --model names it
    LINKS: tuple[str, ...] = ("identity",)  # the links it takes; the first is the default
    # The link under which IRLS is Newton's method: the default, unless a family says (None:
    # none of LINKS)
    CANONICAL_LINK: str | None = ""
    # Which exact solver fits it, by name ("least_squares", "irls", "multinomial"); None: SGD
    # only. What the header, the summary, the plot and the serving signature call the family's
    # loss, solver, mean and output is theirs (report.py, plot.py, export.py), not the family's.
    SOLVER: str | None = "irls"
    MAX_EXACT_FEATURES = 1024  # the (F+1)² sums are allreduced and factored on every rank
    # The loss is LOSS_SCALE x the mean half unit deviance (1: the negative log-likelihood per
    # row, up to a constant; the linear family's mean squared error is 2).
    LOSS_SCALE = 1.0
    # The scale (dispersion) φ is 1 (binomial, Poisson), or estimated by Pearson's χ² / dof
    FIXED_SCALE = True
    POSITIVE_MEAN = False  # whether μ must be > 0 (Poisson, Gamma, Tweedie)
    # The values y may take (data/targets.py checks every rank's rows against it): any finite
    # one unless a family says. BINARY: a target of two values, read as 0 and 1.
    TARGET = Interval()
    BINARY = False
    # Which scores judge it (scoring/): "deviance", "regression", "classification", "classes"
    SCORES = "deviance"
    # A target of K classes (the multinomial): its rows are read with the classes every rank
    # agrees they hold, and its coefficients are a matrix, (F + 1) x (K - 1)
    CLASSES = False

    def __init__(self, link: str | None = None):
        name = link or self.LINKS[0]
        if name not in self.LINKS:
            raise UsageError(
                f"--link {name} is not one of --model {self.NAME}'s: {', '.join(self.LINKS)}"
            )
        self.link = links.named(name)

    def parameter(self) -> float | None:
        """The family's one parameter (families.PARAMETERS names its setting), or None."""
        return None

    def settings(self) -> dict:
        """What families.get needs to make this family again (the export stores it)."""
        return {"link": self.link.name, "power": self.parameter()}

    @property
    def canonical(self) -> bool:
        """Whether the link is the family's canonical one: IRLS is then Newton's method."""
        canonical = self.LINKS[0] if self.CANONICAL_LINK == "" else self.CANONICAL_LINK
        return self.link.name == canonical

    # The distribution, in float64 NumPy

    @property
    def exact(self) -> bool:
        """Whether an exact solver fits it (else SGD only)."""
        return self.SOLVER is not None

    def as_fitted(self) -> Family:
        """The family a fit takes for this one: itself, unless the family says (the linear
        family under another link than identity is the Gaussian GLM's)."""
        return self

    def variance(self, mu: np.ndarray) -> np.ndarray:
        """V(μ): Var(y) = φ V(μ)."""
        raise NotImplementedError

    def variance_derivative(self, mu: np.ndarray) -> np.ndarray:
        """V'(μ): the observed information's term (newton_weights)."""
        raise NotImplementedError

    def unit_deviance(self, y: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """d(y, μ) per row: 2 x (the log-likelihood at μ = y minus that at μ), over φ."""
        raise NotImplementedError

    def log_likelihood(
        self, y: np.ndarray, eta: np.ndarray, scale: float, weight: np.ndarray
    ) -> float:
        """The log-likelihood's sum over the rows at the linear predictor eta, the dispersion
        scale and the prior weights (statsmodels' var_weights: row i's dispersion is
        scale / weight[i]; the binomial's weights are its trials, as R's)."""
        raise NotImplementedError

    def profiled_log_likelihood(self, deviance: float, rows: int, log_weights: float):
        """The fit's log-likelihood at the scale that maximises it, from its weighted deviance
        and Σ log weight alone, where statsmodels reports that one (the Gaussian's identity
        link); None: it is at the fit's scale (log_likelihood)."""
        return None

    def deviance_terms(self, y: np.ndarray, eta: np.ndarray) -> np.ndarray:
        """d(y, μ) per row at the linear predictor eta."""
        return self.unit_deviance(y, self.link.inverse(eta))

    def deviance_in_mean(self, y: np.ndarray, eta: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """d(y, μ) less deviance_in_target(y), per row: the part a path's pass sums for every
        model (mu is g⁻¹(eta), which the pass has already)."""
        return self.unit_deviance(y, mu)

    def deviance_in_target(self, y: np.ndarray) -> np.ndarray | float:
        """The part of d(y, μ) in y alone, summed once a block for all the models of a pass
        (0 unless the family says: the binomial's and Poisson's logarithms of y)."""
        return 0.0

    def loss_terms(self, y: np.ndarray, eta: np.ndarray) -> np.ndarray:
        """Each row's loss at the linear predictor eta: LOSS_SCALE x d(y, μ) / 2. The solvers'
        and scores' in float64 NumPy, and SGD's on TensorFlow tensors: unit_deviance and the
        link's inverse are written in maths.namespace's functions, once for both."""
        return 0.5 * self.LOSS_SCALE * self.unit_deviance(y, self.link.inverse(eta))

    def loss_terms_in_mean(self, y: np.ndarray, eta: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """loss_terms less loss_terms_in_target: the part IRLS sums on every pass (mu is
        g⁻¹(eta), which the pass has already)."""
        return self.loss_terms(y, eta)

    def loss_terms_in_target(self, y: np.ndarray) -> np.ndarray | float:
        """The part of loss_terms in y alone, which IRLS sums once, not on every pass (0
        unless the family says; Poisson's y log y costs a logarithm per row)."""
        return 0.0

    def valid_mean(self, mu: np.ndarray) -> np.ndarray:
        """Where μ is a mean the family can have (IRLS halves a step that leaves it)."""
        return np.isfinite(mu) & (mu > 0) if self.POSITIVE_MEAN else np.isfinite(mu)

    def variance_and_slope(self, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """V(μ) and g'(μ) at the clean mean, as IRLS's weights 1 / (V g'²) and the scores
        (y - μ) / (V g') take them."""
        clean = self.clean_mean(mu)
        return self.variance(clean), self.link.derivative(clean)

    def newton_weights(self, y, mu, weight) -> tuple[np.ndarray, np.ndarray]:
        """A Newton step's weights W and working residuals r = score / W, the score (y - μ) /
        (V g') times the prior weight: Σ W x (r - x·Δ) is then the exact gradient along η.
        Under the canonical link W is the Fisher information's, w / (V g'²), and IRLS is
        Newton's method. Under another, W is the observed information's, w / (V g'²) + w
        (y - μ)(V' g' + V g'') / (V² g'³), where it is at least OBSERVED_FLOOR of Fisher's
        (else Fisher's, which keeps every step a descent): Fisher scoring alone converges
        only linearly where y / μ spreads widely (a gamma model of prices with the log link
        took hundreds of passes), the observed information quadratically. The step's fixed
        point, where the gradient vanishes, is the same."""
        clean = self.clean_mean(mu)
        variance, slope = self.variance(clean), self.link.derivative(clean)
        fisher = weight / (variance * slope * slope)
        if self.canonical:
            return fisher, (y - mu) * slope
        curvature = self.variance_derivative(clean) * slope
        curvature += variance * self.link.second_derivative(clean)
        observed = fisher + weight * (y - mu) * curvature / (variance * variance * slope**3)
        W = np.where(observed >= OBSERVED_FLOOR * fisher, observed, fisher)
        score = weight * (y - mu) / (variance * slope)
        return W, np.divide(score, W, out=np.zeros_like(score), where=W > 0)  # a weight of 0

    def clean_mean(self, mu: np.ndarray) -> np.ndarray:
        """μ where the IRLS weights are computed: off the edge of the domain, where V(μ) or
        g'(μ) would be 0 or infinite (statsmodels clips alike)."""
        return mu

    def starting_mean(self, y_mean: float) -> float:
        """The mean IRLS starts from, every row alike: the intercept-only model's."""
        return y_mean

    def penalty_term(self, W):
        """The ridge term's ‖w‖² (W: the coefficients without the intercepts), on NumPy arrays
        or on SGD's TensorFlow tensors (maths.namespace)."""
        return namespace(W).sum(W * W)

    def initial_params(self, seed: int, rank: int, num_features: int) -> np.ndarray:
        """N(0, 1) start values like the seed's initializer; [w_0 .. w_{F-1}, b].

        Each rank draws its own on purpose: only the broadcast from rank 0 makes them agree,
        so a missing broadcast shows up in the exactness tests instead of going unnoticed.
        """
        return np.random.default_rng([seed, rank]).standard_normal(num_features + 1)

    # The data

    def synthetic_target(self, seed: int, rows: np.ndarray, X: np.ndarray, y: np.ndarray):
        """The synthetic rows' target, from their features and the seed's y = X w + 2 + noise,
        as drawn: a pure function of (seed, row)."""
        return y

    # The fit

    def predict(
        self, theta: np.ndarray, X: np.ndarray, offset: np.ndarray | None = None
    ) -> np.ndarray:
        """μ per row, in float64 (offset: each row's --offset/--exposure term)."""
        eta = linear_predictor(theta, X)
        return self.link.inverse(eta if offset is None else eta + offset)

    def objective(self, loss: float, params: np.ndarray, l2: float) -> float:
        """The loss + l2 x penalty_term (the bias not penalised): what both solvers minimise."""
        return loss + l2 * float(self.penalty_term(params[:-1])) if l2 else loss

    # Optional: predict --threshold writes classes where a family has them
    classes = None
    # A model of K classes' classes (families/multinomial.py), the first the reference: its
    # coefficients are a column per class but the first. None: one column, [w..., b].
    labels: list | None = None

    # The exact solver's checks (IRLS): counts a family sums per iteration beside the
    # solver's own, and what it concludes from them

    COUNTS: tuple[str, ...] = ()

    def iteration_counts(self, y: np.ndarray, eta: np.ndarray) -> list[float]:
        """This block's COUNTS at eta."""
        return []

    def check_iteration(self, counts: dict[str, float], rows: int, penalized: bool) -> None:
        """Refuse a fit that has no finite optimum, from an iteration's counts."""

    def quasi_separated(self, counts: dict[str, float]) -> str:
        """Why a settled optimum is none, for a family that counts "saturated" rows (IRLS then
        checks for quasi-separation, solvers/separation.py)."""
        raise NotImplementedError

    def not_converged(self, counts: dict[str, float], penalized: bool) -> str:
        """What to add, after a colon, to the message that IRLS did not converge."""
        return ""

    def singular(self, counts: dict[str, float], penalized: bool) -> str:
        """Why the weighted design of an iteration is singular, for the user."""
        return (
            f"the Fisher information of the {self.NAME} model is singular: features are "
            "collinear or constant; drop the redundant ones, or fit with --l2 > 0"
        )
