"""The /ui pages through a real server: content, access, and texts kept or not."""

import json

import httpx
import pytest

from tests.e2e.conftest import start_server, stop_server
from tests.fixtures import PROTECTED_ITEMS, SHELL_SENTENCE, planted_corpus

CORPUS = planted_corpus(0)


def populate(url, headers=None):
    docs = [{"id": i, "text": t} for i, t in CORPUS.docs.items()]
    docs.append({"id": "zz-contam", "text": f"Intro words. {SHELL_SENTENCE} The end."})
    assert httpx.post(f"{url}/v1/documents", json={"documents": docs},
                      headers=headers, timeout=120).status_code == 200  # fmt: skip
    body = "\n".join(json.dumps(item) for item in PROTECTED_ITEMS)
    kind = {"content-type": "application/x-ndjson"}
    put = httpx.put(
        f"{url}/v1/protected-sets/evals",
        content=body,
        headers={**kind, **(headers or {})},
        timeout=120,
    )
    assert put.status_code == 201


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("ui"), "--workers", "1")
    populate(server.url)
    yield server
    stop_server(server)


def test_overview_lists_counts_histogram_and_largest_clusters_first(ui):
    page = httpx.get(f"{ui.url}/ui").text
    expected = [g for g in CORPUS.expected_clusters() if len(g) > 1]
    assert f'id="clusters">{len(expected)}<' in page
    assert '<svg id="histogram"' in page
    sizes = [len(g) for g in expected]
    first_root = min(sorted(expected, key=lambda g: (-len(g), min(g)))[0])
    assert page.index(f"/ui/clusters/{first_root}") < page.index("</table>")
    assert f">{max(sizes)}</td>" in page
    assert "evals" in page


def test_cluster_page_shows_diffs_estimates_jaccard_and_matrix(ui):
    group = sorted(CORPUS.clusters, key=len)[-1]
    page = httpx.get(f"{ui.url}/ui/clusters/{min(group)}").text
    assert page.count('class="doc member"') == len(group) - 1
    assert "<ins>" in page and "<del>" in page
    assert 'id="matrix"' in page
    assert "(root)" in page
    assert httpx.get(f"{ui.url}/ui/clusters/{max(group)}").status_code == 404


def test_contamination_page_highlights_the_shared_ngram(ui):
    page = httpx.post(f"{ui.url}/ui/contamination", data={"doc_id": "zz-contam"}).text
    assert "Contaminated: 1 protected item" in page
    # The sentence's 17 words are all inside some shared 13-gram; its surroundings are not.
    assert page.count("<mark>") == 17
    assert "<mark>Tom</mark>" in page and "<mark>sister</mark>" in page
    assert "<mark>Intro</mark>" not in page and "<mark>end</mark>" not in page
    pasted = httpx.post(f"{ui.url}/ui/contamination", data={"text": "nothing protected"}).text
    assert "Clean" in pasted and "<mark>" not in pasted


def test_parameters_page(ui):
    page = httpx.get(f"{ui.url}/ui/parameters").text
    assert '<svg id="s-curve"' in page and "LSH 0.7071" in page and "confirm 0.8" in page
    assert "0.9470" in page  # p(0.8)


