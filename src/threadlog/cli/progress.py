"""Progress on stderr for reads that take more than a second.

Nothing is printed before 1 second (`THREADLOG_PROGRESS_AFTER` sets another); then, on a
terminal, one line rewritten in place (`label 120/551`), elsewhere one line at the start
and one at the end, the hint with the first. Label and hint are terminal-safe.
"""

from __future__ import annotations

import os
import sys
import time

from threadlog.terminal import safe_line

__all__ = ["Progress"]


class Progress:
    def __init__(self, label: str, hint: str = "") -> None:
        self.label = safe_line(label)
        self.hint = safe_line(hint)
        self.after = float(os.environ.get("THREADLOG_PROGRESS_AFTER") or 1.0)
        self.start = time.monotonic()
        self.shown = False
        self.total = 0
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        self.total = total
        if not self.shown and time.monotonic() - self.start < self.after:
            return
        if not self.shown:
            self.shown = True
            hint = f" ({self.hint})" if self.hint else ""
            if not self.tty:
                print(f"{self.label}: {total}…{hint}", file=sys.stderr, flush=True)
                return
            print(f"{self.label}{hint}", file=sys.stderr, flush=True)
        if self.tty:
            print(f"\r{self.label} {done}/{total}", end="", file=sys.stderr, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:  # an exception propagates as it is
        if self.shown:
            took = time.monotonic() - self.start
            end = "\r" if self.tty else ""
            print(f"{end}{self.label}: {self.total} done in {took:.1f} s", file=sys.stderr)
