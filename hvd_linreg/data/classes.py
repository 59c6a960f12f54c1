"""A target of classes (the multinomial model's): each row's class's number, the classes agreed
by every rank as a column's levels are (one allgather), and the shard of a file's rows (read as
fit()'s DataFrame is, data/formula_files.py) or of fit()'s."""

from __future__ import annotations

import numpy as np

from hvd_linreg.errors import UsageError, agreed


def agreed_classes(job, y, max_levels: int, column: str) -> tuple[np.ndarray, list]:
    """Each row's class's number (float64) and the classes, the same on every rank."""
    from hvd_linreg.data import frames
    from hvd_linreg.data.categorical import sorted_levels

    def local():
        import pandas as pd

        cells = y if hasattr(y, "isna") else pd.Series(np.asarray(y))
        missing = np.flatnonzero(cells.isna().to_numpy())
        if len(missing):
            raise UsageError(
                f"row {missing[0]}: no class in {column!r}; drop such rows (missing='drop')"
            )
        frames.refuse_mixed(cells.to_frame(column))
        words = frames.kind(cells) is not None
        values = cells.map(frames.text_of) if words else cells.map(frames.number_of)
        return len(cells), words, sorted(set(values.tolist()), key=str), values

    count, words, mine, values = agreed(job, local)
    every = job.allgather((count, words, mine), name="multinomial_classes")
    kinds = {theirs for n, theirs, _ in every if n}
    if len(kinds) > 1:
        raise UsageError(f"the target {column!r} holds words on some ranks, numbers on others")
    union = set().union(*(theirs for _, _, theirs in every))
    classes = sorted_levels(union) if words else sorted(union)
    if len(classes) < 2:
        raise UsageError(
            f"the target {column!r} has one class ({', '.join(map(str, classes))}): a "
            "multinomial model needs two or more"
        )
    if len(classes) > max_levels:
        raise UsageError(
            f"the target {column!r} has {len(classes)} classes, more than --max_levels "
            f"{max_levels}: is it an ID or a number? Raise --max_levels for that many classes"
        )
    at = {c: i for i, c in enumerate(classes)}
    return values.map(at).to_numpy(np.float64), classes


def file_shard(cfg, job):
    """This rank's shard of --data's rows and the classes of the target: --target (the last
    column by default) and --features (the others), or --formula's left side and the columns
    its right side builds (the shard stores the formula for --export)."""
    from hvd_linreg.data import formulas
    from hvd_linreg.data.files import data_files
    from hvd_linreg.data.formula_files import complete_rows, rank_frame
    from hvd_linreg.data.rows import Carried

    formula = cfg.formula
    target = formulas.target_column(formula) if formula else cfg.target
    files = agreed(job, lambda: data_files(cfg.data))
    carried = Carried(cfg.weights, cfg.offset, None, cfg.fold_column, cfg.groups)
    wanted = None if formula is None else {*formulas.names_in(formula), *carried.names}
    frame, first = rank_frame(files, job, wanted, "--model multinomial")
    target = target or str(frame.columns[-1])
    frame = _categories(job, _columns(cfg, frame, target, carried), cfg.categorical_columns)
    frame, dropped, _ = complete_rows(job, frame, first, carried, cfg.missing, files)
    design = None
    if formula is None:
        X, y = frame.drop(columns=[target, *carried.names]), frame[target]
    else:
        design = formula_design(job, formula, frame, cfg.max_levels)
        X, y = design.X, design.y
    given = {n: frame[n].to_numpy() for n in carried.names}
    roles = dict(weights=carried.weight, offset=carried.offset, fold=carried.fold)
    columns = {role: given.get(name) for role, name in {**roles, "groups": carried.group}.items()}
    return rows_shard(cfg, job, X, y, dropped, design, **columns, names=carried, source=cfg.data)


def formula_design(job, formula: str, data, max_levels: int):
    """A multinomial model's formula on this rank's rows of data: the right side's columns
    built as the other models' are (data/formulas.py), and as the target (y) the column the
    left side names, as it is: its values, words or numbers, are the classes."""
    from dataclasses import replace

    from hvd_linreg.data import formulas

    target = formulas.target_column(formula)
    if target not in data.columns:
        raise UsageError(f"the formula {formula!r} names the target {target!r}: no such column")
    # the left side is not a design column here: formulaic is handed a number in its place
    design = formulas.design(job, formula, data.assign(**{target: 0.0}), max_levels)
    return replace(design, y=data[target].rename(target))


def _columns(cfg, frame, target: str, carried):
    """The frame's columns the run reads, the features first (--features', else every other
    column; a formula's: those it names), then the target and the carried columns."""
    known = {target, *carried.names}
    features = list(cfg.feature_columns or [c for c in frame.columns if c not in known])
    missing = [c for c in [*features, target, *carried.names] if c not in frame.columns]
    if missing:
        raise UsageError(f"--data {cfg.data} has no column {', '.join(missing)}")
    return frame[[*features, target, *carried.names]]


def _categories(job, frame, names):
    """The frame with the columns named in --categorical as pandas categoricals of the levels
    that every rank's rows hold (one allgather): a rank's own values alone would give each
    rank other categories."""
    import pandas as pd

    from hvd_linreg.data.categorical import sorted_levels

    if not names:
        return frame
    mine = [sorted_levels(frame[name].dropna().unique().tolist()) for name in names]
    every = job.allgather(mine, name="multinomial_levels") if job.size > 1 else [mine]
    frame = frame.copy()
    for i, name in enumerate(names):
        levels = sorted_levels(set().union(*(theirs[i] for theirs in every)))
        frame[name] = frame[name].astype(pd.CategoricalDtype(levels))
    return frame


def rows_shard(cfg, job, X, y, dropped=None, design=None, **carried):
    """The rows X, y as a shard, its target each row's class's number, and the classes of y.
    dropped: the rows --missing drop dropped; design: a formula's, which the shard keeps for
    --export and predict_proba; carried: memory_shard's weights, offset, fold, groups, names
    and source."""
    from hvd_linreg.data.memory import memory_shard

    name = str(getattr(y, "name", None) or "y")
    codes, classes = agreed_classes(job, y, cfg.max_levels, name)
    target = codes if getattr(y, "name", None) is None else _named(codes, name)
    shard = memory_shard(cfg, job, X, target, **carried)
    shard.formula = None if design is None else design.stored()
    shard.dropped = dropped
    return shard, classes


def _named(codes: np.ndarray, name: str):
    import pandas as pd

    return pd.Series(codes, name=name)
