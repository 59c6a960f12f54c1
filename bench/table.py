"""The benchmark's verdict: the issue's targets as ratios, and the printed table."""

from __future__ import annotations

CONTROLLER_NAMES = {
    "mpi": "MPI controller",
    "gloo": "Gloo controller",
    "mpi-huge-pages": "MPI, GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
}


def _at(rows: list[dict], ranks: int) -> dict:
    return next(r for r in rows if r["ranks"] == ranks)


def efficiency(rows: list[dict], ranks: int) -> float:
    """Samples/s at `ranks` over `ranks` times the samples/s of one rank (on one core)."""
    return _at(rows, ranks)["samples_per_s"] / (ranks * _at(rows, 1)["samples_per_s"])


def rss_ratio(results: dict, above_empty: bool = False) -> float:
    """Peak RSS per rank at 4 ranks over that at 1 rank; optionally of what the data adds
    on top of an empty run (the Python, TensorFlow and Horovod every process carries)."""
    empty = results["empty_rss_mib"] if above_empty else 0.0
    large = results["large_job"]
    return (_at(large, 4)["peak_rss_mib"] - empty) / (_at(large, 1)["peak_rss_mib"] - empty)


def targets(results: dict) -> list[dict]:
    """Each target of the issue: the measured ratio, the limit, and whether it is met.

    A latency ratio counts only if the three programs reached the same w and b.
    """
    rows = _targets_here(results)
    if "time_to_result" in results:
        rows += _targets_time(results["time_to_result"])
    if "stacks" in results:
        rows += [
            (f"{label}: TF 2.21 stack / TF 2.15 stack", new / old, "<=", 1.1)
            for label, old, new in _stack_rows(results["stacks"])
        ]
    fits = results.get("poisson", {}).get("fits", {})
    if "sklearn" in fits:
        for n, limit in ((1, 0.75), (2, 0.45)):
            ratio = fits[f"tool_{n}"]["fit_s"] / fits["sklearn"]["fit_s"]
            rows.append(
                (
                    f"Poisson fit, {n} rank{'s' * (n > 1)}: hvd-linreg / scikit-learn",
                    ratio,
                    "<=",
                    limit,
                )
            )
    csv = results.get("csv", {}).get("seconds", {})
    for n, limit in ((1, 0.8), (2, 1.6)):
        if f"tool_{n}" in csv:
            ratio = csv["pyarrow"] / csv[f"tool_{n}"]  # rows/s over pyarrow's rows/s
            label = f"CSV rows/s, {n} rank{'s' * (n > 1)}: hvd-linreg / pyarrow on one core"
            rows.append((label, ratio, ">=", limit))
    if "whole_runs" in results:
        rows += _targets_whole(results["whole_runs"])
    if "paths" in results:
        rows += _targets_paths(results["paths"])
    if "multinomial" in results:
        rows += _targets_multinomial(results["multinomial"])
    if "wide" in results:
        rows += _targets_wide(results["wide"])
    if "sparse" in results:
        rows += _targets_sparse(results["sparse"])
    if "dense" in results:
        rows += _targets_sparse(results["dense"], "wide dense lasso", 1.0)
    hosts = results.get("hosts", {}).get("latency")
    if hosts:
        rows.append(
            (
                "step latency, 2 hosts x 2 ranks: hvd-linreg / floor",
                hosts["tool_us"] / hosts["floor_us"],
                "<=",
                2,
            )
        )
    verdicts = []
    for name, ratio, sense, limit in rows:
        met = bool(ratio <= limit if sense == "<=" else ratio >= limit)
        if name.startswith("step latency, 2 ranks:") and not _at(results["latency"], 2)["agree"]:
            met = False  # a fast wrong answer is no result
        if name.startswith("step latency, 2 hosts") and not hosts["agree"]:
            met = False
        if name.startswith("Poisson fit") and not all(r["agree"] for r in fits.values()):
            met = False
        if (
            name.startswith("multinomial fit")
            and not results["multinomial"]["fits"]["tool_2"]["agree"]
        ):
            met = False  # the 2-rank fit must be the 1-rank fit
        verdicts.append(
            {"target": name, "ratio": float(ratio), "limit": f"{sense} {limit}", "met": met}
        )
    return verdicts


