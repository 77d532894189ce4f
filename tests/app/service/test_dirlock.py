"""The data directory's lock file: who holds it, in a record a refused server can quote, and
nothing left behind when it is released."""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import stat

import pytest

from neardup.app.service import DataDirLocked, dirlock
from neardup.app.service.dirlock import LOCK_NAME, DataDirLock


def test_the_holder_record_names_this_process_and_a_utc_start_and_is_cleared_on_release(tmp_path):
    lock = DataDirLock(tmp_path)
    path = tmp_path / LOCK_NAME
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["started"]), record
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 & ~umask
    lock.release()
    assert path.read_bytes() == b""
    lock.release()  # idempotent
    DataDirLock(tmp_path).release()


def test_a_held_lock_names_its_holder_from_its_record(tmp_path):
    """A second lock on the directory (another open file: flock refuses it even in the same
    process) is refused with the holder's pid, host and start, as recorded."""
    lock = DataDirLock(tmp_path)
    try:
        record = json.loads((tmp_path / LOCK_NAME).read_text(encoding="utf-8"))
        with pytest.raises(DataDirLocked) as refused:
            DataDirLock(tmp_path)
        assert str(refused.value) == (
            f"{tmp_path} is in use by pid {os.getpid()} on host {socket.gethostname()} since "
            f"{record['started']} (lock file {tmp_path / LOCK_NAME})"
        )
    finally:
        lock.release()


def test_a_lock_held_without_a_record_names_another_process(tmp_path):
    path = tmp_path / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(DataDirLocked) as refused:
            DataDirLock(tmp_path)
        assert str(refused.value) == (
            f"{tmp_path} is in use by another process (no holder recorded yet) (lock file {path})"
        )
    finally:
        os.close(fd)


def test_a_lock_that_fails_otherwise_raises_its_own_error(tmp_path, monkeypatch):
    def denied(fd: int, operation: int) -> None:
        raise PermissionError("flock denied")

    monkeypatch.setattr(dirlock.fcntl, "flock", denied)
    with pytest.raises(PermissionError, match="flock denied"):
        DataDirLock(tmp_path)
