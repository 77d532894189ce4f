"""The /ui document pages through a real server: the query page ("query before storing", by
hand), a document's page, a cluster's members as JSON Lines and CSV downloads, and HTML 404
pages; with ids and texts holding commas, quotes, newlines, ``/`` and non-ASCII."""

import csv
import html
import io
import json
import random
import re
from urllib.parse import quote, unquote

import httpx
import pytest

from tests.e2e.conftest import start_server, stop_server

_RNG = random.Random(22)
_WORDS = ["alpha", "béta", "gamma", "delta", "中文", "epsilon", "zeta", "eta", "theta", "iota"]
_BODY = " ".join(f"{_RNG.choice(_WORDS)}{_RNG.randint(0, 999)}" for _ in range(160))
#: A text CSV must quote: commas, quotes, a newline, a CR, non-ASCII.
BASE = f'Le "café", naïve; line one\nline two,\r {_BODY} the end, "quoted".'
ROOT = "dir/copy,2"  # the smallest id of the cluster below
TRICKY = 'dir/Ünïcode "id", 1 ?#%'
#: MAX_MATCHES of the server: results list this many, and count all.
MAX_MATCHES = 3


def _variant(n: int) -> str:
    words = BASE.split(" ")
    words[10 + 9 * n] = f"changed{n}"
    return " ".join(words)


DOCS = {TRICKY: BASE, ROOT: BASE, **{f"variant-{n}": _variant(n) for n in range(5)}}
DOCS["loner"] = "A text of its own that nothing else resembles at all, in any way whatsoever."
#: A cluster larger than one export chunk (EXPORT_CHUNK): many exact copies of one text.
COPY_TEXT = " ".join(f"copyword{i}" for i in range(80))
COPIES = {f"copy-{n:04d}": COPY_TEXT for n in range(700)}
META = {"source": "crawl, 2024", "tags": ["a", "ß"], "nested": {"quote": 'say "hi"'}}


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("ui-docs"), "--workers", "1",
                          "--max-matches", str(MAX_MATCHES))  # fmt: skip
    docs = [{"id": i, "text": t, "meta": META if i == TRICKY else {}} for i, t in DOCS.items()]
    docs += [{"id": i, "text": t} for i, t in COPIES.items()]
    response = httpx.post(f"{server.url}/v1/documents", json={"documents": docs}, timeout=120)
    assert response.status_code == 200, response.text
    yield server
    stop_server(server)


def _cluster(url: str, root: str) -> list[str]:
    return httpx.get(f"{url}/v1/clusters/{quote(root, safe='')}").json()["members"]


def test_cluster_export_as_csv_reads_back_every_member_and_its_text(ui):
    members = _cluster(ui.url, ROOT)
    assert len(members) == 7
    response = httpx.get(f"{ui.url}/ui/export/clusters/{quote(ROOT, safe='')}?format=csv")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    disposition = response.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="cluster-dir_copy_2.csv"; ')
    assert unquote(disposition.split("filename*=UTF-8''")[1]) == f"cluster-{ROOT}.csv"
    assert response.headers["x-neardup-rows"] == "7"
    body = response.content.decode("utf-8")
    assert body.startswith("id,cluster,estimate,copy_of,text\r\n")
    rows = list(csv.DictReader(io.StringIO(body, newline="")))
    assert sorted(r["id"] for r in rows) == members
    assert rows[0]["id"] == ROOT and float(rows[0]["estimate"]) == 1.0
    for row in rows:
        assert row["text"] == DOCS[row["id"]]  # quotes, commas, CR, LF and non-ASCII intact
        assert row["cluster"] == ROOT
    by_id = {r["id"]: r for r in rows}
    assert by_id[TRICKY]["copy_of"] == ROOT and by_id["variant-0"]["copy_of"] == ""
    # The pages' order: the root's text (its copies with it), then borderline first.
    assert [r["id"] for r in rows[:2]] == [ROOT, TRICKY]
    estimates = [float(r["estimate"]) for r in rows[2:]]
    assert estimates == sorted(estimates) and max(estimates) < 1.0