def _targets_here(results: dict) -> list[tuple]:
    """The targets of sections 1 to 4 that ran: (name, ratio, sense, limit)."""
    rows = []
    if "latency" in results:
        two = _at(results["latency"], 2)
        rows += [
            (
                "step latency, 2 ranks: hvd-linreg / MWMS",
                two["tool_us"] / two["peer_us"],
                "<=",
                0.35,
            ),
            (
                "step latency, 2 ranks: hvd-linreg / floor",
                two["tool_us"] / two["floor_us"],
                "<=",
                3,
            ),
        ]
    if "large_job" in results:
        rows += [
            (
                "scaling efficiency, 2 ranks, large job",
                efficiency(results["large_job"], 2),
                ">=",
                0.85,
            ),
            ("peak RSS per rank, large job: 4 ranks / 1 rank", rss_ratio(results), "<=", 0.35),
            (
                "large job, 1 rank on 1 core: hvd-linreg / NumPy loop samples/s",
                _at(results["large_job"], 1)["samples_per_s"]
                / results["large_job_numpy_samples_per_s"],
                ">=",
                0.9,
            ),
        ]
    if "allreduce" in results:
        ar = results["allreduce"]
        rows.append(
            (
                "allreduce 16 MB, MPI: Horovod (tool's op=Sum) / mpi4py bandwidth",
                ar["mpi4py_s"] / ar["horovod_s"]["mpi"]["sum"],
                ">=",
                0.9,
            )
        )
    return rows


def _targets_time(t: dict) -> list[tuple]:
    """The targets of section 6."""
    rows = [
        ("start-up, seed job, 4 ranks: hvd-linreg / bare hvd.init() job",
         t["seed_job_s"] / t["bare_s"][4], "<=", 1.1),
    ]  # fmt: skip
    for r in t["large_job"]:
        rows.append(
            (
                f"large job end to end, {r['ranks']} rank(s): hvd-linreg / (bare start + training)",
                r["end_to_end_s"] / (r["bare_s"] + r["training_s"]),
                "<=",
                2,
            )
        )
    rows.append(("synthetic generator, GB/s on one core", t["generator"]["tool_gb_s"], ">=", 1))
    return rows


def _time_to_result(t: dict) -> list[str]:
    out = ["6. Time to result: `horovodrun -np N` from start to exit, seconds (medians)"]
    out += _grid(
        ["job", "hvd-linreg", "baseline", "baseline is", "ratio"],
        [
            [
                "seed job, 4 ranks",
                f"{t['seed_job_s']:.1f}",
                f"{t['bare_s'][4]:.1f}",
                "bare hvd.init(); hvd.join() job",
                f"{t['seed_job_s'] / t['bare_s'][4]:.2f}",
            ],
            *[
                [
                    f"large job, {r['ranks']} rank(s)",
                    f"{r['end_to_end_s']:.1f}",
                    f"{r['bare_s'] + r['training_s']:.1f}",
                    f"bare start {r['bare_s']:.1f} + training {r['training_s']:.2f}",
                    f"{r['end_to_end_s'] / (r['bare_s'] + r['training_s']):.2f}",
                ]
                for r in t["large_job"]
            ],
        ],
    )
    g = t["generator"]
    out.append(
        f"   Synthetic generator, one core, {g['rows']:,} rows x {g['features']} features: "
        f"{g['tool_gb_s']:.2f} GB/s (NumPy's sequential float32 normals: {g['numpy_gb_s']:.2f})"
    )
    return out


STACK_FIGURES = {
    "import_s": "import (TensorFlow, Horovod, the tool), s",
    "step_us_1": "step latency, seed job, 1 rank, us",
    "step_us_2": "step latency, seed job, 2 ranks, us",
    "seed_job_4_ranks_s": "seed job, horovodrun -np 4, start to exit, s",
    "large_job_1_rank_s": "large job, horovodrun -np 1, start to exit, s",
}


