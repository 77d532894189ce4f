"""Dependencies: the resources built in the lifespan, reached from handlers by type."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request

from neardup.app.config import Settings
from neardup.app.service import Service, SettingsChanged
from neardup.app.service.access import SCOPES, Keyring

__all__ = [
    "AnyServiceDep",
    "Caller",
    "CallerDep",
    "ServiceDep",
    "SettingsDep",
    "bearer_token",
    "caller_of",
    "require",
]


def _settings(request: Request) -> Settings:
    """This replica's settings; SettingsChanged (503) once the store's answer settings differ
    from them (another replica's THRESHOLD, say): then they describe no answer it gives."""
    service: Service | None = request.app.state.service
    if service is not None and service.settings_changed is not None:
        raise SettingsChanged(service.settings_changed)
    settings: Settings = request.app.state.settings
    return settings


def _service(request: Request) -> Service:
    service: Service | None = request.app.state.service
    if service is None:
        raise HTTPException(
            503, "starting: the index is being recovered", headers={"Retry-After": "1"}
        )
    if service.settings_changed is not None:  # its answers would differ from the others'
        raise SettingsChanged(service.settings_changed)
    return service


def _any_service(request: Request) -> Service:
    """The service, even one that answers no more (its stats and metrics still tell why)."""
    service: Service | None = request.app.state.service
    if service is None:
        return _service(request)
    return service


SettingsDep = Annotated[Settings, Depends(_settings)]
ServiceDep = Annotated[Service, Depends(_service)]
AnyServiceDep = Annotated[Service, Depends(_any_service)]


def bearer_token(request: Request) -> str | None:
    """The key of an ``Authorization: Bearer KEY`` header, or None."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


@dataclass(frozen=True)
class Caller:
    """Who sends a request: a digest of its key ("open" without keys) and the key's scopes."""

    name: str
    scopes: frozenset[str]


def caller_of(keyring: Keyring | None, key: str | None) -> Caller:
    """The caller presenting ``key`` (every scope, as "open", when the service has no keys)."""
    if keyring is None or key is None:
        return Caller("open", SCOPES)
    name = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return Caller(name, keyring.scopes(key) or frozenset())


def _caller(request: Request) -> Caller:
    """The caller of an admitted request (``require`` has checked its key already)."""
    return caller_of(request.app.state.keyring, bearer_token(request))


CallerDep = Annotated[Caller, Depends(_caller)]


def require(scope: str) -> Any:
    """A dependency admitting requests whose Bearer key has ``scope`` (all, with no keys file)."""

    async def check(request: Request) -> None:
        keyring = request.app.state.keyring
        if keyring is None:
            return
        token = bearer_token(request)
        if token is None:
            raise HTTPException(
                401, "send an API key as 'Authorization: Bearer KEY'",
                headers={"WWW-Authenticate": "Bearer"},
            )  # fmt: skip
        scopes = keyring.scopes(token)
        if scopes is None:
            raise HTTPException(401, "unknown API key", headers={"WWW-Authenticate": "Bearer"})
        if scope not in scopes:
            raise HTTPException(403, f"this API key lacks the '{scope}' scope")

    return Depends(check)
