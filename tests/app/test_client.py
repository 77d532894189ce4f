"""The client's retries and errors, against a scripted transport."""

import httpx
import pytest

from neardup.app.client import Client, ClientError


def scripted(*responses):
    calls = []

    def handler(request):
        calls.append(request)
        step = responses[min(len(calls) - 1, len(responses) - 1)]
        if isinstance(step, Exception):
            raise step
        return step

    return httpx.MockTransport(handler), calls


def test_retries_503_and_429_then_succeeds():
    ok = httpx.Response(200, json={"signatures": [[1, 2]]})
    busy = httpx.Response(503, headers={"Retry-After": "0"}, json={"detail": "busy"})
    slow = httpx.Response(429, headers={"Retry-After": "0"}, json={"detail": "slow down"})
    transport, calls = scripted(busy, slow, ok)
    with Client("http://svc", transport=transport, backoff=0) as client:
        assert client.signatures(["a"]) == [[1, 2]]
    assert len(calls) == 3


def test_client_errors_are_not_retried_and_carry_the_detail():
    transport, calls = scripted(httpx.Response(422, json={"detail": "bad id"}))
    with (
        Client("http://svc", transport=transport, backoff=0) as client,
        pytest.raises(ClientError, match="bad id") as info,
    ):
        client.register([{"id": "", "text": "x"}])
    assert info.value.status == 422 and info.value.detail == "bad id"
    assert len(calls) == 1


def test_connection_errors_retry_then_raise():
    transport, calls = scripted(httpx.ConnectError("refused"))
    with (
        Client("http://svc", transport=transport, retries=2, backoff=0) as client,
        pytest.raises(ClientError, match="no response"),
    ):
        client.stats()
    assert len(calls) == 3


def test_long_inputs_are_batched_in_order():
    seen = []

    def handler(request):
        texts = httpx.Request("POST", "/", content=request.content).read()
        import json

        body = json.loads(texts)
        seen.append(len(body["texts"]))
        return httpx.Response(
            200, json={"results": [{"matches": [{"id": t}]} for t in body["texts"]]}
        )

    with Client("http://svc", transport=httpx.MockTransport(handler), batch_size=3) as client:
        out = client.query([str(i) for i in range(8)])
    assert seen == [3, 3, 2]
    assert [m[0]["id"] for m in out] == [str(i) for i in range(8)]


def test_api_key_is_sent_as_bearer():
    transport, calls = scripted(httpx.Response(200, json={"documents": 0}))
    with Client("http://svc", api_key="s3cret", transport=transport) as client:
        client.stats()
    assert calls[0].headers["authorization"] == "Bearer s3cret"


def test_api_key_comes_from_neardup_api_key_unless_given(monkeypatch):
    monkeypatch.setenv("NEARDUP_API_KEY", "from-env")
    transport, calls = scripted(*[httpx.Response(200, json={"documents": 0})] * 3)
    with Client("http://svc", transport=transport) as client:
        client.stats()
    with Client("http://svc", api_key="given", transport=transport) as client:
        client.stats()
    monkeypatch.delenv("NEARDUP_API_KEY")
    with Client("http://svc", transport=transport) as client:
        client.stats()
    assert calls[0].headers["authorization"] == "Bearer from-env"
    assert calls[1].headers["authorization"] == "Bearer given"
    assert "authorization" not in calls[2].headers


def test_ids_are_one_percent_encoded_path_segment():
    transport, calls = scripted(*[httpx.Response(200, json={"id": "x"})] * 3)
    with Client("http://svc", transport=transport) as client:
        client.document("deb/a b?#%")
        client.cluster("日本/x")
        client.replace("a+b", "text")
    assert calls[0].url.raw_path == b"/v1/documents/deb%2Fa%20b%3F%23%25"
    assert calls[1].url.raw_path == b"/v1/clusters/%E6%97%A5%E6%9C%AC%2Fx"
    assert calls[2].url.raw_path == b"/v1/documents/a%2Bb"
    assert calls[2].method == "PUT"


def test_a_delete_retried_after_a_lost_answer_is_not_reported_as_404():
    """The first DELETE reached the server and deleted the document, but its answer was lost;
    the retry's 404 means "already deleted", not "never existed"."""
    gone = httpx.Response(404, json={"detail": "no document 'd'"})
    transport, calls = scripted(httpx.ReadError("connection reset"), gone)
    with Client("http://svc", transport=transport, backoff=0) as client:
        client.delete("d")
    assert len(calls) == 2
    transport, calls = scripted(gone)
    with (
        Client("http://svc", transport=transport, backoff=0) as client,
        pytest.raises(ClientError) as info,
    ):
        client.delete("d")  # a first-time 404 is still an error
    assert info.value.status == 404


def test_register_takes_the_package_docs_and_mappings():
    import json

    from neardup import Doc

    transport, calls = scripted(httpx.Response(200, json={"results": [{"id": "a"}, {"id": "b"}]}))
    with Client("http://svc", transport=transport) as client:
        client.register([Doc("a", "one text", {"lang": "en"}), {"id": "b", "text": "two"}])
    assert json.loads(calls[0].content)["documents"] == [
        {"id": "a", "text": "one text", "meta": {"lang": "en"}},
        {"id": "b", "text": "two"},
    ]


def test_register_refuses_other_objects_before_sending():
    transport, calls = scripted(httpx.Response(200, json={"results": []}))
    with (
        Client("http://svc", transport=transport) as client,
        pytest.raises(TypeError, match=r"neardup\.Doc or a mapping"),
    ):
        client.register([("a", "text")])
    assert calls == []