def _stack_rows(stacks: dict) -> list[tuple[str, float, float]]:
    """(figure, old stack's median, new stack's median) for each figure of section 7."""
    old, new = stacks["medians"]["old"], stacks["medians"]["new"]
    return [(label, old[key], new[key]) for key, label in STACK_FIGURES.items()]


def _stacks(stacks: dict) -> list[str]:
    v = stacks["versions"]
    out = [f"7. The 2023 stack ({v['old']}) against today's ({v['new']}), medians"]
    out += _grid(
        ["figure", "TF 2.15 stack", "TF 2.21 stack", "ratio"],
        [[label, f"{old:.3g}", f"{new:.3g}", f"{new / old:.2f}"]
         for label, old, new in _stack_rows(stacks)],
    )  # fmt: skip
    return out


def _grid(header: list[str], rows: list[list]) -> list[str]:
    cells = [[str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(c) for c in col) for col in zip(*cells)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]


def _latency(results: dict) -> list[str]:
    out = ["1. Step latency, seed job (1000 samples, batch 100 per rank): microseconds per step"]
    out += _grid(
        [
            "ranks",
            "hvd-linreg",
            "floor NumPy+mpi4py",
            "peer MWMS",
            "tool/floor",
            "tool/peer",
            "same w, b (max rel. gap)",
        ],
        [
            [
                r["ranks"],
                f"{r['tool_us']:.0f}",
                f"{r['floor_us']:.0f}",
                f"{r['peer_us']:.0f}",
                f"{r['tool_us'] / r['floor_us']:.2f}",
                f"{r['tool_us'] / r['peer_us']:.2f}",
                f"{'yes' if r['agree'] else 'NO'} ({max(r['relative_gap'].values()):.0e})",
            ]
            for r in results["latency"]
        ],
    )
    out += ["", "   Levers, 2 ranks: hvd-linreg with one setting, next to its default run"]
    out += _grid(
        ["setting", "us/step", "vs default"],
        [[r["lever"], f"{r['tool_us']:.0f}", f"{r['vs_default']:.2f}"] for r in results["levers"]],
    )
    if "small_allreduce" in results:
        one, tool = results["small_allreduce"], results["latency"]
        by_ranks = {r["ranks"]: r["tool_us"] for r in tool}
        out += [
            "   One step's allreduce alone, 2 ranks (the seed job's gradient, 2 floats): "
            f"Horovod {one['horovod_us']:.0f} us, mpi4py {one['mpi4py_us']:.0f} us; "
            f"hvd-linreg's 1-rank step plus Horovod's allreduce: "
            f"{by_ranks.get(1, float('nan')) + one['horovod_us']:.0f} us"
        ]
    return out


def _large_job(results: dict) -> list[str]:
    large = results["large_job"]
    out = [
        "2./4. Large job: 8,000,000 rows x 64 features, batch 65536 per rank "
        "(1 rank pinned to 1 core)"
    ]
    out += _grid(
        ["ranks", "cpus", "samples/s", "scaling efficiency", "peak RSS per rank", "peak PSS"],
        [
            [
                r["ranks"],
                r["cpus"],
                f"{r['samples_per_s']:.3g}",
                f"{efficiency(large, r['ranks']):.0%}",
                f"{r['peak_rss_mib']:.0f} MiB",
                f"{r['peak_pss_mib']:.0f} MiB",
            ]
            for r in large
        ],
    )
    four, one = _at(large, 4), _at(large, 1)
    out.append(
        f"   The NumPy loop (bench/floor.py) on the same job, 1 rank on 1 core: "
        f"{results['large_job_numpy_samples_per_s']:.3g} samples/s"
    )
    out.append(
        f"   An empty run (1000 rows) peaks at {results['empty_rss_mib']:.0f} MiB RSS, "
        f"{results['empty_pss_mib']:.0f} MiB PSS. 4 ranks / 1 rank: RSS above the empty run "
        f"{rss_ratio(results, above_empty=True):.2f}, PSS "
        f"{four['peak_pss_mib'] / one['peak_pss_mib']:.2f}"
    )
    return out


