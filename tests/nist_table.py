"""Print docs/statistics.md's accuracy table: the correct digits (LRE) of the worst coefficient
and the worst standard error of the tool's exact fit at 1, 2 and 3 ranks under MPI and Gloo,
next to scikit-learn's, statsmodels' and SciPy's on the same rows (six horovodrun jobs, about a
minute).

    .venv/bin/python tests/nist_table.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import fit_with_the_tool, libraries, problems, tool_lre, write  # noqa: E402

RUNS = [
    (launcher, size) for size in (1, 2, 3) for launcher in ("horovodrun-mpi", "horovodrun-gloo")
]


def main() -> None:
    found = problems()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write(found, directory)
        fits = {run: fit_with_the_tool(*run, directory, directory) for run in RUNS}
    columns = [f"{size} rank{'s' * (size > 1)} {launcher[11:].upper()}" for launcher, size in RUNS]
    print(f"| problem | {' | '.join(columns)} | scikit-learn | statsmodels (QR) | SciPy lstsq |")
    print(f"| --- |{' --- |' * (len(columns) + 3)}")
    for name, p in found.items():
        tool = [tool_lre(fits[run][name], p) for run in RUNS]
        cells = [f"{c:.1f} / {e:.1f}" for c, e in tool]
        libs = [f"{c:.1f}" + ("" if e is None else f" / {e:.1f}") for c, e in libraries(p).values()]
        print(f"| {name} | {' | '.join(cells + libs)} |")


if __name__ == "__main__":
    main()
