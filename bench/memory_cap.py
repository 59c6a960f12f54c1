"""Train on a .npy larger than the memory the rank may use, under a cgroup (v1) memory cap.

Needs root and cgroup v1's memory controller (/sys/fs/cgroup/memory). One rank, in a cgroup
whose limit is --cap_mb (page cache included, as the kernel counts it); prints its exit code,
peak RSS (/usr/bin/time) and the cgroup's peak usage. Before the shard was read as used, the
rank copied the whole shard into memory and the kernel killed it.

    python bench/memory_cap.py [--before /tmp/old] [--data /tmp/hvd_linreg_io.npy]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CGROUP = Path("/sys/fs/cgroup/memory/hvd_linreg_cap")
RUN_FROM = """import sys
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, sys.argv.pop(1))
from hvd_linreg.cli import main
sys.exit(main())
"""


def run_capped(src: str, data: str, cap_mb: int, args: list[str]) -> dict:
    CGROUP.mkdir(exist_ok=True)
    (CGROUP / "memory.limit_in_bytes").write_text(str(cap_mb << 20))
    (CGROUP / "memory.max_usage_in_bytes").write_text("0")  # resets the peak
    with tempfile.TemporaryDirectory() as tmp:
        script, metrics = Path(tmp) / "run.py", Path(tmp) / "m.json"
        script.write_text(RUN_FROM)
        tool = [sys.executable, str(script), src, "--data", data, *args]
        cmd = ["/usr/bin/time", "-f", "peak RSS %M KiB", *tool, "--metrics_json", str(metrics)]
        enter = f'echo $$ > {CGROUP}/cgroup.procs && exec "$@"'
        done = subprocess.run(["sh", "-c", enter, "sh", *cmd], capture_output=True, text=True)
        m = json.loads(metrics.read_text()) if metrics.exists() else {}
    rss = [line for line in done.stderr.splitlines() if line.startswith("peak RSS")]
    return {
        "exit": done.returncode,
        "peak_rss_mib": int(rss[-1].split()[2]) / 1024 if rss else None,
        "cgroup_peak_mib": int((CGROUP / "memory.max_usage_in_bytes").read_text()) / 2**20,
        "samples_per_s": m.get("samples_per_s"),
        "loss": m.get("loss"),
        "tail": done.stderr.strip().splitlines()[-2:],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="/tmp/hvd_linreg_io.npy", help="a .npy, larger than the cap")
    p.add_argument("--cap_mb", type=int, default=700)
    p.add_argument("--before", help="a tree of the code before, run first")
    args = p.parse_args()
    size_mb = os.path.getsize(args.data) / 2**20
    flags = ["--batch_size", "65536", "--num_steps", "100", "--log_every", "50", "--quiet"]
    print(f"{args.data}: {size_mb:.0f} MiB, cap {args.cap_mb} MiB, 1 rank, {' '.join(flags)}")
    trees = ([("before", args.before)] if args.before else []) + [("after", str(REPO))]
    try:
        for label, src in trees:
            print(label, json.dumps(run_capped(src, args.data, args.cap_mb, flags)))
    finally:
        CGROUP.rmdir()


if __name__ == "__main__":
    main()
