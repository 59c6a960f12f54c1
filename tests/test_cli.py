"""The command line: the seed's flags and defaults, both spellings, clear usage errors."""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from dataclasses import fields

import pytest

from conftest import LAUNCH_TIMEOUT_S, REPO, launcher_env
from hvd_linreg.cli import MODEL_COMMANDS, build_model_parser, main, parse_config
from hvd_linreg.config import Config, field_names
from hvd_linreg.errors import UsageError


def test_defaults_are_the_seed_programs():
    cfg = parse_config([])
    assert (cfg.num_steps, cfg.learning_rate, cfg.batch_size, cfg.log_every) == (
        1000,
        0.01,
        100,
        100,
    )


@pytest.mark.parametrize("spelling", ["--num_steps", "--num-steps"])
def test_underscore_and_dashed_flags_both_work(spelling):
    assert parse_config([spelling, "7"]).num_steps == 7


def readme_flag_table() -> dict[str, str]:
    """The README's flag table: each flag's name (no dashes) -> its default column."""
    section = (REPO / "README.md").read_text().split("\n## Flags\n", 1)[1].split("\n## ", 1)[0]
    table = {}
    for row in section.splitlines():
        if row.startswith("| `--"):
            cells = [cell.strip() for cell in row.strip("|").split(" | ")]
            for name in re.findall(r"`--([a-z0-9_]+)", cells[0]):
                table[name] = cells[1]
    return table


def test_readme_flag_table_lists_every_flag_with_its_default():
    """Each setting is declared once (config.Config); the README's table must follow it."""
    table = readme_flag_table()
    assert set(table) == {*field_names(), "config", "version", "help"}
    for f in fields(Config):
        if f.default is not None:
            assert table[f.name] == ("off" if f.default is False else str(f.default)), f.name


def test_readme_lists_the_flags_of_predict_and_evaluate():
    """docs/using-the-model.md's table: each flag of each subcommand, and no other."""
    page = (REPO / "docs" / "using-the-model.md").read_text()
    section = page.split("\n## Predict and evaluate\n", 1)[1]
    rows = section.split("\n## ", 1)[0].splitlines()
    table = [
        re.match(r"\| `--(\w+) [^|]*\| (\w+) \|", row).groups() for row in rows if "| `--" in row
    ]
    for command in MODEL_COMMANDS:
        documented = {name for name, of in table if of in ("both", command)}
        actions = build_model_parser(command)._actions
        assert documented == {a.dest for a in actions if a.dest != "help"}, command


def test_help_explains_every_flag():
    out = subprocess.run(
        [sys.executable, "-m", "hvd_linreg", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env=launcher_env(),
    ).stdout
    for name in field_names():
        assert f"--{name}" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--num_steps", "0"], "--num_steps must be a positive whole number"),
        (["--batch_size", "-5"], "--batch_size must be a positive whole number"),
        (["--num_steps", "1.5"], "invalid int value"),
        (["--learning_rate", "nan"], "--learning_rate must be a finite number"),
        (["--learning_rate", "0"], "--learning_rate must be > 0"),
        (["--data", "x.csv", "--num_features", "3"], "cannot be combined with --data"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_flags_are_usage_errors(argv, message):
    with pytest.raises(UsageError, match=message):
        parse_config(argv)


def test_usage_error_exits_2_with_one_line_and_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "hvd_linreg", "--num_steps", "-1"],
        capture_output=True,
        text=True,
        env=launcher_env(),
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "hvd-linreg: error: --num_steps must be a positive whole number, got -1"
    )
    assert "Traceback" not in proc.stdout + proc.stderr


