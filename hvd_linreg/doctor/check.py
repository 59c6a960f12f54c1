"""What one doctor check found, and the fixes that several checks share."""

from __future__ import annotations

from dataclasses import dataclass

INSTALL_PACKAGES = (
    "run `make setup` in the repository (it installs the pinned packages into .venv), "
    "then put .venv/bin first on PATH"
)
INSTALL_MPI = (
    "install Open MPI: apt-get install openmpi-bin libopenmpi-dev "
    "(on a cluster: module load openmpi), then `make setup`"
)


@dataclass(frozen=True)
class Check:
    """The outcome of one check: what it saw and, when it failed, how to fix it."""

    name: str
    ok: bool
    detail: str = ""
    fix: str = ""
    skipped: bool = False  # not run, because of failures before it (which count, not this)

    def lines(self) -> list[str]:
        status = "skip" if self.skipped else "ok" if self.ok else "FAIL"
        detail = f" ({self.detail})" if self.detail else ""
        fix = [f"      fix: {self.fix}"] if self.fix and not self.ok else []
        return [f"{status:<6}{self.name}{detail}", *fix]


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
