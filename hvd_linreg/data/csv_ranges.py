"""A CSV file cut by bytes, as Hadoop's input splits cut one: every rank takes the records that
start in its 1/size of the data bytes of the files, a record that began before its range being
the previous rank's and one that runs past its end its own. Where a file holds double quotes, a
record ends only at a line break outside a quoted field (RFC 4180), so each rank counts the
quotes ahead of its range (split_quotes: one allgather)."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

from hvd_linreg.data.csv_arrow import count_octets

# A split's bytes: mapped from the file (_csv_lines), or read where quotes decide its cuts
Buffer = bytes | memoryview


def csv_split_text(p: Path, data_start: int, rank: int, size: int) -> str:
    """The lines that start in this rank's byte range of the data, as Hadoop's input splits cut
    a file: the range is 1/size of the bytes after the header; a line that began before it is
    the previous rank's, a line that runs past its end is this rank's. So a rank reads its
    range, plus the header and at most one line past it."""
    return "".join(text for _, text in csv_split_texts([(p, data_start)], rank, size))


def csv_split_texts(
    files: list[tuple[Path, int]], rank: int, size: int, quotes: dict[int, int] | None = None
) -> list[tuple[int, str]]:
    """This rank's lines of CSV files (path, header length) read one after another: the data
    bytes of all the files are cut in size ranges, and each file's part of this rank's range
    is cut at lines as csv_split_text cuts one file. (file index, its lines), by file.

    quotes: for each file that holds a double quote, the quotes in its bytes before this
    rank's part (split_quotes): its parts are then cut at the line breaks outside quoted
    fields (RFC 4180: a quoted field may hold line breaks)."""
    return [
        (i, str(data, "utf-8", "replace")) for i, data in split_bytes(files, rank, size, quotes)
    ]


def split_bytes(
    files: list[tuple[Path, int]], rank: int, size: int, quotes: dict[int, int] | None = None
) -> list[tuple[int, Buffer]]:
    """csv_split_texts' lines as the files' bytes."""
    texts = []
    for i, (p, data_start), lo, hi in _pieces(files, rank, size):
        begin, end = data_start + lo, data_start + hi
        if quotes is not None and i in quotes:
            texts.append((i, _quoted_csv_lines(p, data_start, begin, end, quotes[i])))
        else:
            texts.append((i, _csv_lines(p, data_start, begin, end)))
    return texts


def split_quotes(files: list[tuple[Path, int]], rank: int, size: int, job) -> dict[int, int]:
    """For each file with a double quote in it, the quotes before this rank's part of it: every
    rank counts those of its own part (one more read of it) and one allgather sums them. One
    rank reads the files whole, so no cut is inside a quoted field: nothing to count."""
    if size == 1:
        return {}
    mine = {
        i: _count_quotes(p, data_start + lo, data_start + hi)
        for i, (p, data_start), lo, hi in _pieces(files, rank, size)
    }
    every = job.allgather(mine) if size > 1 else [mine]
    quoted = {i for counts in every for i, n in counts.items() if n}
    return {i: sum(counts.get(i, 0) for counts in every[:rank]) for i in quoted}


def _pieces(files: list[tuple[Path, int]], rank: int, size: int):
    """(file index, (path, header length), lo, hi): the data bytes lo .. hi - 1 of each file
    in this rank's range of all the files' data bytes."""
    lengths = [p.stat().st_size - data_start for p, data_start in files]
    offsets = np.cumsum([0, *lengths])
    begin, end = rank * int(offsets[-1]) // size, (rank + 1) * int(offsets[-1]) // size
    for i, file in enumerate(files):
        lo, hi = max(begin, offsets[i]) - offsets[i], min(end, offsets[i + 1]) - offsets[i]
        if lo < hi:
            yield i, file, int(lo), int(hi)


def _csv_lines(p: Path, data_start: int, begin: int, end: int) -> memoryview:
    """The lines of p that start in its bytes begin .. end - 1 (after the header), mapped
    from the page cache, not copied: a rank's range is read by the parser that reads it."""
    mapped = _mapped(p)
    start = begin
    if begin > data_start:  # past the end of the line that began before the range
        start = _line_end(mapped, begin - 1)
    if start >= end:
        return memoryview(b"")  # the line that began before the range runs past its end
    stop = end if mapped[end - 1] == ord("\n") else _line_end(mapped, end)
    return memoryview(mapped)[start:stop]


def _mapped(p: Path) -> mmap.mmap:
    """p's bytes, mapped read-only and read ahead of the parser (not around each page); p is
    not empty (it has a header)."""
    with open(p, "rb", buffering=0) as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    mapped.madvise(mmap.MADV_SEQUENTIAL)
    return mapped


def _line_end(mapped: mmap.mmap, at: int) -> int:
    """Just past the first line break at or after byte `at`; the file's end if none."""
    found = mapped.find(b"\n", at)
    return len(mapped) if found < 0 else found + 1


def _quoted_csv_lines(p: Path, data_start: int, begin: int, end: int, before: int) -> bytes:
    """The records of p that start in its bytes begin .. end - 1, a record ending at a line
    break outside quotes: after an even number of double quotes since the data's start
    (before: the quotes ahead of begin)."""
    inside = _count_quotes(p, begin, end)
    with open(p, "rb", buffering=0) as f:
        start = begin
        if begin > data_start:  # past the end of the record that began before the range
            f.seek(begin - 1)
            start = _record_end(f, begin - 1, (before - (f.read(1) == b'"')) % 2)
        if start >= end:
            return b""  # no record starts in the range: a quoted field spans it
        f.seek(end - 1)
        last = f.read(1) == b'"'
        stop = _record_end(f, end - 1, (before + inside - last) % 2)
        f.seek(start)
        return f.read(stop - start)


def _record_end(f, at: int, odd: int) -> int:
    """Where the first record end at or after byte `at` of f is: just past a line break that
    follows an even number of quotes (odd: whether the quotes before `at` are odd); or the
    file's end."""
    f.seek(at)
    while chunk := f.read(1 << 20):
        k = 0
        while (line_break := chunk.find(b"\n", k)) >= 0:
            odd ^= chunk.count(b'"', k, line_break) & 1
            if not odd:
                return at + line_break + 1
            k = line_break + 1
        odd ^= chunk.count(b'"', k) & 1
        at += len(chunk)
    return at


def _count_quotes(p: Path, begin: int, end: int) -> int:
    """The double quotes in p's bytes begin .. end - 1."""
    mapped = _mapped(p)
    if mapped.find(b'"', begin, end) < 0:  # at memchr's speed: most files hold no quote
        return 0
    return count_octets(mapped, b'"', begin, end)
