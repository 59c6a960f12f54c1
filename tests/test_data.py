"""The data contract: one global dataset; each rank holds its runs of rows and a piece of the
rest, every step's global batch is the same rows whatever the rank count, and a rank reads only
its rows."""

from __future__ import annotations

import re

import numpy as np
import pytest

from hvd_linreg.config import Config
from hvd_linreg.data import csv_split_text, load_shard, synthetic_rows, true_weights
from hvd_linreg.data.csv_ranges import split_bytes
from hvd_linreg.data.holdout import Holdout, to_owners
from hvd_linreg.data.layout import layout_for
from hvd_linreg.errors import UsageError


@pytest.mark.parametrize("size", [2, 3, 4])
def test_each_rank_holds_every_size_th_row_and_a_piece_of_the_rest(size):
    """Synthetic data, 1003 rows, batch 10 per rank: runs of 1 row, so rank r's SGD rows are
    rows r, r + size, ... below N_sgd = 1003 - 1003 mod size, then a copy of the first 9 of
    them; the rows after N_sgd are cut in consecutive pieces; the ranks hold every row once."""
    cfg = Config(num_samples=1003, num_features=3, batch_size=10)
    whole = load_shard(cfg, 0, 1)
    batched = 1003 - 1003 % size
    tails = []
    for rank in range(size):
        shard = load_shard(cfg, rank, size)
        ids = np.arange(rank, batched, size)
        assert shard.num_train == len(ids)
        held = np.r_[ids, ids[:9]]
        np.testing.assert_array_equal(shard.X[: len(held)], whole.X[held])
        np.testing.assert_array_equal(shard.y[: len(held)], whole.y[held])
        tails.append(shard.y[len(held) :])
    np.testing.assert_array_equal(np.concatenate(tails), whole.y[batched:1003])


