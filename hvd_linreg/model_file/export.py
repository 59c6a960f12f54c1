"""The model as a file (--export): a TensorFlow SavedModel whose serving signature maps
features to predictions, and hvd_linreg's metadata inside it, assets.extra/hvd_linreg.json
(w and b, the features' names, the training data, flags and metrics), which predict and
evaluate read without TensorFlow."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hvd_linreg import __version__
from hvd_linreg.config import Config
from hvd_linreg.data import Shard
from hvd_linreg.data.rows import NOTHING_CARRIED, Carried
from hvd_linreg.errors import UsageError
from hvd_linreg.families import FAMILIES
from hvd_linreg.families.coefficients import from_stored, stored
from hvd_linreg.runtime.atomic import atomic_directory

# TensorFlow Serving's place for files of the model that are not TensorFlow's own.
METADATA = Path("assets.extra") / "hvd_linreg.json"
FORMAT = "hvd_linreg linear model"
# The serving signature's output, by family: a binary family's probability; else the mean,
# unless named here
SERVING_OUTPUTS = dict.fromkeys(["linear", "gaussian"], "prediction")


@dataclass(frozen=True)
class ExportedModel:
    """What predict and evaluate need of an exported model: its family's parameters."""

    path: str
    theta: np.ndarray  # the coefficients, (F + 1) x K′ float64 (coefficients.py)
    dtype: str  # the training precision, that of the serving signature
    feature_names: tuple[str, ...] | None
    target_name: str | None
    family: str = "linear"  # the model family (families/) that predicts and scores
    link: str | None = None  # its link; None: the family's default
    # the family's parameter (families.PARAMETERS): tweedie's power, negative_binomial's alpha
    power: float | None = None
    # --weights, --offset, --exposure: the columns it was fitted with (predict adds the
    # offset and the exposure's log to each row's linear predictor; evaluate weighs rows)
    carried: Carried = NOTHING_CARRIED
    # categorical columns: each one's name -> its levels (data/categorical.py); columns: the
    # data's columns the features come from, each categorical one giving its dummies
    levels: dict[str, list] | None = None
    columns: tuple[str, ...] | None = None
    # --formula's, fit(formula, data=)'s: what builds the features from the data's columns
    # (data/formulas.py's Design.stored())
    formula: dict | None = None
    # a model of classes (--model multinomial): its classes, the first the reference, theta's
    # K′ = K - 1 columns those of the others
    classes: list | None = None
    # a binary model of a target of words: its two levels, the second the one modelled
    target_levels: list | None = None

    @property
    def num_features(self) -> int:
        return len(self.theta) - 1


def check_target(path: str | None) -> None:
    """Refuse, before training, an --export path that cannot be written, or that holds
    something other than a model hvd_linreg exported: that is never overwritten."""
    if path is None:
        return
    p = Path(path)
    parent = p.absolute().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise UsageError(f"cannot write --export {path}: {parent} is not a writable directory")
    if p.is_symlink():
        raise UsageError(f"--export {path} is a symbolic link; give the directory's own path")
    if os.path.lexists(p):
        try:
            load(path)
        except UsageError:
            raise UsageError(
                f"--export {path} exists and is not a model hvd-linreg exported: it is left as "
                "it is; choose another path"
            ) from None


def save(
    cfg: Config,
    family,
    shard: Shard,
    theta: np.ndarray,
    metrics: dict[str, Any],
) -> None:
    """Rank 0 writes the model (theta: its coefficients, coefficients.py) to --export, whole or
    not at all (atomic_directory). The file keeps one predictor's as w and b, a list and a
    number."""
    check_target(cfg.export)  # again: something may have appeared there while training ran
    w, b = stored(theta)
    metadata = {
        "format": FORMAT,
        "model": family.NAME,
        **family.settings(),  # its link and its parameter (power: None for most)
        "hvd_linreg": __version__,
        "num_features": len(theta) - 1,
        "dtype": shard.dtype,
        "w": w,
        "b": b,
        "feature_names": None if shard.feature_names is None else list(shard.feature_names),
        "target_name": shard.target_name,
        "columns": None if shard.columns is None else list(shard.columns),
        "levels": shard.levels or None,
        "target_levels": shard.target_levels,
        "formula": shard.formula,
        "missing": cfg.missing,
        # the carried columns by the names a data file gives them (the shard's: hvd_linreg.fit
        # names its arrays weights and offset)
        "weights": shard.carried_columns.weight,
        "offset": shard.carried_columns.offset,
        "exposure": shard.carried_columns.exposure,
        "fold": shard.carried_columns.fold,  # predict and evaluate pass over it
        "data": shard.source if cfg.synthetic else str(Path(shard.source).absolute()),
        "config": cfg.as_dict(),
        "metrics": metrics,
    }

    def build(directory: Path) -> None:
        _save_model(family, directory, theta, shard.dtype)
        (directory / METADATA).parent.mkdir(exist_ok=True)
        (directory / METADATA).write_text(json.dumps(metadata, indent=2) + "\n")

    atomic_directory(Path(cfg.export), build)


