"""Exact least squares, optimizers and Horovod's options, configuration files."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import launch, params_of, read_metrics
from hvd_linreg.cli import main, parse_config
from hvd_linreg.data import synthetic_rows
from hvd_linreg.errors import UsageError
from reference import SGD, Adam, averaged, constant, linear_warmup, lstsq, mse


def _run(tmp_path, *args) -> dict:
    out = tmp_path / f"m{len(list(tmp_path.glob('m*.json')))}.json"
    assert main([*args, "--metrics_json", str(out)]) == 0
    return read_metrics(out)


@pytest.fixture
def data_file(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((1000, 4)).astype(np.float32)
    y = (X @ np.float32([1, 2, -3, 0.5]) + 4 + rng.standard_normal(1000)).astype(np.float32)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    return str(tmp_path / "d.npz"), X, y


def test_exact_solver_matches_lstsq_on_one_rank(tmp_path, data_file):
    path, X, y = data_file
    m = _run(tmp_path, "--solver", "exact", "--data", path)
    np.testing.assert_allclose(params_of(m), lstsq(X, y), rtol=1e-9)
    assert m["optimality_gap"] == 0.0


@pytest.mark.multiprocess
@pytest.mark.parametrize("size", [2, 4])
def test_exact_solver_matches_lstsq_on_many_ranks(tmp_path, data_file, size):
    path, X, y = data_file
    run = launch("mpirun", size, ["--solver", "exact", "--data", path], tmp_path)
    assert run.returncode == 0, run.output
    np.testing.assert_allclose(params_of(run.metrics), lstsq(X, y), rtol=1e-9)


def test_exact_sums_stay_accurate_for_millions_of_rows(tmp_path):
    m = _run(tmp_path, "--solver", "exact", "--num_samples", "2000000", "--num_features", "2")
    X, y = synthetic_rows(0, np.arange(2_000_000), 2)
    np.testing.assert_allclose(params_of(m), lstsq(X, y), rtol=1e-9)


def test_sgd_reports_the_loss_the_exact_loss_and_the_gap_between(tmp_path, data_file):
    path, X, y = data_file
    m = _run(tmp_path, "--data", path, "--num_steps", "300")
    loss, exact_loss = mse(params_of(m), X, y), mse(lstsq(X, y), X, y)
    assert m["loss"] == pytest.approx(loss, rel=1e-9)
    assert m["exact_loss"] == pytest.approx(exact_loss, rel=1e-9)
    assert m["optimality_gap"] == pytest.approx(loss - exact_loss, rel=1e-6)
    assert m["optimality_gap"] > 1e-4  # 300 steps leave a gap: the check above is not 0 == 0


def test_optimality_gap_is_skipped_for_very_many_features(tmp_path, capsys):
    m = _run(
        tmp_path,
        "--num_features",
        "5000",
        "--num_samples",
        "20",
        "--batch_size",
        "10",
        "--num_steps",
        "2",
    )
    assert m["exact_loss"] is None and m["optimality_gap"] is None
    assert "exact optimum: skipped (more than 4096 features)" in capsys.readouterr().out


STEPS, BATCH = 100, 50


def _simulate(data_file, m, optimizer) -> np.ndarray:
    """The NumPy simulation of this run's data, steps and start, with the given optimizer."""
    _, X, y = data_file
    return averaged(
        X,
        y,
        ranks=1,
        batch_size=BATCH,
        steps=m["steps"],
        optimizer=optimizer,
        w0=m["initial_w"],
        b0=m["initial_b"],
    )


def _follows(data_file, m, optimizer, *, not_: list) -> None:
    """The run equals the simulation of `optimizer`, and is far from each of `not_` (what a
    tool that got the option wrong would compute): the comparison can tell them apart."""
    np.testing.assert_allclose(params_of(m), _simulate(data_file, m, optimizer), rtol=1e-4)
    for wrong in not_:
        assert not np.allclose(params_of(m), _simulate(data_file, m, wrong), rtol=1e-2)


def test_momentum_follows_keras_sgd_with_momentum(tmp_path, data_file):
    flags = ["--data", data_file[0], "--batch_size", str(BATCH), "--num_steps", str(STEPS)]
    m = _run(tmp_path, *flags, "--optimizer", "momentum", "--learning_rate", "0.02")
    _follows(data_file, m, SGD(constant(0.02), momentum=0.9), not_=[SGD(constant(0.02))])


def test_momentum_flag_sets_the_momentum(tmp_path, data_file):
    flags = ["--data", data_file[0], "--batch_size", str(BATCH), "--num_steps", str(STEPS)]
    m = _run(tmp_path, *flags, "--optimizer", "momentum", "--momentum", "0.5")
    _follows(
        data_file,
        m,
        SGD(constant(0.01), momentum=0.5),
        not_=[SGD(constant(0.01), momentum=0.9), SGD(constant(0.01))],
    )


def test_adam_follows_keras_adam(tmp_path, data_file):
    flags = ["--data", data_file[0], "--batch_size", str(BATCH), "--num_steps", str(STEPS)]
    m = _run(tmp_path, *flags, "--optimizer", "adam", "--learning_rate", "0.05")
    _follows(
        data_file,
        m,
        Adam(constant(0.05)),
        not_=[SGD(constant(0.05)), Adam(constant(0.05), epsilon=1e-1)],
    )


def test_k_backward_passes_equal_one_pass_with_k_times_the_batch(tmp_path):
    k4 = _run(
        tmp_path, "--backward_passes_per_step", "4", "--batch_size", "25", "--num_steps", "400"
    )
    one = _run(tmp_path, "--batch_size", "100", "--num_steps", "100")
    np.testing.assert_allclose(params_of(k4), params_of(one), rtol=1e-6)


