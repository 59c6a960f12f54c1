"""NIST's Statistical Reference Datasets for linear least squares (www.itl.nist.gov/div898/strd/
lls), public domain: the data and the certified estimates and standard deviations, which NIST
computed in 500-digit arithmetic. Each model has an intercept but NoInt1's and NoInt2's, lines
through the origin (the tool's --no_intercept); the polynomial ones are fitted on the powers x,
x², ... of their one predictor.

tests/test_nist.py checks that the least squares of these rows, solved in rational arithmetic,
is the certified estimate to at least 13 digits: a mistyped value would miss it."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np


@dataclass(frozen=True)
class Dataset:
    name: str
    x: tuple[str, ...]  # the predictor rows as NIST prints them: one value, or several (spaces)
    y: tuple[str, ...]
    degree: int  # the polynomial's degree for one predictor; 0: the columns are the features
    estimates: tuple[str, ...]  # certified: intercept first (where the model has one)
    std_errors: tuple[str, ...]
    intercept: bool = True  # False: the model is through the origin, no b

    def columns(self, exact: bool = False) -> tuple[list[list], list]:
        """The features (rows of columns, the powers for a polynomial) and the target, as
        float64 or (exact) as Fractions of the printed decimals."""
        number = Fraction if exact else float
        rows = [[number(v) for v in line.split()] for line in self.x]
        if self.degree:
            rows = [[row[0] ** k for k in range(1, self.degree + 1)] for row in rows]
        return rows, [number(v) for v in self.y]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        rows, y = self.columns()
        return np.array(rows, dtype=np.float64), np.array(y, dtype=np.float64)

    @property
    def certified(self) -> tuple[np.ndarray, np.ndarray]:
        """The certified [w..., b] and their standard errors, in the tool's order (b last);
        [w...] alone for a model without an intercept."""

        def tool_order(values: tuple[str, ...]) -> np.ndarray:
            ordered = [*values[1:], values[0]] if self.intercept else values
            return np.array(ordered, dtype=np.float64)

        return tool_order(self.estimates), tool_order(self.std_errors)


def _numbers(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_TWENTY_ONE = tuple(str(x) for x in range(21))

NORRIS = Dataset(
    "Norris",
    _numbers(
        """0.2 337.4 118.2 884.6 10.1 226.5 666.3 996.3 448.6 777.0 558.2 0.4 0.6 775.5
        666.9 338.0 447.5 11.6 556.0 228.1 995.8 887.6 120.2 0.3 0.3 556.8 339.1 887.2
        999.0 779.0 11.1 118.3 229.2 669.1 448.9 0.5"""
    ),
    _numbers(
        """0.1 338.8 118.1 888.0 9.2 228.1 668.5 998.5 449.1 778.9 559.2 0.3 0.1 778.1
        668.8 339.3 448.9 10.8 557.7 228.3 998.0 888.8 119.6 0.3 0.6 557.6 339.3 888.0
        998.5 778.9 10.2 117.6 228.9 668.4 449.2 0.2"""
    ),
    1,
    ("-0.262323073774029", "1.00211681802045"),
    ("0.232818234301152", "0.429796848199937E-03"),
)

PONTIUS = Dataset(
    "Pontius",
    tuple(str(150000 * k) for k in range(1, 21)) * 2,
    _numbers(
        """.11019 .21956 .32949 .43899 .54803 .65694 .76562 .87487 .98292 1.09146 1.20001
        1.30822 1.41599 1.52399 1.63194 1.73947 1.84646 1.95392 2.06128 2.16844 .11052
        .22018 .32939 .43886 .54798 .65739 .76596 .87474 .98300 1.09150 1.20004 1.30818
        1.41613 1.52408 1.63159 1.73965 1.84696 1.95445 2.06177 2.16829"""
    ),
    2,
    ("0.673565789473684E-03", "0.732059160401003E-06", "-0.316081871345029E-14"),
    ("0.107938612033077E-03", "0.157817399981659E-09", "0.486652849992036E-16"),
)

FILIP = Dataset(
    "Filip",
    _numbers(
        """-6.860120914 -4.324130045 -4.358625055 -4.358426747 -6.955852379 -6.661145254
        -6.355462942 -6.118102026 -7.115148017 -6.815308569 -6.519993057 -6.204119983
        -5.853871964 -6.109523091 -5.79832982 -5.482672118 -5.171791386 -4.851705903
        -4.517126416 -4.143573228 -3.709075441 -3.499489089 -6.300769497 -5.953504836
        -5.642065153 -5.031376979 -4.680685696 -4.329846955 -3.928486195 -8.56735134
        -8.363211311 -8.107682739 -7.823908741 -7.522878745 -7.218819279 -6.920818754
        -6.628932138 -6.323946875 -5.991399828 -8.781464495 -8.663140179 -8.473531488
        -8.247337057 -7.971428747 -7.676129393 -7.352812702 -7.072065318 -6.774174009
        -6.478861916 -6.159517513 -6.835647144 -6.53165267 -6.224098421 -5.910094889
        -5.598599459 -5.290645224 -4.974284616 -4.64454848 -4.290560426 -3.885055584
        -3.408378962 -3.13200249 -8.726767166 -8.66695597 -8.511026475 -8.165388579
        -7.886056648 -7.588043762 -7.283412422 -6.995678626 -6.691862621 -6.392544977
        -6.067374056 -6.684029655 -6.378719832 -6.065855188 -5.752272167 -5.132414673
        -4.811352704 -4.098269308 -3.66174277 -3.2644011"""
    ),
    _numbers(
        """0.8116 0.9072 0.9052 0.9039 0.8053 0.8377 0.8667 0.8809 0.7975 0.8162 0.8515
        0.8766 0.8885 0.8859 0.8959 0.8913 0.8959 0.8971 0.9021 0.909 0.9139 0.9199 0.8692
        0.8872 0.89 0.891 0.8977 0.9035 0.9078 0.7675 0.7705 0.7713 0.7736 0.7775 0.7841
        0.7971 0.8329 0.8641 0.8804 0.7668 0.7633 0.7678 0.7697 0.77 0.7749 0.7796 0.7897
        0.8131 0.8498 0.8741 0.8061 0.846 0.8751 0.8856 0.8919 0.8934 0.894 0.8957 0.9047
        0.9129 0.9209 0.9219 0.7739 0.7681 0.7665 0.7703 0.7702 0.7761 0.7809 0.7961
        0.8253 0.8602 0.8809 0.8301 0.8664 0.8834 0.8898 0.8964 0.8963 0.9074 0.9119
        0.9228"""
    ),
    10,
    _numbers(
        """-1467.48961422980 -2772.17959193342 -2316.37108160893 -1127.97394098372
        -354.478233703349 -75.1242017393757 -10.8753180355343 -1.06221498588947
        -0.670191154593408E-01 -0.246781078275479E-02 -0.402962525080404E-04"""
    ),
    _numbers(
        """298.084530995537 559.779865474950 466.477572127796 227.204274477751
        71.6478660875927 15.2897178747400 2.23691159816033 0.221624321934227
        0.142363763154724E-01 0.535617408889821E-03 0.896632837373868E-05"""
    ),
)

LONGLEY = Dataset(
    "Longley",
    (
        "83.0 234289 2356 1590 107608 1947",
        "88.5 259426 2325 1456 108632 1948",
        "88.2 258054 3682 1616 109773 1949",
        "89.5 284599 3351 1650 110929 1950",
        "96.2 328975 2099 3099 112075 1951",
        "98.1 346999 1932 3594 113270 1952",
        "99.0 365385 1870 3547 115094 1953",
        "100.0 363112 3578 3350 116219 1954",
        "101.2 397469 2904 3048 117388 1955",
        "104.6 419180 2822 2857 118734 1956",
        "108.4 442769 2936 2798 120445 1957",
        "110.8 444546 4681 2637 121950 1958",
        "112.6 482704 3813 2552 123366 1959",
        "114.2 502601 3931 2514 125368 1960",
        "115.7 518173 4806 2572 127852 1961",
        "116.9 554894 4007 2827 130081 1962",
    ),
    _numbers(
        """60323 61122 60171 61187 63221 63639 64989 63761 66019 67857 68169 66513 68655
        69564 69331 70551"""
    ),
    0,
    _numbers(
        """-3482258.63459582 15.0618722713733 -0.358191792925910E-01 -2.02022980381683
        -1.03322686717359 -0.511041056535807E-01 1829.15146461355"""
    ),
    _numbers(
        """890420.383607373 84.9149257747669 0.334910077722432E-01 0.488399681651699
        0.214274163161675 0.226073200069370 455.478499142212"""
    ),
)


def _wampler(name: str, y: str, estimates: tuple[str, ...], std_errors: str) -> Dataset:
    return Dataset(name, _TWENTY_ONE, _numbers(y), 5, estimates, _numbers(std_errors))


_ONES = ("1",) * 6
WAMPLER = (
    _wampler(
        "Wampler1",
        """1 6 63 364 1365 3906 9331 19608 37449 66430 111111 177156 271453 402234 579195
        813616 1118481 1508598 2000719 2613660 3368421""",
        _ONES,
        "0 0 0 0 0 0",
    ),
    _wampler(
        "Wampler2",
        """1.00000 1.11111 1.24992 1.42753 1.65984 1.96875 2.38336 2.94117 3.68928 4.68559
        6.00000 7.71561 9.92992 12.75603 16.32384 20.78125 26.29536 33.05367 41.26528
        51.16209 63.00000""",
        ("1", "0.1", "0.01", "0.001", "0.0001", "0.00001"),
        "0 0 0 0 0 0",
    ),
    _wampler(
        "Wampler3",
        """760 -2042 2111 -1684 3888 1858 11379 17560 39287 64382 113159 175108 273291
        400186 581243 811568 1121004 1506550 2002767 2611612 3369180""",
        _ONES,
        """2152.32624678170 2363.55173469681 779.343524331583 101.475507550350
        5.64566512170752 0.112324854679312""",
    ),
    _wampler(
        "Wampler4",
        """75901 -204794 204863 -204436 253665 -200894 214131 -185192 221249 -138370 315911
        -27644 455253 197434 783995 608816 1370781 1303798 2205519 2408860 3444321""",
        _ONES,
        """215232.624678170 236355.173469681 77934.3524331583 10147.5507550350
        564.566512170752 11.2324854679312""",
    ),
    _wampler(
        "Wampler5",
        """7590001 -20479994 20480063 -20479636 25231365 -20476094 20489331 -20460392
        18417449 -20413570 20591111 -20302844 18651453 -20077766 21059195 -19666384
        26348481 -18971402 22480719 -17866340 10958421""",
        _ONES,
        """21523262.4678170 23635517.3469681 7793435.24331583 1014755.07550350
        56456.6512170752 1123.24854679312""",
    ),
)

# Lines through the origin, y = B1·x: NoInt2's B1 is 8/11, NoInt1's 251/121.
NO_INTERCEPT = (
    Dataset(
        "NoInt1",
        tuple(str(x) for x in range(60, 71)),
        tuple(str(y) for y in range(130, 141)),
        1,
        ("2.07438016528926",),
        ("1.65289256198347E-02",),
        intercept=False,
    ),
    Dataset(
        "NoInt2",
        ("4", "5", "6"),
        ("3", "4", "4"),
        1,
        ("0.727272727272727",),
        ("4.20827318078432E-02",),
        intercept=False,
    ),
)

DATASETS = (NORRIS, PONTIUS, FILIP, LONGLEY, *WAMPLER, *NO_INTERCEPT)
BY_NAME = {d.name: d for d in DATASETS}


def rational_fit(dataset: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """The least squares [w..., b] ([w...] without an intercept) of the dataset's printed
    decimals and their standard errors, solved exactly (Fractions; only the standard errors'
    square roots are rounded)."""
    rows, y = dataset.columns(exact=True)
    design = [[*row, Fraction(1)] if dataset.intercept else row for row in rows]
    return rational_least_squares(design, y)


def rational_least_squares(design: list[list], y: list) -> tuple[np.ndarray, np.ndarray]:
    """The exact least squares of a full-rank design of Fractions, and the standard errors."""
    k = len(design[0])
    gram = [[sum(r[i] * r[j] for r in design) for j in range(k)] for i in range(k)]
    rhs = [sum(r[i] * t for r, t in zip(design, y)) for i in range(k)]
    inverse = _inverse(gram)
    beta = [sum(inverse[i][j] * rhs[j] for j in range(k)) for i in range(k)]
    rss = sum((sum(b * v for b, v in zip(beta, r)) - t) ** 2 for r, t in zip(design, y))
    sigma2 = rss / (len(y) - k)
    errors = [float(sigma2 * inverse[i][i]) ** 0.5 for i in range(k)]
    return np.array([float(b) for b in beta]), np.array(errors)


def _inverse(matrix: list[list[Fraction]]) -> list[list[Fraction]]:
    """Gauss-Jordan elimination in exact arithmetic."""
    k = len(matrix)
    rows = [[*row, *(Fraction(int(i == j)) for j in range(k))] for i, row in enumerate(matrix)]
    for c in range(k):
        pivot = next(r for r in range(c, k) if rows[r][c] != 0)
        rows[c], rows[pivot] = rows[pivot], rows[c]
        rows[c] = [v / rows[c][c] for v in rows[c]]
        for r in range(k):
            if r != c and rows[r][c] != 0:
                rows[r] = [a - rows[r][c] * b for a, b in zip(rows[r], rows[c])]
    return [row[k:] for row in rows]


def lre(estimate, certified, digits=15.0) -> float:
    """NIST's log relative error of the worst element: correct significant digits, absolute
    where the certified value is 0, capped at the digits NIST prints (or each element's)."""
    estimate, certified = np.asarray(estimate, float), np.asarray(certified, float)
    error = np.abs(estimate - certified)
    relative = np.where(
        certified != 0, error / np.where(certified != 0, np.abs(certified), 1), error
    )
    with np.errstate(divide="ignore"):
        return float(np.clip(-np.log10(relative), 0.0, np.asarray(digits, float)).min())
