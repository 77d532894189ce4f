"""A stand-in executor that finishes chunk 0 last, so completion order never matches submission."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

# Submissions pending this long with no new one are run, the last submitted first.
_QUIET = 0.05


class ReversePool:
    """Duck-typed executor: completes its futures in reverse submission order.

    Jobs are held until no job has been submitted for a moment (the caller is then waiting for
    a result), and then run newest first, so every batch of submissions completes backwards.
    """

    def __init__(self, workers: int) -> None:
        self._max_workers = workers
        self._jobs: list[tuple[Future[Any], Any, tuple[Any, ...]]] = []
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._runner: threading.Thread | None = None

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        with self._lock:
            self._jobs.append((fut, fn, args))
            self._last = time.monotonic()
            if self._runner is None:
                self._runner = threading.Thread(target=self._run, daemon=True)
                self._runner.start()
        return fut

    def _run(self) -> None:
        while True:
            time.sleep(_QUIET / 2)
            with self._lock:
                if time.monotonic() - self._last < _QUIET:
                    continue
                jobs, self._jobs = self._jobs, []
                if not jobs:
                    self._runner = None
                    return
            for fut, fn, args in reversed(jobs):
                try:
                    fut.set_result(fn(*args))
                except Exception as exc:  # as an executor does: the caller sees it, no hang
                    fut.set_exception(exc)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass
