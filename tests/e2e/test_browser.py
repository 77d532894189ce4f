"""The /ui pages in a real headless Chromium (Debian's, driven by Playwright), with screenshots.

Screenshots go to ``$NEARDUP_SCREENSHOTS`` when set, else to the test's temporary directory.
"""

import csv
import io
import json
import os
import shutil
from pathlib import Path
from urllib.request import urlopen

import pytest
from playwright.sync_api import sync_playwright

from neardup.core.minhash import words
from tests.e2e.conftest import start_server, stop_server
from tests.e2e.test_cluster_pages import ROOT as LICENSE_ROOT
from tests.e2e.test_cluster_pages import populate as populate_licenses
from tests.e2e.test_ui import CORPUS, populate
from tests.fixtures import PROTECTED_ITEMS, SHELL_SENTENCE

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Headless as root, and no background traffic: this machine's network is closed.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    where = os.environ.get("NEARDUP_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def page(server, tmp_path_factory):
    assert Path(CHROMIUM).exists(), "Debian's chromium is needed (`make test` installs it)"
    populate(server.url)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.console_messages = []
        page.on("console", lambda message: page.console_messages.append(message.text))
        yield page
        browser.close()


def test_overview_cluster_diff_contamination_and_parameters(server, page, shots):
    page.goto(f"{server.url}/ui")
    expected = [g for g in CORPUS.expected_clusters() if len(g) > 1]
    assert page.locator("#clusters").inner_text() == str(len(expected))
    assert page.locator("#histogram rect").count() == 9
    page.screenshot(path=str(shots / "overview.png"), full_page=True)

    page.locator("#clusters-table a").first.click()
    page.wait_for_url("**/ui/clusters/**")
    root = page.url.rsplit("/", 1)[-1]
    group = next(g for g in expected if min(g) == root)
    members = page.locator(".doc.member")
    assert members.count() == len(group) - 1
    inserted = page.locator(".doc.member ins").all_inner_texts()
    deleted = page.locator(".doc.member del").all_inner_texts()
    assert inserted and deleted
    root_words = set(words(CORPUS.docs[root]))
    assert any(set(words(w)) - root_words for w in inserted)  # really new words
    assert all(set(words(w)) <= root_words for w in deleted)  # really the root's words
    page.screenshot(path=str(shots / "cluster.png"), full_page=True)

    page.goto(f"{server.url}/ui/contamination")
    page.fill("#text", "It began when TOM found a shiny red shell by the river and carried it "
                       "home to show his sister, they say.")  # fmt: skip
    page.click("#check button")
    page.wait_for_selector("#verdict")
    assert page.locator("#verdict").inner_text().startswith("Contaminated")
    marked = page.locator("#highlighted mark").all_inner_texts()
    assert marked[0] == "TOM" and "river" in marked and "It" not in marked
    assert page.locator("#hits td").nth(1).inner_text().startswith("math-001")
    page.screenshot(path=str(shots / "contamination.png"), full_page=True)

    page.goto(f"{server.url}/ui/parameters")
    assert page.locator("#s-curve polyline").count() == 1
    assert "0.7071" in page.locator("#choices").inner_text()
    page.screenshot(path=str(shots / "parameters.png"), full_page=True)


def test_the_content_security_policy_blocks_nothing_the_pages_use(server, page):
    page.goto(f"{server.url}/ui")
    # The stylesheet applied (the header's dark background) with style-src 'self' in force.
    background = page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor")
    assert background == "rgb(29, 35, 48)"
    page.goto(f"{server.url}/ui/parameters")
    assert page.locator("#choices tr.current").count() == 1
    assert not [m for m in page.console_messages if "Content Security Policy" in m]


@pytest.fixture(scope="module")
def licenses(tmp_path_factory):
    """A server holding the 82-member license cluster (tests/e2e/test_cluster_pages.py)."""
    srv = start_server(tmp_path_factory.mktemp("licenses"), "--workers", "1")
    populate_licenses(srv.url)
    yield srv
    stop_server(srv)