def _allreduce_grid(floor_s: float, nbytes: int, horovod_s: dict[str, float]) -> list[str]:
    """mpi4py's time per allreduce, then each Horovod one's: ms, GB/s and ratio to mpi4py."""
    timed = {"mpi4py Allreduce (floor)": floor_s, **horovod_s}
    rows = [
        [name, f"{t * 1e3:.2f}", f"{nbytes / t / 1e9:.2f}", f"{floor_s / t:.2f}"]
        for name, t in timed.items()
    ]
    return _grid(["allreduce", "ms", "GB/s", "vs mpi4py"], rows)


def _allreduce(results: dict) -> list[str]:
    ar = results["allreduce"]
    horovod = {
        f"Horovod {op}, {CONTROLLER_NAMES[controller]}": seconds
        for controller, times in ar["horovod_s"].items()
        for op, seconds in times.items()
    }
    out = ["3. Allreduce of a 16 MB gradient, 2 ranks (ms per allreduce; GB/s = bytes / time)"]
    return out + _allreduce_grid(ar["mpi4py_s"], ar["bytes"], horovod)


def _across_hosts(hosts: dict) -> list[str]:
    title = "5. Across 2 hosts (the namespaced test cluster, ci/cluster.sh; launched from node1)"
    if "skipped" in hosts:
        return [title, f"   skipped: {hosts['skipped']}"]
    lat, ar = hosts["latency"], hosts["allreduce"]
    out = [title, f"   Seed job, {lat['hosts']} (microseconds per step)"]
    out += _grid(
        ["hvd-linreg", "floor NumPy+mpi4py", "tool/floor", "same w, b (rel. gap)"],
        [
            [
                f"{lat['tool_us']:.0f}",
                f"{lat['floor_us']:.0f}",
                f"{lat['tool_us'] / lat['floor_us']:.2f}",
                f"{'yes' if lat['agree'] else 'NO'} ({lat['relative_gap']:.0e})",
            ]
        ],
    )
    horovod = {f"Horovod {op}, MPI controller": t for op, t in ar["horovod_s"].items()}
    out += ["", f"   Allreduce of a 16 MB gradient, {ar['hosts']} (ms per allreduce)"]
    return out + _allreduce_grid(ar["mpi4py_s"], ar["bytes"], horovod)


def _exact(rows: list[dict]) -> list[str]:
    out = [
        "8. Exact solve, 8,000,000 rows x 64 features: seconds from the loaded shard to w and b "
        "(medians)"
    ]
    out += _grid(
        ["ranks", "hvd-linreg --solver exact", "normal equations (NumPy)", "ratio",
         "same w, b (max rel. gap)"],
        [[r["ranks"], f"{r['tool_s']:.2f}", f"{r['baseline_s']:.2f}",
          f"{r['tool_s'] / r['baseline_s']:.2f}",
          f"{'yes' if r['agree'] else 'NO'} ({r['relative_gap']:.0e})"] for r in rows],
    )  # fmt: skip
    return out


def _families(f: dict) -> list[str]:
    us = f["us"]
    out = [f"9. The seed job's step by model family, {f['ranks']} ranks (µs per step, medians)"]
    return out + _grid(
        ["--model", "µs per step", "ratio to linear"],
        [[model, f"{t:.1f}", f"{t / us['linear']:.2f}"] for model, t in us.items()],
    )


PEER_NAMES = {
    "sklearn": "scikit-learn PoissonRegressor (newton-cholesky)",
    "glum": "glum GeneralizedLinearRegressor",
    "statsmodels": "statsmodels GLM(Poisson), IRLS",
}


