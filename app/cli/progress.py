"""Progress on stderr: tqdm bars on a terminal, a periodic log line otherwise, nothing if quiet.

A pass over corpus files counts bytes (``unit="B"``) against the files' total size, so every
pass has a total and an ETA, compressed or not. What is counted is work done, not input read:
a pass whose batches go to worker processes credits a batch's bytes when its result comes
back (``Ledger``), not when it is read (the reader runs ahead of the workers). A heartbeat
thread keeps the output alive while no result comes back (workers starting, a slow batch): a
log line every ``LOG_EVERY`` seconds, the bar's clock redrawn every ``REDRAW_EVERY``.

A Spark run (``StageProgress``) shows each of neardup's stages (signatures, classes,
candidates, ...) the same way, counting the tasks its Spark jobs have finished out of those they
have, from Spark's status tracker (each stage's jobs run in a job group of their own,
``app.spark.job``); a thread polls it every ``POLL_SECONDS``. Spark's own console bar is off: it
ends without a newline, so the summary after it shared its line.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, Protocol, TextIO, TypeVar

from tqdm import tqdm

__all__ = ["POLL_SECONDS", "Ledger", "Progress", "StageProgress", "task_counts"]

#: Seconds between log lines when stderr is not a terminal.
LOG_EVERY = 10.0
#: Seconds between redraws of a terminal bar that nothing updates (its elapsed time and rate).
REDRAW_EVERY = 1.0
#: The heartbeat's shortest period (a LOG_EVERY of 0 logs at every update, not in a busy loop).
_MIN_BEAT = 0.1

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

    def set_total(self, total: int) -> None:
        """The total is now ``total`` (a Spark stage's tasks grow as its jobs start)."""
        with self._lock:
            self.total = total
            if self._bar is not None and self._bar.total != total:
                self._bar.total = total
                self._bar.refresh()

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
        while not self._stop.wait(max(every, _MIN_BEAT)):
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
        shown = f"{rate:.0f}" if rate >= 10 or rate == 0 else f"{rate:.2g}"
        print(
            f"neardup: {self.stage}: {state}: {self.count}{of} {units} "
            f"in {seconds:.1f}s ({shown} {units}/s{eta})",
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


#: Seconds between two looks at Spark's status tracker.
POLL_SECONDS = 0.5


class _Tracker(Protocol):
    """What is used of ``pyspark.StatusTracker``."""

    def getJobIdsForGroup(self, jobGroup: str | None = None) -> list[int]: ...
    def getJobInfo(self, jobId: int) -> Any: ...
    def getStageInfo(self, stageId: int) -> Any: ...


def task_counts(tracker: _Tracker, group: str) -> tuple[int, int]:
    """``(finished, all)`` tasks of the stages of the jobs in ``group`` so far, a stage shared
    by several jobs counted once. A stage Spark skips (its result is there already: a persisted
    or shuffled one) is listed with its tasks but never runs: one that has not started counts
    for nothing once its job has ended or a later stage of its job (a higher id) has started."""
    counts: dict[int, tuple[int, int]] = {}
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        if info is None:
            continue
        found = {s: tracker.getStageInfo(s) for s in info.stageIds}
        stages = {s: i for s, i in found.items() if i is not None}
        started = [s for s, i in stages.items() if i.numActiveTasks or i.numCompletedTasks]
        ended = str(getattr(info, "status", "RUNNING")) not in ("RUNNING", "UNKNOWN")
        for stage, i in stages.items():
            done = int(i.numCompletedTasks)
            idle = not (i.numActiveTasks or done)
            skipped = idle and (ended or any(s > stage for s in started))
            counts[stage] = (done, done if skipped else max(int(i.numTasks), done))
    return sum(d for d, _ in counts.values()), sum(t for _, t in counts.values())


class StageProgress:
    """``with StageProgress(tracker, quiet) as p: p.stage("signatures", group) ...``: the
    progress of each stage in turn, the previous one closed (its ``done`` line) as the next one
    starts. ``clock`` and ``poll`` are for tests (a fake clock, and no thread: ``poll=None``,
    the test calls ``look`` itself)."""

    def __init__(
        self,
        tracker: _Tracker,
        quiet: bool = False,
        *,
        poll: float | None = POLL_SECONDS,
        **progress: Any,
    ) -> None:
        self._tracker = tracker
        self._quiet = quiet
        self._options = progress
        self._lock = threading.Lock()
        self._current: tuple[Progress, str] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if poll is not None and not quiet:
            self._thread = threading.Thread(
                target=self._follow, args=(poll,), name="spark-progress", daemon=True
            )
            self._thread.start()

    def stage(self, name: str, group: str) -> None:
        """Stage ``name`` starts; its Spark jobs run in the job group ``group``."""
        with self._lock:
            self._close()
            progress = Progress(name, unit="task", total=0, quiet=self._quiet, **self._options)
            self._current = (progress, group)

    def look(self) -> None:
        """Bring the current stage's counts up to date from the tracker."""
        with self._lock:
            if self._current is None:
                return
            progress, group = self._current
            done, total = task_counts(self._tracker, group)
            progress.set_total(total)
            progress.advance_to(done)

    def _follow(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self.look()
            except Exception:  # a tracker gone with its context: the run says why
                return

    def _close(self) -> None:
        if self._current is not None:
            progress, group = self._current
            self._current = None
            try:
                done, total = task_counts(self._tracker, group)
            except Exception:  # the tracker gone: the counts so far
                done, total = progress.count, progress.total or 0
            progress.set_total(total)
            progress.advance_to(done)
            progress.__exit__(None, None, None)

    def __enter__(self) -> StageProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if kind is None:
                self._close()
            elif self._current is not None:  # a failed run: its error follows, not a done line
                self._current[0].__exit__(kind, exc, tb)
                self._current = None
