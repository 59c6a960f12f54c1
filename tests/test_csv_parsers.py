"""A CSV split is parsed by pyarrow where pyarrow reads it as the tool's own parser does
(data/csv_arrow.py), and by that parser everywhere else: the two give the same rows, texts,
dropped rows and line counts, and pyarrow declines wherever there is a line to name. Through
the command line: a cell or a column name longer than the csv module's default limit is read by
the tool's parser and the header's like any other."""

from __future__ import annotations

import csv
import random

import numpy as np
import pytest

from conftest import refused
from hvd_linreg.cli import main
from hvd_linreg.data import csv_arrow
from hvd_linreg.data import csv_parse as csv_reader

NAMES = ["x", "g", "note", "y"]
WORDS = frozenset({1, 2})  # the features that may hold words


def both(data: bytes, used=(0, 1, 3), drop=False, as_text=frozenset(), given=None):
    """(pyarrow's split or None, the tool's parser's split) of the same bytes."""
    kinds = csv_reader.Kinds(WORDS, as_text, given or {})
    keep = sorted(set(used))
    # as a rank's range is parsed: mapped from its file, not copied
    fast = csv_reader._arrow_split(memoryview(data), NAMES, keep, drop, kinds)
    slow = csv_reader._parse_text(data.decode(), NAMES, keep, drop, kinds)
    return fast, slow


def assert_same(fast, slow) -> None:
    assert fast is not None, "pyarrow declined a split it reads as the tool does"
    assert slow.problem is None
    np.testing.assert_array_equal(fast.rows, slow.rows)  # NaN where not used, in both
    assert fast.num_lines == slow.num_lines
    np.testing.assert_array_equal(fast.dropped, slow.dropped)
    if len(slow.rows):
        assert fast.words.keys() == slow.words.keys()
    for j, words in fast.words.items():
        theirs = slow.words[j]
        assert [words.texts[i] for i in words.index] == [theirs.texts[i] for i in theirs.index]


@pytest.mark.parametrize(
    "text",
    [
        "1.5,a,free text,2\n-2,b,,3\n1e5,a,x,4\n",  # numbers and words, an unused empty cell
        "1,a,,1\r\n2,b,,2\r\n",  # CRLF
        "1,a,,1\n2,b,,2",  # no line break at the end
        ' 1.5 ,"a, b",,1\n1_000,"say ""hi""",,2\n',  # what only Python's float() reads; quotes
        '1,"two\nlines",,1\n2,b,,2\n',  # a line break inside a quoted field
        "nan,a,,1\n2,NA,,2\n3,b,,\n4,,,4\n5, a ,,5\n",  # missing spellings, dropped
        "1,2.0,,1\n2,2,,2\n3,x,,3\n",  # numbers among words are words: 2.0 and 2 differ
    ],
)
def test_pyarrow_reads_a_split_as_the_tools_parser_does(text):
    drop = "NA" in text
    assert_same(*both(text.encode(), drop=drop))


def test_columns_read_as_text_and_levels_given_read_the_same():
    data = b"1,2,a,1\n2,2.0,b,2\n3,x,a,3\n"
    assert_same(*both(data, used=(0, 1, 2, 3), as_text=frozenset({1, 2})))
    given = {2: ["a", "b"], 0: [1.0, 2.0, 3.0]}  # a model's levels (predict)
    assert_same(*both(data, used=(0, 2, 3), as_text=frozenset({2}), given=given))


@pytest.mark.parametrize(
    "text, problem",
    [
        ("1,a,,1\n2,b,,2,extra\n", "5 fields, but the header has 4"),
        ("1,a,,1\nword,b,,2\n", "'word' is not a number"),  # x may hold no word
        ("1,a,,1\n2,b,,\n", "a missing value ('') in column 'y'"),  # not dropped
        ("1,a,,1\n,,,\n2,b,,2\n", None),  # a line of blanks is no row to the tool
        ("1,a,,1\n   \n2,b,,2\n", None),
    ],
)
def test_pyarrow_declines_where_the_tool_names_a_line_or_skips_one(text, problem):
    fast, slow = both(text.encode(), drop=problem is None)  # dropping, blank lines stay no rows
    assert fast is None
    if problem:
        assert problem in slow.problem[1]
    else:
        assert slow.problem is None and len(slow.rows) == 2


