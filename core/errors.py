"""The errors core raises.

Every error is a subclass of a builtin, so callers that only know Python's tree still catch it::

    NeardupError
     +-- ParameterError (ValueError)      a parameter out of range or inconsistent
     +-- SignatureError (ValueError)      a signature of the wrong shape, or inserted twice
     +-- DuplicateIdError (ValueError)    the same document id twice in one input
     +-- CorpusError (ValueError)         a corpus or protected file that cannot be parsed;
     |                                    names the file and line
     +-- WorkerError (RuntimeError)       a signature worker process died
          +-- UnguardedMainError            ... because it re-ran a script with no
                                            ``if __name__ == "__main__":`` guard
"""

from __future__ import annotations

__all__ = [
    "CorpusError",
    "DuplicateIdError",
    "NeardupError",
    "ParameterError",
    "SignatureError",
    "UnguardedMainError",
    "WorkerError",
]


class NeardupError(Exception):
    """Base class of every error raised by core."""


class ParameterError(NeardupError, ValueError):
    """A parameter is out of range or inconsistent with another."""


class SignatureError(NeardupError, ValueError):
    """A signature has the wrong shape, or a key is inserted twice."""


class DuplicateIdError(NeardupError, ValueError):
    """The same document id appears twice where ids must be unique."""

    def __init__(self, *doc_ids: str) -> None:
        shown = ", ".join(repr(i) for i in doc_ids[:20])
        more = f" and {len(doc_ids) - 20} more" if len(doc_ids) > 20 else ""
        noun = "id" if len(doc_ids) == 1 else "ids"
        super().__init__(f"document {noun} {shown}{more} appear(s) more than once")
        self.doc_ids = doc_ids


class CorpusError(NeardupError, ValueError):
    """A corpus or protected file cannot be parsed.

    Attributes:
        path: the file, as given.
        line: the 1-based line number, or None when the whole file is at fault.
    """

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


class WorkerError(NeardupError, RuntimeError):
    """A signature worker process died before returning its chunk."""


class UnguardedMainError(WorkerError):
    """The pool's workers died because each re-ran the calling script's top level.

    Spawned workers import the main script before their first task; a script that calls neardup
    at its top level, outside ``if __name__ == "__main__":``, makes every worker start a pool of
    its own, which Python forbids.
    """

    def __init__(self, script: str | None) -> None:
        where = f"{script!r}" if script else "the main script"
        super().__init__(
            f"the signature worker processes re-ran {where} from its top level and stopped: "
            "a script that uses workers > 1 must call neardup under "
            '`if __name__ == "__main__":` (spawned workers import the script; the guard keeps '
            "them from running it)"
        )
        self.script = script