def test_find_a_document_page_through_its_cluster_and_scroll_the_matrix(licenses, page, shots):
    page.goto(f"{licenses.url}/ui")
    assert page.locator("a.signout").count() == 0  # open access: nobody to sign out
    target = "py/pkg-8.dist-info/LICENSE"
    page.fill("#find-id", target)
    page.click("#find button")
    page.wait_for_url("**/ui/clusters/**")
    found = page.locator("tr.found")
    assert found.count() == 1 and found.get_attribute("data-id") == target
    chain = found.locator("td.chain").inner_text()
    assert chain.startswith(f"{LICENSE_ROOT} → ") and chain.split(" → ")[-1].startswith(target)
    first = page.locator("tr.member-row").first
    assert first.get_attribute("data-id") == LICENSE_ROOT
    assert first.locator("td.copies").inner_text().startswith("×31")
    # The matrix scrolls inside its box; the page itself does not scroll sideways.
    box = page.locator("#matrix-box")
    assert box.evaluate("b => b.scrollWidth > b.clientWidth")
    box.evaluate("b => { b.scrollLeft = 400; }")
    assert box.evaluate("b => b.scrollLeft") > 0
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(shots / "cluster-licenses.png"), full_page=True)

    page.locator("a.next").first.click()
    page.wait_for_url("**page=2")
    assert 0 < page.locator("tr.member-row").count() <= 20
    member = page.locator("tr.member-row").first
    doc_id = member.get_attribute("data-id")
    member.locator("td a.doc-link").click()
    page.wait_for_url("**/ui/documents/**")
    assert page.locator("#doc-id").inner_text() == doc_id
    page.go_back()
    member.locator("td a.check-link").click()
    page.wait_for_url("**/ui/contamination?doc_id=**")
    assert page.locator("#doc_id").input_value() == doc_id


def test_docs_render_offline_from_the_service_alone(server, page, shots):
    """Swagger UI renders with every request to another host refused (as without internet)."""
    elsewhere = []

    def only_local(route):
        if route.request.url.startswith(server.url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    try:
        page.goto(f"{server.url}/docs")
        page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
        assert "neardup" in page.locator(".swagger-ui .info .title").inner_text()
        page.wait_for_selector(".opblock", timeout=30_000)
        assert page.locator(".opblock").count() >= 15
        assert page.locator(".btn.authorize").count() == 1  # the Bearer scheme
        page.screenshot(path=str(shots / "docs.png"), full_page=False)
    finally:
        page.unroute("**/*")
    assert elsewhere == []


def test_query_a_text_then_its_document_page_and_its_cluster_both_ways(server, page, shots):
    expected = [g for g in CORPUS.expected_clusters() if len(g) > 1]
    group = sorted(expected, key=lambda g: (-len(g), min(g)))[0]
    root = min(group)
    page.goto(f"{server.url}/ui/query")
    page.fill("#text", CORPUS.docs[root])
    page.click("#query button")
    page.wait_for_selector("#verdict")
    assert page.locator("#verdict").inner_text().startswith(f"{len(group)} registered document")
    rows = page.locator("#matches tr.match")
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.id)")) == sorted(group)
    page.screenshot(path=str(shots / "query.png"), full_page=True)

    member = max(group)
    page.locator(f'#matches tr.match[data-id="{member}"] td a').first.click()
    page.wait_for_url(f"**/ui/documents/{member}")
    assert page.locator("#doc-id").inner_text() == member
    assert page.locator("#text").inner_text() == CORPUS.docs[member]
    assert page.locator("#matches tr.match").count() == len(group) - 1
    page.screenshot(path=str(shots / "document.png"), full_page=True)

    page.click("#cluster-link")
    page.wait_for_url(f"**/ui/clusters/{root}?find={member}")
    found = page.locator("tr.found")
    assert found.get_attribute("data-id") == member
    found.locator("a.doc-link").click()
    page.wait_for_url(f"**/ui/documents/{member}")
    page.click("#check-link")
    page.wait_for_url("**/ui/contamination?doc_id=**")
    assert page.locator("#doc_id").input_value() == member


def test_empty_texts_and_unknown_pages_in_the_browser(server, page, shots):
    page.goto(f"{server.url}/ui/contamination")
    page.click("#check button")
    page.wait_for_selector("#verdict")
    assert page.locator("#verdict").inner_text() == "Nothing to check: the text is empty"
    page.goto(f"{server.url}/ui/query")
    page.fill("#text", "   ")
    page.click("#query button")
    page.wait_for_selector("#verdict")
    assert page.locator("#verdict").inner_text() == "Nothing to check: the text is empty"
    for path in ["/ui/clusters/no-such-root", "/ui/documents/no-such-doc"]:
        response = page.goto(f"{server.url}{path}")
        assert response.status == 404
        assert page.locator("#error-title").inner_text() == "Not found"
        assert "no-such" in page.locator("#error-detail").inner_text()
        # The page's own stylesheet applies (CSP) and it links back.
        assert page.locator("header a").first.get_attribute("href") == "/ui"
    page.screenshot(path=str(shots / "not-found.png"), full_page=True)