def test_cluster_export_as_json_lines_equals_the_csv(ui):
    root = quote(ROOT, safe="")
    response = httpx.get(f"{ui.url}/ui/export/clusters/{root}?format=jsonl")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["content-disposition"].startswith(
        'attachment; filename="cluster-dir_copy_2.jsonl"'
    )
    lines = response.content.decode("utf-8").split("\n")
    assert lines[-1] == ""
    records = [json.loads(line) for line in lines[:-1]]
    as_csv = httpx.get(f"{ui.url}/ui/export/clusters/{root}?format=csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(as_csv, newline="")))
    assert [r["id"] for r in records] == [r["id"] for r in rows]
    assert all(r["text"] == DOCS[r["id"]] for r in records)
    assert {r["id"]: r["copy_of"] for r in records}[TRICKY] == ROOT
    assert {r["id"]: r["copy_of"] for r in records}[ROOT] is None


def test_cluster_export_streams_a_cluster_larger_than_a_chunk(ui):
    response = httpx.get(f"{ui.url}/ui/export/clusters/copy-0000?format=jsonl", timeout=60)
    records = [json.loads(line) for line in response.text.splitlines()]
    assert response.headers["x-neardup-rows"] == str(len(COPIES))
    assert sorted(r["id"] for r in records) == sorted(COPIES)
    assert all(r["text"] == COPY_TEXT and r["estimate"] == 1.0 for r in records)
    assert [r["copy_of"] for r in records[1:]] == ["copy-0000"] * (len(COPIES) - 1)


def _is_html_404(response: httpx.Response, says: str) -> None:
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert '<h1 id="error-title">Not found</h1>' in response.text
    assert says in html.unescape(response.text)
    assert '"detail"' not in response.text


def test_unknown_clusters_documents_and_pages_are_html_404_pages(ui):
    unknown = 'no/such "id"'
    path = quote(unknown, safe="")
    _is_html_404(httpx.get(f"{ui.url}/ui/clusters/{path}"), repr(unknown))
    _is_html_404(httpx.get(f"{ui.url}/ui/documents/{path}"), repr(unknown))
    _is_html_404(httpx.get(f"{ui.url}/ui/export/clusters/{path}?format=csv"), repr(unknown))
    # A member that is not its cluster's root has no cluster page.
    _is_html_404(httpx.get(f"{ui.url}/ui/clusters/variant-0"), "'variant-0' is not the root")
    _is_html_404(httpx.get(f"{ui.url}/ui/no-such-page"), "Not Found")
    # The API still answers JSON.
    api = httpx.get(f"{ui.url}/v1/clusters/{path}")
    assert api.status_code == 404 and api.json() == {"detail": f"{unknown!r} is not the root "
                                                     "of a cluster"}  # fmt: skip
    bad = httpx.get(f"{ui.url}/ui/export/clusters/{quote(ROOT, safe='')}?format=xml")
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("text/html")
    assert "format must be one of jsonl, csv" in bad.text


def _listed(page: str) -> list[tuple[str, float]]:
    rows = re.findall(r'<tr class="match" data-id="([^"]*)"><td>.*?</td><td>([0-9.]+)</td>', page)
    return [(html.unescape(i), float(e)) for i, e in rows]


def test_the_query_page_lists_what_v1_query_answers_capped_and_counted(ui):
    api = httpx.post(f"{ui.url}/v1/query", json={"texts": [BASE]}).json()["results"][0]
    assert api["match_count"] == 7 and len(api["matches"]) == MAX_MATCHES
    page = httpx.post(f"{ui.url}/ui/query", data={"text": BASE}).text
    assert "7 registered document(s) at estimate 0.8 or more" in page
    assert f"The best {MAX_MATCHES} are listed (at most {MAX_MATCHES}); all 7 are counted" in page
    assert _listed(page) == [(m["id"], round(m["estimate"], 3)) for m in api["matches"]]
    for m in api["matches"]:
        assert f'href="/ui/documents/{quote(m["id"], safe="")}"' in page
    strict = httpx.post(f"{ui.url}/ui/query", data={"text": BASE, "threshold": "1"}).text
    assert "2 registered document(s) at estimate 1.0 or more" in strict  # the exact copies


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_the_query_page_says_an_empty_text_has_nothing_to_check(ui, text):
    response = httpx.post(f"{ui.url}/ui/query", data={"text": text})
    assert response.status_code == 200
    assert "Nothing to check: the text is empty" in response.text
    assert "No registered document" not in response.text


@pytest.mark.parametrize(
    ("threshold", "says"),
    [("0.3", "below what the bands can find"), ("abc", "must be a number"), ("1.5", "(0, 1]")],
)
def test_the_query_page_refuses_a_bad_threshold(ui, threshold, says):
    response = httpx.post(f"{ui.url}/ui/query", data={"text": BASE, "threshold": threshold})
    assert response.status_code == 422
    assert says in html.unescape(response.text) and 'id="verdict"' not in response.text


def test_a_document_page_shows_text_meta_cluster_and_matches_linked_both_ways(ui):
    page = httpx.get(f"{ui.url}/ui/documents/{quote(TRICKY, safe='')}").text
    shown = html.unescape(page)
    assert BASE in shown and json.dumps(META, indent=2, ensure_ascii=False) in shown
    to_cluster = f'href="/ui/clusters/{quote(ROOT, safe="")}?find={quote(TRICKY, safe="")}"'
    assert to_cluster in page and "(7 members)" in page
    # Its matches: the other 6 members, counted; the best 2 listed (MAX_MATCHES less itself).
    assert "6 other document(s) at estimate 0.8 or more; the best 2 are listed" in page
    listed = _listed(page)
    assert [i for i, _ in listed] == [ROOT, "variant-0"] and listed[0][1] == 1.0
    assert f'href="/ui/documents/{quote(ROOT, safe="")}"' in page
    # ... and back: the cluster page links each row to its document's page.
    cluster = httpx.get(f"{ui.url}/ui/clusters/{quote(ROOT, safe='')}").text
    for member in _cluster(ui.url, ROOT):
        if member != TRICKY:  # an exact copy of the root: collapsed into the root's row
            assert f'href="/ui/documents/{quote(member, safe="")}"' in cluster
    assert f'href="/ui/export/clusters/{quote(ROOT, safe="")}?format=csv"' in cluster
    alone = httpx.get(f"{ui.url}/ui/documents/loner").text
    assert "Alone: no other document is in its cluster." in alone
    assert "No other document at estimate 0.8 or more." in alone


def test_pages_and_exports_keep_the_read_rule_and_the_report_names_ngrams_for_protect(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("reader-key-0123456789 read\nowner-key-0123456789 read,write,protect\n",
                    encoding="utf-8")  # fmt: skip
    server = start_server(tmp_path, "--workers", "1", "--api-keys-file", str(keys))
    reader = {"authorization": "Bearer reader-key-0123456789"}
    owner = {"authorization": "Bearer owner-key-0123456789"}
    try:
        docs = [{"id": i, "text": t} for i, t in DOCS.items()]
        assert httpx.post(f"{server.url}/v1/documents", json={"documents": docs},
                          headers=owner).status_code == 200  # fmt: skip
        secret = "one two three four five six seven eight nine ten eleven twelve thirteen"
        put = httpx.put(f"{server.url}/v1/protected-sets/evals", content=secret,
                        headers={**owner, "content-type": "text/plain"})  # fmt: skip
        assert put.status_code == 201
        root = quote(ROOT, safe="")
        for method, path, data in [
            ("GET", f"/ui/export/clusters/{root}?format=csv", None),
            ("GET", f"/ui/documents/{root}", None),
            ("GET", "/ui/query", None),
            ("POST", "/ui/query", {"text": BASE}),
            ("POST", "/ui/decontamination/report", {"docs": '{"text": "x"}'}),
        ]:
            anonymous = httpx.request(method, f"{server.url}{path}", data=data)
            assert anonymous.status_code == 303, path
            assert anonymous.headers["location"] == "/ui/login"
            signed = httpx.request(method, f"{server.url}{path}", data=data, headers=reader)
            assert signed.status_code == 200, path
        docs = json.dumps({"id": "d1", "text": f"before {secret} after"})
        form = {"docs": docs, "format": "jsonl"}
        shown = {}
        for name, key in (("reader", reader), ("owner", owner)):
            got = httpx.post(f"{server.url}/ui/decontamination/report", data=form, headers=key)
            [item] = [r for r in map(json.loads, got.text.splitlines()) if r["record"] == "item"]
            shown[name] = item["first_ngram"]
        assert shown == {"reader": None, "owner": secret}
    finally:
        stop_server(server)


def test_the_query_page_checks_a_long_text_whole_and_shows_back_only_its_start(ui):
    long = BASE + " tail" * 60_000  # 300,000 characters more than the page shows back
    api = httpx.post(f"{ui.url}/v1/query", json={"texts": [long]}, timeout=60).json()
    page = httpx.post(f"{ui.url}/ui/query", data={"text": long}, timeout=60).text
    shown = len(long) - 200_000
    assert f"only its first 200000 characters are shown back, {shown} more are not" in page
    assert _listed(page) == [
        (m["id"], round(m["estimate"], 3)) for m in api["results"][0]["matches"]
    ]
    assert len(page) < 250_000