def _save_model(family, directory: Path, theta: np.ndarray, dtype: str) -> None:
    """A SavedModel whose serving signature maps features to the family's serving output
    (TensorFlow started quietly here, where an exact run had none)."""
    from hvd_linreg.runtime.startup import import_tensorflow

    import_tensorflow()
    from hvd_linreg.sgd.model import Model, save_serving

    save_serving(
        directory,
        Model(theta, dtype, 0.0, family),
        "probability" if family.BINARY else SERVING_OUTPUTS.get(family.NAME, "mean"),
    )


def load(path: str, flag: str = "--model") -> ExportedModel:
    """The model at path (flag: the option that named it, for the messages); UsageError when it
    is not one hvd_linreg exported."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{flag} {path} does not exist")
    if not p.is_dir():
        raise UsageError(f"{flag} {path} is not a directory; hvd-linreg --export writes one")
    if not (p / METADATA).is_file() or not (p / "saved_model.pb").is_file():
        raise UsageError(
            f"{flag} {path} is not a model hvd-linreg exported (it has no saved_model.pb and "
            f"{METADATA}); write one with hvd-linreg --export {path}"
        )
    try:
        meta = json.loads((p / METADATA).read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"its format is {meta.get('format')!r}, not {FORMAT!r}")
        if meta.get("model", "linear") not in FAMILIES:
            raise ValueError(f"its model family {meta['model']!r} is not one this version knows")
        theta = _theta(meta)
        if len(theta) != meta["num_features"] + 1:
            raise ValueError("w does not have num_features values")
        names = meta["feature_names"]
        return ExportedModel(
            path,
            theta,
            meta["dtype"],
            None if names is None else tuple(names),
            meta["target_name"],
            meta.get("model", "linear"),
            meta.get("link"),
            meta.get("power"),
            Carried(
                meta.get("weights"), meta.get("offset"), meta.get("exposure"), meta.get("fold")
            ),
            meta.get("levels"),
            None if meta.get("columns") is None else tuple(meta["columns"]),
            _formula(meta.get("formula")),
            meta.get("classes"),
            meta.get("target_levels"),
        )
    except KeyError as e:
        raise UsageError(f"cannot read {flag} {path}'s metadata ({METADATA}): no {e}") from None
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise UsageError(f"cannot read {flag} {path}'s metadata ({METADATA}): {e}") from None


def read_start(path: str, family) -> ExportedModel:
    """--start's model, for a run of family: one hvd_linreg exported, a model of classes where
    the run's is one, else of the run's link (its coefficients are on the link's scale: the
    family and its parameter may differ, a start is only a start)."""
    from hvd_linreg.families import get

    model = load(path, "--start")
    if (model.classes is not None) != family.CLASSES:
        theirs = "a model of classes" if model.classes is not None else "a model of one mean"
        raise UsageError(
            f"--start {path} is {theirs} (--model {model.family}), this run's --model "
            f"{family.NAME} is not: start from a model of the same kind"
        )
    link = model.link or get(model.family).link.name
    if model.classes is None and link != family.link.name:
        raise UsageError(
            f"--start {path} has the {link} link, this run the {family.link.name} link: a "
            "start's coefficients are on its link's scale"
        )
    return model


def check_start(model: ExportedModel, shard: Shard, classes: list | None = None) -> None:
    """Refuse --start's model for the run of these rows (and classes) unless its features,
    and classes, are the run's, in the same order."""
    where = f"--start {model.path}"
    if model.num_features != shard.num_features:
        raise UsageError(
            f"{where} has {model.num_features} features, this run's data "
            f"{shard.num_features}: a start's coefficients are of the run's features"
        )
    mine, theirs = shard.feature_names, model.feature_names
    if mine is not None and theirs is not None and tuple(mine) != tuple(theirs):
        raise UsageError(
            f"{where}'s features are {', '.join(theirs)}; this run's are {', '.join(mine)}: a "
            "start's coefficients are of the same features, in the same order"
        )
    if classes is not None and [str(c) for c in model.classes] != [str(c) for c in classes]:
        raise UsageError(
            f"{where}'s classes are {', '.join(map(str, model.classes))}; this run's are "
            f"{', '.join(map(str, classes))}: a start's columns are of the same classes"
        )


def _theta(meta: dict) -> np.ndarray:
    """The coefficients (coefficients.py): (F + 1) x 1 from w and b; a model of classes'
    (F + 1) x (K - 1), from w by class and b."""
    return from_stored(meta["w"], meta["b"], classes=meta.get("classes") is not None)


def _formula(stored) -> dict | None:
    """The stored formula: a model an earlier version saved kept only its text."""
    if isinstance(stored, str):
        raise ValueError(
            f"it was fitted from the formula {stored!r} by an earlier version, which did not "
            "keep what builds its columns: fit it again"
        )
    return stored


def written(directory: str) -> str:
    """The line that says where --export wrote the model, and how to use it."""
    return (
        f"model written to {directory}: `hvd-linreg predict --model {directory} --data FILE "
        "--out PREDICTIONS.csv` applies it"
    )
