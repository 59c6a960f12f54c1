"""The data contract: one global dataset, sharded by stride, read only where owned."""

from __future__ import annotations

import re

import numpy as np
import pytest

from hvd_linreg.config import Config, UsageError
from hvd_linreg.data import load_shard, read_rows, true_weights


@pytest.mark.parametrize("size", [2, 3, 4])
def test_synthetic_shards_interleave_into_the_one_rank_dataset(size):
    cfg = Config(num_samples=1000, num_features=3, batch_size=10)
    whole = load_shard(cfg, 0, 1)
    used = 1000 // size * size
    for rank in range(size):
        shard = load_shard(cfg, rank, size)
        np.testing.assert_array_equal(shard.X, whole.X[rank:used:size])
        np.testing.assert_array_equal(shard.y, whole.y[rank:used:size])


def test_synthetic_data_follows_the_seed_model():
    shard = load_shard(Config(num_samples=20000, num_features=2, batch_size=10), 0, 1)
    A = np.c_[shard.X, np.ones(len(shard.y))]
    coef, *_ = np.linalg.lstsq(A, shard.y, rcond=None)
    np.testing.assert_allclose(coef, [5.0, 2.5, 2.0], atol=0.01)
    assert abs(np.std(shard.y - A @ [5.0, 2.5, 2.0]) - 0.1) < 0.005
    assert shard.w_true == true_weights(2).tolist() and shard.b_true == 2.0


def test_different_seeds_give_different_data():
    a = load_shard(Config(seed=1, batch_size=10), 0, 1)
    b = load_shard(Config(seed=2, batch_size=10), 0, 1)
    assert not np.array_equal(a.X, b.X)


def test_rows_beyond_a_multiple_of_the_ranks_are_dropped():
    shard = load_shard(Config(num_samples=1003, batch_size=10), 1, 4)
    assert (shard.num_samples, shard.num_dropped, len(shard.y)) == (1000, 3, 250)


@pytest.fixture
def table():
    rng = np.random.default_rng(0)
    return rng.standard_normal((11, 3)).astype(np.float32)


def test_npy_last_column_is_the_target(tmp_path, table):
    path = tmp_path / "d.npy"
    np.save(path, table)
    X, y, n = read_rows(str(path), None, 1, 3)
    assert n == 11
    np.testing.assert_array_equal(X, table[1::3, :2])
    np.testing.assert_array_equal(y, table[1::3, 2])


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_reads_X_and_y(tmp_path, table, compressed):
    path = tmp_path / "d.npz"
    (np.savez_compressed if compressed else np.savez)(path, X=table[:, :2], y=table[:, 2])
    X, y, n = read_rows(str(path), None, 2, 4)
    np.testing.assert_array_equal(X, table[2::4, :2])
    np.testing.assert_array_equal(y, table[2::4, 2])


def test_csv_target_by_name(tmp_path, table):
    path = tmp_path / "d.csv"
    lines = ["a,price,c"] + [",".join(repr(float(v)) for v in row) for row in table] + [""]
    path.write_text("\n".join(lines))
    X, y, n = read_rows(str(path), "price", 0, 2)
    assert n == 11
    np.testing.assert_allclose(y, table[0::2, 1])
    np.testing.assert_allclose(X, table[0::2][:, [0, 2]])


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
    X1, y1, rows = read_rows(str(path), None, 1, 2)
    assert rows == 10
    np.testing.assert_array_equal(X1, X[1::2])
    np.testing.assert_array_equal(y1, y[1::2])


@pytest.mark.parametrize("shape", [(12,), (12, 1), (3, 4, 2)])
def test_npy_of_another_shape_is_refused(tmp_path, shape):
    path = tmp_path / "d.npy"
    np.save(path, np.zeros(shape, np.float32))
    with pytest.raises(
        UsageError,
        match=re.escape(f"must hold a 2-D array (rows, features + target), got shape {shape}"),
    ):
        read_rows(str(path), None, 0, 1)


def test_target_on_a_file_that_is_not_csv_is_refused(tmp_path, table):
    path = tmp_path / "d.npz"
    np.savez(path, X=table[:, :2], y=table[:, 2])
    with pytest.raises(UsageError, match="--target names a CSV column; it does not apply to .npz"):
        read_rows(str(path), "price", 0, 1)


def test_csv_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,2\n\n3,4\n  ,  \n5,6\n\n")
    X, y, n = read_rows(str(path), None, 0, 1)
    assert n == 3
    np.testing.assert_array_equal(X[:, 0], [1, 3, 5])
    np.testing.assert_array_equal(y, [2, 4, 6])


def test_csv_errors_name_the_file_line_counting_blank_lines(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,2\n\n3,4\n\n5,x\n")
    with pytest.raises(UsageError, match=re.escape(f"{path} line 6: 'x' is not a number")):
        read_rows(str(path), None, 0, 1)
