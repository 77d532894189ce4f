"""One server per data directory: an exclusive ``flock`` on ``DATA_DIR/neardup.lock``.

The lock is held for as long as the store is open and released by the kernel when the process
ends, however it ends (a stale lock file after ``kill -9`` locks nothing). The file records the
holder (pid, host, start time) so a second server can name it when it refuses to start.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from neardup.app.service.errors import DataDirLocked

__all__ = ["LOCK_NAME", "DataDirLock"]

LOCK_NAME = "neardup.lock"


class DataDirLock:
    """Take the lock of ``data_dir`` (non-blocking); DataDirLocked naming the holder if taken."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_NAME
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise DataDirLocked(
                f"{data_dir} is in use by {holder} (lock file {self.path})"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        _record(fd)

    def release(self) -> None:
        """Clear the holder record and unlock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)  # closing the only descriptor releases the flock


def _record(fd: int) -> None:
    """Write this process as the holder."""
    started = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started})
    os.ftruncate(fd, 0)
    os.pwrite(fd, (text + "\n").encode("utf-8"), 0)


def _holder(fd: int) -> str:
    """The recorded holder, in words ("another process" if the record is missing or odd)."""
    try:
        found = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"pid {int(found['pid'])} on host {found['host']} since {found['started']}"
    except (OSError, ValueError, TypeError, KeyError):
        return "another process (no holder recorded yet)"
