"""libsvm (svmlight) files: a row a line, `label index:value index:value ...`, the indices
increasing, `# comments` and `qid:` passed over; gzip'd too (`.svm.gz`). The rows are sparse:
the shard holds them as a CSR design matrix (matrix/sparse.py) and only the exact solvers take
them.

Each rank parses the lines that start in its byte range of the files (scikit-learn's
load_svmlight_file, by offset and length), and keeps them: no row moves. Whether the indices
start at 0 or 1 (--index_base; auto: 0 where any line holds index 0) and the number of features
(the largest index) are agreed by the ranks in one allgather, so every rank's matrix has the
dataset's columns. A line the parser refuses is found again in Python and named by its file
and line."""

from __future__ import annotations

import gzip
import itertools
import os
import struct
from pathlib import Path

import numpy as np

from hvd_linreg.config import Config
from hvd_linreg.data.layout import layout_for
from hvd_linreg.data.rows import NOTHING_CARRIED
from hvd_linreg.data.shard import Shard
from hvd_linreg.data.spec import ScatterReader
from hvd_linreg.errors import UsageError
from hvd_linreg.matrix import SparseMatrix
from hvd_linreg.runtime.ranks import Job

SUFFIXES = (".svm", ".libsvm", ".svmlight")
# Bytes read at a time to count the lines before a range, to name a line the parser refuses
_COUNT_BYTES = 1 << 24
# The most features a libsvm file may have: its indices are read as 32-bit integers
_MOST_FEATURES = (1 << 31) - 1


def length(path: Path) -> int:
    """The bytes of the file's text: a gzip file's from its trailer (one member, under 4 GiB)."""
    if path.suffix.lower() != ".gz":
        return path.stat().st_size
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        (text,) = struct.unpack("<I", f.read(4))
    if text < size:  # text compresses: fewer text bytes than gzip's means a trailer wrapped
        raise UsageError(
            f"{path}: a gzip'd libsvm file is read by byte ranges of its text, whose length "
            "its trailer holds only below 4 GiB: split it into smaller files, or decompress it"
        )
    return text


def _ranges(files: list[Path], rank: int, size: int) -> list[tuple[Path, int, int]]:
    """This rank's (file, offset, length) of the files' text taken as one, cut in size equal
    ranges: a line belongs to the range it starts in."""
    lengths = [length(f) for f in files]
    total = sum(lengths)
    start, stop = total * rank // size, total * (rank + 1) // size
    out, at = [], 0
    for f, n in zip(files, lengths):
        a, b = max(start, at), min(stop, at + n)
        if a < b:
            out.append((f, a - at, b - a))
        at += n
    return out


def _parse(path: Path, offset: int, count: int):
    """The lines starting in path's bytes offset .. offset + count: (X as CSR with the indices
    as written, y); UsageError naming the line the parser refuses."""
    from sklearn.datasets import load_svmlight_file

    try:  # a range's columns are known only once every rank has read its own: the most
        X, y = load_svmlight_file(
            str(path),
            n_features=_MOST_FEATURES,
            zero_based=True,
            offset=offset,
            length=count,
            dtype=np.float64,
        )
    except (ValueError, RuntimeError) as e:
        raise UsageError(_bad_line(path, offset, count, str(e))) from None
    width = int(X.indices.max()) + 1 if X.nnz else 0
    return X[:, :width] if width else X[:, :0], y


def _bad_line(path: Path, offset: int, count: int, why: str) -> str:
    """What is wrong with the first line the parser refuses, by its line number in the file."""
    for line, text in _lines(path, offset):
        problem = _line_problem(text)
        if problem:
            return f"{path} line {line}: {problem}"
    return f"{path}: not a libsvm file ({why})"


def _row_line(path: Path, offset: int, nth: int) -> str:
    """How a message names the nth row (from 0) of the range that starts at byte offset: its
    line in the file, blank and comment lines counted as an editor counts them."""
    rows = (line for line, text in _lines(path, offset) if text.split(b"#", 1)[0].split())
    return f"{path} line {next(itertools.islice(rows, nth, None))}"


def _lines(path: Path, offset: int):
    """(line number, text) of the lines that start at or after byte offset: the file read
    once more, as only a run that stops does."""
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rb") as f:
        line, read = 1, 0
        while read < offset:  # the lines before this range
            chunk = f.read(min(_COUNT_BYTES, offset - read))
            line, read = line + chunk.count(b"\n"), read + len(chunk)
        if offset:  # the range starts after the line it is inside of
            line += 1
            f.readline()
        for text in iter(f.readline, b""):
            yield line, text
            line += 1