def test_pages_need_a_read_key_and_keep_a_session_id_not_the_key(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text(
        "reader-key-0123456789 read\nwriter-key-0123456789 write,protect\n", encoding="utf-8"
    )
    server = start_server(tmp_path, "--workers", "1", "--api-keys-file", str(keys))
    try:
        populate(server.url, {"authorization": "Bearer writer-key-0123456789"})
        anonymous = httpx.get(f"{server.url}/ui")
        assert anonymous.status_code == 303 and anonymous.headers["location"] == "/ui/login"
        refused = httpx.post(f"{server.url}/ui/login", data={"key": "writer-key-0123456789"})
        assert refused.status_code == 401 and "lacks the read scope" in refused.text
        # The raw key in the cookie (what the cookie used to hold) opens nothing.
        forged = httpx.get(f"{server.url}/ui", cookies={"neardup_session": "reader-key"})
        assert forged.status_code == 303
        with httpx.Client(base_url=server.url) as browser:
            login = browser.post("/ui/login", data={"key": "reader-key-0123456789"},
                                 headers={"origin": server.url})  # fmt: skip
            assert login.status_code == 303
            cookie = login.headers["set-cookie"]
            assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
            assert "max-age" not in cookie.lower() and "expires" not in cookie.lower()
            assert "reader-key" not in cookie
            session = browser.cookies["neardup_session"]
            assert len(session) >= 40
            signed_in = browser.get("/ui")
            assert signed_in.status_code == 200 and 'href="/ui/logout"' in signed_in.text
            assert browser.get("/ui/parameters").status_code == 200
            browser.get("/ui/logout")
            assert browser.get("/ui").status_code == 303
        # Signed out server-side: the old id opens nothing any more.
        replayed = httpx.get(f"{server.url}/ui", cookies={"neardup_session": session})
        assert replayed.status_code == 303
    finally:
        stop_server(server)


@pytest.mark.parametrize(
    "headers",
    [{"origin": "http://evil.example"}, {"origin": "null"},
     {"referer": "http://evil.example/phish"}],
)  # fmt: skip
def test_sign_in_posted_from_another_site_is_refused(ui, headers):
    response = httpx.post(f"{ui.url}/ui/login", data={"key": "any"}, headers=headers)
    assert response.status_code == 403 and "another site" in response.text
    assert "set-cookie" not in response.headers
    own = httpx.post(f"{ui.url}/ui/login", data={"key": "any"},
                     headers={"referer": f"{ui.url}/ui/login"})  # fmt: skip
    assert own.status_code == 303


def test_pages_forbid_framing_scripts_and_inline_styles(ui):
    for path in ["/ui", "/ui/login", "/ui/parameters", "/ui/contamination", "/ui/logout",
                 "/ui/clusters/no-such-root"]:  # fmt: skip
        response = httpx.get(f"{ui.url}{path}")
        csp = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
        assert "style-src 'self'" in csp and "unsafe-inline" not in csp
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "<script" not in response.text and "<style" not in response.text
        assert " style=" not in response.text
    group = sorted(CORPUS.clusters, key=len)[-1]
    cluster = httpx.get(f"{ui.url}/ui/clusters/{min(group)}").text
    checked = httpx.post(f"{ui.url}/ui/contamination", data={"doc_id": "zz-contam"}).text
    assert " style=" not in cluster + checked and "<style" not in cluster + checked
    css = httpx.get(f"{ui.url}/ui/style.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_without_stored_texts_the_cluster_page_shows_ids_and_estimates(tmp_path):
    server = start_server(tmp_path, "--workers", "1", "--no-store-text")
    try:
        populate(server.url)
        group = sorted(CORPUS.clusters, key=len)[-1]
        page = httpx.get(f"{server.url}/ui/clusters/{min(group)}").text
        assert "Texts are not stored" in page
        assert 'class="doc member"' not in page
        assert all(m in page for m in group)
        document = httpx.get(f"{server.url}/ui/documents/{min(group)}").text
        assert "Texts are not stored (STORE_TEXT is off)." in document
        assert f"{len(group) - 1} other document(s)" in document
        export = httpx.get(f"{server.url}/ui/export/clusters/{min(group)}?format=jsonl")
        rows = [json.loads(line) for line in export.text.splitlines()]
        assert sorted(r["id"] for r in rows) == sorted(group)
        assert all(r["text"] is None for r in rows)
    finally:
        stop_server(server)


@pytest.mark.parametrize("text", ["", "  \n "])
def test_an_empty_text_has_nothing_to_check_not_a_verdict_of_clean(ui, text):
    response = httpx.post(f"{ui.url}/ui/contamination", data={"text": text})
    assert response.status_code == 200
    assert '<h2 id="verdict">Nothing to check: the text is empty</h2>' in response.text
    assert "Clean" not in response.text and "Contaminated" not in response.text


def test_an_unknown_document_to_check_is_an_html_404_page(ui):
    response = httpx.post(f"{ui.url}/ui/contamination", data={"doc_id": "no-such-doc"})
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "no stored text for document" in response.text and 'id="verdict"' not in response.text


@pytest.mark.parametrize(("trusted", "secure"), [("*", True), ("192.0.2.1", False)])
def test_the_session_cookie_is_secure_behind_a_trusted_tls_proxy(tmp_path, trusted, secure):
    """A TLS proxy on another host says https in X-Forwarded-Proto; the cookie is Secure when
    the proxy's address is among --forwarded-allow-ips, and the header is ignored otherwise."""
    server = start_server(tmp_path, "--workers", "1", "--forwarded-allow-ips", trusted)
    try:
        signed_in = httpx.post(f"{server.url}/ui/login", data={"key": "any"},
                               headers={"x-forwarded-proto": "https"})  # fmt: skip
        assert signed_in.status_code == 303
        cookie = signed_in.headers["set-cookie"].lower()
        assert cookie.startswith("neardup_session=") and "httponly" in cookie
        assert ("; secure" in cookie) is secure
    finally:
        stop_server(server)
