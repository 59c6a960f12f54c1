"""The files --data names, and the reader of each format (READERS)."""

from __future__ import annotations

import glob
from pathlib import Path

from hvd_linreg.data.csv import CSV
from hvd_linreg.data.npy import NPY, NPZ
from hvd_linreg.data.parquet import PARQUET
from hvd_linreg.data.spec import DataSpec, ScatterReader, TableReader
from hvd_linreg.data.svmlight import SUFFIXES, SVMLIGHT
from hvd_linreg.data.table import Table
from hvd_linreg.errors import UsageError

# The readers, by file name suffix: adding a format is one module that declares a reader, and
# its entry here. The two kinds (hvd_linreg.data.spec): a TableReader opens the files as a
# Table that every rank reads its own rows of; a ScatterReader builds the shard itself, each
# rank parsing its byte range and the ranks trading rows by collectives.
READERS: dict[str, TableReader | ScatterReader] = {
    ".npy": NPY,
    ".npz": NPZ,
    ".csv": CSV,
    ".parquet": PARQUET,
    **{suffix + gz: SVMLIGHT for suffix in SUFFIXES for gz in ("", ".gz")},
}


def format_of(path: Path) -> str:
    """A file's format, by the suffix READERS knows it by: .svm.gz for a gzip'd libsvm file."""
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes and suffixes[-1] == ".gz":
        return "".join(suffixes)
    return path.suffix.lower()


def open_table(files: list[Path], spec: DataSpec) -> Table:
    """The files' rows, one file after another, to be read by ranges (nothing is read yet but
    headers and footers)."""
    suffix = format_of(files[0])
    reader = READERS.get(suffix)
    if not isinstance(reader, TableReader):
        known = [f"{name} {known.note}".strip() for name, known in READERS.items()]
        raise UsageError(
            f"{files[0]}: unknown data format {suffix or '(no extension)'}; use {_either(known)}"
        )
    return reader.open(files, spec)


def data_files(data: str) -> list[Path]:
    """The files --data names: one file; or a directory's files, or a glob's matches, sorted by
    path, all of one format. Names starting with . or _ are skipped (Spark's _SUCCESS, the
    .crc checksums beside its parts)."""
    p = Path(data)
    if p.is_dir():
        files = [f for f in p.iterdir() if not f.name.startswith((".", "_"))]
        if not files:
            raise UsageError(f"data directory {data} holds no data files")
    elif p.exists() or not any(c in data for c in "*?["):
        if not p.exists():
            raise UsageError(f"data file {data} does not exist")
        if not p.is_file():
            raise UsageError(f"data path {data} is not a file")
        return [p]
    else:
        files = [Path(f) for f in glob.glob(data) if not Path(f).name.startswith((".", "_"))]
        if not files:
            raise UsageError(f"--data {data} matches no file")
    files.sort(key=str)
    for f in files:
        if not f.is_file():
            raise UsageError(f"{f} is not a file: --data {data} reads files, not sub-directories")
    formats = {}
    for f in files:
        formats.setdefault(format_of(f), f)
    several = [  # a gzip'd format by its plain suffix
        suffix
        for suffix, reader in READERS.items()
        if reader.several_files and not suffix.endswith(".gz")
    ]
    if len(formats) > 1:
        raise UsageError(
            f"--data {data} mixes formats ({', '.join(map(str, formats.values()))}): the files "
            f"of one dataset must be {_either(['all ' + suffix for suffix in several])}"
        )
    if len(files) > 1 and format_of(files[0]) not in several:
        raise UsageError(
            f"--data {data}: a dataset of several files reads {_either(several)} files, "
            f"not {files[0].suffix or '(no extension)'} ({files[0]})"
        )
    return files


def _either(items: list[str]) -> str:
    """'a, b or c'."""
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else "".join(items)
