"""Admission and the body limit as ASGI middleware, driven directly (no server)."""

import asyncio
from unittest.mock import patch
from urllib.parse import parse_qsl, urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from neardup.app.api import bodies
from neardup.app.api.admission import Admission, Capacity
from neardup.app.api.body_limit import BodyLimit
from neardup.app.config import Settings


def _scope(method="POST", path="/v1/documents", length=None, chunked=False):
    headers = [(b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    if chunked:
        headers.append((b"transfer-encoding", b"chunked"))
    return {"type": "http", "method": method, "path": path, "headers": headers}


class Client:
    """One request's side of the ASGI exchange: body chunks to give (None: wait for ever),
    messages received."""

    def __init__(self, *chunks):
        self.chunks = list(chunks)
        self.reads = 0
        self.sent = []

    async def receive(self):
        self.reads += 1
        chunk = self.chunks.pop(0)
        if chunk is None:
            await asyncio.Event().wait()  # a client that never sends the rest
        return {"type": "http.request", "body": chunk, "more_body": bool(self.chunks)}

    async def send(self, message):
        self.sent.append(message)

    @property
    def status(self):
        return self.sent[0]["status"] if self.sent else None

    def header(self, name):
        return dict(self.sent[0]["headers"]).get(name)


def _held_app(release):
    """An app that reads the body, then answers 200 once ``release`` is set."""

    async def app(scope, receive, send):
        await receive()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


def test_admission_sheds_past_max_inflight_before_reading_the_body():
    async def run():
        release = asyncio.Event()
        capacity = Capacity(max_inflight=2, max_buffered_bytes=10**6)
        gate = Admission(_held_app(release), capacity)
        held = [Client(b"{}") for _ in range(2)]
        tasks = [asyncio.create_task(gate(_scope(), c.receive, c.send)) for c in held]
        await asyncio.sleep(0.01)
        assert capacity.stats()["admitted"] == 2
        late = Client(b"{}")
        await gate(_scope(path="/v1/protected-sets/x", method="PUT"), late.receive, late.send)
        assert late.status == 503 and late.reads == 0
        assert late.header(b"retry-after") == b"1" and late.header(b"connection") == b"close"
        form = Client(b"docs=...")  # the /ui pages' forms are admitted the same way
        await gate(_scope(path="/ui/decontamination"), form.receive, form.send)
        assert form.status == 503 and form.reads == 0
        reader = Client(b"")  # GETs are never gated
        get = gate(_scope("GET", "/v1/stats"), reader.receive, reader.send)
        get_task = asyncio.create_task(get)
        await asyncio.sleep(0.01)
        assert reader.reads == 1
        release.set()
        await asyncio.gather(*tasks, get_task)
        assert [c.status for c in held] == [200, 200]
        assert capacity.stats() == {"admitted": 0, "buffered_bytes": 0, "shed": 2}

    asyncio.run(run())


def test_admission_and_buffer_are_given_back_before_the_client_sees_the_answer():
    async def run():
        capacity = Capacity(max_inflight=1, max_buffered_bytes=10**6)
        release = asyncio.Event()
        release.set()
        seen = []

        async def send(message):
            if message["type"] == "http.response.body":
                seen.append((capacity.admitted, capacity.buffered))

        app = BodyLimit(_held_app(release), max_bytes=100, capacity=capacity, timeout=60)
        await Admission(app, capacity)(_scope(length=2), Client(b"{}").receive, send)
        assert seen == [(0, 0)]

    asyncio.run(run())


def test_body_limit_bounds_the_bytes_buffered_across_requests():
    async def run():
        release = asyncio.Event()
        capacity = Capacity(max_inflight=8, max_buffered_bytes=1000)
        limit = BodyLimit(_held_app(release), max_bytes=800, capacity=capacity, timeout=60)
        # 700 bytes declared: reserved before a byte is read, while the body trickles in.
        slow = Client(b"x" * 100, None)
        slow_task = asyncio.create_task(limit(_scope(length=700), slow.receive, slow.send))
        await asyncio.sleep(0.01)
        assert capacity.buffered == 700
        declared = Client(b"y" * 400)
        await limit(_scope(length=400), declared.receive, declared.send)
        assert declared.status == 503 and declared.reads == 0
        assert declared.header(b"retry-after") == b"1"
        chunked = Client(b"z" * 200, b"z" * 200)  # no Content-Length: counted while reading
        await limit(_scope(), chunked.receive, chunked.send)
        assert chunked.status == 503 and chunked.reads == 2
        small = Client(b"w" * 250)
        small_task = asyncio.create_task(limit(_scope(length=250), small.receive, small.send))
        await asyncio.sleep(0.01)
        assert capacity.buffered == 950
        slow_task.cancel()
        release.set()
        await small_task
        assert small.status == 200
        with pytest.raises(asyncio.CancelledError):
            await slow_task
        assert capacity.buffered == 0 and capacity.shed == 2

    asyncio.run(run())


def test_body_limit_413_before_reading_a_declared_oversize_body():
    async def run():
        capacity = Capacity(max_inflight=8, max_buffered_bytes=10**6)
        limit = BodyLimit(_held_app(asyncio.Event()), max_bytes=100, capacity=capacity, timeout=60)
        client = Client(b"x" * 101)
        await limit(_scope(length=101), client.receive, client.send)
        assert client.status == 413 and client.reads == 0 and capacity.buffered == 0

    asyncio.run(run())


def test_body_limit_408_for_a_body_slower_than_the_timeout():
    async def run():
        capacity = Capacity(max_inflight=8, max_buffered_bytes=10**6)
        limit = BodyLimit(_held_app(asyncio.Event()), max_bytes=100, capacity=capacity,
                          timeout=0.2)  # fmt: skip
        client = Client(b"{", None)  # then nothing more
        await asyncio.wait_for(limit(_scope(length=50), client.receive, client.send), 5)
        assert client.status == 408 and client.header(b"connection") == b"close"
        assert capacity.buffered == 0

    asyncio.run(run())


def test_body_limit_400_for_both_content_length_and_transfer_encoding():
    async def run():
        capacity = Capacity(max_inflight=8, max_buffered_bytes=10**6)
        limit = BodyLimit(_held_app(asyncio.Event()), max_bytes=100, capacity=capacity,
                          timeout=60)  # fmt: skip
        client = Client(b"{}")
        await asyncio.wait_for(
            limit(_scope(length=2, chunked=True), client.receive, client.send), 5
        )
        assert client.status == 400 and client.reads == 0
        assert client.header(b"connection") == b"close"

    asyncio.run(run())


def test_settings_refuse_a_buffer_smaller_than_one_body():
    with pytest.raises(ValidationError, match="max_buffered_bytes"):
        Settings(max_body_bytes=2**20, max_buffered_bytes=2**19)
    assert Settings().max_buffered_bytes == 512 * 2**20


@settings(max_examples=200)
@given(st.lists(st.tuples(st.text(), st.text()), max_size=5), st.integers(3, 64))
def test_a_form_is_read_as_pythons_parser_reads_it_a_slice_at_a_time(fields, slice_bytes):
    """Unescaped in slices (never splitting a %XX escape nor a UTF-8 character's escapes)."""
    body = urlencode(fields).encode()
    with patch.object(bodies, "_SLICE", slice_bytes):
        assert bodies._form_fields(body) == parse_qsl(body.decode(), keep_blank_values=True)
