"""core/_fanout.py in process: chunk bounds, what fan_out submits, results in order, the pool
a spawn_pool call configures (no worker started), the parent watch and the exit-code wait."""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest

from neardup.core import _fanout
from neardup.core._fanout import (
    PARENT_CHECK_SECONDS,
    UNGUARDED_MAIN_EXIT,
    chunk_bounds,
    fan_out,
    in_order,
    ordered_map,
    pool_size,
    spawn_pool,
    start_worker,
)
from neardup.core.errors import ParameterError, WorkerError


@pytest.mark.parametrize(
    ("n", "parts", "bounds"),
    [
        (0, 3, [(0, 0)]),
        (1, 3, [(0, 1)]),
        (5, 1, [(0, 5)]),
        (5, 0, [(0, 5)]),
        (5, 2, [(0, 3), (3, 5)]),
        (7, 3, [(0, 3), (3, 5), (5, 7)]),
        (6, 3, [(0, 2), (2, 4), (4, 6)]),
        (3, 5, [(0, 1), (1, 2), (2, 3)]),
        (10, 4, [(0, 3), (3, 6), (6, 8), (8, 10)]),
    ],
)
def test_chunk_bounds_are_contiguous_and_differ_by_at_most_one(n, parts, bounds):
    assert chunk_bounds(n, parts) == bounds


def test_fan_out_submits_each_chunk_as_a_list_with_the_arguments_in_order():
    with ThreadPoolExecutor(2) as pool:
        futures = fan_out(pool, lambda chunk, a, b: (chunk, a, b), (1, 2, 3, 4, 5), 2, "x", 9)
        assert in_order(futures) == [([1, 2, 3], "x", 9), ([4, 5], "x", 9)]
    assert in_order([]) == []


def test_fan_out_on_a_pool_shut_down_is_a_worker_error():
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    with pytest.raises(WorkerError) as caught:
        fan_out(pool, len, ["a"], 1)
    assert str(caught.value).startswith("a signature worker process died: cannot schedule")
    assert isinstance(caught.value.__cause__, RuntimeError)


def _broken() -> Future:
    future: Future = Future()
    future.set_exception(BrokenProcessPool("gone"))
    return future


def test_results_of_a_broken_pool_are_a_worker_error():
    done: Future = Future()
    done.set_result(1)
    with pytest.raises(WorkerError) as caught:
        in_order([done, _broken()])
    assert str(caught.value) == "a signature worker process died: gone"
    assert isinstance(caught.value.__cause__, BrokenProcessPool)


class _OneBroken:
    _max_workers = 1

    def submit(self, fn, *args):
        return _broken()


def test_ordered_map_turns_a_broken_result_into_a_worker_error():
    with pytest.raises(WorkerError, match=r"^a signature worker process died: gone$"):
        list(ordered_map(_OneBroken(), len, [[1], [2], [3], [4]], ahead=1))
    with pytest.raises(WorkerError, match=r"^a signature worker process died: gone$"):
        list(ordered_map(_OneBroken(), len, [[1]]))


def test_ordered_map_here_passes_the_arguments():
    assert list(ordered_map(None, lambda b, x, y: b * x + y, [1, 2], 3, 4)) == [(1, 7), (2, 10)]


def test_pool_size_is_the_pools_worker_count_or_one():
    with ThreadPoolExecutor(3) as pool:
        assert pool_size(pool) == 3
    assert pool_size(object()) == 1


@pytest.mark.parametrize("workers", [0, -1, True, 1.5, "2", None])
def test_spawn_pool_refuses_a_worker_count_that_is_not_a_whole_number(workers):
    with pytest.raises(ParameterError) as caught:
        spawn_pool(workers)
    assert str(caught.value) == f"workers must be a whole number >= 1, got {workers!r}"


def _warm() -> None:
    pass


def test_spawn_pool_is_a_spawn_pool_whose_workers_watch_this_process_and_warm_up():
    pool = spawn_pool(3, warm=_warm)  # no worker starts before a task is submitted
    try:
        assert pool._max_workers == 3
        assert pool._mp_context.get_start_method() == "spawn"
        assert pool._initializer is start_worker
        assert pool._initargs == (os.getpid(), _warm)
    finally:
        pool.shutdown()
    pool = spawn_pool(1)
    try:
        assert pool._initargs == (os.getpid(), None)
    finally:
        pool.shutdown()


def test_spawn_pool_in_a_worker_importing_an_unguarded_script_exits_with_its_own_code(
    monkeypatch,
):
    def exit_(code):
        raise SystemExit(code)

    monkeypatch.setattr(_fanout.process.current_process(), "_inheriting", True, raising=False)
    monkeypatch.setattr(_fanout.os, "_exit", exit_)
    with pytest.raises(SystemExit) as caught:
        spawn_pool(2)
    assert caught.value.code == UNGUARDED_MAIN_EXIT == 87