def test_a_level_the_model_does_not_know_is_named_by_the_tools_parser():
    data = b"1,a,,1\n2,c,,2\n"
    fast, slow = both(data, used=(1, 3), as_text=frozenset({1}), given={1: ["a", "b"]})
    assert fast is None
    assert slow.problem is not None and "'c' in column 'g'" in slow.problem[1]


def test_random_splits_read_the_same():
    """Splits of random cells of every kind above: wherever pyarrow reads one, it reads it as
    the tool's parser does, and it reads most of those without a problem."""
    rng = random.Random(0)
    numbers = ["1.5", "-2", "3", "1e5", ".5", "nan", "NA", "", "  2 ", "null", "N/A", "1_0"]
    words = ["a", "b", " a", "B c", '"x,y"', '"q""r"', '"two\nlines"', "NA", "", "1", "2.0"]
    read = 0
    for _ in range(400):
        lines = []
        for _ in range(rng.randint(1, 6)):
            g = rng.choice(words if rng.random() < 0.5 else numbers)
            lines.append(",".join([rng.choice(numbers), g, rng.choice(words), rng.choice("123")]))
        data = "\n".join(lines).encode() + b"\n" * (rng.random() < 0.8)
        used = sorted({*rng.sample(range(3), rng.randint(1, 3)), 3})
        as_text = frozenset({2}) if rng.random() < 0.3 else frozenset()
        fast, slow = both(data, used, rng.random() < 0.7, as_text)
        if fast is not None:
            assert_same(fast, slow)
            read += 1
    assert read > 150


def test_a_word_past_the_first_lines_makes_a_feature_text_and_a_target_the_tools_problem():
    """pyarrow reads the columns typed, those of text found in the first lines: a word after
    them in a feature reads that column again as text, one in the target goes to the tool's
    parser, which names its line."""
    numbers = "".join(f"{i / 7:.6f},{i % 5},,{i}\n" for i in range(20_000))  # past the sniff
    assert len(numbers) > csv_arrow.SNIFF_BYTES
    fast, slow = both((numbers + "1,word,,1\n2,3,,2\n").encode())
    assert_same(fast, slow)
    assert set(fast.words) == {1} and fast.words[1].present() == {"word", *"01234"}
    fast, slow = both((numbers + "1,2,,word\n").encode())
    assert fast is None
    assert slow.problem[:2] == (20_001, "'word' is not a number (column 'y')")


def test_a_split_of_many_blocks_reads_as_one(monkeypatch):
    """pyarrow's blocks are written into one table as they come, each with a dictionary of its
    own: words that turn up in later blocks only, blocks without a missing cell and blocks
    with them, and a word past the first lines (the column read again, as text) give the
    rows, texts and dropped rows of the tool's parser."""
    monkeypatch.setattr(csv_arrow, "BLOCK_BYTES", 1 << 12)  # a few hundred lines a block
    rng = random.Random(1)
    lines = []
    for i in range(8000):
        late = i > 6000  # past the first 64 KB, which decide the columns of text
        g = rng.choice(["a", "b", " c ", "NA", "", "7"] if late else ["1", "2", "3"])
        lines.append(f"{i / 3:.4f},{g},note {i % 5},{i % 7}")
    data = ("\n".join(lines) + "\n").encode()
    assert data.find(b",a,") > csv_arrow.SNIFF_BYTES
    fast, slow = both(data, drop=True)
    assert_same(fast, slow)
    assert fast.words[1].present() == {"a", "b", "c", "1", "2", "3", "7"}
    fast, slow = both(data.replace(b",NA,", b",a,").replace(b",,", b",b,"), used=(0, 1, 2, 3))
    assert_same(fast, slow)


