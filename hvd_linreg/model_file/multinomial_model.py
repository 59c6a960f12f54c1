"""A multinomial model as a file: --export writes it (a SavedModel whose serving signature maps
features to each class's probability, and the metadata export.py reads, with the classes);
`hvd-linreg predict` writes each row's probability of each class and its most probable class,
and `hvd-linreg evaluate` scores the model (log-loss, accuracy, the confusion matrix).

Each rank reads a contiguous block of a CSV or Parquet file's rows as a DataFrame (words as
words: a target of words is read as it is), in file order, as --formula's rows are; a model
fitted with an offset adds the file's offset column, and one fitted from a formula builds its
columns from the file's by the stored formula."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from hvd_linreg.data.categorical import UnseenAsReference
from hvd_linreg.data.frames import plain
from hvd_linreg.data.row_names import row_name
from hvd_linreg.data.rows import Rows
from hvd_linreg.errors import UsageError, agreed
from hvd_linreg.families.coefficients import stored


def save(cfg, result) -> None:
    """Rank 0 writes the model to --export, whole or not at all."""
    from hvd_linreg import __version__
    from hvd_linreg.model_file import export
    from hvd_linreg.runtime.atomic import atomic_directory

    export.check_target(cfg.export)
    shard, B = result.shard, result.params
    w, b = stored(B)
    metadata = {
        "format": export.FORMAT,
        "model": "multinomial",
        "hvd_linreg": __version__,
        "num_features": B.shape[0] - 1,
        "dtype": shard.dtype,
        "classes": [plain(c) for c in result.classes],
        "w": w,
        "b": b,
        "feature_names": None if shard.feature_names is None else list(shard.feature_names),
        "target_name": shard.target_name,
        "columns": None if shard.columns is None else list(shard.columns),
        "levels": shard.levels or None,
        "formula": shard.formula,
        "weights": shard.carried_columns.weight,
        "offset": shard.carried_columns.offset,
        "data": str(Path(shard.source).absolute()) if Path(shard.source).exists() else None,
        "config": cfg.as_dict(),
        "metrics": result.to_dict(),
    }

    def build(directory: Path) -> None:
        from hvd_linreg.runtime.startup import import_tensorflow

        import_tensorflow()  # quietly, before model.py imports it
        from hvd_linreg.sgd.model import save_class_serving

        save_class_serving(directory, B, shard.dtype)
        (directory / export.METADATA).parent.mkdir(exist_ok=True)
        (directory / export.METADATA).write_text(json.dumps(metadata, indent=2) + "\n")

    atomic_directory(Path(cfg.export), build)


def predict(
    model_path: str, data_path: str, out: str, threshold, keep: str | None, unseen: str = "error"
) -> int:
    """Each row's probability of each class (a column per class, named by it) and its most
    probable class (`class`), in the file's order; --keep_columns beside them."""
    from hvd_linreg.model_file.export import load
    from hvd_linreg.model_file.predict import kept_columns, open_data, read_kept
    from hvd_linreg.runtime import ranks
    from hvd_linreg.solvers.multinomial import log_probabilities

    model = unseen_levels(load(model_path), unseen)
    if threshold is not None:
        raise UsageError("--threshold is for a model of two classes; this one has several")
    if Path(out).suffix.lower() != ".csv":
        raise UsageError(f"--out {out}: a multinomial model's predictions are written as .csv")
    data = open_data(data_path)
    kept = kept_columns(data, keep, out)
    job = ranks.init(horovod=False)
    rows = _rows(model, data.path, job, need_target=False, out=out)
    mine = np.exp(log_probabilities(rows.X, model.theta, rows.offset))
    probabilities = np.concatenate(job.allgather(mine, name="predictions"))
    classes = model.classes

    def write():
        if job.is_root:  # only rank 0 writes
            columns = read_kept(data, kept, len(probabilities)) if kept else None
            _write(Path(out), probabilities, classes, kept, columns)

    agreed(job, write)
    if job.is_root:
        job.log(f"hvd-linreg predict: {len(probabilities)} predictions written to {out}")
    return 0


def evaluate(
    model_path: str, data_path: str, metrics_json: str | None, unseen: str = "error"
) -> int:
    """The model's log-loss, accuracy and confusion matrix on the file's rows (with its
    target), printed by rank 0 and written to --metrics_json."""
    from hvd_linreg.model_file.export import load
    from hvd_linreg.model_file.predict import open_data
    from hvd_linreg.report import write_json
    from hvd_linreg.runtime import ranks
    from hvd_linreg.statistics.multinomial import score_lines, scores

    model = unseen_levels(load(model_path), unseen)
    data = open_data(data_path)
    job = ranks.init(horovod=False)
    rows = _rows(model, data.path, job, need_target=True, out=metrics_json)
    result = scores(job, [rows], model.theta, model.classes, "evaluate")
    if job.is_root:
        job.log(f"Scores of the model {model_path} on {data_path} ({result['rows']:g} rows):")
        for line in score_lines("scores", result, model.classes):
            job.log(line)
        if metrics_json:
            write_json(metrics_json, {"model": model_path, "data": data_path, **result})
    return 0