def test_output_into_head_ends_quietly(tmp_path):
    """`hvd-linreg | head`: the tool stops when head has gone, like a command killed by
    SIGPIPE (exit 141), with no traceback, instead of training on or crashing loudly."""
    err, code = tmp_path / "stderr", tmp_path / "code"
    tool = f"{sys.executable} -m hvd_linreg --num_steps 1000000 --log_every 1"
    proc = subprocess.run(
        ["bash", "-c", f"{tool} 2>{err} | head -n 3; echo ${{PIPESTATUS[0]}} >{code}"],
        capture_output=True,
        text=True,
        env=launcher_env(),
        timeout=LAUNCH_TIMEOUT_S,
    )
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("hvd-linreg: 1 rank"), lines
    assert [line.split(" Loss: ")[0] for line in lines[1:]] == ["Step: 1", "Step: 2"], lines
    assert "Traceback" not in err.read_text(), err.read_text()
    assert code.read_text().strip() == "141"


def test_config_is_immutable():
    with pytest.raises(AttributeError):
        Config().num_steps = 5  # type: ignore[misc]


def test_a_tensorflow_error_that_is_not_a_lost_rank_keeps_its_traceback():
    """Only a failed collective means 'the job lost a rank'; a real TensorFlow error anywhere
    else (here a reshape that cannot be done, in place of the trainer) is a bug: traceback."""
    script = (
        "import hvd_linreg.pipeline as pipeline, tensorflow as tf\n"
        "pipeline.run = lambda cfg: tf.reshape(tf.zeros([3]), [2])\n"
        "from hvd_linreg.cli import main\n"
        "raise SystemExit(main(['--num_steps', '1']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=launcher_env(),
        timeout=LAUNCH_TIMEOUT_S,
    )
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert "InvalidArgumentError" in proc.stderr
    assert "lost a rank" not in proc.stdout + proc.stderr


def test_version_prints_the_package_version():
    proc = subprocess.run(
        [sys.executable, "-m", "hvd_linreg", "--version"],
        capture_output=True,
        text=True,
        env=launcher_env(),
    )
    assert proc.returncode == 0, proc.stderr
    version = configparser.ConfigParser()
    version.read(REPO / "setup.cfg")
    assert proc.stdout == f"hvd-linreg {version['metadata']['version']}\n"


STALL = ("HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS")


def test_one_rank_sets_the_stall_limits_and_leaves_the_cycle_time(monkeypatch):
    for name in (*STALL, "HOROVOD_CYCLE_TIME", "OMPI_MCA_mpi_yield_when_idle"):
        monkeypatch.delenv(name, raising=False)
    assert main(["--num_steps", "10", "--quiet"]) == 0
    assert [os.environ.get(name) for name in STALL] == ["30", "120"]
    assert "HOROVOD_CYCLE_TIME" not in os.environ
    assert "OMPI_MCA_mpi_yield_when_idle" not in os.environ


@pytest.mark.parametrize("given, threads", [(None, 1), ("2", 2)])
def test_numpys_blas_runs_one_thread_unless_you_say(given, threads):
    """Checked in a fresh process: BLAS reads the variable once, when NumPy loads."""
    env = {k: v for k, v in launcher_env().items() if k != "OPENBLAS_NUM_THREADS"}
    if given:
        env["OPENBLAS_NUM_THREADS"] = given
    code = (
        "import hvd_linreg, numpy, threadpoolctl; "
        "print(max(i['num_threads'] for i in threadpoolctl.threadpool_info()))"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.stdout == f"{threads}\n", proc.stderr


def test_your_stall_limits_win(monkeypatch):
    monkeypatch.setenv("HOROVOD_STALL_CHECK_TIME_SECONDS", "7")
    monkeypatch.setenv("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "0")
    assert main(["--num_steps", "10", "--quiet"]) == 0
    assert [os.environ[name] for name in STALL] == ["7", "0"]


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"optimality_gap": "sometimes"}, "--optimality_gap must be one of auto, always, never"),
        ({"backward_passes_per_step": 0}, "--backward_passes_per_step must be a positive whole"),
    ],
)
def test_settings_a_config_file_gives_are_checked_too(setting, message):
    """A TOML file passes argparse by: each setting's own check still refuses a bad value."""
    with pytest.raises(UsageError, match=message):
        Config(**setting)