def _line_problem(text: bytes) -> str | None:
    """What is wrong with one line of a libsvm file, or None."""
    body = text.split(b"#", 1)[0].split()
    if not body:
        return None
    try:
        float(body[0])
    except ValueError:
        return f"the label {body[0].decode(errors='replace')!r} is not a number"
    previous = -1
    for token in body[1:]:
        index, _, value = token.partition(b":")
        if index == b"qid":
            continue
        word = token.decode(errors="replace")
        try:
            number = int(index)
            float(value)
        except ValueError:
            return f"{word!r} is not index:value (a whole index, a number)"
        if number < 0 or number <= previous:
            return f"{word!r}: the indices must be increasing and not negative"
        previous = number
    return None


def read_svmlight_shard(
    files: list[Path], cfg: Config, rank: int, size: int, job: Job | None
) -> Shard:
    """This rank's rows of the libsvm files, kept where they are read."""
    why = _refused(cfg)
    if why:
        raise UsageError(why)
    error, parts = None, []
    try:
        parts = [_parse(f, a, n) for f, a, n in _ranges(files, rank, size)]
    except UsageError as e:
        error = e
    if job is not None:
        job.agree(error)
    elif error is not None:
        raise error
    from scipy import sparse

    X = sparse.vstack([x for x, _ in parts], format="csr") if parts else sparse.csr_matrix((0, 0))
    y = np.concatenate([t for _, t in parts]) if parts else np.zeros(0)
    lowest = int(X.indices.min()) if X.nnz else None
    mine = (X.shape[0], X.shape[1], lowest)
    every = job.allgather(mine, name="svmlight_rows") if job is not None and size > 1 else [mine]
    counts = [n for n, _, _ in every]
    if min(counts) == 0:
        raise UsageError(
            f"{cfg.data} has too few lines for {size} ranks: rank {counts.index(0)} read none"
        )
    base = _base(cfg.index_base, [low for _, _, low in every if low is not None], cfg.data)
    width = max(w for _, w, _ in every)
    X.resize((X.shape[0], max(width, 1)))
    X = X[:, base:] if base else X
    layout = layout_for(sum(counts), rank, size, cfg.batch_size, batched=False, counts=counts)
    dtype = cfg.dtype or "float64"
    names = tuple(f"x{j + base}" for j in range(X.shape[1]))
    ranges = _ranges(files, rank, size)
    starts = np.cumsum([0, *(x.shape[0] for x, _ in parts)])

    def row_name(local: int) -> str:
        k = int(np.searchsorted(starts, local, "right")) - 1
        return _row_line(ranges[k][0], ranges[k][1], local - int(starts[k]))

    return Shard(
        SparseMatrix(X.astype(dtype)),
        y.astype(dtype),
        layout,
        cfg.data,
        feature_names=names,
        target_name="label",
        carried_columns=NOTHING_CARRIED,
        where=row_name,
    )


def _base(setting: str, lowest: list[int], data: str) -> int:
    """The index of the first feature: --index_base, or (auto) 0 where some line holds index
    0, else 1; a 1-based file with index 0 is refused."""
    low = min(lowest, default=1)
    if setting == "auto":
        return 0 if low == 0 else 1
    if setting == "1" and low == 0:
        raise UsageError(f"{data} holds index 0, which --index_base 1 has no feature for")
    return int(setting)


def _refused(cfg: Config) -> str | None:
    """Why a run with these settings does not read a libsvm file (None: it does)."""
    if cfg.solver == "sgd":
        return (
            f"{cfg.data} is a libsvm file, whose sparse rows --solver exact fits: SGD's batches "
            "would be their dense rows"
        )
    if cfg.validation_fraction:
        return (
            f"--validation_fraction does not take a libsvm file ({cfg.data}): its rows stay "
            "where they are read; hold out a file of its own and score it with evaluate"
        )
    for flag in COLUMN_FLAGS:
        if getattr(cfg, flag) is not None:
            return (
                f"--{flag} names a column, and a libsvm file ({cfg.data}) has none: its target "
                "is each line's label, its features its indices"
            )
    return None


# The settings that name a file's columns
COLUMN_FLAGS = (
    "target",
    "features",
    "categorical",
    "weights",
    "offset",
    "exposure",
    "fold_column",
    "groups",
)


SVMLIGHT = ScatterReader(read_svmlight_shard, note="(libsvm: label index:value ...)")
