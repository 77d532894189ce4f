"""Dependencies: the resources built in the lifespan, reached from handlers by type."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request

from app.config import Settings
from app.service import Service

__all__ = ["ServiceDep", "SettingsDep", "bearer_token", "require"]


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


SettingsDep = Annotated[Settings, Depends(_settings)]
ServiceDep = Annotated[Service, Depends(_service)]


def bearer_token(request: Request) -> str | None:
    """The key of an ``Authorization: Bearer KEY`` header, or None."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


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