@pytest.mark.parametrize("size", [1, 2, 3])
@pytest.mark.parametrize("features, batch", [(3, 10), (2047, 48)])
def test_step_i_uses_global_rows_i_G_on_mod_N_sgd_whatever_the_rank_count(
    tmp_path, size, features, batch
):
    """Row ids as the target: step i's batches (the shard's rows from i*B on, mod n, one slice
    of what it holds), over all ranks, are the global rows (i*G + k) mod N_sgd, k < G. Rows of
    16 KB (2047 float64 features and the target): runs of 16 rows, the smallest divisor of 48
    that reaches 256 KB; N_sgd = 300 - 300 mod (size * 16)."""
    path = tmp_path / "d.npy"
    table = np.zeros((300, features + 1))
    table[:, -1] = np.arange(300)
    np.save(path, table)
    run = 16 if features == 2047 and size > 1 else 1
    batched = 300 - 300 % (size * run)
    shards = [_read(path, rank, size, batch) for rank in range(size)]
    assert {(s.layout.run_length, s.layout.num_batched) for s in shards} == {(run, batched)}
    for step in range(3 * batched // (size * batch) + 2):  # several epochs, batches that wrap
        rows = []
        for shard in shards:
            first = step * batch % shard.num_train
            rows.append(shard.y[first : first + batch])
        G = size * batch
        expected = (step * G + np.arange(G)) % batched
        np.testing.assert_array_equal(np.sort(np.concatenate(rows)), np.sort(expected))


def test_synthetic_data_follows_the_seed_model():
    shard = load_shard(Config(num_samples=20000, num_features=2, batch_size=10), 0, 1)
    A = np.c_[shard.X, np.ones(len(shard.y))]
    coef, *_ = np.linalg.lstsq(A, shard.y, rcond=None)
    np.testing.assert_allclose(coef, [5.0, 2.5, 2.0], atol=0.01)
    assert abs(np.std(shard.y - A @ [5.0, 2.5, 2.0]) - 0.1) < 0.005
    assert shard.w_true == true_weights(2).tolist() and shard.b_true == 2.0


def test_a_synthetic_row_is_the_same_whatever_rows_and_threads_compute_it():
    ids = np.arange(20_000)  # 64 features: chunks of 7943 rows, so three chunks
    X, y = synthetic_rows(7, ids, 64)
    for rows, threads in [(ids[::-1], 1), (ids[1234:], 2), (ids[[17, 9000]], 1), (ids, 3)]:
        X_part, y_part = synthetic_rows(7, rows.copy(), 64, threads=threads)
        np.testing.assert_array_equal(X_part, X[rows])
        np.testing.assert_array_equal(y_part, y[rows])


def test_synthetic_draws_are_independent_standard_normals():
    from scipy import stats

    X, y = synthetic_rows(3, np.arange(200_000), 8)
    noise = (y - X.astype(np.float64) @ true_weights(8) - 2.0) / 0.1
    draws = np.c_[X, noise]  # 9 draws a row: both halves of Box-Muller's pairs, and a lone one
    for column in draws.T:
        # 0.005: about 1.7 times the 5 % critical value of the KS statistic at this size
        assert stats.kstest(column, "norm").statistic < 0.005
    correlation = np.corrcoef(draws, rowvar=False) - np.eye(9)
    assert np.abs(correlation).max() < 0.01  # the standard error is 0.0022


def test_different_seeds_give_different_data():
    a = load_shard(Config(seed=1, batch_size=10), 0, 1)
    b = load_shard(Config(seed=2, batch_size=10), 0, 1)
    assert not np.array_equal(a.X, b.X)


@pytest.mark.parametrize("size", [2, 3])
def test_without_batches_each_rank_holds_a_consecutive_piece(tmp_path, size):
    """--solver exact takes no batch: every row is left over, cut into consecutive pieces,
    rank r's the rows r N / s .. (r + 1) N / s - 1, in memory and read as used."""
    table = np.random.default_rng(3).standard_normal((1003, 4))
    path = tmp_path / "d.npy"
    np.save(path, table)
    cfg = Config(data=str(path), solver="exact")
    for rank in range(size):
        rows = slice(rank * 1003 // size, (rank + 1) * 1003 // size)
        shard = load_shard(cfg, rank, size)
        assert shard.num_train == 0 and shard.layout.global_row(0) == rows.start
        np.testing.assert_array_equal(shard.X, table[rows, :-1])
        np.testing.assert_array_equal(shard.y, table[rows, -1])


def test_without_batches_rows_that_come_cut_stay_with_their_rank():
    """A CSV's records stay with the rank that parsed them, the rows given to fit() with the
    rank that gave them: the pieces are the ranks' counts, and no row is sent (no job is
    needed). A rank with no rows, or SGD, cuts as before."""
    layout = layout_for(10, 1, 3, 2, batched=False, counts=[5, 2, 3])
    np.testing.assert_array_equal(layout.rows(), [5, 6])
    np.testing.assert_array_equal(layout.owners(np.arange(10)), [0] * 5 + [1] * 2 + [2] * 3)
    rows = np.arange(14.0).reshape(2, 7)
    holdout = Holdout.of(Config(solver="exact"), 10)
    table, validation = to_owners(rows, 5, holdout, layout, None)
    assert table is rows and validation is None
    assert layout_for(10, 1, 3, 2, batched=False, counts=[7, 0, 3]).pieces is None
    np.testing.assert_array_equal(
        layout_for(12, 1, 3, 2, counts=[5, 4, 3]).rows()[:4], [1, 4, 7, 10]
    )


def test_rows_beyond_the_last_whole_stride_of_runs_are_in_no_batch_but_held():
    shard = load_shard(Config(num_samples=1003, batch_size=10), 1, 4)
    assert (shard.num_samples, shard.layout.num_batched, shard.num_train) == (1003, 1000, 250)
    assert len(shard.y) == 250 + 9 + 1  # a copy of its first 9; its piece of the last 3: 1000


@pytest.fixture
def table():
    rng = np.random.default_rng(0)
    return rng.standard_normal((11, 3)).astype(np.float32)


def _read(path, rank=0, size=1, batch_size=1, target=None):
    return load_shard(Config(data=str(path), batch_size=batch_size, target=target), rank, size)


def test_npy_last_column_is_the_target(tmp_path, table):
    """11 rows, 3 ranks, batch 1: rank 1 holds rows 1, 4, 7 and row 9 of the last two."""
    path = tmp_path / "d.npy"
    np.save(path, table)
    shard = _read(path, 1, 3)
    assert shard.num_samples == 11
    np.testing.assert_array_equal(shard.X, table[[1, 4, 7, 9], :2])
    np.testing.assert_array_equal(shard.y, table[[1, 4, 7, 9], 2])


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_reads_X_and_y(tmp_path, table, compressed):
    path = tmp_path / "d.npz"
    (np.savez_compressed if compressed else np.savez)(path, X=table[:, :2], y=table[:, 2])
    shard = _read(path, 2, 4)  # rows 2, 6, and row 9 of the last three
    np.testing.assert_array_equal(shard.X, table[[2, 6, 9], :2])
    np.testing.assert_array_equal(shard.y, table[[2, 6, 9], 2])


def test_csv_target_by_name(tmp_path, table):
    path = tmp_path / "d.csv"
    lines = ["a,price,c"] + [",".join(repr(float(v)) for v in row) for row in table] + [""]
    path.write_text("\n".join(lines))
    shard = _read(path, target="price")
    assert shard.num_samples == 11
    np.testing.assert_allclose(shard.y, table[:, 1])
    np.testing.assert_allclose(shard.X, table[:, [0, 2]])


def test_batch_larger_than_a_shard_is_refused():
    with pytest.raises(UsageError, match="larger than each rank's shard of 250 rows"):
        load_shard(Config(num_samples=1000, batch_size=300), 0, 4)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npz_members_of_every_npy_format_version_are_read(tmp_path, version):
    """Uncompressed members are memory-mapped through NumPy's public header readers (1.0,
    2.0); a 3.0 member, which has none, is read whole. Either way rank 1 gets rows 1, 3, ..."""
    import zipfile

    X = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10, dtype=np.float32) * 3
    path = tmp_path / "data.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name, array in (("X", X), ("y", y)):
            with z.open(f"{name}.npy", "w") as member:
                np.lib.format.write_array(member, array, version=version)
    shard = _read(path, 1, 2)
    assert shard.num_samples == 10
    np.testing.assert_array_equal(shard.X, X[1::2])
    np.testing.assert_array_equal(shard.y, y[1::2])


@pytest.mark.parametrize("shape", [(12,), (12, 1), (3, 4, 2)])
def test_npy_of_another_shape_is_refused(tmp_path, shape):
    path = tmp_path / "d.npy"
    np.save(path, np.zeros(shape, np.float32))
    with pytest.raises(
        UsageError,
        match=re.escape(f"must hold a 2-D array (rows, features + target), got shape {shape}"),
    ):
        _read(path)


def test_target_on_a_file_that_is_not_csv_is_refused(tmp_path, table):
    path = tmp_path / "d.npz"
    np.savez(path, X=table[:, :2], y=table[:, 2])
    with pytest.raises(
        UsageError,
        match="--target names columns of a CSV or Parquet file; it does not apply to .npz",
    ):
        _read(path, target="price")


def test_csv_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,2\n\n3,4\n  ,  \n5,6\n\n")
    shard = _read(path)
    assert shard.num_samples == 3
    np.testing.assert_array_equal(shard.X[:, 0], [1, 3, 5])
    np.testing.assert_array_equal(shard.y, [2, 4, 6])


def test_csv_errors_name_the_file_line_counting_blank_lines(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,2\n\n3,4\n\n5,x\n")
    with pytest.raises(UsageError, match=re.escape(f"{path} line 6: 'x' is not a number")):
        _read(path)


def test_csv_columns_the_run_does_not_use_are_not_parsed(tmp_path):
    """An ID and a free-text column (quoted, with a comma) beside the features: only the
    columns the run uses are parsed. A target of words is read as its levels (a yes/no
    target's: test_first_contact.py), which a least-squares run refuses, naming them."""
    path = tmp_path / "d.csv"
    path.write_text('id,x,note,z,y\nr1,1,"Doe, J.",2,3\nr2,4,n/a,5,6\nr3,7,,8,9\n')
    cfg = Config(data=str(path), target="y", features="x,z", batch_size=1)
    shard = load_shard(cfg, 0, 1)
    np.testing.assert_array_equal(shard.X, [[1, 2], [4, 5], [7, 8]])
    np.testing.assert_array_equal(shard.y, [3, 6, 9])
    assert shard.feature_names == ("x", "z")
    words = load_shard(Config(data=str(path), target="id", features="x,z", batch_size=1), 0, 1)
    assert words.target_levels == ["r1", "r2", "r3"]
    np.testing.assert_array_equal(words.y, [0, 1, 2])
    from hvd_linreg.cli import main

    assert main(["--data", str(path), "--target", "id", "--features", "x,z", "--solver",
                 "exact"]) == 2  # fmt: skip


def _rchar() -> int:
    """Bytes this process has read through read() calls so far (the .npy reader reads so)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def _where(view: memoryview) -> tuple[int, int]:
    """The file bytes [start, stop) a rank's lines are: the view is a slice of the file's
    mapping, so its address less the mapping's is its offset."""
    start = (
        np.frombuffer(view, np.uint8).ctypes.data - np.frombuffer(view.obj, np.uint8).ctypes.data
    )
    return start, start + len(view)


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_csv_byte_ranges_cut_at_lines_and_each_rank_reads_about_its_share(tmp_path, size):
    """The ranks' lines are the file's data lines, each once, in order; what a rank parses is
    the file's bytes from at most a line before its 1/size of the data to at most a line past
    it (the mapping's pages outside it are never touched)."""
    path = tmp_path / "d.csv"
    lines = [f"{i},{i * 0.5:.{i % 7}f},{-i}\n" for i in range(5000)]
    path.write_text("a,b,c\n" + "".join(lines))
    data_bytes, longest = path.stat().st_size - 6, max(len(line) for line in lines)
    texts, ends = [], []
    for rank in range(size):
        texts.append(csv_split_text(path, 6, rank, size))
        [(_, view)] = split_bytes([(path, 6)], rank, size)
        start, stop = _where(view)
        lo, hi = 6 + rank * data_bytes // size, 6 + (rank + 1) * data_bytes // size
        assert lo <= start < lo + longest and hi <= stop < hi + longest
        assert bytes(view) == texts[-1].encode()
        ends.append((start, stop))
    assert "".join(texts) == "".join(lines)
    assert all(a[1] == b[0] for a, b in zip(ends, ends[1:]))


def test_a_shard_larger_than_the_rank_s_memory_is_read_as_used(tmp_path, monkeypatch):
    """Above half the memory a rank may use, only the first run is read at start; the blocks
    read as used are the rows the shard would hold in memory, each once."""
    path = tmp_path / "d.npy"
    np.save(path, np.random.default_rng(5).standard_normal((1003, 4)).astype(np.float32))
    cfg = Config(data=str(path), batch_size=10)
    in_memory = load_shard(cfg, 1, 4)
    monkeypatch.setenv("HVD_LINREG_RANK_MEMORY", "1000")
    streamed = load_shard(cfg, 1, 4)
    assert in_memory.table is None and streamed.table is not None
    assert len(streamed.y) == 1  # its first run, of 1 row
    blocks = list(streamed.blocks(max_rows=40))
    assert len(blocks) > 2
    held = in_memory.layout.held_positions()
    each_once = np.unique(held, return_index=True)[1]  # positions in held order, first copy
    np.testing.assert_array_equal(np.concatenate([b.X for b in blocks]), in_memory.X[each_once])
    np.testing.assert_array_equal(np.concatenate([b.y for b in blocks]), in_memory.y[each_once])
    assert [len(b.y) for b in in_memory.blocks(max_rows=40)] == [len(b.y) for b in blocks]


def test_a_bad_row_is_found_in_a_shard_read_as_used(tmp_path, monkeypatch):
    table = np.ones((1003, 3), np.float32)
    table[777, 1] = np.nan  # global row 777: rank 1's (runs of 1 row: 777 % 4 = 1)
    path = tmp_path / "d.npy"
    np.save(path, table)
    monkeypatch.setenv("HVD_LINREG_RANK_MEMORY", "1000")
    with pytest.raises(UsageError, match=re.escape("d.npy row 777: NaN or inf in")):
        load_shard(Config(data=str(path), batch_size=10), 1, 4)


def test_each_rank_reads_its_runs_alone_when_they_are_256_kb_or_more(tmp_path):
    """Runs of 1024 rows x 260 bytes: a rank reads (pread) its two runs and its piece of the
    100 rows after them, a quarter of the file, plus headers and /proc files."""
    table = np.random.default_rng(1).standard_normal((2 * 4096 + 100, 65)).astype(np.float32)
    path = tmp_path / "d.npy"
    np.save(path, table)
    for rank in range(4):
        before = _rchar()
        shard = _read(path, rank, 4, batch_size=1024)
        read = _rchar() - before
        runs = [np.arange(1024) + c + 1024 * rank for c in (0, 4096)]
        ids = np.concatenate([*runs, np.arange(25) + 8192 + 25 * rank])
        np.testing.assert_array_equal(shard.X, table[ids, :-1])
        np.testing.assert_array_equal(shard.y, table[ids, -1])
        assert read <= path.stat().st_size / 4 + 8192


@pytest.mark.parametrize("size", [2, 3])
def test_runs_shorter_than_the_batch_are_read_alone_and_their_copy_is_not_read(tmp_path, size):
    """Rows of 520 bytes at batch 1024: runs of 512 rows (266 KB), and a rank reads its runs
    and its piece of the rest, 1/size of the file: at 2 ranks its first 512 rows, held twice
    (batches wrap around its 1536), are copied, not read again."""
    table = np.random.default_rng(2).standard_normal((3372, 65))
    path = tmp_path / "d.npy"
    np.save(path, table)
    batched = 3072  # 3372 - 3372 mod (size * 512)
    for rank in range(size):
        before = _rchar()
        shard = _read(path, rank, size, batch_size=1024)
        read = _rchar() - before
        assert shard.layout.run_length == 512 and shard.layout.num_batched == batched
        ids = np.flatnonzero(np.arange(batched) // 512 % size == rank)
        tail = np.array_split(np.arange(batched, 3372), size)[rank]
        held = np.r_[ids, ids[:512], tail]
        np.testing.assert_array_equal(shard.X, table[held, :-1])
        np.testing.assert_array_equal(shard.y, table[held, -1])
        assert read <= path.stat().st_size / size + 8192
