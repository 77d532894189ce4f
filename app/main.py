"""``create_app()``, the application factory: the service (``app.service``) served over HTTP
(``app.api``), with its lifespan (store, index, process pool). The only importer of ``app.api``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.trustedhost import TrustedHostMiddleware

from app.api.admission import Admission, Capacity
from app.api.body_limit import BodyLimit
from app.api.errors import install_error_handlers
from app.api.metrics import Metrics
from app.api.routes import clusters, documents, health, protected_sets, signatures, stats
from app.api.ui import pages
from app.api.ui.security import SecurityHeaders, Sessions
from app.config import Settings, get_settings
from app.service import Service
from app.service.access import Keyring

__all__ = ["create_app"]

log = logging.getLogger("neardup")


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service, configured by ``settings`` (default: the environment)."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log.info("starting data_dir=%s workers=%d", settings.data_dir, settings.workers)
        service = await Service.start(settings)
        app.state.service = service
        app.state.ready = True
        log.info("ready documents=%d", len(service.index))
        try:
            yield
        finally:
            app.state.ready = False
            await service.close()
            log.info("stopped")

    app = FastAPI(title="neardup", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    # Read once, at start: a malformed keys file stops the service here (KeysFileError).
    keys = settings.api_keys_file
    app.state.keyring = Keyring.from_file(keys) if keys is not None else None
    app.state.ready = False
    app.state.sessions = Sessions()
    metrics = app.state.metrics = Metrics()
    capacity = app.state.capacity = Capacity(
        settings.max_inflight, settings.max_buffered_bytes, on_shed=metrics.count_shed
    )
    install_error_handlers(app)
    # Outermost last: the Host header first (400 for names not served: DNS rebinding), then
    # admission before the body is read, and the body before metrics time the app.
    app.middleware("http")(metrics.middleware)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, capacity=capacity,
        timeout=settings.client_timeout,
    )  # fmt: skip
    app.add_middleware(Admission, capacity=capacity)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.host_names, www_redirect=False)
    for module in (health, signatures, documents, clusters, protected_sets, stats, pages):
        app.include_router(module.router)
    app.add_exception_handler(pages.LoginRequired, pages.login_redirect)
    return app
