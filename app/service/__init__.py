"""The service without the web: operations over the index, the store, the pool and the
protected sets, in terms of document ids. ``app.api`` serves it over HTTP."""

from app.service.errors import (
    Conflict,
    NotFound,
    Overloaded,
    ParameterMismatch,
    QuotaExceeded,
    RateLimited,
    TooLarge,
)
from app.service.operations import NewDoc, Registered, Service

__all__ = [
    "Conflict",
    "NewDoc",
    "NotFound",
    "Overloaded",
    "ParameterMismatch",
    "QuotaExceeded",
    "RateLimited",
    "Registered",
    "Service",
    "TooLarge",
]
