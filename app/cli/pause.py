"""A test-only hook: stop a run at a named point so that a test can kill it there.

With ``NEARDUP_TEST_PAUSE=STAGE`` in the environment, a command reaching ``pause_point(STAGE)``
prints ``neardup: test pause at STAGE`` on stderr and stops itself (SIGSTOP): the test then
sends SIGKILL (a crash at exactly that point) or SIGCONT (the run goes on, e.g. to race another
one). Unset, or naming another stage, it does nothing. The stages (tests/e2e/test_index_crash.py):

- ``read``: ``dedup``, pass 1, once the first batch of signatures is in (the inputs half read);
- ``signatures``: ``dedup``, after pass 1 and the decisions, before any output is opened;
- ``write``: ``dedup``, pass 2, once the first batch is written to the temporary outputs;
- ``commit``: ``dedup --index`` and ``index compact``, the new part's files written, before the
  next version is committed.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["PAUSE_ENV", "pause_point"]

#: The environment variable naming the stage to stop at.
PAUSE_ENV = "NEARDUP_TEST_PAUSE"
_paused: set[str] = set()  # a stage stops a process once, however often it is reached


def pause_point(stage: str) -> None:
    """Stop this process here if ``NEARDUP_TEST_PAUSE`` names ``stage`` (tests only)."""
    if os.environ.get(PAUSE_ENV) != stage or stage in _paused:
        return
    _paused.add(stage)
    print(f"neardup: test pause at {stage}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