def test_downloads_of_a_cluster_and_of_the_report(server, page, shots):
    expected = [g for g in CORPUS.expected_clusters() if len(g) > 1]
    root = min(sorted(expected, key=lambda g: (-len(g), min(g)))[0])
    page.goto(f"{server.url}/ui/clusters/{root}")
    with page.expect_download() as caught:
        page.click("#export-csv")
    download = caught.value
    assert download.suggested_filename == f"cluster-{root}.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text("utf-8"),
                                           newline="")))  # fmt: skip
    members = next(g for g in expected if min(g) == root)
    assert sorted(r["id"] for r in rows) == sorted(members)
    assert all(r["text"] == CORPUS.docs[r["id"]] for r in rows)

    page.goto(f"{server.url}/ui/decontamination")
    assert page.locator("#window").input_value() == "200"
    assert page.locator("#min_piece").input_value() == "200"
    assert page.locator("#max_pieces").input_value() == "10"
    text = f"Some words first, and more of them here. {SHELL_SENTENCE} And a tail after it."
    page.fill("#docs", json.dumps({"id": "web-1", "text": text}))
    page.check('input[name="mode"][value="cut"]')
    page.fill("#window", "0")
    page.fill("#min_piece", "5")
    page.click("#decontaminate button[type=submit]:not(.download)")
    page.wait_for_selector("#run-settings")
    assert "window 0 characters each side, min piece 5 characters, max pieces 10" in (
        page.locator("#run-settings").inner_text()
    )
    assert page.locator("#kept td").first.inner_text() == "web-1#1"
    page.screenshot(path=str(shots / "decontamination.png"), full_page=True)
    with page.expect_download() as caught:
        page.click("#report-jsonl")
    download = caught.value
    assert download.suggested_filename == "report.jsonl"
    records = [json.loads(line) for line in Path(download.path()).read_text("utf-8").splitlines()]
    assert records[0]["record"] == "report" and records[0]["contaminated"] == 1
    assert [r["item"] for r in records if r["record"] == "item"] == [PROTECTED_ITEMS[0]["case_id"]]


#: 20 items of 15 words: 20 items, each its own n-grams.
EVAL_ITEMS = [
    {"id": f"ev-{i:02d}", "question": " ".join(f"eval{i}word{j}" for j in range(15))}
    for i in range(20)
]
EVAL_JSONL = "".join(json.dumps(item) + "\n" for item in EVAL_ITEMS).encode()


def _file(name, data):
    return {"name": name, "mimeType": "application/octet-stream", "buffer": data}


def test_docs_upload_of_a_protected_set_is_a_file_picker(server, page, shots):
    """/docs' upload body is a file picker: a 20-item JSON Lines file stores 20 items (the text
    box it was stored them as one)."""
    page.goto(f"{server.url}/docs")
    block = page.locator("#operations-protected_sets-put_set_v1_protected_sets__name__put")
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    picker = block.locator('input[type="file"]')
    assert picker.count() == 1
    block.locator('input[placeholder="name"]').fill("docs-evals")
    picker.set_input_files(_file("evals.jsonl", EVAL_JSONL))
    block.locator("button.execute").click()
    status = block.locator(".live-responses-table tbody .response-col_status")
    status.wait_for(timeout=30_000)
    assert status.inner_text() == "201"
    page.screenshot(path=str(shots / "docs-upload.png"), full_page=False)
    stored = json.loads(urlopen(f"{server.url}/v1/protected-sets/docs-evals").read())
    assert stored["items"] == 20


