"""What a reader is told (DataSpec) and what a reader declares (TableReader, ScatterReader).

The two kinds of reader:
  * a TableReader opens files as one Table read by ranges of rows, so every rank reads its own
    rows straight from the files (.npy, .npz, Parquet);
  * a ScatterReader builds the shard itself: each rank parses its byte range of the files and
    the rows go to the ranks that hold them by collectives (CSV, whose rows are not at known
    offsets).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hvd_linreg.config import MAX_LEVELS
from hvd_linreg.data.rows import NOTHING_CARRIED, Carried

if TYPE_CHECKING:
    from hvd_linreg.config import Config
    from hvd_linreg.data.shard import Shard
    from hvd_linreg.data.table import Table
    from hvd_linreg.runtime.ranks import Job


@dataclass(frozen=True)
class DataSpec:
    """The settings a reader reads: the columns to use and the precision to train in."""

    target: str | None = None  # --target: the target column's name; None: the last column
    features: tuple[str, ...] | None = None  # --features, in order; None: all but the target
    dtype: str | None = None  # --dtype; None: the data's own precision
    # --weights, --offset, --exposure: read as trailing columns of the features
    carried: Carried = NOTHING_CARRIED
    missing: str = "error"  # --missing: what a missing value in a column used does
    categorical: tuple[str, ...] = ()  # --categorical: columns of numbers used as codes
    max_levels: int = MAX_LEVELS  # --max_levels: the most levels a categorical column may have

    @classmethod
    def of(cls, cfg: Config) -> DataSpec:
        """The reader settings of a run's Config."""
        carried = Carried(cfg.weights, cfg.offset, cfg.exposure, cfg.fold_column, cfg.groups)
        return cls(
            cfg.target,
            cfg.feature_columns,
            cfg.dtype,
            carried,
            cfg.missing,
            cfg.categorical_columns,
            cfg.max_levels,
        )


def numbered_columns(num_features: int) -> list[str]:
    """How messages name unnamed columns: the features' then the target's, by position."""
    return [f"column {j}" for j in range(num_features + 1)]


@dataclass(frozen=True)
class TableReader:
    """A format every rank reads its own rows of: open(files, spec) is its Table, of which
    nothing is read yet but headers and footers."""

    open: Callable[[list[Path], DataSpec], Table]
    named_columns: bool = False  # --target, --features and the carried columns name columns
    # --weights, --offset, --exposure name arrays of the file beside X and y (.npz)
    named_arrays: bool = False
    several_files: bool = True  # a dataset may be a directory or glob of such files
    # Read by parts far larger than a row (Parquet's row groups): runs of whole batches keep
    # each rank to its own parts.
    whole_batches: bool = False
    labels: Callable[[int], list[str]] = numbered_columns  # for unnamed columns
    note: str = ""  # what the unknown-format message says about it
    # open(files, spec) by the ranks together (job: their collectives), each reading its share
    # of what every rank needs (a Parquet file's levels); the only one that takes
    # --missing drop: without the rows that hold a missing value in a used column, the same
    # rows at any rank count. None: each rank opens alone, and --missing drop is refused
    open_ranked: Callable[[list[Path], DataSpec, Job | None], Table] | None = None


@dataclass(frozen=True)
class ScatterReader:
    """A format whose shard read_shard(files, cfg, rank, size, job) builds, with collectives."""

    read_shard: Callable[[list[Path], Config, int, int, Job | None], Shard]
    several_files: bool = True
    note: str = ""
