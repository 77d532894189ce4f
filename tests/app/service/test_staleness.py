"""A replica that has not read the shared store's log for POLL_SECONDS + STORE_TIMEOUT says
so: its ``log_lag_seconds`` grows and it is not ready ("behind") until it reads it again."""

import asyncio
import time

from neardup.app.config import Settings
from neardup.app.service import Service


async def _until(check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def test_a_follower_that_falls_behind_is_not_ready(tmp_path, pg_url):
    settings = Settings(data_dir=tmp_path, workers=1, store_url=pg_url, store_timeout=1.0)

    async def run():
        service = await Service.start(settings)
        try:
            await _until(lambda: service.log_lag() < 0.5)
            assert await service.unready_reason() is None
            async with service._lock:  # the follower cannot read the log: it falls behind
                await _until(lambda: service.log_lag() > 1.5)  # POLL_SECONDS + STORE_TIMEOUT
                assert service.stats()["log_lag_seconds"] > 1.5
                assert await service.unready_reason() == "behind"
            await _until(lambda: service.log_lag() < 0.5)
            assert await service.unready_reason() is None
        finally:
            await service.close()

    asyncio.run(run())


def test_an_embedded_store_has_no_lag(tmp_path):
    async def run():
        service = await Service.start(Settings(data_dir=tmp_path, workers=1, store_timeout=0.5))
        try:
            await asyncio.sleep(0.6)
            assert service.log_lag() == 0.0
            assert await service.unready_reason() is None
        finally:
            await service.close()

    asyncio.run(run())