def unseen_levels(model, unseen: str):
    """The model with its levels as predict's --unseen_levels takes them: "reference", a
    value none of them is the reference level."""
    if unseen != "reference" or not model.levels:
        return model
    levels = {name: UnseenAsReference(v) for name, v in model.levels.items()}
    return replace(model, levels=levels)


def _rows(model, path: Path, job, need_target: bool, out: str | None):
    """This rank's block of the file's rows as Rows: the features, each row's class's number
    (none without need_target), its weight (None: 1) and its offset where the model has one."""
    from hvd_linreg.data.formula_files import complete_rows, rank_frame
    from hvd_linreg.data.rows import NOTHING_CARRIED
    from hvd_linreg.report import check_writable

    agreed(job, lambda: check_writable("--out", out) if job.is_root else None)
    features = _read(model)
    target, weight, offset = model.target_name, model.carried.weight, model.carried.offset
    wanted = {*features, offset, *([target, weight] if need_target else [])} - {None}
    frame, first = rank_frame([path], job, wanted, "a multinomial model")

    def build():
        missing = [c for c in features if c not in frame.columns]
        if missing:
            raise UsageError(f"{path} has no column {', '.join(missing)}, which the model reads")
        if need_target and target not in frame.columns:
            raise UsageError(f"{path} has no column {target} (the model's target)")
        if offset is not None and offset not in frame.columns:
            raise UsageError(
                f"{path} has no column {offset!r}: the model {model.path} adds it (--offset) to "
                "each row's log-odds"
            )
        return frame

    agreed(job, build)
    frame, _, _ = complete_rows(job, frame, first, NOTHING_CARRIED, "error", [path])
    return agreed(job, lambda: _arrays(model, frame, first, path, need_target))


def _read(model) -> list[str]:
    """The file's columns that the model's features come from."""
    if model.formula is not None:
        return list(model.formula["variables"])
    return list(model.columns or model.feature_names or ())


def _arrays(model, frame, first: int, path: Path, need_target: bool):
    from hvd_linreg.data import formulas, frames
    from hvd_linreg.data.memory import features_of

    if model.formula is not None:  # the stored formula's columns, from the file's
        X = formulas.Design.of_stored(model.formula).new_rows(frame)
    elif model.levels:
        X = frames.new_rows(frame[_read(model)], model.columns, model.levels)
    else:
        X = frame[_read(model)]
    X = features_of(X, model.num_features)
    offset = model.carried.offset
    o = None if offset is None else _numbers(frame, offset, first, path)
    if not need_target:
        return Rows(X, np.empty(0), None, o)
    cells = frame[model.target_name]
    values = cells.map(frames.text_of if frames.kind(cells) else frames.number_of)
    at = {c: i for i, c in enumerate(model.classes)}
    codes = values.map(at)
    unknown = np.flatnonzero(codes.isna().to_numpy())
    if len(unknown):
        row = first + int(unknown[0])
        raise UsageError(
            f"{row_name(path, row)}: the class {values.iloc[unknown[0]]!r} in "
            f"{model.target_name!r}, not one of the model's ({', '.join(map(str, at))})"
        )
    weight = model.carried.weight
    w = _numbers(frame, weight, first, path) if weight in frame.columns else None
    return Rows(X, codes.to_numpy(np.float64), w, o)


def _numbers(frame, column: str, first: int, path: Path) -> np.ndarray:
    """A column of weights or offsets as float64; UsageError naming a row without a number."""
    import pandas as pd

    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        raise UsageError(
            f"{row_name(path, first + int(bad[0]))}: "
            f"{frame[column].iloc[bad[0]]!r} in column {column!r}, not a finite number"
        )
    return values


def _write(path: Path, probabilities: np.ndarray, classes: list, kept, columns) -> None:
    """The CSV: the kept columns, a probability column per class, then the class."""
    import csv
    import io

    from hvd_linreg.runtime.atomic import atomic_write

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*kept, *map(str, classes), "class"])
    best = probabilities.argmax(axis=1)
    cells = columns or [[] for _ in range(len(probabilities))]
    for mine, row, k in zip(cells, probabilities.tolist(), best):
        writer.writerow([*mine, *map(repr, row), classes[k]])
    atomic_write(path, lambda f: f.write(buffer.getvalue().encode()))
