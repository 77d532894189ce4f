"""The /ui pages in a real headless Chromium (Debian's, driven by Playwright), with screenshots.

Screenshots go to ``$NEARDUP_SCREENSHOTS`` when set, else to the test's temporary directory.
"""

import os
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from core.minhash import words
from tests.e2e.test_ui import CORPUS, populate

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
