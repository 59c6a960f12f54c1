"""Usage errors that no other test reaches: each ends the tool with exit code 2 and its one
`hvd-linreg: error:` line, without a traceback (run in this process through cli.main)."""

from __future__ import annotations

import json
import os
import shutil
import socket

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import refused
from hvd_linreg.cli import main
from hvd_linreg.data import load
from hvd_linreg.model_file import predict

METADATA = "assets.extra/hvd_linreg.json"


def _text(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _classes(num_rows: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Two features and a 0/1 target drawn from a logistic model: not separable."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((num_rows, 2))
    y = (rng.random(num_rows) < 1 / (1 + np.exp(-(X @ [1.0, -1.0])))).astype(np.float64)
    return X, y


def _csv(path, names: list[str], rows) -> str:
    lines = [",".join(names)] + [",".join(repr(float(v)) for v in row) for row in rows]
    return _text(path, "\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A logistic model exported after a short SGD run on a CSV file of columns a, b and t:
    it names its features and its target. The one training of this file."""
    where = tmp_path_factory.mktemp("model")
    X, y = _classes(40)
    data = _csv(where / "train.csv", ["a", "b", "t"], np.c_[X, y])
    args = ["--model", "logistic", "--data", data, "--num_steps", "20", "--batch_size", "8"]
    args += ["--optimality_gap", "never", "--quiet", "--export", str(where / "model")]
    assert main(args) == 0
    return str(where / "model")


def _predict(model: str, data, tmp_path) -> list[str]:
    return ["predict", "--model", model, "--data", str(data), "--out", str(tmp_path / "p.npy")]


# The flags and the config file


def test_a_config_file_that_cannot_be_read_is_refused(tmp_path, capsys):
    path = tmp_path / "none.toml"
    assert refused(capsys, ["--config", str(path)]) == (
        f"cannot read --config {path}: No such file or directory"
    )


def test_a_negative_seed_is_refused(capsys):
    assert refused(capsys, ["--seed", "-1"]) == "--seed must be a whole number >= 0, got -1"


def test_a_target_column_without_a_data_file_is_refused(capsys):
    assert refused(capsys, ["--target", "y"]) == (
        "--target names columns of a CSV or Parquet file, so it needs --data"
    )


# Data files


def test_a_csv_file_of_one_column_is_refused(tmp_path, capsys):
    data = _text(tmp_path / "d.csv", "y\n1\n2\n3\n")
    assert refused(capsys, ["--data", data]) == (
        f"{data} has one column; it needs at least one feature and a target"
    )


def test_csv_files_with_their_columns_in_another_order_are_refused(tmp_path, capsys):
    parts = tmp_path / "parts"
    parts.mkdir()
    _text(parts / "a.csv", "x,y\n1,2\n")
    _text(parts / "b.csv", "y,x\n2,1\n")
    assert refused(capsys, ["--data", str(parts)]) == (
        f"{parts / 'b.csv'} has its columns in another order; the files of one dataset need "
        f"the same columns ({parts / 'a.csv'}: x, y)"
    )


def test_a_csv_file_with_a_header_and_no_rows_is_refused(tmp_path, capsys):
    data = _text(tmp_path / "d.csv", "a,b\n")
    assert refused(capsys, ["--data", data]) == f"{data} has a header but no data rows"


def test_a_socket_given_as_the_data_file_is_refused(tmp_path, capsys):
    # A socket, not a FIFO: were the check gone, opening a FIFO would wait for a writer for
    # ever, where opening a socket fails at once.
    path = tmp_path / "d.npy"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert refused(capsys, ["--data", str(path)]) == f"data path {path} is not a file"


def test_a_directory_of_several_npz_files_is_refused(tmp_path, capsys):
    parts = tmp_path / "parts"
    parts.mkdir()
    for name in ("a.npz", "b.npz"):
        np.savez(parts / name, X=np.zeros((4, 2)), y=np.zeros(4))
    assert refused(capsys, ["--data", str(parts)]) == (
        f"--data {parts}: a dataset of several files reads .npy, .csv, .parquet, .svm, .libsvm "
        "or .svmlight files, "
        f"not .npz ({parts / 'a.npz'})"
    )


def test_an_npy_file_of_strings_is_refused(tmp_path, capsys):
    data = tmp_path / "d.npy"
    np.save(data, np.array([["1", "2"], ["3", "4"]]))
    assert refused(capsys, ["--data", str(data)]) == (
        f"{data}: arrays must be numeric, got dtype <U1"
    )


def _after_the_header_is_read(monkeypatch, module, change) -> None:
    """change(path) runs right after the tool read the data file's header, as another process
    might change the file while the job starts: the rows are read after it."""
    real = module.open_table

    def open_then_change(files, spec):
        table = real(files, spec)
        change(files[0])
        return table

    monkeypatch.setattr(module, "open_table", open_then_change)


def _truncate(path) -> None:
    os.truncate(path, os.path.getsize(path) // 2)


def test_an_npy_file_truncated_after_its_header_was_read_is_refused(tmp_path, capsys, monkeypatch):
    data = tmp_path / "d.npy"
    np.save(data, np.ones((20, 3)))
    _after_the_header_is_read(monkeypatch, load, _truncate)
    assert refused(capsys, ["--data", str(data), "--batch_size", "5"]) == (
        f"{data} ends before its array does (truncated?)"
    )


def test_an_npy_file_removed_after_its_header_was_read_is_refused(tmp_path, capsys, monkeypatch):
    data = tmp_path / "d.npy"
    np.save(data, np.ones((20, 3)))
    _after_the_header_is_read(monkeypatch, load, os.remove)
    assert refused(capsys, ["--data", str(data), "--batch_size", "5"]) == (
        f"cannot read {data}: [Errno 2] No such file or directory: '{data}'"
    )


def _parquet_with_zeros(directory, where: str) -> str:
    """A dataset directory of one Parquet file whose footer, or whose data pages, are
    overwritten with zeros. A directory: its name in the message tells the reader's own
    message (naming the file) from the one that reading the rows ends with (naming --data)."""
    directory.mkdir()
    path = directory / "d.parquet"
    pq.write_table(pa.table({"x": np.arange(10.0), "y": np.arange(10.0)}), path)
    data = bytearray(path.read_bytes())
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    lo, hi = (footer, len(data) - 8) if where == "footer" else (4, footer)
    data[lo:hi] = bytes(hi - lo)
    path.write_bytes(bytes(data))
    return str(path)


def test_a_parquet_file_whose_footer_is_corrupt_is_refused(tmp_path, capsys):
    data = _parquet_with_zeros(tmp_path / "parts", "footer")
    # The rest is pyarrow's: "Couldn't deserialize thrift: ..."
    assert refused(capsys, ["--data", str(tmp_path / "parts")]).startswith(f"cannot read {data}: ")


def test_a_parquet_file_whose_data_pages_are_corrupt_is_refused(tmp_path, capsys):
    """The footer reads, and names the row groups; reading one of them fails."""
    data = _parquet_with_zeros(tmp_path / "parts", "pages")
    assert pq.ParquetFile(data).metadata.num_row_groups == 1  # the footer still reads
    args = ["--data", str(tmp_path / "parts"), "--batch_size", "5"]
    assert refused(capsys, args).startswith(f"cannot read {data}: ")


# The run


def test_an_export_into_a_missing_directory_is_refused(tmp_path, capsys):
    target = tmp_path / "no" / "model"
    assert refused(capsys, ["--num_steps", "1", "--export", str(target)]) == (
        f"cannot write --export {target}: {tmp_path / 'no'} is not a writable directory"
    )


def test_an_export_to_a_symbolic_link_is_refused(tmp_path, capsys):
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "model"
    target.symlink_to(tmp_path / "elsewhere")
    assert refused(capsys, ["--num_steps", "1", "--export", str(target)]) == (
        f"--export {target} is a symbolic link; give the directory's own path"
    )


def test_more_features_than_rows_without_a_penalty_are_refused_first(tmp_path, capsys):
    """Past the dense solver's 4,096 columns the wide route fits dense rows too; without a
    penalty, fewer rows than coefficients have no unique fit, said before any pass."""
    data = tmp_path / "wide.npy"
    np.save(data, np.random.default_rng(0).standard_normal((3, 4098)).astype(np.float32))
    assert refused(capsys, ["--data", str(data), "--solver", "exact", "--quiet"]) == (
        "3 rows and 4097 features: without a penalty the fit has no unique solution; fit "
        "with --l2 > 0, or the elastic net's path (--alpha, --l1_ratio, --cv)"
    )


def _logistic_exact(data, *extra: str) -> list[str]:
    return ["--model", "logistic", "--solver", "exact", "--data", str(data), "--quiet", *extra]


def test_newton_that_does_not_converge_warns_and_finishes(tmp_path, capsys):
    """Separated classes and a tiny --l2: the penalised optimum is finite but so far out that
    Newton's steps, about 1 each along the separating direction, do not reach it in 100
    iterations. The run finishes with the last iterate and one warning line (it was refused
    before --max_iter existed; tests/test_convergence.py has the rest)."""
    from hvd_linreg.cli import main

    X = np.random.default_rng(3).standard_normal((20, 1))
    np.savez(tmp_path / "d.npz", X=X, y=(X[:, 0] > 0).astype(np.float64))
    assert main(_logistic_exact(tmp_path / "d.npz", "--l2", "1e-30")) == 0
    _, err = capsys.readouterr()
    assert [line for line in err.splitlines() if line.startswith("warning: ")] == [
        "warning: Newton's method did not converge in 100 iterations: the coefficients and "
        "statistics are its last iterate's; raise --max_iter (or --tol)"
    ]


def test_newton_on_a_feature_repeated_is_refused(tmp_path, capsys):
    X, y = _classes(20)
    np.savez(tmp_path / "d.npz", X=np.c_[X[:, 0], X[:, 0]], y=y)
    assert refused(capsys, _logistic_exact(tmp_path / "d.npz")) == (
        "the Hessian of the log-loss is singular: features are collinear or constant; drop "
        "the redundant ones, or fit with --l2 > 0"
    )


# predict and evaluate


def test_a_threshold_that_is_not_a_probability_is_refused(model, tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", ["a", "b"], np.zeros((3, 2)))
    args = [*_predict(model, data, tmp_path), "--threshold", "1.5"]
    assert refused(capsys, args) == "--threshold 1.5 must be between 0 and 1 (a probability)"


def test_a_model_whose_metadata_lacks_its_weights_is_refused(model, tmp_path, capsys):
    copy = tmp_path / "model"
    shutil.copytree(model, copy)
    meta = json.loads((copy / METADATA).read_text())
    del meta["w"]
    (copy / METADATA).write_text(json.dumps(meta))
    data = _csv(tmp_path / "d.csv", ["a", "b"], np.zeros((3, 2)))
    assert refused(capsys, _predict(str(copy), data, tmp_path)) == (
        f"cannot read --model {copy}'s metadata ({METADATA}): no 'w'"
    )


def test_predict_on_a_csv_file_with_a_header_and_no_rows_is_refused(model, tmp_path, capsys):
    data = _text(tmp_path / "d.csv", "a,b\n")
    assert refused(capsys, _predict(model, data, tmp_path)) == (
        f"{data} has a header but no data rows"
    )


def test_predict_on_a_file_without_rows_is_refused(model, tmp_path, capsys):
    data = tmp_path / "d.npy"
    np.save(data, np.zeros((0, 3)))
    assert refused(capsys, _predict(model, data, tmp_path)) == f"{data} holds no rows"


def test_predict_on_an_npz_whose_x_has_other_columns_is_refused(model, tmp_path, capsys):
    data = tmp_path / "d.npz"
    np.savez(data, X=np.zeros((4, 3)), y=np.zeros(4))
    assert refused(capsys, _predict(model, data, tmp_path)) == (
        f"{data}: X has 3 columns, but the model {model} has 2 features"
    )


def test_predict_on_a_csv_file_without_a_feature_is_refused(model, tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", ["a", "t"], np.zeros((3, 2)))
    assert refused(capsys, _predict(model, data, tmp_path)) == (
        f"{data} has no column b: the model {model}'s features are a, b"
    )


def test_columns_to_keep_that_cannot_be_kept_are_refused(model, tmp_path, capsys):
    """A column the model does not use is passed over; one that --keep_columns cannot copy
    (not in the file, a file without names, a .npy output) ends the run with exit 2."""
    data = _csv(tmp_path / "d.csv", ["a", "b", "t", "z"], np.zeros((3, 4)))
    keep = [*_predict(model, data, tmp_path), "--keep_columns"]
    assert refused(capsys, [*keep, "z"]) == (
        f"--keep_columns writes its columns beside the predictions in a CSV file: --out "
        f"{tmp_path / 'p.npy'} must end in .csv"
    )
    keep[-2] = str(tmp_path / "p.csv")
    assert refused(capsys, [*keep, "id"]) == f"{data} has no column id (--keep_columns)"
    assert (
        refused(capsys, [*keep, "z,z"]) == "--keep_columns takes distinct column names, got 'z,z'"
    )


def test_predict_on_a_row_holding_nan_is_refused(model, tmp_path, capsys):
    data = _text(tmp_path / "d.csv", "a,b\n1,2\nnan,1\n3,4\n")
    assert refused(capsys, _predict(model, data, tmp_path)) == (
        f"{data} line 3: a missing value ('nan') in column 'a'; fill it"
    )
    assert not (tmp_path / "p.npy").exists()


def test_predict_on_a_file_removed_after_its_header_was_read_is_refused(
    model, tmp_path, capsys, monkeypatch
):
    data = tmp_path / "d.npy"
    np.save(data, np.zeros((5, 3)))
    _after_the_header_is_read(monkeypatch, predict, os.remove)
    assert refused(capsys, _predict(model, data, tmp_path)) == (
        f"cannot read {data}: [Errno 2] No such file or directory: '{data}'"
    )


def test_evaluating_a_logistic_model_on_a_target_other_than_0_and_1_is_refused(
    model, tmp_path, capsys
):
    X, y = _classes(10, seed=6)
    y[3] = 2.0
    data = _csv(tmp_path / "d.csv", ["a", "b", "t"], np.c_[X, y])
    assert refused(capsys, ["evaluate", "--model", model, "--data", data]) == (
        "the target holds 2: a logistic model is scored on a target of 0 or 1 (or a "
        "proportion in [0, 1]); recode it"
    )
