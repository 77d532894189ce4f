"""A stand-in executor that finishes chunk 0 last, so completion order never matches submission."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any


class ReversePool:
    """Duck-typed executor: completes its futures in reverse submission order."""

    def __init__(self, workers: int) -> None:
        self._max_workers = workers
        self._jobs: list[tuple[Future[Any], Any, tuple[Any, ...]]] = []

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self._jobs.append((fut, fn, args))
        if len(self._jobs) == self._max_workers:
            threading.Thread(target=self._finish, daemon=True).start()
        return fut

    def _finish(self) -> None:
        for fut, fn, args in reversed(self._jobs):
            time.sleep(0.05)
            fut.set_result(fn(*args))
        self._jobs.clear()

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass
