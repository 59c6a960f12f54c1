"""A CI stage fails on a skip whose reason tests/conftest.py does not declare, whether a test
skips itself or a whole module skips at collection (a dependency gone missing), with and
without xdist's workers: a pytest run in a subprocess with the suite's hooks as a plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXPECTED_SKIPS

TESTS = Path(__file__).parent
DECLARED = next(iter(EXPECTED_SKIPS))
BODIES = {
    "module": "import pytest\npytest.skip({reason!r}, allow_module_level=True)\n",
    "test": "import pytest\n\ndef test_it():\n    pytest.skip({reason!r})\n",
}


def pytest_run(tmp_path: Path, where: str, reason: str, workers: list[str]):
    (tmp_path / "test_skipping.py").write_text(BODIES[where].format(reason=reason))
    (tmp_path / "test_passing.py").write_text("def test_it():\n    pass\n")
    env = {
        **os.environ,
        "HVD_LINREG_STRICT_SKIPS": "1",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", *workers]
    return subprocess.run(
        [*cmd, "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.parametrize("where", ["module", "test"])
def test_an_undeclared_skip_fails_the_stage_and_a_declared_one_does_not(tmp_path, where, workers):
    bad = pytest_run(tmp_path, where, "numpy is not installed", workers)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "UNDECLARED SKIP numpy is not installed" in bad.stdout
    good = pytest_run(tmp_path, where, DECLARED, workers)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "UNDECLARED" not in good.stdout
