"""Progress on stderr: tqdm bars on a terminal, a periodic log line otherwise, nothing if quiet.

A pass over corpus files counts bytes (``unit="B"``) against the files' total size, so every
pass has a total and an ETA, compressed or not. What is counted is work done, not input read:
a pass whose batches go to worker processes credits a batch's bytes when its result comes
back (``Ledger``), not when it is read (the reader runs ahead of the workers). A heartbeat
thread keeps the output alive while no result comes back (workers starting, a slow batch): a
log line every ``LOG_EVERY`` seconds, the bar's clock redrawn every ``REDRAW_EVERY``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, TextIO, TypeVar

from tqdm import tqdm

__all__ = ["Ledger", "Progress"]

#: Seconds between log lines when stderr is not a terminal.
LOG_EVERY = 10.0
#: Seconds between redraws of a terminal bar that nothing updates (its elapsed time and rate).
REDRAW_EVERY = 1.0

_T = TypeVar("_T")


class Progress:
    """One stage's progress: ``with Progress("near dedup", total=n) as p: p.update(k)``.

    ``clock`` (``time.monotonic``) is what the log lines and the ETA measure time with; a test
    gives a fake one, with ``heartbeat=False``, and calls ``tick`` itself.
    """

    def __init__(
        self,
        stage: str,
        *,
        total: int | None = None,
        unit: str = "doc",
        quiet: bool = False,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool = True,
    ) -> None:
        self.stage = stage
        self.total = total
        self.unit = unit
        self.count = 0
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._clock = clock
        self._lock = threading.Lock()
        self._bar: tqdm[Any] | None = None
        self._started = clock()
        self._last_log = self._started
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        if not quiet and self._stream.isatty():
            self._bar = tqdm(
                total=total, desc=stage, unit=unit, file=self._stream, dynamic_ncols=True,
                unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
            )  # fmt: skip
        if not quiet and heartbeat:
            every = REDRAW_EVERY if self._bar is not None else LOG_EVERY
            self._beat = threading.Thread(
                target=self._heartbeat, args=(every,), name=f"progress-{stage}", daemon=True
            )
            self._beat.start()

    def update(self, n: int) -> None:
        """Count ``n`` more items."""
        with self._lock:
            self.count += n
            if self._bar is not None:
                self._bar.update(n)
            elif not self._quiet:
                self._log_if_due()

    def advance_to(self, position: int) -> None:
        """Count up to ``position`` items in all (a pass's bytes done so far)."""
        if position > self.count:
            self.update(position - self.count)

    def tick(self) -> None:
        """Log a line if ``LOG_EVERY`` seconds passed since the last one (no terminal), or
        redraw the bar (a terminal): the heartbeat's call."""
        if self._quiet:
            return
        with self._lock:
            if self._bar is not None:
                self._bar.refresh()
            else:
                self._log_if_due()

    def _log_if_due(self) -> None:
        now = self._clock()
        if now - self._last_log >= LOG_EVERY:
            self._last_log = now
            self._log()

    def _heartbeat(self, every: float) -> None:
        while not self._stop.wait(every):
            self.tick()

    def _log(self, done: bool = False) -> None:
        seconds = max(self._clock() - self._started, 1e-9)
        rate = self.count / seconds
        of, eta = "", ""
        if self.total is not None:
            of = f"/{self.total}"
            if not done:
                left = max(self.total - self.count, 0)
                eta = f", ETA {left / rate:.0f}s" if rate > 0 else ", ETA unknown"
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
        return self._clock() - self._started

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if self._bar is not None:
            self._bar.close()
        elif not self._quiet and kind is None:
            self._log(done=True)


class Ledger:
    """Bytes handed to workers and not yet done: each batch ``track`` passes on is noted with
    the reader's position after it; ``settle`` credits the oldest one's to ``progress`` when its
    result comes back (results come back in the order the batches went out)."""

    def __init__(self, progress: Progress, position: Callable[[], int]) -> None:
        self._progress = progress
        self._position = position
        self._marks: deque[int] = deque()

    def track(self, batches: Iterable[_T]) -> Iterator[_T]:
        """``batches`` as they are, each noted with the position after it."""
        for batch in batches:
            self._marks.append(self._position())
            yield batch

    def settle(self) -> None:
        """The oldest batch not yet done is done: its bytes count."""
        if self._marks:
            self._progress.advance_to(self._marks.popleft())
