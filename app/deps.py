"""Dependencies: the resources built in the lifespan, reached from handlers by type."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.config import Settings
from app.pool import SignaturePool

__all__ = ["PoolDep", "SettingsDep"]


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _pool(request: Request) -> SignaturePool:
    pool: SignaturePool = request.app.state.pool
    return pool


SettingsDep = Annotated[Settings, Depends(_settings)]
PoolDep = Annotated[SignaturePool, Depends(_pool)]