def _poisson(p: dict) -> list[str]:
    fits = p["fits"]
    out = [
        f"10. Poisson exact fit, {p['rows']:,} rows x {p['features']} features (float64): "
        "seconds from the loaded data to the coefficients (medians), peak RSS per rank"
    ]
    names = {f"tool_{n}": f"hvd-linreg --model poisson --solver exact, {n} rank{'s' * (n > 1)}"
             for n in (1, 2)}  # fmt: skip
    names.update(PEER_NAMES)
    out += _grid(
        ["fit", "seconds", "peak RSS (MiB)", "same coefficients (max rel. gap)"],
        [[names[k], f"{r['fit_s']:.2f}", f"{r['peak_rss_mib']:.0f}",
          f"{'yes' if r['agree'] else 'NO'} ({r['max_gap']:.0e})"] for k, r in fits.items()],
    )  # fmt: skip
    if p["missing"]:
        out.append(f"   not installed, so not run: {', '.join(p['missing'])} (pip install them)")
    return out


MULTINOMIAL_NAMES = {
    "sklearn-lbfgs": "scikit-learn LogisticRegression (lbfgs)",
    "sklearn-newton-cholesky": "scikit-learn LogisticRegression (newton-cholesky)",
    "statsmodels": "statsmodels MNLogit (newton)",
}


def fastest_peer(fits: dict) -> str | None:
    """The fastest peer whose coefficients are the tool's (a fit short of the optimum has not
    done the same work), or None."""
    agreed = [who for who, r in fits.items() if not who.startswith("tool_") and r["agree"]]
    return min(agreed, key=lambda who: fits[who]["fit_s"], default=None)


def _multinomial(m: dict) -> list[str]:
    fits, fastest = m["fits"], fastest_peer(m["fits"])
    out = [
        f"14. Multinomial exact fit, {m['rows']:,} rows x {m['features']} features (float64), "
        f"{m['classes']} classes: seconds from the loaded data to the coefficients (medians), "
        "peak RSS per rank"
    ]
    names = {f"tool_{n}": f"hvd-linreg --model multinomial --solver exact, {n} rank{'s' * (n > 1)}"
             for n in (1, 2)}  # fmt: skip
    names.update(MULTINOMIAL_NAMES)
    rows = []
    for k, r in fits.items():
        ratio = f"{r['fit_s'] / fits[fastest]['fit_s']:.2f}" if fastest else ""
        same = f"{'yes' if r['agree'] else 'NO'} ({r['max_gap']:.0e})"
        rows.append([names[k], f"{r['fit_s']:.2f}", ratio, f"{r['peak_rss_mib']:.0f}", same])
    out += _grid(
        ["fit", "seconds", "/ fastest peer", "peak RSS (MiB)", "same coefficients (max rel. gap)"],
        rows,
    )
    threads = m["threads"]
    given = ", ".join(f"{k}={v}" for k, v in threads["peers"].items())
    out.append(
        f"   threads: the tool {', '.join(f'{k}={v}' for k, v in threads['tool'].items())} a "
        f"rank (the tool's {m['iterations']} Newton iterations); every peer {given}, the "
        "machine's cores"
    )
    for peer, why in m["failed"].items():
        out.append(f"   {MULTINOMIAL_NAMES[peer]}: no result ({why.split(': ')[0]})")
    if m["missing"]:
        out.append(f"   not installed, so not run: {', '.join(m['missing'])} (pip install them)")
    return out


def _targets_multinomial(m: dict) -> list[tuple]:
    """The tool at 1 rank <= 0.75 x the fastest agreeing peer's time, at 2 ranks <= 0.45 x."""
    fits, fastest = m["fits"], fastest_peer(m["fits"])
    if fastest is None:
        return []
    return [
        (f"multinomial fit, {n} rank{'s' * (n > 1)}: hvd-linreg / {MULTINOMIAL_NAMES[fastest]}",
         fits[f"tool_{n}"]["fit_s"] / fits[fastest]["fit_s"], "<=", limit)
        for n, limit in ((1, 0.75), (2, 0.45))
    ]  # fmt: skip


WIDE_NAMES = {
    "glum": "glum 3.4 (tabmat's categorical matrices)",
    "h2o": "H2O 3.46 GLM (IRLSM; its train() alone)",
}


