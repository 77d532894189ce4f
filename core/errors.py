"""The errors core raises.

Every error is a subclass of a builtin, so callers that only know Python's tree still catch it::

    NeardupError
     +-- ParameterError (ValueError)      a parameter out of range or inconsistent
     |    +-- IndexParameterError           ... differing from the one its index is locked to
     +-- SignatureError (ValueError)      a signature of the wrong shape, or inserted twice
     +-- DuplicateIdError (ValueError)    the same document id twice in one input
     +-- CorpusError (ValueError)         a corpus or protected file that cannot be parsed;
     |                                    names the file and line
     +-- JSONError (ValueError)           a JSON text that cannot be read (where, and why)
     +-- IndexIdError (ValueError)        input ids already in the index (names id and part)
     +-- IndexDamagedError (ValueError)   a listed file or a version missing or wrong (names it)
     +-- IndexLayoutError (ValueError)    a part of an older layout where its table is needed
     +-- IndexMissingError (FileNotFoundError)  no committed index at the location
     +-- IndexBucketError (FileNotFoundError)   a new index's bucket does not exist (s3://)
     +-- IndexConflictError (RuntimeError)      another run committed the same version first
     |    +-- IndexChangedError               ... or removed files of the version being read
     +-- WorkerError (RuntimeError)       a signature worker process died
          +-- UnguardedMainError            ... because it re-ran a script with no
                                            ``if __name__ == "__main__":`` guard
"""

from __future__ import annotations

