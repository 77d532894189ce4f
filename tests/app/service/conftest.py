"""In-process services for the service's unit tests: the signature pool's workers are threads of
the test process (no spawned interpreter to start), and the store is SQLite in ``tmp_path``."""

from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from neardup.app.config import Settings
from neardup.app.service import Service
from neardup.app.service import pool as pool_module


@pytest.fixture
def service_in(tmp_path, monkeypatch) -> Callable[..., AbstractAsyncContextManager[Service]]:
    """``async with service_in(**settings) as service``: ``Service.start`` on a SQLite store in
    ``tmp_path`` whose signature pool runs the real ``SignaturePool`` on threads."""

    def threads(workers: int, *, warm: Callable[[], object] | None = None) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(workers, thread_name_prefix="signatures")

    monkeypatch.setattr(pool_module, "spawn_pool", threads)

    @asynccontextmanager
    async def started(**settings: Any) -> AsyncIterator[Service]:
        settings.setdefault("data_dir", tmp_path / "data")
        service = await Service.start(Settings(workers=1, **settings))
        try:
            yield service
        finally:
            await service.close()

    return started
