"""Spawn pools whose workers are warmed as they start (``spawn_pool(warm=warm_worker)``)."""

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from neardup.core import _compiled, _scripts, _tokens
from neardup.core._fanout import UNGUARDED_MAIN_EXIT
from neardup.core.engine import (
    fan_out,
    ordered_map,
    raise_worker_error,
    spawn_pool,
    stop_pool,
    warm_worker,
)
from neardup.core.errors import ParameterError, UnguardedMainError, WorkerError
from neardup.core.minhash import signatures


def worker_state(hold: float = 0.0) -> tuple[int, bool, bool]:
    """(pid, compiled kernels loaded, code-point tables built) of the worker running it, after
    holding it ``hold`` seconds."""
    time.sleep(hold)
    tables = _tokens.char_table.cache_info().currsize > 0
    return os.getpid(), _compiled._State.kernels is not None, tables


def test_every_worker_is_warmed_before_its_first_task():
    with spawn_pool(2, warm=warm_worker) as pool:
        # Two tasks at once, each holding its worker: the pool starts a second worker.
        states = [f.result() for f in [pool.submit(worker_state, 0.5) for _ in range(2)]]
    assert len({pid for pid, _, _ in states}) == 2
    assert all(loaded and tables for _, loaded, tables in states)


def test_a_plain_pool_does_not_load_the_compiled_kernels_up_front():
    with spawn_pool(1) as pool:
        _, loaded, tables = pool.submit(worker_state).result()
    assert not loaded and not tables


def test_warm_worker_says_numpy_where_jit_is_off(monkeypatch):
    monkeypatch.setenv(_compiled.JIT_VARIABLE, "0")
    with spawn_pool(1, warm=warm_worker) as pool:
        assert pool.submit(warm_worker).result() is False
        _, loaded, tables = pool.submit(worker_state).result()
    assert not loaded and tables


def test_a_warmed_pool_signs_like_one_process_and_reports_unencodable_text():
    batch = [f"Ünïcödé wörds {i} ΑΣ façade «quoted» 日本語 " * (1 + i % 9) for i in range(300)]
    with spawn_pool(2, warm=warm_worker) as pool:
        assert np.array_equal(signatures(batch, pool=pool), signatures(batch))
        # Named by its place in the whole call, not in the slab it was sent in.
        bad = ["fine text"] * 5000 + ["lone \ud800 surrogate"]
        with pytest.raises(ParameterError, match="text 5000 is not valid Unicode"):
            signatures(bad, pool=pool)


SCRIPT = """
from neardup import Doc, near_dedup
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
docs = [Doc(id=str(i), text=" ".join(words[(i + j) % 12] + str(j % 7) for j in range(200)))
        for i in range(3000)]
{call}
"""