__all__ = [
    "CorpusError",
    "DuplicateIdError",
    "IndexBucketError",
    "IndexChangedError",
    "IndexConflictError",
    "IndexDamagedError",
    "IndexIdError",
    "IndexLayoutError",
    "IndexMissingError",
    "IndexParameterError",
    "JSONError",
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


class JSONError(NeardupError, ValueError):
    """A JSON text that cannot be read: bad syntax, NaN or Infinity, an integer longer than
    Python reads, nesting deeper than ``MAX_JSON_DEPTH``, and where asked a number beyond a
    float's range or a key twice in one object (``core.engine.read_json``). Every reader of
    JSON turns it into its own error: a CorpusError naming file and line, a 400 or a 422.

    Attributes:
        reason: what is wrong, in one line (also the message).
        kind: ``syntax``, ``constant``, ``integer``, ``depth``, ``range`` or ``duplicate``;
            where asked, ``values`` (more values than allowed), ``items`` (a batch member
            with more items than allowed) or ``key`` (an unknown top-level key).
        line: the 1-based line, when known (always for ``syntax``).
        column: the 1-based column, when known.
        field: for ``key``, the key.
    """

    def __init__(
        self,
        reason: str,
        kind: str,
        line: int | None = None,
        column: int | None = None,
        *,
        field: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.line = line
        self.column = column
        self.field = field


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


class IndexMissingError(NeardupError, FileNotFoundError):
    """No committed version at an index's location (``--index-mode read`` on a new path)."""

    def __init__(self, url: str) -> None:
        super().__init__(f"{url}: no index here (no committed version under {url}/_index/)")
        self.url = url


class IndexBucketError(NeardupError, FileNotFoundError):
    """A new index on an object store (``s3://BUCKET/...``) whose bucket does not exist: its
    client would create the bucket at the first write (a mistyped name, a new bucket), so
    neardup refuses before writing anything; create the bucket first."""

    def __init__(self, url: str, bucket: str) -> None:
        super().__init__(
            f"{url}: the bucket {bucket!r} does not exist (neardup never creates a bucket: "
            "check the name, or create the bucket first)"
        )
        self.url = url
        self.bucket = bucket


class IndexParameterError(ParameterError):
    """A run's parameter differs from the one its index was built with (or one side lacks it).

    Attributes:
        name: the parameter (``threshold``, ``tokenizer``, ...).
        indexed: the index's value (None when the index has no such parameter).
        given: the run's value (None when the run has no such parameter).
    """

    def __init__(self, url: str, name: str, indexed: object, given: object) -> None:
        def shown(v: object) -> str:
            return "no value" if v is None else repr(v)

        way_out = "run with the index's value, or use another index"
        if name == "tokenizer" and indexed is not None and given is not None:
            way_out = (
                "an index is never extended under another tokenizer version: build it again "
                "with this one, or use another index (docs/index.md)"
            )
        super().__init__(
            f"{url}: parameter {name} is locked to the index: the index has {shown(indexed)}, "
            f"this run {shown(given)} ({way_out})"
        )
        self.url = url
        self.name = name
        self.indexed = indexed
        self.given = given


class IndexIdError(NeardupError, ValueError):
    """Ids of a run's input are already in its index. ``found`` maps each id to its part (all
    of them, or the first ``SHOWN`` in id order); ``total``, how many there are (default: as
    many as ``found``). The message names the first ``SHOWN`` and says how many more."""

    #: Ids named in the message at most.
    SHOWN = 20

    def __init__(self, url: str, found: dict[str, str], total: int | None = None) -> None:
        named = sorted(found.items())[: self.SHOWN]
        shown = ", ".join(f"{i!r} (part {p})" for i, p in named)
        left = (len(found) if total is None else total) - len(named)
        more = f" and {left} more" if left > 0 else ""
        super().__init__(
            f"{url}: id {shown}{more} already in the index: ids must be "
            "unique across the index and the new inputs (--id-prefix names a dump's ids apart: "
            "--id-prefix 'cc-2024-10/{file}/')"
        )
        self.url = url
        self.found = found
        self.total = len(found) if total is None else total


class IndexDamagedError(NeardupError, ValueError):
    """A file an index's committed version lists is missing, of another size, unreadable, or
    holds other rows than listed; or a committed version is missing or malformed: never read
    as a smaller or older index, never with parameters it does not state."""

    def __init__(self, url: str, path: str, problem: str) -> None:
        problem = " ".join(problem.split())  # one line: Arrow's own messages end in a newline
        super().__init__(f"{url}: the index is damaged: {path} {problem}")
        self.url = url
        self.path = path
        self.problem = problem


class IndexLayoutError(NeardupError, ValueError):
    """A part of an older layout (no key table) where a lookup needs its key table: never read
    by a scan there; ``neardup index compact`` rewrites it with one."""

    def __init__(self, url: str, part: str) -> None:
        super().__init__(
            f"{url}: part {part} has no key table (the first layout): run "
            f"`neardup index compact {url}`"
        )
        self.url = url
        self.part = part


class IndexConflictError(NeardupError, RuntimeError):
    """Another run committed the version this run meant to commit: nothing was added."""

    def __init__(
        self,
        url: str,
        version: int,
        parts: list[str],
        *,
        compaction: bool = False,
        deletion: bool = False,
    ) -> None:
        added = f"part {', '.join(parts)}" if parts else "no new part"
        if deletion:
            super().__init__(
                f"{url}: another run added version {version} ({added}) while this deletion "
                "ran; nothing was deleted and its deletion vectors are removed; rerun "
                "`neardup index delete` to delete against it"
            )
        elif compaction:
            super().__init__(
                f"{url}: another run added version {version} ({added}) while this compaction "
                "ran; nothing was committed and the compaction's new parts are removed; the "
                "index is as that run left it; rerun `neardup index compact` to compact it"
            )
        else:
            super().__init__(
                f"{url}: another run added version {version} ({added}) while this run ran; "
                "nothing was added to the index; this run's outputs are written and valid "
                f"against version {version - 1}; rerun to dedup against it"
            )
        self.url = url
        self.version = version
        self.parts = parts


class IndexChangedError(IndexConflictError):
    """A file of the version a run reads was removed by a later version (a compaction while the
    run read the index): nothing is damaged; rerun against the new version."""

    def __init__(self, url: str, version: int, newer: int, path: str) -> None:
        RuntimeError.__init__(
            self,
            f"{url}: {path} of version {version}, which this run reads, was removed by version "
            f"{newer} (compacted while this run ran); nothing was added to the index; rerun",
        )
        self.url = url
        self.version = newer
        self.parts = []
        self.path = path
