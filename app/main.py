"""``create_app()``, the application factory: the service (``app.service``) served over HTTP
(``app.api``), with its lifespan (store, index, process pool). The only importer of ``app.api``."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from neardup.app.api.admission import Admission, Capacity
from neardup.app.api.body_limit import BodyLimit
from neardup.app.api.docs import documented_app
from neardup.app.api.errors import install_error_handlers
from neardup.app.api.metrics import Metrics
from neardup.app.api.routes import clusters, documents, health, protected_sets, signatures, stats
from neardup.app.api.ui import decontamination, pages, protected, render
from neardup.app.api.ui import documents as ui_documents
from neardup.app.api.ui.security import SecurityHeaders, Sessions
from neardup.app.config import Settings, get_settings, redact
from neardup.app.service import Service
from neardup.app.service.access import Keyring
from neardup.app.service.store import Store

__all__ = ["create_app"]

log = logging.getLogger("neardup")


async def _start(app: FastAPI, settings: Settings, store: Store | None) -> None:
    """Recover the service, then mark the app ready, then wait for the signature workers to
    warm up; a failure stops the server.

    Ready comes before the workers are warm (~0.5 s after the first use, the kernels' compile
    on the first): a request meanwhile waits in the pool's queue behind the workers' start, so
    it is answered as it would be later, only later.
    """
    try:
        service = await Service.start(settings, store)
    except Exception:
        log.exception("could not start the service; stopping")
        os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down as on Ctrl-C
        return
    app.state.service = service
    app.state.settings = service.settings  # with the answer settings the store locks
    app.state.ready = True
    log.info("ready documents=%d", len(service.index))
    try:
        await service.warm_up()
    except Exception:
        log.exception("the signature workers could not start; stopping")
        os.kill(os.getpid(), signal.SIGTERM)


def _store_of(settings: Settings) -> str:
    """Where the store is, for the log: the shared store's URL (no password) and schema, or
    the data directory (unused with a shared store, so not named then)."""
    if settings.store_url:
        url = redact(settings.store_url, settings.store_url)
        return f"store_url={url} store_schema={settings.store_schema}"
    return f"data_dir={settings.data_dir}"


def create_app(settings: Settings | None = None, store: Store | None = None) -> FastAPI:
    """The service, configured by ``settings`` (default: the environment).

    ``store``: an open store for the first start (``neardup serve`` passes the one it checked,
    holding the data directory's lock); otherwise each start opens ``settings.data_dir``.
    """
    settings = settings or get_settings()
    handed = [store] if store is not None else []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log.info("starting %s workers=%d", _store_of(settings), settings.workers)
        # Listen while recovering: /readyz says "starting", other routes 503 until ready.
        starting = asyncio.create_task(_start(app, settings, handed.pop() if handed else None))
        try:
            yield
        finally:
            app.state.ready = False
            if not starting.done():
                starting.cancel()
            with suppress(asyncio.CancelledError):
                await starting
            if app.state.service is not None:
                await app.state.service.close()
            log.info("stopped")

    app = documented_app(version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    # Read once, at start: a malformed keys file stops the service here (KeysFileError).
    keys = settings.api_keys_file
    app.state.keyring = Keyring.from_file(keys) if keys is not None else None
    app.state.ready = False
    app.state.service = None
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
    for module in (health, signatures, documents, clusters, protected_sets, stats):
        app.include_router(module.router)
    for ui in (pages, ui_documents, decontamination, protected):
        app.include_router(ui.router)
    app.add_exception_handler(render.LoginRequired, render.login_redirect)
    app.add_exception_handler(HTTPException, render.html_error)  # HTML under /ui, else JSON
    return app