# --- cells longer than the csv module's limit ------------------------------------------------

LONG = "long text " * 20_000  # 200,000 characters: the csv module's default limit is 131,072
TRAIN = ["--features", "x,g", "--target", "y", "--solver", "exact", "--quiet"]


def _file(tmp_path, name: str, rows: str, header: str = ",".join(NAMES)) -> str:
    path = tmp_path / name
    path.write_text(f"{header}\n{rows}")
    return str(path)


@pytest.mark.parametrize(
    "rows, message",
    [
        ('1,a,"{}",1\nfoo,b,,2\n', "line 3: 'foo' in column 'x' is not a number, but the column"),
        ('1,"{}",,1\n2,b,,word\n', "line 3: 'word' is not a number (column 'y')"),
    ],
    ids=["in a column not used", "in a feature of words"],
)
def test_a_long_cell_beside_a_word_where_a_number_belongs(tmp_path, capsys, rows, message):
    """The tool's parser reads the rows (pyarrow declines them) and names the word's line, as
    it does without the long cell: one line, exit code 2."""
    short = refused(capsys, ["--data", _file(tmp_path, "data.csv", rows.format("s")), *TRAIN])
    data = _file(tmp_path, "data.csv", rows.format(LONG))  # the same path: the same message
    assert refused(capsys, ["--data", data, *TRAIN]) == short
    assert short.startswith(f"{data} {message}")
    assert csv.field_size_limit() == 131072  # the module's limit is left as it was


def test_a_long_level_where_the_tools_parser_reads_the_rows(tmp_path):
    """A line of blanks makes pyarrow decline the rows; the tool's parser reads the long cell
    as a level of g like any other."""
    rows = "".join(f"{i},{'ab'[i % 2]},,{i % 3}\n" for i in range(10)) + f',,,\n1,"{LONG}",,1\n'
    fast, slow = both(rows.encode())
    assert fast is None
    assert slow.problem is None and slow.words[1].present() == {"a", "b", LONG.strip()}
    assert main(["--data", _file(tmp_path, "long.csv", rows), *TRAIN]) == 0
    assert csv.field_size_limit() == 131072


def test_a_long_column_name(tmp_path):
    """The header's names are read by the csv module too."""
    rows = "".join(f"{i},{i % 3},,{i * i % 7}\n" for i in range(10))
    header = f"x,g,{LONG},y"
    assert main(["--data", _file(tmp_path, "named.csv", rows, header), *TRAIN]) == 0
    assert csv.field_size_limit() == 131072


def test_predict_with_a_long_cell_in_a_column_the_model_does_not_use(tmp_path, capsys):
    """Rows with a line of blanks are predicted, and a word where the model reads a number is
    refused by its line, a long cell in another column or not."""
    train = _file(tmp_path, "train.csv", "".join(f"{i},a,,{2 * i + 1}\n" for i in range(10)))
    model = str(tmp_path / "model")
    flags = ["--features", "x", "--target", "y", "--solver", "exact", "--quiet"]
    assert main(["--data", train, *flags, "--export", model]) == 0
    out = tmp_path / "p.csv"
    data = _file(tmp_path, "new.csv", f'1,a,"{LONG}",1\n,,,\n3,b,short,2\n')
    assert main(["predict", "--model", model, "--data", data, "--out", str(out)]) == 0
    assert np.loadtxt(out, skiprows=1) == pytest.approx([3.0, 7.0])
    data = _file(tmp_path, "bad.csv", f'1,a,"{LONG}",1\nfoo,b,short,2\n')
    argv = ["predict", "--model", model, "--data", data, "--out", str(out)]
    assert refused(capsys, argv) == f"{data} line 3: 'foo' is not a number (column 'x')"
    assert csv.field_size_limit() == 131072
