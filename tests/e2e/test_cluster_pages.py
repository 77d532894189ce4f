"""Cluster pages that scale, through a real server: an 82-member cluster of license files (30
exact copies, 43 one-word variants, a chain of 8 drifting rewrites) is paged, collapses its
copies, sorts the borderline first, shows the chain that joined each member below the
threshold, and stays bounded in size; the overview finds a document by id."""

import html
import itertools
import re
from urllib.parse import quote

import httpx
import numpy as np
import pytest

from neardup.core.minhash import signatures

LICENSE_TEXT = (
    "Permission is hereby granted free of charge to any person obtaining a copy of this "
    "software and associated documentation files to deal in the software without restriction "
    "including without limitation the rights to use copy modify merge publish distribute "
    "sublicense and or sell copies of the software and to permit persons to whom the software "
    "is furnished to do so subject to the following conditions the above copyright notice and "
    "this permission notice shall be included in all copies or substantial portions of the "
    "software the software is provided as is without warranty of any kind express or implied "
    "including but not limited to the warranties of merchantability fitness for a particular "
    "purpose and noninfringement in no event shall the authors or copyright holders be liable "
    "for any claim damages or other liability whether in an action of contract tort or "
    "otherwise arising from out of or in connection with the software or the use or other "
    "dealings in the software except as contained in this notice the name of a copyright "
    "holder shall not be used in advertising or otherwise to promote the sale use or other "
    "dealings in this software without prior written authorization of the copyright holder "
    "copyright the open group all rights reserved and the contributors listed in the file"
)
LICENSE = LICENSE_TEXT.split(" ")
ROOT = "a-license/base"


def license_cluster() -> dict[str, str]:
    """82 documents, one cluster rooted at ROOT."""
    docs = {ROOT: " ".join(LICENSE)}
    for n in range(30):
        docs[f"deb/lib{n:02d}/copyright"] = docs[ROOT]
    for j in range(1, 9):  # each rewrites 6 more leading words: drifts away, one step at a time
        words = [f"rewritten{i}" if i < 6 * j else w for i, w in enumerate(LICENSE)]
        docs[f"py/pkg-{j}.dist-info/LICENSE"] = " ".join(words)
    for n in range(43):
        words = list(LICENSE)
        words[(n * 7 + 20) % len(words)] = f"year{1990 + n}"
        docs[f"r/variant-{n:02d}"] = " ".join(words)
    return docs


DOCS = license_cluster()


def populate(url: str, headers=None) -> None:
    docs = [{"id": i, "text": t} for i, t in DOCS.items()]
    response = httpx.post(f"{url}/v1/documents", json={"documents": docs}, headers=headers,
                          timeout=120)  # fmt: skip
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def cluster(server):
    populate(server.url)
    body = httpx.get(f"{server.url}/v1/clusters/{quote(ROOT, safe='')}", timeout=60).json()
    assert body["size"] == len(DOCS) == 82
    return server


def rows(page: str) -> list[dict]:
    """The member rows of a cluster page: id, copies, estimate, chain text."""
    out = []
    for row in re.findall(r'<tr class="member-row[^"]*" data-id="([^"]*)">(.*?)</tr>', page, re.S):
        doc_id, cells = html.unescape(row[0]), re.findall(r"<td[^>]*>(.*?)</td>", row[1], re.S)
        copies = re.match(r"×(\d+)", cells[1])
        chain = html.unescape(re.sub(r"<[^>]+>", "", cells[4])).strip()
        out.append({"id": doc_id, "count": int(copies[1]) if copies else 1,
                    "estimate": float(cells[2]), "chain": chain})  # fmt: skip
    return out


def pages(server, root=ROOT) -> list[str]:
    out, page = [], 1
    while True:
        url = f"{server.url}/ui/clusters/{quote(root, safe='')}?page={page}"
        response = httpx.get(url, timeout=60)
        assert response.status_code == 200
        out.append(response.text)
        if 'class="next"' not in response.text:
            return out
        page += 1


def test_pages_are_bounded_and_cover_every_member_once(cluster):
    texts = pages(cluster)
    assert len(texts) == 3  # 1 + 8 + 43 = 52 distinct texts, 20 a page
    all_rows = [r for t in texts for r in rows(t)]
    assert sum(r["count"] for r in all_rows) == 82
    assert len({r["id"] for r in all_rows}) == len(all_rows) == 52
    for text in texts:
        assert len(rows(text)) <= 20
        # Each page holds its rows' texts once (no root beside every member): a few KB a row.
        assert len(text.encode("utf-8")) < 100_000
    assert "82 members · 52 distinct texts" in texts[0]


def test_exact_copies_collapse_into_one_row_with_a_count(cluster):
    first = rows(pages(cluster)[0])
    assert first[0]["id"] == ROOT and first[0]["count"] == 31
    assert "and 20 more" in pages(cluster)[0]  # 30 copies: 10 named, 20 counted


def test_members_sort_by_estimate_borderline_first(cluster):
    all_rows = [r for t in pages(cluster) for r in rows(t)]
    estimates = [r["estimate"] for r in all_rows[1:]]
    assert estimates == sorted(estimates) and estimates[0] < 0.8 <= estimates[-1]


def test_a_member_below_the_threshold_shows_the_chain_that_joined_it(cluster):
    all_rows = [r for t in pages(cluster) for r in rows(t)]
    below = [r for r in all_rows if r["estimate"] < 0.8]
    assert len(below) >= 3
    sigs = dict(zip(DOCS, signatures(list(DOCS.values())), strict=True))
    for row in below:
        hops = [h.split(" (")[0] for h in row["chain"].split(" → ")]
        assert hops[0] == ROOT and hops[-1] == row["id"], row
        for a, b in itertools.pairwise(hops):  # every hop a confirmed pair
            assert np.mean(np.asarray(sigs[a]) == np.asarray(sigs[b])) >= 0.8
    for row in all_rows:
        if row["estimate"] >= 0.8:
            assert row["chain"] == ""


def test_find_by_id_opens_the_page_holding_its_row(cluster):
    target = "py/pkg-8.dist-info/LICENSE"  # the farthest from the root: the first rows
    found = httpx.get(f"{cluster.url}/ui/find", params={"id": target}, follow_redirects=True,
                      timeout=60)  # fmt: skip
    assert found.status_code == 200
    assert f'class="member-row below found" data-id="{html.escape(target)}"' in found.text
    copy = httpx.get(f"{cluster.url}/ui/find", params={"id": "deb/lib17/copyright"},
                     follow_redirects=True, timeout=60)  # fmt: skip
    assert f'found" data-id="{ROOT}"' in copy.text  # a copy's row is its text's row
    missing = httpx.get(f"{cluster.url}/ui/find", params={"id": "no/such id"}, timeout=60)
    assert missing.status_code == 404
    assert "No registered document has the id <code>no/such id</code>" in missing.text


def test_no_sign_out_when_access_is_open(cluster):
    for path in ("/ui", f"/ui/clusters/{quote(ROOT, safe='')}", "/ui/parameters"):
        page = httpx.get(f"{cluster.url}{path}", timeout=60).text
        assert "/ui/logout" not in page and "Sign out" not in page


def test_a_contamination_check_without_sets_says_nothing_was_checked(cluster):
    page = httpx.post(f"{cluster.url}/ui/contamination", data={"text": "any words"}, timeout=60)
    assert 'id="verdict">Nothing checked: no protected sets' in page.text
    assert "Clean" not in page.text
