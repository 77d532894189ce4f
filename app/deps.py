"""Dependencies: the resources built in the lifespan, reached from handlers by type."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.config import Settings
from app.pool import SignaturePool
from app.service import Service

__all__ = ["PoolDep", "ServiceDep", "SettingsDep"]


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def _pool(request: Request) -> SignaturePool:
    return _service(request).pool


SettingsDep = Annotated[Settings, Depends(_settings)]
ServiceDep = Annotated[Service, Depends(_service)]
PoolDep = Annotated[SignaturePool, Depends(_pool)]