def test_start_worker_watches_the_parent_then_warms(monkeypatch):
    calls = []
    monkeypatch.setattr(_fanout, "watch_parent", lambda parent: calls.append(("watch", parent)))
    start_worker(41, lambda: calls.append("warm"))
    start_worker(42)
    assert calls == [("watch", 41), "warm", ("watch", 42)]


def test_the_parent_watch_is_a_daemon_thread_running_the_orphan_check(monkeypatch):
    seen = []

    def check(parent):
        thread = threading.current_thread()
        seen.append((parent, thread.name, thread.daemon))

    monkeypatch.setattr(_fanout, "_exit_when_orphaned", check)
    _fanout.watch_parent(1234)
    for thread in threading.enumerate():
        if thread.name == "watch-parent":
            thread.join(5)
    assert seen == [(1234, "watch-parent", True)]


def test_an_orphaned_worker_exits_with_code_1_once_its_parent_changes(monkeypatch):
    parents = iter([7, 7, 7, 1])
    sleeps = []

    def exit_(code):
        raise SystemExit(code)

    monkeypatch.setattr(_fanout.os, "getppid", lambda: next(parents))
    monkeypatch.setattr(_fanout.os, "_exit", exit_)
    monkeypatch.setattr(_fanout.time, "sleep", sleeps.append)
    with pytest.raises(SystemExit) as caught:
        _fanout._exit_when_orphaned(7)
    assert caught.value.code == 1
    assert sleeps == [PARENT_CHECK_SECONDS] * 3 == [0.25] * 3


class _Process:
    def __init__(self, code, looks):
        self.code, self.looks, self.joins = code, looks, []

    def join(self, timeout):
        self.joins.append(timeout)

    @property
    def exitcode(self):
        self.looks -= 1
        return self.code if self.looks < 0 else None


def test_exit_code_waits_two_seconds_by_default_for_the_code(monkeypatch):
    process = _Process(5, 3)
    assert _fanout._exit_code(process) == 5
    assert process.joins == [2.0]
    clock = iter([100.0, 100.0, 100.05, 100.2])
    monkeypatch.setattr(_fanout.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(_fanout.time, "sleep", lambda s: None)
    never = _Process(None, 0)
    assert _fanout._exit_code(never, wait=0.1) is None
    assert never.joins == [0.1]
    assert never.looks == -4  # at 100.0, 100.05 and 100.2 (past the deadline), then read


def test_exit_code_looks_every_10_ms_until_the_deadline_inclusive_of_none(monkeypatch):
    clock = iter([100.0, 100.0, 100.25, 100.5, 100.75])
    sleeps = []
    monkeypatch.setattr(_fanout.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(_fanout.time, "sleep", sleeps.append)
    never = _Process(None, 0)
    assert _fanout._exit_code(never, wait=0.5) is None
    # Looked at 100.0 and 100.25; at 100.5, the deadline, no longer waited for.
    assert sleeps == [0.01, 0.01]
    assert never.looks == -4


class _Inline:
    """Runs each task as it is submitted."""

    _max_workers = 2

    def submit(self, fn, *args):
        future: Future = Future()
        future.set_result(fn(*args))
        return future


def test_ordered_map_reads_two_batches_a_worker_ahead_by_default():
    read = []

    def batches():
        for i in range(8):
            read.append(i)
            yield i

    out = ordered_map(_Inline(), lambda b: b * 10, batches())
    assert next(out) == (0, 0)
    assert read == [0, 1, 2, 3, 4]  # the one waited for and 2 x 2 past it
    assert list(out) == [(i, 10 * i) for i in range(1, 8)]


class _Unguarded:
    """A pool whose one worker exited re-running an unguarded script, and takes no work."""

    _max_workers = 1

    def __init__(self):
        self._processes = {0: _Process(UNGUARDED_MAIN_EXIT, 0)}

    def submit(self, fn, *args):
        raise BrokenProcessPool("a child process terminated abruptly")


def test_ordered_map_on_workers_that_reran_an_unguarded_script_is_one_error_naming_it(
    monkeypatch,
):
    from neardup.core.errors import UnguardedMainError

    # The script is the main module's file (set here: a test runner's __main__ may have none).
    script = "/data/jobs/dedup_corpus.py"
    monkeypatch.setattr(sys.modules["__main__"], "__file__", script, raising=False)
    with pytest.raises(UnguardedMainError) as caught:
        list(ordered_map(_Unguarded(), len, [[1], [2]]))
    assert caught.value.script == script
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(UnguardedMainError) as caught:
        fan_out(_Unguarded(), len, ["a", "b"], 2)
    assert caught.value.script == script
    # Where __main__ has no file (an interactive session), none is named.
    monkeypatch.delattr(sys.modules["__main__"], "__file__")
    with pytest.raises(UnguardedMainError) as caught:
        list(ordered_map(_Unguarded(), len, [[1]]))
    assert caught.value.script is None