def _wide(w: dict) -> list[str]:
    out = [
        f"15. Wide categorical designs: InstEval, {w['rows']:,} rows, {w['coefficients']:,} "
        f"coefficients, a ridge (glum's alpha {w['alpha']:g}): seconds from the loaded data to "
        "the coefficients and for the whole process (medians), peak RSS per rank"
    ]
    for family, fits in w["cases"].items():
        rows = []
        for k, r in fits.items():
            name = WIDE_NAMES.get(
                k, f"hvd-linreg --solver exact, {k[5:]} rank{'s' * (k != 'tool_1')}"
            )
            glum = fits.get("glum")
            ratio = f"{r['fit_s'] / glum['fit_s']:.2f}" if glum else ""
            same = f"{'yes' if r['agree'] else 'NO'} ({r['max_gap']:.0e})"
            rows.append([name, f"{r['fit_s']:.2f}", ratio, f"{r['whole_s']:.2f}",
                         f"{r['peak_rss_mib']:.0f}", same])  # fmt: skip
        out.append(f"   {family}:")
        out += _grid(["fit", "seconds", "/ glum", "whole run (s)", "peak RSS (MiB)",
                      "same coefficients (max rel. gap)"], rows)  # fmt: skip
    if w["missing"]:
        out.append(f"   not installed, so not run: {', '.join(w['missing'])} (pip install them)")
    return out


def _targets_wide(w: dict) -> list[tuple]:
    """The tool's fit at 1 rank <= 0.25 x glum's, at 2 ranks <= 0.15 x, each family."""
    rows = []
    for family, fits in w["cases"].items():
        if "glum" not in fits or not fits["glum"]["agree"]:
            continue
        for n, limit in ((1, 0.25), (2, 0.15)):
            ratio = fits[f"tool_{n}"]["fit_s"] / fits["glum"]["fit_s"]
            label = f"InstEval {family}, {n} rank{'s' * (n > 1)}: hvd-linreg / glum"
            rows.append((label, ratio, "<=", limit))
    return rows


def _sparse(s: dict) -> list[str]:
    """Section 16's table (the sparse logistic path), or 18's (the dense gaussian one)."""
    dense = "density" not in s
    what = (
        f"18. A wide dense lasso path: {s['rows']:,} x {s['columns']:,} normal features, gaussian"
        if dense
        else f"16. A sparse logistic lasso path: {s['rows']:,} x {s['columns']:,} indicators, "
        f"{s['density']:.1%} of them 1"
    )
    out = [
        f"{what}, unstandardized, on glmnet's strengths: the first {s['strengths']} (where a "
        "working set would pass 4,096 features); seconds from the loaded rows to the "
        "coefficients"
    ]
    glmnet, rows = s["fits"].get("glmnet"), []
    matrix, rows_are = ("matrix", "array") if dense else ("dgCMatrix", "CSR rows")
    for k, r in s["fits"].items():
        name = (
            f"R glmnet 4.1 ({matrix}, thresh 1e-7)"
            if k == "glmnet"
            else (f"hvd_linreg.fit on the {rows_are}, {k[5:]} rank{'s' * (k != 'tool_1')}")
        )
        ratio = f"{r['fit_s'] / glmnet['fit_s']:.2f}" if glmnet else ""
        rows.append([name, f"{r['fit_s']:.2f}", ratio, str(r["strengths"]), f"{r['max_gap']:.0e}"])
    out += _grid(["fit", "seconds", "/ glmnet", "strengths", "gap to the tool's"], rows)
    if s["missing"]:
        out.append(f"   not installed, so not run: {', '.join(s['missing'])}")
    return out


