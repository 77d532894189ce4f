"""The errors the service raises (beyond core's tree); ``app.api.errors`` maps them to status
codes, in one place.

    NeardupError (core)
     +-- NotFound (LookupError)       an unknown document, cluster root or protected set  -> 404
     +-- Conflict                     a registered id sent again with another text        -> 409
     +-- TooLarge                     a batch, text or working memory over the limits     -> 413
     +-- Overloaded                   more batches in flight than MAX_INFLIGHT            -> 503
     +-- QuotaExceeded                protected sets over MAX_PROTECTED_SETS or _BYTES    -> 507
     +-- RateLimited                  a caller over its contamination-check rate          -> 429
     +-- ProtectScopeNeeded           an answer that would show where protected text is   -> 403
     +-- OutOfReach                   a query threshold below the bands' reach            -> 422
     +-- StoreFull                    a full (or failing) disk; nothing was stored        -> 507
     +-- StoreUnavailable             the shared database cannot be reached right now     -> 503
     |    +-- StoreRefused            it refuses this role: a privilege, the password, ... -> 503
     +-- IndexUnavailable             the served index's storage cannot be read right now -> 503
 +-- SettingsChanged              the store's answer settings changed under a replica -> 503
     +-- ParameterMismatch            a store made with other index parameters (startup)
     |    +-- SettingsMismatch        other answer settings (THRESHOLD, NGRAM, ...) (startup)
     +-- DamagedStore                 a store file that is not a usable neardup store (startup)
     +-- DataDirLocked                another process holds the data directory (startup)
 +-- IndexNotServable             a served index with a part of the first layout (startup)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from neardup.core.engine import JSONError, NeardupError

__all__ = [
    "Conflict",
    "DamagedStore",
    "DataDirLocked",
    "IndexNotServable",
    "IndexUnavailable",
    "LogPruned",
    "NotFound",
    "OutOfReach",
    "Overloaded",
    "ParameterMismatch",
    "ProtectScopeNeeded",
    "QuotaExceeded",
    "RateLimited",
    "SettingsChanged",
    "SettingsMismatch",
    "StoreFull",
    "StoreRefused",
    "StoreUnavailable",
    "TooLarge",
    "json_limits",
]


class NotFound(NeardupError, LookupError):
    """An unknown document, cluster root or protected set."""


class OutOfReach(NeardupError, ValueError):
    """A query threshold below what the bands can find (``MinhashParams.query_floor``)."""


class Conflict(NeardupError):
    """A registered id sent again with a different text; ``ids`` names every such id of the
    batch (answered as the 409's ``conflicts``, so a client can skip or replace them)."""

    def __init__(self, message: str, ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.ids = list(ids)


class TooLarge(NeardupError):
    """A batch over MAX_BATCH, a text over MAX_TEXT_CHARS, or a batch over MAX_BATCH_MEMORY."""


#: What each limit of a JSON budget is called in the settings.
_JSON_SETTINGS = {"values": "MAX_JSON_VALUES", "containers": "MAX_JSON_CONTAINERS"}


@contextmanager
def json_limits(what: str) -> Iterator[None]:
    """Turn core's JSONError of kind ``values`` (JSON over a ``JSONBudget``) into TooLarge
    (413) naming ``what`` and the setting."""
    try:
        yield
    except JSONError as exc:
        if exc.kind != "values":
            raise
        setting = _JSON_SETTINGS.get(exc.field or "", "MAX_JSON_VALUES")
        raise TooLarge(f"{what} is over a limit: {exc.reason} ({setting})") from None


class Overloaded(NeardupError):
    """More batches in flight than MAX_INFLIGHT: answered 503 with Retry-After at once."""


class QuotaExceeded(NeardupError):
    """Storing this would put the protected sets over their count or size limit."""


class ProtectScopeNeeded(NeardupError):
    """An answer that would give offsets into protected matches (a cut mode's pieces) asked by
    a key without the protect scope."""


class RateLimited(NeardupError):
    """A caller checked more texts for contamination than its rate allows.

    Attributes:
        retry_after: whole seconds until the texts asked for are allowed.
    """

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ParameterMismatch(NeardupError, RuntimeError):
    """The store was created with other index parameters; names them."""


class SettingsMismatch(ParameterMismatch):
    """The store's replicas answer with other settings (``Settings.answer_settings``): names
    each, both values, and how to change them for every replica (``neardup store-settings``)."""


class SettingsChanged(NeardupError):
    """The settings locked in the shared store were changed (``neardup store-settings``) while
    this replica runs with the old ones: it answers 503 and is not ready until restarted."""


class StoreFull(NeardupError, OSError):
    """A write the store could not make because its disk is full (SQLITE_FULL) or failing
    (SQLITE_IOERR); it was rolled back whole. Answered 507; /readyz is 503 until a write works."""


class StoreUnavailable(NeardupError, ConnectionError):
    """The shared store (PostgreSQL) cannot be reached or did not answer in time; nothing was
    stored. Answered 503 with Retry-After; writes work again once the database is back."""


class IndexUnavailable(NeardupError, ConnectionError):
    """The served index (``--index``) cannot be read right now: its object store does not
    answer (unreachable endpoint, timeouts, throttling after the client's retries) or refuses
    the credentials. A write looks its documents up in the index before storing them, so it
    stopped before storing anything (but when the index fails in the moment after its commit:
    sending it again is safe). Answered 503 with Retry-After; /readyz is 503 "index
    unavailable" until a read of the index works again."""


class LogPruned(StoreUnavailable):
    """This replica's position in the shared store's log is older than the oldest entry kept
    (entries past LOG_RETENTION_SECONDS are pruned): it cannot catch up entry by entry and
    reloads its whole state from the live documents (503 if it escapes a request)."""


class StoreRefused(StoreUnavailable):
    """The shared store refuses this neardup: its role lacks a privilege (named, with the
    GRANT), the password is wrong, the role or database does not exist, the URL cannot be read,
    or its layout is of a newer version. One line at start (exit 2); 503 if it happens later."""


class DamagedStore(NeardupError, RuntimeError):
    """A store file that is empty, not a SQLite database, or has documents but no parameters."""


class DataDirLocked(NeardupError, RuntimeError):
    """Another process (named: pid, host, start time) has the data directory open."""


class IndexNotServable(NeardupError):
    """A persistent index (``--index``) with a part of the first layout (no key table): the
    service looks documents up by key only, never by a scan."""
