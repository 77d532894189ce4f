"""Finding a process's spawn pool workers (and its resource tracker), to kill or watch them."""

from pathlib import Path


def _children(pid: int, marker: bytes) -> list[int]:
    """The pids of ``pid``'s children whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and marker in cmdline:
            found.append(int(entry.name))
    return found


def pool_workers(pid: int) -> list[int]:
    """The pids of ``pid``'s children that are multiprocessing spawn workers."""
    return _children(pid, b"spawn_main")


def resource_trackers(pid: int) -> list[int]:
    """The pids of ``pid``'s multiprocessing resource tracker processes."""
    return _children(pid, b"resource_tracker")


def children(pid: int) -> list[int]:
    """The pids of every child of ``pid``."""
    return _children(pid, b"")
