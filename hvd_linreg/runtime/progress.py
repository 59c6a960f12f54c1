"""What rank 0 shows while an exact fit runs (a path with its folds, IRLS, Newton's method for
classes): nothing for its first SHOW_AFTER seconds, so that a short fit prints only its
summary; then on a terminal a bar (tqdm), and into a file or a pipe a plain line at most every
EVERY seconds. SGD shows its steps instead (monitor.py). A leaf: the solvers get one from their
job (ranks.Job.progress)."""

from __future__ import annotations

import sys
import time

SHOW_AFTER = 2.0  # seconds of a fit before its progress shows
EVERY = 5.0  # seconds between plain lines


class Progress:
    """A fit's progress: update(done, passes) after each strength or iteration; close() at
    its end. shown False: silent (another rank, --quiet, a library call)."""

    def __init__(self, what: str, total: int | None, unit: str, shown: bool):
        self.what, self.total, self.unit, self.shown = what, total, unit, shown
        self.started = self.last = time.monotonic()
        self.bar = None

    def update(self, done: int, passes: int | None = None) -> None:
        if not self.shown:
            return
        now = time.monotonic()
        if now - self.started < SHOW_AFTER:
            return
        if sys.stdout.isatty():
            self._bar(done, passes)
        elif now - self.last >= EVERY or self.last == self.started:
            self.last = now
            of = f" of {self.total}" if self.total else ""
            more = f", {passes} passes over the data" if passes is not None else ""
            sys.stdout.write(
                f"progress: {self.what}, {self.unit} {done}{of}{more}, {now - self.started:.0f} s\n"
            )
            sys.stdout.flush()

    def _bar(self, done: int, passes: int | None) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc=self.what, unit=f" {self.unit}", leave=False)
        self.bar.update(done - self.bar.n)
        if passes is not None:
            self.bar.set_postfix(passes=passes, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
