"""Section 13: the elastic-net path with 5-fold cross-validation (l1_ratio 0.5, 100 strengths,
folds from a column) on 500,000 x 32 correlated features, gaussian, binomial and Poisson: the
tool at 1 and 2 ranks, and beside it on the same rows and folds R's glmnet (glmnet and
cv.glmnet with foldid), glum's GeneralizedLinearRegressorCV and scikit-learn's ElasticNetCV
(gaussian) and LogisticRegressionCV (saga, 20 Cs, binomial). Each time is the fit on loaded
data: the tool's wall_s, the peers' from their arrays to the coefficients.

    python bench/paths.py --write DIR            # DIR/rows.parquet and DIR/rows.csv
    python bench/paths.py --peer glum --family poisson --dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROWS, FEATURES, FOLDS = 500_000, 32, 5
FAMILIES = {
    "gaussian": ("linear", "y"),
    "binomial": ("logistic", "yes"),
    "poisson": ("poisson", "count"),
}
TIMEOUT_S = 1800
_R = r"""
library(glmnet)
args <- commandArgs(TRUE)
d <- read.csv(args[1]); X <- as.matrix(d[, paste0("x", 0:31)]); y <- d[[args[2]]]
start <- Sys.time()
fit <- cv.glmnet(X, y, family = args[3], alpha = 0.5, nlambda = 100, lambda.min.ratio = 1e-4,
                 foldid = d$fold)
cat(as.numeric(Sys.time() - start, units = "secs"), length(fit$lambda), fit$lambda.min, "\n")
"""


def write(directory: str, seed: int = 0) -> None:
    """X with correlation 0.5^|i-j|, 10 true non-zeros, a fold 1..5 per row, and a target of
    each family, as Parquet (the tool, glum, scikit-learn) and CSV (R)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    cov = 0.5 ** np.abs(np.subtract.outer(np.arange(FEATURES), np.arange(FEATURES)))
    X = rng.standard_normal((ROWS, FEATURES)) @ np.linalg.cholesky(cov).T
    beta = np.zeros(FEATURES)
    beta[:10] = np.linspace(1, -1, 10) * 0.3
    eta = X @ beta
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(FEATURES)])
    df["fold"] = rng.integers(1, FOLDS + 1, ROWS)
    df["y"] = eta + rng.normal(size=ROWS)
    df["count"] = rng.poisson(np.exp(0.5 * eta)).astype(float)
    df["yes"] = (rng.uniform(size=ROWS) < 1 / (1 + np.exp(-eta))).astype(float)
    Path(directory).mkdir(parents=True, exist_ok=True)
    df.to_parquet(Path(directory) / "rows.parquet", row_group_size=ROWS // 8)
    df.to_csv(Path(directory) / "rows.csv", index=False)


def peer(name: str, family: str, directory: str) -> dict:
    """One peer's path + CV on the loaded rows: seconds, strengths fitted, its alpha_min."""
    import pandas as pd
    from sklearn.model_selection import PredefinedSplit

    if name == "glmnet":
        script = Path(directory) / "cv.R"
        script.write_text(_R)
        target = FAMILIES[family][1]
        out = subprocess.run(
            ["Rscript", str(script), str(Path(directory) / "rows.csv"), target, family],
            capture_output=True, text=True, check=True, timeout=TIMEOUT_S,
        ).stdout.split()  # fmt: skip
        return {"seconds": float(out[0]), "strengths": int(out[1]), "alpha_min": float(out[2])}
    df = pd.read_parquet(Path(directory) / "rows.parquet")
    X = df[[f"x{j}" for j in range(FEATURES)]].to_numpy()
    y = df[FAMILIES[family][1]].to_numpy()
    split = PredefinedSplit(df.fold.to_numpy() - 1)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "glum":
            from glum import GeneralizedLinearRegressorCV

            model = GeneralizedLinearRegressorCV(
                family=family.replace("gaussian", "normal"),
                l1_ratio=0.5,
                n_alphas=100,
                min_alpha_ratio=1e-4,
                cv=split,
            ).fit(X, y)
            strengths, alpha = len(model.alphas_), float(model.alpha_)
        elif family == "poisson":
            raise SystemExit("scikit-learn has no L1 Poisson")
        elif family == "gaussian":
            from sklearn.linear_model import ElasticNetCV

            model = ElasticNetCV(l1_ratio=0.5, n_alphas=100, eps=1e-4, cv=split).fit(X, y)
            strengths, alpha = len(model.alphas_), float(model.alpha_)
        else:
            from sklearn.linear_model import LogisticRegressionCV

            model = LogisticRegressionCV(
                Cs=20, penalty="elasticnet", solver="saga", l1_ratios=[0.5], cv=split
            ).fit(X, y)
            strengths, alpha = 20, float(1.0 / (model.C_[0] * len(y)))
    return {"seconds": time.perf_counter() - start, "strengths": strengths, "alpha_min": alpha}


def tool(family: str, directory: str, ranks: int) -> dict:
    """The tool's path + CV at ranks (mpirun above 1): its wall_s, strengths, passes and
    alpha_min."""
    model, target = FAMILIES[family]
    metrics = Path(directory) / f"tool-{family}-{ranks}.json"
    command = [
        shutil.which("hvd-linreg") or "hvd-linreg",
        "--data",
        str(Path(directory) / "rows.parquet"),
    ]
    command += ["--target", target, "--model", model, "--solver", "exact", "--fold_column", "fold"]
    command += ["--features", ",".join(f"x{j}" for j in range(FEATURES))]
    command += ["--l1_ratio", "0.5", "--alpha_min_ratio", "1e-4", "--quiet"]
    command += ["--metrics_json", str(metrics)]
    if ranks > 1:
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        command = [
            "mpirun",
            *root,
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
            str(ranks),
            *command,
        ]
    subprocess.run(
        command, check=True, timeout=TIMEOUT_S, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    m = json.loads(metrics.read_text())
    return {
        "seconds": m["wall_s"],
        "strengths": len(m["path"]["alpha"]),
        "passes": m["passes"],
        "alpha_min": m["cv"]["alpha_min"],
    }


PEERS = ("glmnet", "glum", "sklearn")


def section(progress) -> dict:
    """Every family: the tool at 1 and 2 ranks and each peer this machine has, in turn."""
    import launch  # bench/ is on the path of bench/run.py, which runs this section

    have = [
        p for p in PEERS if (shutil.which("Rscript") if p == "glmnet" else launch.importable(p))
    ]
    results = {}
    with tempfile.TemporaryDirectory(prefix="hvd-bench-paths-") as tmp:
        launch.run_python(["paths.py", "--write", tmp])
        for family in FAMILIES:
            runs = {f"tool_{n}": tool(family, tmp, n) for n in (1, 2)}
            for name in have:
                if name == "sklearn" and family == "poisson":
                    continue  # scikit-learn has no L1 Poisson
                args = ["paths.py", "--peer", name, "--family", family, "--dir", tmp]
                runs[name] = json.loads(launch.run_python(args).splitlines()[-1])
            results[family] = runs
            progress(f"paths, {family}")
    return {
        "rows": ROWS,
        "features": FEATURES,
        "families": results,
        "missing": [p for p in PEERS if p not in have],
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--write", metavar="DIR")
    p.add_argument("--peer", choices=PEERS)
    p.add_argument("--family", choices=tuple(FAMILIES))
    p.add_argument("--dir")
    args = p.parse_args()
    if args.write:
        write(args.write)
    else:
        print(json.dumps(peer(args.peer, args.family, args.dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
