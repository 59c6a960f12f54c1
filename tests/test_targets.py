"""The target against each family's declared domain (families/domain.py, data/targets.py): the
refusal names the first row out, its value and what the family needs, exit 2, before any fit;
a target inside the domain is taken. Single rank, in-process (a rank's refusal reaching every
rank is test_glm's and test_logistic's, under mpirun)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import refused
from hvd_linreg import families
from hvd_linreg.cli import main
from hvd_linreg.families.domain import Interval


def _table(tmp_path, targets: list[float], weights: bool = False) -> str:
    """a, b (and w), then the target y, the last column."""
    rows = [
        f"{i % 5},{(i * 7) % 3}," + f"{1 + i % 2}," * weights + f"{t}"
        for i, t in enumerate(targets)
    ]
    path = tmp_path / "t.csv"
    path.write_text("a,b," + "w," * weights + "y\n" + "\n".join(rows) + "\n")
    return str(path)


COUNTS = [float(i % 4) for i in range(30)]


@pytest.mark.parametrize(
    "model, bad, needs",
    [
        ("poisson", -1.0, "--model poisson needs y >= 0"),
        ("tweedie", -0.5, "--model tweedie needs y >= 0"),
        ("negative_binomial", -2.0, "--model negative_binomial needs y >= 0"),
        ("gamma", 0.0, "--model gamma needs y > 0"),
        ("inverse_gaussian", -1.0, "--model inverse_gaussian needs y > 0"),
    ],
)
def test_a_target_outside_the_domain_is_named(model, bad, needs, tmp_path, capsys):
    targets = [c + 1.0 for c in COUNTS]
    targets[11] = bad
    data = _table(tmp_path, targets)
    said = refused(capsys, ["--model", model, "--data", data, "--solver", "exact"])
    assert said == f"{data} line 13: the target is {bad:g}; {needs}"


def test_a_weighted_binary_target_is_a_proportion(tmp_path, capsys):
    targets = [(i % 3) / 2 for i in range(30)]
    targets[17] = 1.5
    data = _table(tmp_path, targets, weights=True)
    said = refused(
        capsys, ["--model", "binomial", "--data", data, "--weights", "w", "--solver", "exact"]
    )
    assert said == (
        f"{data} line 19: the target is 1.5; --model binomial with --weights "
        "needs a proportion y in [0, 1]"
    )


def test_a_binary_target_of_three_values_is_refused(tmp_path, capsys):
    targets = [3.0 + i % 2 for i in range(30)]
    targets[20] = 5.0
    data = _table(tmp_path, targets)
    said = refused(capsys, ["--model", "logistic", "--data", data, "--solver", "exact"])
    assert said.endswith(
        "line 22: the target is 5; --model logistic needs a target of 0 or 1, or "
        "of two values read as 0 and 1 (here 3 and 4)"
    )


def test_a_target_on_the_closed_end_is_taken(tmp_path, capsys):
    """y = 0 is a count (>= 0), and the fit goes on."""
    data = _table(tmp_path, COUNTS)
    assert main(["--model", "poisson", "--data", data, "--solver", "exact"]) == 0
    assert "final loss" in capsys.readouterr().out


def test_each_family_declares_its_domain():
    """As data: what the refusals say, and which values are in."""
    said = {name: str(families.get(name).TARGET) for name in families.GLMS}
    assert said["poisson"] == said["tweedie"] == said["negative_binomial"] == "y >= 0"
    assert said["gamma"] == said["inverse_gaussian"] == "y > 0"
    assert said["logistic"] == "y in [0, 1]" and families.get("logistic").BINARY
    assert (
        families.get("linear").TARGET.everything and not families.get("poisson").TARGET.everything
    )
    half_open = Interval(0.0, 1.0, low_inclusive=False, high_inclusive=True)
    assert str(half_open) == "y in (0, 1]"
    assert half_open.contains(np.array([0.0, 0.5, 1.0, 1.5])).tolist() == [
        False,
        True,
        True,
        False,
    ]