KEYS = {"reader": "reader-key-0123456789", "protector": "protect-key-0123456789"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A server with keys: one that may read, one that may read and protect."""
    tmp = tmp_path_factory.mktemp("secured")
    keys = tmp / "keys.txt"
    keys.write_text(f"{KEYS['reader']} read\n{KEYS['protector']} read,protect\n", "utf-8")
    srv = start_server(tmp, "--workers", "1", "--api-keys-file", str(keys))
    yield srv
    stop_server(srv)


def _sign_in(page, url, key):
    page.goto(f"{url}/ui/login")
    assert page.locator("a.signout").count() == 0  # nobody to sign out on the sign-in page
    page.fill("#key", key)
    page.click("form button")
    page.wait_for_url(f"{url}/ui")
    assert page.locator("a.signout").count() == 1


def test_protected_sets_page_uploads_lists_and_deletes_with_protect(secured, page, shots):
    url = secured.url
    _sign_in(page, url, KEYS["protector"])
    page.click('header a[href="/ui/protected-sets"]')
    page.wait_for_url("**/ui/protected-sets")
    assert page.locator("#no-sets").count() == 1
    page.fill("#name", "evals")
    page.set_input_files("#file", _file("evals.jsonl", EVAL_JSONL))
    page.click("#upload button")
    page.wait_for_selector("#stored")
    row = page.locator('#sets tr[data-set="evals"] td')
    assert row.all_inner_texts()[:2] == ["evals", "20"]
    # JSON Lines named .txt would be one item: refused, saying what it is; nothing stored.
    page.fill("#name", "as-text")
    page.set_input_files("#file", _file("evals.txt", EVAL_JSONL))
    page.click("#upload button")
    page.wait_for_selector("#error")
    assert page.locator("#error").inner_text().startswith("this looks like JSON Lines with 20")
    assert page.locator('#sets tr[data-set="as-text"]').count() == 0
    # A semicolon CSV reads as its columns; a set under 13 words is refused unless allowed.
    csv_body = "id;question\n" + "".join(f"{i['id']};{i['question']}\n" for i in EVAL_ITEMS)
    page.fill("#name", "semi")
    page.set_input_files("#file", _file("evals.csv", csv_body.encode()))
    page.click("#upload button")
    page.wait_for_selector("#stored")
    assert page.locator('#sets tr[data-set="semi"] td').nth(1).inner_text() == "20"
    page.fill("#name", "short")
    page.set_input_files("#file", _file("short.txt", b"too few words"))
    page.click("#upload button")
    page.wait_for_selector("#error")
    assert "under 13 words" in page.locator("#error").inner_text()
    page.check("#allow_no_ngrams")
    page.set_input_files("#file", _file("short.txt", b"too few words"))
    page.click("#upload button")
    page.wait_for_selector("#stored")
    assert page.locator('#sets tr[data-set="short"] td').nth(2).inner_text() == "0"
    page.screenshot(path=str(shots / "protected-sets.png"), full_page=True)
    # A form posted from another site is refused, whatever the session may do.
    foreign = page.request.post(f"{url}/ui/protected-sets/short/delete",
                                headers={"origin": "http://elsewhere.example"})  # fmt: skip
    assert foreign.status == 403
    page.locator('#sets tr[data-set="short"] form.delete button').click()
    page.wait_for_url("**/ui/protected-sets")
    assert page.locator('#sets tr[data-set="short"]').count() == 0
    page.click("a.signout")
    page.wait_for_url("**/ui/login")


def test_protected_sets_page_lists_only_for_a_read_key(secured, page):
    url = secured.url
    _sign_in(page, url, KEYS["reader"])
    page.goto(f"{url}/ui/protected-sets")
    assert page.locator("#read-only").count() == 1
    assert page.locator("#upload").count() == 0 and page.locator("form.delete").count() == 0
    assert page.locator('#sets tr[data-set="evals"]').count() == 1
    # The session's key lacks protect: posting the forms anyway is refused, as the API is.
    upload = page.request.post(
        f"{url}/ui/protected-sets",
        multipart={"name": "sneaky", "file": _file("evals.jsonl", EVAL_JSONL)},
    )
    assert upload.status == 403 and "protect" in upload.text()
    assert page.request.post(f"{url}/ui/protected-sets/evals/delete").status == 403
    page.reload()
    listed = page.locator("#sets tr[data-set]").evaluate_all("rs => rs.map(r => r.dataset.set)")
    assert "evals" in listed and "sneaky" not in listed
    page.click("a.signout")
    page.wait_for_url("**/ui/login")


def test_decontamination_page_names_a_pasted_array_and_downloads_the_kept(server, page):
    page.goto(f"{server.url}/ui/decontamination")
    docs = [{"id": "web-1", "text": f"Intro. {SHELL_SENTENCE} Outro."},
            {"id": "web-2", "text": "Nothing protected in this one at all."}]  # fmt: skip
    page.fill("#docs", json.dumps(docs, indent=1))
    page.click("#decontaminate button[type=submit]:not(.download)")
    page.wait_for_selector("#error")
    assert page.locator("#error").inner_text().startswith("this is a JSON array of 2 value(s)")
    page.fill("#docs", "\n".join(json.dumps(d) for d in docs))
    with page.expect_download() as caught:
        page.click("#kept-jsonl")
    download = caught.value
    assert download.suggested_filename == "kept.jsonl"
    kept = [json.loads(line) for line in Path(download.path()).read_text("utf-8").splitlines()]
    assert [d["id"] for d in kept] == ["web-2"]  # mode drop: the contaminated one is dropped
    assert kept[0]["text"] == docs[1]["text"]
