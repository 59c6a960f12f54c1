"""This rank's shard of the global dataset: synthetic (as in the seed) or read from files.

The modules, in the order the data flows through them:
  files      the files --data names, and READERS: the reader of each format
  spec       what a reader is told (DataSpec) and declares (TableReader, ScatterReader)
  npy        .npy and .npz files, read by ranges of rows
  parquet    Parquet files, read by row groups (pyarrow is imported only to read one)
  csv        CSV files, each rank parsing its byte range, rows sent to their ranks
  csv_ranges   a CSV file cut by bytes, records whole (quotes counted across ranks)
  csv_parse    a split's rows parsed: by pyarrow (csv_arrow) or the tool's own parser
  missing    which cells are missing (--missing), and the file rows of the rows kept
  categorical  columns of words or codes as treatment dummies, levels agreed by the ranks
  columns    choosing named columns (--target, --features)
  table      Table: a dataset read by ranges of rows, and what its readers share
  holdout    the held-out validation rows (--validation_fraction)
  layout     the layout contract: which rows each rank holds, and in what runs
  synthetic  the synthetic rows, a pure function of (seed, row, column)
  rows       Rows: a block of rows as the tool carries them (features, target, weight, offset)
  shard      Shard: the rows in memory, and their finite checks
  load       load_shard: the shard of a run
  memory     memory_shard: the shard of the rows each rank passes to hvd_linreg.fit
"""

from hvd_linreg.data.csv import CsvHeader, csv_header, read_csv_split
from hvd_linreg.data.csv_ranges import csv_split_text, csv_split_texts
from hvd_linreg.data.files import READERS, data_files, open_table
from hvd_linreg.data.holdout import Holdout, is_validation
from hvd_linreg.data.layout import Layout, global_batch_size, layout_for, run_length
from hvd_linreg.data.load import load_shard, read_shard
from hvd_linreg.data.rows import Rows
from hvd_linreg.data.shard import Shard
from hvd_linreg.data.spec import DataSpec, ScatterReader, TableReader
from hvd_linreg.data.synthetic import NOISE_STDDEV, TRUE_BIAS, synthetic_rows, true_weights
from hvd_linreg.data.table import StoredArray, Table, own_dtype, read_across, rows_of
from hvd_linreg.runtime.buffers import aligned_empty

__all__ = [
    "NOISE_STDDEV",
    "READERS",
    "TRUE_BIAS",
    "CsvHeader",
    "DataSpec",
    "Holdout",
    "Layout",
    "Rows",
    "ScatterReader",
    "Shard",
    "StoredArray",
    "Table",
    "TableReader",
    "aligned_empty",
    "csv_header",
    "csv_split_text",
    "csv_split_texts",
    "data_files",
    "global_batch_size",
    "is_validation",
    "layout_for",
    "load_shard",
    "open_table",
    "own_dtype",
    "read_across",
    "read_csv_split",
    "read_shard",
    "rows_of",
    "run_length",
    "synthetic_rows",
    "true_weights",
]