def test_warmup_ramps_the_rate_from_lr_over_w_to_lr_in_w_updates(tmp_path, data_file):
    flags = ["--data", data_file[0], "--batch_size", str(BATCH), "--num_steps", "60"]
    m = _run(tmp_path, *flags, "--learning_rate", "0.02", "--lr_warmup_steps", "40")
    ramp = linear_warmup(0.02, 40)
    _follows(
        data_file,
        m,
        SGD(ramp),
        not_=[
            SGD(constant(0.02)),  # no warm-up
            SGD(lambda k: ramp(40 - min(k, 40))),  # the ramp inverted: lr down to lr / W
            SGD(linear_warmup(0.02, 20)),  # half as long
        ],
    )


def test_warmup_applies_to_adam_too(tmp_path, data_file):
    flags = ["--data", data_file[0], "--batch_size", str(BATCH), "--num_steps", str(STEPS)]
    m = _run(
        tmp_path,
        *flags,
        "--optimizer",
        "adam",
        "--learning_rate",
        "0.05",
        "--lr_warmup_steps",
        "30",
    )
    _follows(data_file, m, Adam(linear_warmup(0.05, 30)), not_=[Adam(constant(0.05))])


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("options")
    common = ["--num_steps", "200", "--num_features", "3"]
    variants = {
        "base": [],
        "fp16": ["--fp16_allreduce"],
        "scale_lr": ["--scale_lr"],
        "double_lr": ["--learning_rate", "0.02"],
        # 2 passes of 50 rows per update, 400 passes: the updates of "base" (batch 100)
        "k2": ["--backward_passes_per_step", "2", "--batch_size", "50", "--num_steps", "400"],
    }
    runs = {k: launch("mpirun", 2, [*common, *v], tmp) for k, v in variants.items()}
    for run in runs.values():
        assert run.returncode == 0, run.output
    return {k: r.metrics for k, r in runs.items()}


@pytest.mark.multiprocess
def test_fp16_allreduce_changes_results_only_within_fp16_rounding(two_rank_runs):
    base, fp16 = params_of(two_rank_runs["base"]), params_of(two_rank_runs["fp16"])
    assert not np.array_equal(base, fp16)
    np.testing.assert_allclose(fp16, base, rtol=2e-3)


@pytest.mark.multiprocess
def test_scale_lr_multiplies_the_rate_by_the_ranks(two_rank_runs):
    np.testing.assert_allclose(
        params_of(two_rank_runs["scale_lr"]), params_of(two_rank_runs["double_lr"]), rtol=1e-6
    )
    assert not np.allclose(params_of(two_rank_runs["scale_lr"]), params_of(two_rank_runs["base"]))


@pytest.mark.multiprocess
def test_k_backward_passes_equal_one_pass_with_k_times_the_batch_on_two_ranks(two_rank_runs):
    np.testing.assert_allclose(
        params_of(two_rank_runs["k2"]), params_of(two_rank_runs["base"]), rtol=1e-6
    )


def test_log_and_checkpoint_intervals_must_be_multiples_of_the_backward_passes():
    with pytest.raises(UsageError, match="must be multiples of --backward_passes_per_step 4"):
        parse_config(["--backward_passes_per_step", "4", "--log_every", "10"])
    with pytest.raises(UsageError, match="must be multiples of --backward_passes_per_step 3"):
        parse_config(["--backward_passes_per_step", "3", "--checkpoint_every", "100"])


@pytest.mark.core  # the TOML reader is the standard library's: each Python's own
def test_config_file_values_and_command_line_override(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('num_steps = 70\nlearning-rate = 0.5\noptimizer = "adam"\n')
    cfg = parse_config(["--config", str(path), "--num_steps", "80"])
    assert (cfg.num_steps, cfg.learning_rate, cfg.optimizer) == (80, 0.5, "adam")


@pytest.mark.core
def test_config_file_that_is_not_toml_is_a_usage_error(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("num_steps = = 70\n")
    with pytest.raises(UsageError, match=f"--config {path} is not valid TOML"):
        parse_config(["--config", str(path)])


def test_config_file_unknown_key_is_named(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("num_stepz = 70\n")
    with pytest.raises(UsageError, match="unknown key 'num_stepz'"):
        parse_config(["--config", str(path)])


def test_config_file_values_are_validated(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('batch_size = "big"\n')
    with pytest.raises(UsageError, match="--batch_size must be a positive whole number"):
        parse_config(["--config", str(path)])


def test_metrics_record_the_effective_configuration(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("num_steps = 30\nseed = 9\n")
    m = _run(tmp_path, "--config", str(path), "--learning_rate", "0.02")
    assert (m["config"]["num_steps"], m["config"]["seed"], m["config"]["learning_rate"]) == (
        30,
        9,
        0.02,
    )


@pytest.mark.parametrize(
    "flags, computed",
    [
        ([], False),  # 20000 rows x 17 against 2 steps of 10: the normal equations cost more
        (["--optimality_gap", "always"], True),
        (["--num_steps", "20000", "--optimality_gap", "never"], False),
        (["--num_steps", "20000"], True),  # now the training costs more
    ],
)
def test_optimality_gap_is_computed_when_it_costs_less_than_the_training(
    tmp_path, capsys, flags, computed
):
    m = _run(
        tmp_path,
        "--num_features",
        "16",
        "--num_samples",
        "20000",
        "--batch_size",
        "10",
        "--num_steps",
        "2",
        *flags,
    )
    assert (m["exact_loss"] is not None) == computed
    assert (m["optimality_gap"] is not None) == computed
    assert ("exact optimum: skipped" in capsys.readouterr().out) != computed
