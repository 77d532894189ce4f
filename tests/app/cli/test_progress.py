"""Progress follows work done (issue 33.2): bytes count when their signatures come back, a log
line comes every LOG_EVERY seconds even while none does, with an ETA once there is a rate.
Time is a fake clock throughout: no sleeps, no timed assertions."""

import io
import json
import os
import threading
from types import SimpleNamespace

import pytest

from neardup.app.cli import dedup as dedup_module
from neardup.app.cli import index as index_module
from neardup.app.cli import main
from neardup.app.cli import progress as progress_module
from neardup.app.cli.progress import Ledger, Progress, StageProgress, task_counts
from neardup.core.engine import batch_signatures


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def logged(**kwargs):
    clock, stream = FakeClock(), io.StringIO()
    progress = Progress("signatures", stream=stream, clock=clock, heartbeat=False, **kwargs)
    return progress, clock, stream


def test_progress_logs_every_log_every_seconds_while_nothing_is_done():
    progress, clock, stream = logged(total=1000, unit="B")
    clock.now += progress_module.LOG_EVERY - 0.5
    progress.tick()
    assert stream.getvalue() == ""
    clock.now += 0.5
    progress.tick()
    assert stream.getvalue() == (
        "neardup: signatures: running: 0/1000 bytes in 10.0s (0 bytes/s, ETA unknown)\n"
    )
    clock.now += progress_module.LOG_EVERY
    progress.tick()
    assert stream.getvalue().count("\n") == 2


def test_progress_eta_is_the_bytes_left_at_the_rate_of_bytes_done():
    progress, clock, stream = logged(total=1000, unit="B")
    clock.now += 20.0
    progress.update(250)  # 12.5 bytes/s: 750 left take 60 s
    assert stream.getvalue() == (
        "neardup: signatures: running: 250/1000 bytes in 20.0s (12 bytes/s, ETA 60s)\n"
    )
    clock.now += 1.0
    progress.update(250)  # within LOG_EVERY of the last line: none
    assert stream.getvalue().count("\n") == 1
    clock.now += 19.0
    with progress:
        progress.advance_to(1000)
    lines = stream.getvalue().splitlines()
    assert lines[-1] == "neardup: signatures: done: 1000/1000 bytes in 40.0s (25 bytes/s)"


def test_progress_quiet_writes_nothing():
    progress, clock, stream = logged(total=10, quiet=True)
    clock.now += 100.0
    with progress:
        progress.tick()
        progress.update(10)
    assert stream.getvalue() == ""


def test_progress_heartbeat_logs_while_no_update_comes(monkeypatch):
    """The heartbeat thread calls ``tick`` on its own: a line appears with no update at all."""
    monkeypatch.setattr(progress_module, "LOG_EVERY", 0.01)
    clock, stream = FakeClock(), io.StringIO()
    ticked = threading.Event()

    class Watched(Progress):
        def tick(self) -> None:
            clock.now += 1.0  # every beat: past LOG_EVERY on the fake clock
            super().tick()
            if stream.getvalue():
                ticked.set()

    with Watched("signatures", total=10, stream=stream, clock=clock):
        assert ticked.wait(60), "no heartbeat line"
    assert "signatures: running: 0/10 docs" in stream.getvalue()


def test_ledger_credits_a_batch_when_its_result_comes_back_not_when_it_is_read():
    progress, _, _ = logged(total=30, unit="B")
    read = iter([10, 20, 30])  # the reader's position after each batch
    position = [0]
    ledger = Ledger(progress, lambda: position[0])

    def batches():
        for end in read:
            position[0] = end
            yield end

    tracked = ledger.track(batches())
    ahead = [next(tracked), next(tracked), next(tracked)]  # a pool reads ahead of its workers
    assert ahead == [10, 20, 30] and progress.count == 0
    counts = []
    for _ in ahead:
        ledger.settle()
        counts.append(progress.count)
    assert counts == [10, 20, 30]


@pytest.mark.parametrize("command", ["dedup", "index query"])
def test_signature_bytes_follow_signed_batches_not_the_reader(tmp_path, monkeypatch, command):
    """A stream that reads every batch before its first result (as a pool with room ahead
    does): the bytes counted after the first result are those of the first batch only, in
    ``dedup``'s signature pass and in ``index query``'s."""
    rows = [{"id": f"d{i:03d}", "text": f"document {i} " + "word " * 200} for i in range(64)]
    corpus = tmp_path / "in.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    size = corpus.stat().st_size
    module = dedup_module if command == "dedup" else index_module
    if command != "dedup":  # an index to query: built before the stream is replaced
        assert cli(tmp_path, "dedup", "in.jsonl", "--output", "o.jsonl", "--index", "idx",
                   "--workers", "1", "--quiet") == 0  # fmt: skip
    counts: list[int] = []
    made: list[Progress] = []

    class Recorded(Progress):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    def read_ahead(batches, params, workers=1):
        everything = list(batches)
        for batch in everything:
            yield batch_signatures(batch, params)
            counts.append(made[0].count)

    monkeypatch.setattr(module, "BATCH", 8)
    monkeypatch.setattr(module, "Progress", Recorded)
    monkeypatch.setattr(module, "signature_stream", read_ahead)
    flags = ["--output", "q.jsonl", "--workers", "1"]
    args = ["dedup", "in.jsonl", *flags] if command == "dedup" else ["index", "query", "idx",
                                                                   "in.jsonl", *flags]  # fmt: skip
    assert cli(tmp_path, *args) == 0
    assert len(counts) == 8
    assert counts == sorted(counts) and counts[0] < size / 2 and counts[-1] == size


def cli(cwd, *args) -> int:
    before = os.getcwd()
    os.chdir(cwd)
    try:
        return main(list(args))
    finally:
        os.chdir(before)


