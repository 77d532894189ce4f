"""Finding a process's spawn pool workers, to kill one in a test."""

from pathlib import Path


def pool_workers(pid: int) -> list[int]:
    """The pids of ``pid``'s children that are multiprocessing spawn workers."""
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
        if ppid == pid and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return found
