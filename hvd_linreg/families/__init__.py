"""Model families: what a run fits, and how the fit is judged.

A family is one module that owns its maths, with these names (families/linear.py is the first):
- NAME, and LOSS: what the loss is called in the summary and the plot;
- Model(params, dtype, l2): a tf.Module with `params` (one variable, [w..., b]), `loss(X, y)`
  on a batch, `predict(X)` and `numpy_params()`; the trainer minimises its loss;
- initial_params(seed, rank, num_features): a rank's start, before rank 0's is broadcast;
- loss(job, shard, theta): the loss over the whole dataset; objective(loss, theta, l2);
- predict(theta, X): the prediction in float64, as `predict` writes it;
- scores(job, theta, blocks): a Scores object with count, values(), as_json(), line() and
  table(), for the validation rows and `evaluate`;
- optimum(job, shard, l2, names), MAX_EXACT_FEATURES: the exact solver (optimum = None where a
  family has none), and statistics(optimum, names): its statistics, with as_json();
- save_model(directory, theta, dtype): the SavedModel with its serving signature;
- curve(theta, xs): the fitted curve over one feature, for the plot;
- table() on the statistics: the lines that end the run's summary;
- SOLVER and SOLVER_COST: the exact solver's name for the header line and what its wall time
  covers, for the summary (None without an exact solver);
- synthetic_target(seed, rows, X, y): the synthetic rows' target, from their features and the
  least-squares target y the generator drew, a pure function of (seed, row);
- check_target(job, shard), which the recipe calls on every rank once the shard is loaded: it
  refuses a target the family cannot fit, and returns the shard (recoded where the family
  reads the target otherwise).

Optional: classes(predictions, threshold), which makes `predict --threshold` write classes.

Adding a family is its module and one line in FAMILIES. The modules are imported only when
asked for: each imports TensorFlow.
"""

from __future__ import annotations

import importlib
from types import ModuleType

FAMILIES = {
    "linear": "hvd_linreg.families.linear",
    "logistic": "hvd_linreg.families.logistic",
}


def get(name: str) -> ModuleType:
    """The family registered under name."""
    return importlib.import_module(FAMILIES[name])