@pytest.mark.parametrize("quiet", [False, True])
def test_progress_bar_on_a_terminal_ends_its_line(quiet):
    """A terminal's bar ends with a newline, so the summary after it has a line of its own."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    with Progress("write", total=4, stream=stream, quiet=quiet, heartbeat=False) as progress:
        progress.update(4)
    assert stream.getvalue().endswith("\n") if not quiet else stream.getvalue() == ""


def test_ledger_with_nothing_tracked_settles_nothing():
    progress, _, _ = logged(total=5)
    Ledger(progress, lambda: 5).settle()
    assert progress.count == 0


class FakeTracker:
    """Spark's status tracker: jobs by group, their stages and status, each stage's tasks."""

    def __init__(self) -> None:
        self.groups: dict[str, list[int]] = {}
        self.jobs: dict[int, list[int]] = {}
        self.ended: set[int] = set()
        self.stages: dict[int, tuple[int, int, int]] = {}  # id -> (completed, active, tasks)

    def getJobIdsForGroup(self, group=None):
        return list(self.groups.get(group, []))

    def getJobInfo(self, job):
        if job not in self.jobs:
            return None
        status = "SUCCEEDED" if job in self.ended else "RUNNING"
        return SimpleNamespace(stageIds=self.jobs[job], status=status)

    def getStageInfo(self, stage):
        if stage not in self.stages:
            return None
        done, active, tasks = self.stages[stage]
        return SimpleNamespace(numCompletedTasks=done, numActiveTasks=active, numTasks=tasks)


def test_task_counts_sum_a_groups_stages_once_each():
    tracker = FakeTracker()
    tracker.groups = {"run:signatures": [1, 2], "run:classes": [3]}
    tracker.jobs = {1: [10], 2: [10, 11, 12], 3: [13]}  # stage 10 shared; 12 not known yet
    tracker.stages = {10: (2, 0, 2), 11: (1, 2, 4), 13: (0, 0, 8)}
    assert task_counts(tracker, "run:signatures") == (3, 6)
    assert task_counts(tracker, "run:classes") == (0, 8)
    assert task_counts(tracker, "run:other") == (0, 0)


def test_task_counts_leave_out_the_stages_spark_skips():
    """A stage listed by a job but never run (its result reused) does not hold a stage's
    count below its total: it counts for nothing once a later stage of its job started, or
    its job ended."""
    tracker = FakeTracker()
    tracker.groups = {"g": [1, 2]}
    tracker.jobs = {1: [20, 21], 2: [22, 23]}
    tracker.stages = {20: (0, 0, 8), 21: (1, 1, 4), 22: (0, 0, 8), 23: (0, 0, 2)}
    assert task_counts(tracker, "g") == (1, 4 + 8 + 2)  # 20 skipped; job 2 not started yet
    tracker.stages.update({21: (4, 0, 4), 23: (2, 0, 2)})
    tracker.ended = {1, 2}
    assert task_counts(tracker, "g") == (6, 6)  # 22 skipped too: every stage is done


def test_stage_progress_follows_each_stage_and_closes_the_last(monkeypatch):
    """Spark (33.2): each of neardup's stages logs its tasks done as they finish, on a fake
    clock; the previous stage's done line comes as the next starts, the last's on exit, each
    ending its line (the summary after it begins a line of its own)."""
    clock, stream, tracker = FakeClock(), io.StringIO(), FakeTracker()
    tracker.groups = {"r:signatures": [1], "r:classes": [2]}
    tracker.jobs = {1: [5], 2: [5, 6]}
    tracker.stages = {5: (0, 2, 4)}
    with StageProgress(tracker, poll=None, stream=stream, clock=clock, heartbeat=False) as watch:
        watch.stage("signatures", "r:signatures")
        clock.now += 10.0
        tracker.stages[5] = (1, 2, 4)
        watch.look()
        clock.now += 10.0
        tracker.stages[5] = (3, 1, 4)
        watch.look()
        tracker.stages[5] = (4, 0, 4)
        watch.stage("classes", "r:classes")
        tracker.stages[6] = (2, 0, 2)
        clock.now += 5.0
    assert stream.getvalue().splitlines() == [
        "neardup: signatures: running: 1/4 tasks in 10.0s (0.1 tasks/s, ETA 30s)",
        "neardup: signatures: running: 3/4 tasks in 20.0s (0.15 tasks/s, ETA 7s)",
        "neardup: signatures: done: 4/4 tasks in 20.0s (0.2 tasks/s)",
        "neardup: classes: done: 6/6 tasks in 5.0s (1.2 tasks/s)",
    ]
    assert stream.getvalue().endswith("\n")


def test_stage_progress_of_a_failed_run_writes_no_done_line():
    clock, stream, tracker = FakeClock(), io.StringIO(), FakeTracker()
    watch = StageProgress(tracker, poll=None, stream=stream, clock=clock, heartbeat=False)
    with pytest.raises(RuntimeError), watch:
        watch.stage("signatures", "r:signatures")
        raise RuntimeError("a bad row")
    assert stream.getvalue() == ""


def test_stage_progress_polls_on_its_own_thread():
    stream, tracker = io.StringIO(), FakeTracker()
    tracker.groups = {"g": [1]}
    tracker.jobs = {1: [7]}
    tracker.stages = {7: (3, 2, 5)}
    looked = threading.Event()

    class Watched(StageProgress):
        def look(self) -> None:
            super().look()
            if self._current is not None and self._current[0].count == 3:
                looked.set()

    with Watched(tracker, poll=0.01, stream=stream, heartbeat=False) as watch:
        watch.stage("candidates", "g")
        assert looked.wait(60), "the tracker was never polled"
