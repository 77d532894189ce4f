"""``create_app()``: the FastAPI service and its lifespan (the process pool, later the store)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.config import Settings, get_settings
from app.errors import install_error_handlers
from app.pool import SignaturePool
from app.routes import health, signatures

__all__ = ["create_app"]

log = logging.getLogger("neardup")


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service, configured by ``settings`` (default: the environment)."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool = SignaturePool(
            settings.workers, num_perm=settings.num_perm, seed=settings.seed, k=settings.k
        )
        app.state.pool = pool
        await pool.warm_up()
        app.state.ready = True
        log.info("neardup ready: workers=%d num_perm=%d", settings.workers, settings.num_perm)
        try:
            yield
        finally:
            app.state.ready = False
            pool.close()

    app = FastAPI(title="neardup", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.ready = False
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(signatures.router)
    return app
