"""Every id the API accepts is reachable in every path, percent-encoded, through a real uvicorn
(which decodes ``%2F`` before routing): documents, clusters, the /ui pages and the client."""

import html
import json
import re
from urllib.parse import quote, unquote

import httpx
import pytest

from neardup.app.client import Client, ClientError

#: Ids a data pipeline meets: paths, reserved URL characters, quotes, non-ASCII, the longest.
IDS = [
    "deb/libfontenc1",
    "py/pip-26.3.dist-info/LICENSE.txt",
    "/leading",
    "trailing/",
    "a//b",
    "a/../b",
    "./x",
    "x/.",
    "...",
    "50%",
    "%2F",
    "%",
    "a?b=c&d",
    "x#frag",
    "a+b",
    "with space",
    "  ",
    'quo"te',
    "it's",
    "<b>&amp;</b>",
    "back\\slash",
    "naïve/ünïcode",
    "日本語/文書",
    "emoji 😀",
    "x" * 256,
    "/" * 256,
]


def _text(n: int) -> str:
    return " ".join(f"w{n}x{i}" for i in range(60))


@pytest.fixture(scope="module")
def registered(server):
    """Each id twice: itself, and a copy of its text under ``id + "~copy"`` when that fits,
    so every id is the root of a two-member cluster (and listed on the overview)."""
    docs = []
    for n, doc_id in enumerate(IDS):
        docs.append({"id": doc_id, "text": _text(n)})
        if len(doc_id) < 250:
            docs.append({"id": doc_id + "~copy", "text": _text(n)})
    with Client(server.url) as client:
        results = client.register(docs)
    assert [r["status"] for r in results] == ["created"] * len(docs)
    return docs


@pytest.mark.parametrize("doc_id", IDS)
def test_documents_and_clusters_reachable_through_the_client(server, registered, doc_id):
    with Client(server.url) as client:
        assert client.document(doc_id)["id"] == doc_id
        cluster = client.cluster(client.document(doc_id)["cluster"])
        assert doc_id in cluster["members"]
        if len(doc_id) < 250:
            assert cluster["root"] == min(doc_id, doc_id + "~copy") == doc_id
            assert cluster["members"] == [doc_id, doc_id + "~copy"]


@pytest.mark.parametrize("doc_id", IDS)
def test_ui_cluster_page_of_every_id(server, registered, doc_id):
    response = httpx.get(f"{server.url}/ui/clusters/{quote(doc_id, safe='')}", timeout=60)
    assert response.status_code == 200
    assert f"Cluster <code>{doc_id}</code>" in html.unescape(response.text)


@pytest.mark.parametrize("doc_id", IDS)
def test_ui_document_page_and_cluster_download_of_every_id(server, registered, doc_id):
    path = quote(doc_id, safe="")
    page = httpx.get(f"{server.url}/ui/documents/{path}", timeout=60)
    assert page.status_code == 200
    assert f'<code id="doc-id">{doc_id}</code>' in html.unescape(page.text)
    # Its cluster's page links back to its page, encoded as one path segment.
    cluster = httpx.get(f"{server.url}/ui/clusters/{path}", timeout=60).text
    assert f'href="/ui/documents/{path}"' in cluster
    export = httpx.get(f"{server.url}/ui/export/clusters/{path}?format=jsonl", timeout=60)
    assert export.status_code == 200
    assert unquote(export.headers["content-disposition"].split("filename*=UTF-8''")[1]) == (
        f"cluster-{doc_id}.jsonl"
    )
    ids = [json.loads(line)["id"] for line in export.text.splitlines()]
    assert ids == ([doc_id, doc_id + "~copy"] if len(doc_id) < 250 else [doc_id])


def test_every_overview_link_opens_its_cluster(server, registered):
    roots = {d["id"] for d in registered if len(d["id"]) < 250 and not d["id"].endswith("~copy")}
    seen = set()
    page = 1
    while True:
        body = httpx.get(f"{server.url}/ui?page={page}", timeout=60).text
        links = re.findall(r'href="(/ui/clusters/[^"]+)"', body)
        for link in links:
            target = html.unescape(link)
            assert "/" not in target.removeprefix("/ui/clusters/"), "an id's / left unencoded"
            seen.add(unquote(target.removeprefix("/ui/clusters/")))
            assert httpx.get(f"{server.url}{target}", timeout=60).status_code == 200
        if f"/ui?page={page + 1}" not in body:
            break
        page += 1
    assert roots <= seen


def test_delete_by_any_id_then_404(server, registered):
    with Client(server.url) as client:
        for doc_id in ("deb/libfontenc1~copy", "a?b=c&d~copy", "日本語/文書~copy", "/" * 256):
            client.delete(doc_id)
            with pytest.raises(ClientError) as info:
                client.document(doc_id)
            assert info.value.status == 404
        assert client.cluster("deb/libfontenc1")["members"] == ["deb/libfontenc1"]
    raw = httpx.delete(f"{server.url}/v1/documents/{quote('x/.', safe='')}~copy", timeout=60)
    assert raw.status_code == 204


@pytest.mark.parametrize(
    ("doc_id", "why"),
    [
        (".", "no URL can carry"),
        ("..", "no URL can carry"),
        ("x" * 257, "at most 256"),
        ("y" * 1000, "at most 256"),
        ("tab\there", "pattern"),
    ],
)
def test_ids_no_url_could_reach_are_refused_at_registration(server, doc_id, why):
    response = httpx.post(
        f"{server.url}/v1/documents",
        json={"documents": [{"id": doc_id, "text": "some words here"}]},
        timeout=60,
    )
    assert response.status_code == 422
    assert why in str(response.json()["detail"])
