"""What `hvd-linreg predict` writes: the predictions as .npy or .csv, with the data file's
columns that --keep_columns carries beside them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hvd_linreg.runtime.atomic import atomic_write

OUTPUT_FORMATS = (".npy", ".csv")


def write_predictions(
    path: Path, predictions: np.ndarray, kept: list[str] = (), columns: list | None = None
) -> None:
    """Atomically: .npy (float64), or .csv with the header `prediction` and values that read
    back exactly; the kept columns' names and cells before it."""
    if path.suffix.lower() == ".npy":
        atomic_write(path, lambda f: np.save(f, predictions))
        return
    if not kept:
        text = "prediction\n" + "".join(f"{_cell(v)}\n" for v in predictions.tolist())
        atomic_write(path, lambda f: f.write(text.encode()))
        return
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*kept, "prediction"])
    writer.writerows([*cells, _cell(v)] for cells, v in zip(columns, predictions.tolist()))
    atomic_write(path, lambda f: f.write(buffer.getvalue().encode()))


def _cell(value) -> str:
    """A prediction as the CSV writes it: a number so that it reads back exactly, a level as
    its word."""
    return repr(value) if isinstance(value, float) else str(value)