def _generated_wide(g: dict) -> list[str]:
    levels = ", ".join(f"{n:,}" for n in g["levels"].values())
    out = [
        f"17. A long and wide generated design: {g['rows']:,} rows, categoricals of {levels} "
        f"levels and {g['dense']} dense columns, Poisson, --l2 {g['l2']:g}: the fit's seconds "
        "(from the loaded rows to the coefficients), the whole process's, peak RSS per rank"
    ]
    rows = []
    for k, r in g["fits"].items():
        name = f"hvd-linreg --solver exact, {k[5:]} rank{'s' * (k != 'tool_1')}"
        rss = " / ".join(f"{m:.0f}" for m in r["peak_rss_mib"])
        rows.append([name, f"{r['coefficients']:,}", f"{r['fit_s']:.1f}", f"{r['whole_s']:.1f}",
                     rss, f"{r['max_gap']:.0e}"])  # fmt: skip
    out += _grid(["fit", "coefficients", "seconds", "whole run (s)", "peak RSS (MiB)",
                  "gap to 1 rank"], rows)  # fmt: skip
    return out


def _targets_sparse(s: dict, what: str = "sparse logistic lasso", goal: float = 0.5) -> list:
    """The tool's path at 1 rank <= goal x glmnet's."""
    glmnet = s["fits"].get("glmnet")
    if glmnet is None:
        return []
    ratio = s["fits"]["tool_1"]["fit_s"] / glmnet["fit_s"]
    return [(f"{what}, 1 rank: hvd-linreg / glmnet", ratio, "<=", goal)]


def _csv(c: dict) -> list[str]:
    out = [
        f"11. CSV parse and encode, {c['rows']:,} rows ({c['bytes'] / 1e9:.2f} GB, two string "
        "columns): seconds from the page cache to the encoded rows in memory (medians)"
    ]
    names = {"tool_1": "hvd-linreg reader, 1 rank", "tool_2": "hvd-linreg reader, 2 ranks",
             "pyarrow": "pyarrow.csv.read_csv + dictionary_encode, 1 core"}  # fmt: skip
    out += _grid(
        ["reader", "seconds", "rows/s"],
        [[names[k], f"{t:.1f}", f"{c['rows'] / t:,.0f}"] for k, t in c["seconds"].items()],
    )
    return out


WHOLE_NAMES = {
    "tool_1": "hvd-linreg --solver exact, 1 rank (no launcher)",
    "tool_2": "hvd-linreg --solver exact, 2 ranks (mpirun)",
    "sklearn": "scikit-learn script: load, fit",
    "glum": "glum script: load, fit",
}


def _whole_runs(w: dict) -> list[str]:
    out = [
        f"12. Whole runs, start to exit: {w['rows']:,} x {w['features']} float64 rows (.npz) "
        "and a 5,000-row CSV (medians of wall seconds; the largest peak RSS of a rank)"
    ]
    rows = [
        [case, WHOLE_NAMES[who], f"{r['wall_s']:.2f}", f"{r['peak_rss_mib']:.0f}",
         f"{r['max_gap']:.0e}"]
        for case, by in w["cases"].items()
        for who, r in by.items()
    ]  # fmt: skip
    out += _grid(["data", "run", "seconds", "peak RSS (MiB)", "max rel. gap to the tool"], rows)
    if w["missing"]:
        out.append(f"   not installed, so not run: {', '.join(w['missing'])} (pip install them)")
    return out


def _targets_whole(w: dict) -> list[tuple]:
    """Every whole run at 1 rank within the fastest peer's; the small CSV's RSS within 300 MiB."""
    rows = []
    for case, by in w["cases"].items():
        peers = [r["wall_s"] for who, r in by.items() if not who.startswith("tool_")]
        if peers:
            label = f"whole run, {case}, 1 rank: hvd-linreg / fastest peer"
            rows.append((label, by["tool_1"]["wall_s"] / min(peers), "<=", 1.0))
        if "CSV" in case:
            rss = by["tool_1"]["peak_rss_mib"] / 300
            rows.append((f"peak RSS, {case}: hvd-linreg / 300 MiB", rss, "<=", 1.0))
    return rows