def _script(tmp_path, call: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "job.py").write_text(SCRIPT.format(call=call))
    return subprocess.run(
        [sys.executable, "job.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


def test_an_unguarded_script_gets_one_error_naming_the_cause_and_the_fix(tmp_path):
    ran = _script(tmp_path, "print(len(list(near_dedup(docs, workers=2))))")
    assert ran.returncode == 1
    assert ran.stderr.count("Traceback") == 1, ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith("neardup.core.errors.UnguardedMainError: "), last
    assert "job.py" in last
    assert 'if __name__ == "__main__":' in last
    assert "bootstrapping" not in ran.stderr  # Python's own page-long message, once per worker


def test_a_guarded_script_runs_on_the_pool(tmp_path):
    call = (
        'if __name__ == "__main__":\n'
        "    two, one = (list(near_dedup(docs, workers=w)) for w in (2, 1))\n"
        "    print(len(two), [d.id for d in two] == [d.id for d in one])"
    )
    ran = _script(tmp_path, call)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["1", "True"]  # 3,000 texts with one shingle set, one survivor


class _Worker:
    """A pool's worker process as ``raise_worker_error`` reads it: its exit code is noted only
    after ``reaped_after`` looks (the pool's own thread may be reaping it)."""

    def __init__(self, code: int, reaped_after: int = 0) -> None:
        self.code, self.looks = code, reaped_after

    def join(self, timeout: float) -> None:
        pass

    @property
    def exitcode(self) -> int | None:
        self.looks -= 1
        return self.code if self.looks < 0 else None


class _BrokenPool:
    """A pool whose workers exited with ``codes`` and that takes no more work."""

    def __init__(self, *codes: int, reaped_after: int = 0) -> None:
        self._processes = {i: _Worker(c, reaped_after) for i, c in enumerate(codes)}
        self._max_workers = len(codes)

    def submit(self, *args, **kwargs):
        raise BrokenProcessPool("a child process terminated abruptly")


def test_workers_that_reran_an_unguarded_script_are_one_error_naming_it(monkeypatch):
    # The script is the main module's file (set here: a test runner's __main__ may have none).
    script = "/data/jobs/dedup_corpus.py"
    monkeypatch.setattr(sys.modules["__main__"], "__file__", script, raising=False)
    # The exit code is seen only once the pool's thread has reaped the worker (a few looks).
    pool = _BrokenPool(1, UNGUARDED_MAIN_EXIT, reaped_after=3)
    with pytest.raises(UnguardedMainError) as caught:
        fan_out(pool, len, ["a", "b"], 2)
    assert caught.value.script == script
    assert str(caught.value).startswith(f"the signature worker processes re-ran {script!r} ")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_worker_that_died_otherwise_is_a_worker_error_saying_why():
    for pool in (_BrokenPool(-9, 1), None):
        with pytest.raises(WorkerError) as caught:
            raise_worker_error(BrokenProcessPool("boom"), pool)
        assert type(caught.value) is WorkerError
        assert str(caught.value) == "a signature worker process died: boom"
        assert isinstance(caught.value.__cause__, BrokenProcessPool)
    with pytest.raises(WorkerError, match=r"^a signature worker process died: a child process "):
        fan_out(_BrokenPool(1), len, ["a"], 1)
    with pytest.raises(WorkerError, match=r"^a signature worker process died: a child process "):
        list(ordered_map(_BrokenPool(1), len, [["a"]]))


def test_warm_worker_builds_the_tables_of_its_tokenizer_in_this_process():
    tables = (_tokens.kernel_table, _scripts.char_classes)
    for table in tables:
        table.cache_clear()
    assert warm_worker() is True  # numba is a dependency: the compiled kernels load
    assert _scripts.char_classes.cache_info().currsize == 0  # words need no script table
    warm_worker("multilingual")
    assert _scripts.char_classes.cache_info().currsize == 1


def test_ordered_map_reads_ahead_at_most_ahead_batches_a_worker_and_keeps_order():
    read = []

    def batches():
        for i in range(10):
            read.append(i)
            yield [i, i]

    def scaled(batch, factor):
        time.sleep(0.001 * (batch[0] % 3))  # later batches may finish first
        return [x * factor for x in batch]

    with ThreadPoolExecutor(2) as pool:
        out = ordered_map(pool, scaled, batches(), 10, ahead=2)
        assert next(out) == ([0, 0], [0, 0])
        assert read == [0, 1, 2, 3, 4]  # the one waited for and 2 a worker past it
        assert list(out) == [([i, i], [10 * i, 10 * i]) for i in range(1, 10)]
    assert list(ordered_map(None, scaled, batches(), 3)) == [
        ([i, i], [3 * i, 3 * i]) for i in range(10)]  # fmt: skip


def _hold(folder: str) -> None:
    """A worker's start, or a task, that does not end by itself (a warm-up or a chunk that
    nobody waits for any more), once it has said so with a file in ``folder``."""
    Path(folder, str(os.getpid())).touch()
    time.sleep(3600)


@pytest.mark.parametrize("held", ["starting", "busy"])
def test_stop_pool_ends_workers_still_starting_or_busy_instead_of_waiting(tmp_path, held):
    hold = partial(_hold, str(tmp_path))
    pool = spawn_pool(2, warm=hold if held == "starting" else None)
    # Two tasks at once: the pool starts both workers.
    futures = [pool.submit(hold if held == "busy" else os.getpid) for _ in range(2)]
    workers = list(pool._processes.values())
    stopper = threading.Thread(target=stop_pool, args=(pool,), daemon=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(tmp_path.iterdir())) == len(workers) == 2  # both held
        stopper.start()
        stopper.join(timeout=120)  # an hour of _hold each, were they waited for
        assert not stopper.is_alive(), "stop_pool waited for its workers"
        assert [w.exitcode for w in workers] == [-signal.SIGTERM] * 2  # ended, and reaped
        for future in futures:
            assert future.cancelled() or isinstance(future.exception(), BrokenProcessPool)
    finally:
        for worker in workers:  # nothing left behind, whatever failed
            if worker.exitcode is None:
                worker.kill()
        if stopper.is_alive():
            stopper.join(timeout=60)
