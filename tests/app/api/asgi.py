"""Requests to an ASGI app in process (httpx's ASGI transport; no server, no lifespan)."""

import asyncio

import httpx


def call(app, *requests, host="testserver"):
    """Send ``requests`` (tuples of ``httpx.Client.request`` arguments) in order; the responses."""

    async def run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
            return [await client.request(*args) for args in requests]

    return asyncio.run(run())