PATH_NAMES = {
    "tool_1": "hvd-linreg, 1 rank",
    "tool_2": "hvd-linreg, 2 ranks (mpirun)",
    "glmnet": "R glmnet: cv.glmnet(foldid)",
    "glum": "glum GeneralizedLinearRegressorCV",
    "sklearn": "scikit-learn ElasticNetCV / LogisticRegressionCV (saga, 20 Cs)",
}


def _paths(p: dict) -> list[str]:
    out = [
        f"13. Elastic-net path + 5-fold CV (l1_ratio 0.5, folds from a column): {p['rows']:,} x "
        f"{p['features']} correlated float64 features; seconds of the fit on loaded data"
    ]
    rows = []
    for family, by in p["families"].items():
        fastest = min((r["seconds"] for who, r in by.items() if not who.startswith("tool_")),
                      default=None)  # fmt: skip
        for who, r in by.items():
            ratio = f"{r['seconds'] / fastest:.2f}" if fastest else ""
            passes = str(r.get("passes", ""))
            rows.append([family, PATH_NAMES[who], f"{r['seconds']:.2f}", ratio,
                         str(r["strengths"]), passes, f"{r['alpha_min']:.4g}"])  # fmt: skip
    out += _grid(
        ["family", "system", "seconds", "/ fastest peer", "strengths", "passes", "alpha_min"], rows
    )
    if p["missing"]:
        out.append(f"   not installed, so not run: {', '.join(p['missing'])}")
    return out


def _targets_paths(p: dict) -> list[tuple]:
    """The path with CV at 1 rank <= 0.5 x the fastest peer's time, at 2 ranks <= 0.3 x."""
    rows = []
    for family, by in p["families"].items():
        peers = [r["seconds"] for who, r in by.items() if not who.startswith("tool_")]
        if peers:
            for ranks, goal in ((1, 0.5), (2, 0.3)):
                label = f"path + CV, {family}, {ranks} rank{'s' * (ranks > 1)}: / fastest peer"
                rows.append((label, by[f"tool_{ranks}"]["seconds"] / min(peers), "<=", goal))
    return rows


def render(results: dict) -> list[str]:
    m = results["machine"]
    out = [
        "",
        f"hvd-linreg benchmark: {m['cores']} cores, load average "
        f"{m['load_average_at_start'][0]:.1f} at start, {m['load_average_at_end'][0]:.1f} at end; "
        "medians of repeated runs; tool controller: MPI unless noted",
        "",
    ]
    for key, section in (
        ("latency", _latency),
        ("large_job", _large_job),
        ("allreduce", _allreduce),
    ):
        if key in results:
            out += section(results) + [""]
    if "time_to_result" in results:
        out += _time_to_result(results["time_to_result"]) + [""]
    if "hosts" in results:
        out += _across_hosts(results["hosts"]) + [""]
    if "exact" in results:
        out += _exact(results["exact"]) + [""]
    if "families" in results:
        out += _families(results["families"]) + [""]
    if "poisson" in results:
        out += _poisson(results["poisson"]) + [""]
    if "csv" in results:
        out += _csv(results["csv"]) + [""]
    if "whole_runs" in results:
        out += _whole_runs(results["whole_runs"]) + [""]
    if "paths" in results:
        out += _paths(results["paths"]) + [""]
    if "multinomial" in results:
        out += _multinomial(results["multinomial"]) + [""]
    if "wide" in results:
        out += _wide(results["wide"]) + [""]
    if "sparse" in results:
        out += _sparse(results["sparse"]) + [""]
    if "dense" in results:
        out += _sparse(results["dense"]) + [""]
    if "generated_wide" in results:
        out += _generated_wide(results["generated_wide"]) + [""]
    if "stacks" in results:
        out += _stacks(results["stacks"])
    if not results["targets"]:  # sections 8 and 9 alone have none
        return out
    out += ["", "Targets (ratios of figures measured in this run)"]
    out += _grid(
        ["target", "measured", "goal", "verdict"],
        [
            [t["target"], f"{t['ratio']:.2f}", t["limit"], "met" if t["met"] else "NOT met"]
            for t in results["targets"]
        ],
    )
    return out
