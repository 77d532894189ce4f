"""The service without the web: operations over the index, the store, the pool and the
protected sets, in terms of document ids. ``app.api`` serves it over HTTP."""

from neardup.app.service.errors import (
    Conflict,
    DamagedStore,
    DataDirLocked,
    LogPruned,
    NotFound,
    OutOfReach,
    Overloaded,
    ParameterMismatch,
    ProtectScopeNeeded,
    QuotaExceeded,
    RateLimited,
    SettingsChanged,
    SettingsMismatch,
    StoreFull,
    StoreRefused,
    StoreUnavailable,
    TooLarge,
)
from neardup.app.service.operations import DecontRequest, Hits, NewDoc, Registered, Service

__all__ = [
    "Conflict",
    "DamagedStore",
    "DataDirLocked",
    "DecontRequest",
    "Hits",
    "LogPruned",
    "NewDoc",
    "NotFound",
    "OutOfReach",
    "Overloaded",
    "ParameterMismatch",
    "ProtectScopeNeeded",
    "QuotaExceeded",
    "RateLimited",
    "Registered",
    "Service",
    "SettingsChanged",
    "SettingsMismatch",
    "StoreFull",
    "StoreRefused",
    "StoreUnavailable",
    "TooLarge",
]
