"""Progress on stderr: tqdm bars on a terminal, a periodic log line otherwise, nothing if quiet.

A pass over corpus files counts bytes (``unit="B"``) against the files' total size, so every
pass has a total and an ETA, compressed or not.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

from tqdm import tqdm

__all__ = ["Progress"]

#: Seconds between log lines when stderr is not a terminal.
LOG_EVERY = 10.0


class Progress:
    """One stage's progress: ``with Progress("near dedup", total=n) as p: p.update(k)``."""

    def __init__(
        self,
        stage: str,
        *,
        total: int | None = None,
        unit: str = "doc",
        quiet: bool = False,
        stream: TextIO | None = None,
    ) -> None:
        self.stage = stage
        self.total = total
        self.unit = unit
        self.count = 0
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._bar: tqdm[Any] | None = None
        self._started = time.monotonic()
        self._last_log = self._started
        if not quiet and self._stream.isatty():
            self._bar = tqdm(
                total=total, desc=stage, unit=unit, file=self._stream, dynamic_ncols=True,
                unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
            )  # fmt: skip

    def update(self, n: int) -> None:
        """Count ``n`` more items."""
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
        elif not self._quiet and time.monotonic() - self._last_log >= LOG_EVERY:
            self._last_log = time.monotonic()
            self._log()

    def advance_to(self, position: int) -> None:
        """Count up to ``position`` items in all (a reader's bytes so far)."""
        if position > self.count:
            self.update(position - self.count)

    def _log(self, done: bool = False) -> None:
        seconds = max(time.monotonic() - self._started, 1e-9)
        rate = self.count / seconds
        of, eta = "", ""
        if self.total is not None:
            of = f"/{self.total}"
            if not done and rate > 0:
                eta = f", ETA {max(self.total - self.count, 0) / rate:.0f}s"
        state = "done" if done else "running"
        units = "bytes" if self.unit == "B" else f"{self.unit}s"
        print(
            f"neardup: {self.stage}: {state}: {self.count}{of} {units} "
            f"in {seconds:.1f}s ({rate:.0f} {units}/s{eta})",
            file=self._stream,
            flush=True,
        )

    @property
    def seconds(self) -> float:
        """Seconds since the stage started."""
        return time.monotonic() - self._started

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.close()
        elif not self._quiet and kind is None:
            self._log(done=True)
