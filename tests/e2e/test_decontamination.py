"""``POST /v1/decontamination`` through a real server: the modes and the report agree with the
batch commands on the same inputs; n-grams only for the protect scope; bad input is a 4xx."""

import csv
import html
import io
import json
import re
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from neardup.core.engine import ProtectedFormat, Protection, parse_protected_set
from tests.app.cli.test_cli import neardup
from tests.app.cli.test_decontamination import BOILER, CLEAN, ELEVEN, SHELL, TWO, L, M
from tests.core.test_decont_bounds import check_meta

JSONL = ProtectedFormat.JSONL
KEYS = {"read": "k-read-0123456789ab", "all": "k-all-cdef01234567"}
EVALS = [
    {"id": "q1", "question": f"{BOILER}. {SHELL}"},
    {"id": "q2", "question": f"{BOILER}. What colour is the sky over the sea at noon?"},
]
DOCS = [{"id": "two", "text": TWO, "meta": {"src": "web"}}, {"id": "eleven", "text": ELEVEN},
        {"id": "clean", "text": CLEAN}, {"id": "quiz", "text": f"Quiz. {BOILER}. Ok."}]  # fmt: skip


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    from tests.e2e.conftest import start_server, stop_server

    tmp = tmp_path_factory.mktemp("decont")
    keys = tmp / "keys.txt"
    keys.write_text(f"{KEYS['read']} read\n{KEYS['all']} read,write,protect\n", encoding="utf-8")
    # The read key's rate is not what this module tests (tests/e2e/test_read_keys.py is).
    server = start_server(tmp, "--workers", "1", "--api-keys-file", str(keys),
                          "--contamination-words-per-minute", "100000000")  # fmt: skip
    body = "".join(json.dumps(e) + "\n" for e in EVALS)
    headers = {"content-type": "application/x-ndjson", **auth("all")}
    response = httpx.put(
        f"{server.url}/v1/protected-sets/evals.jsonl", content=body, headers=headers
    )
    assert response.status_code == 201, response.text
    (tmp / "evals.jsonl").write_text(body, encoding="utf-8")
    (tmp / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    yield server, tmp
    stop_server(server)


def auth(key):
    return {"authorization": f"Bearer {KEYS[key]}"}


def post(srv, key="all", **body):
    server, _ = srv
    body.setdefault("documents", DOCS)
    return httpx.post(f"{server.url}/v1/decontamination", json=body, headers=auth(key), timeout=60)


def test_cut_agrees_with_neardup_dedup(srv):
    _, tmp = srv
    response = post(srv, mode="cut")
    assert response.status_code == 200, response.text
    served = response.json()
    assert served["checked_sets"] == ["evals.jsonl"]
    # 11 pieces; the quiz is all boilerplate (its pieces under 200 characters).
    assert served["dropped"] == [
        {"id": "eleven", "rule": "too many pieces"},
        {"id": "quiz", "rule": "nothing left"},
    ]
    assert [d["id"] for d in served["documents"]] == ["two#1", "two#2", "clean"]
    assert served["documents"][0]["meta"]["decontamination"]["removed"] == [[299, 852 + 2 * L]]
    result = neardup("dedup", "docs.jsonl", "--protected", "evals.jsonl", "--output", "out.jsonl",
                     "--decontamination", "cut", "--workers", "1", "--quiet", cwd=tmp)  # fmt: skip
    assert result.returncode == 0, result.stderr
    batch = [json.loads(line) for line in (tmp / "out.jsonl").read_text().splitlines()]
    assert [(d["id"], d["text"]) for d in batch] == [
        (d["id"], d["text"]) for d in served["documents"]
    ]
    for b, s in zip(batch, served["documents"], strict=True):
        b["meta"].pop("minhash_cluster")
        assert b["meta"] == s["meta"]


@pytest.mark.parametrize("cap", [None, 1])
def test_one_report_for_the_cli_the_manifest_and_the_service(srv, cap):
    _, tmp = srv
    flags = ["--item-cap", str(cap)] if cap else []
    served = post(srv, mode="annotate", item_cap=cap)
    assert served.status_code == 200, served.text
    assert [d["id"] for d in served.json()["documents"]] == [d["id"] for d in DOCS]
    cli = neardup("contamination", "docs.jsonl", "--protected", "evals.jsonl", "--quiet", *flags,
                  cwd=tmp)  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    out = f"out-{cap}.jsonl"
    dedup = neardup("dedup", "docs.jsonl", "--protected", "evals.jsonl", "--output", out,
                    "--keep-duplicates", "--workers", "1", "--quiet", *flags, cwd=tmp)  # fmt: skip
    assert dedup.returncode == 0, dedup.stderr
    manifest = json.loads((tmp / f"{out}.manifest.json").read_text())["contamination"]
    report = json.loads(cli.stdout)
    # One schema, one set of values (a protect key may see the n-grams, as the CLI's user).
    assert served.json()["report"] == report == manifest
    assert (report["documents"], report["contaminated"]) == (4, 2 if cap else 3)
    # A read key gets the same report with every n-gram null.
    hidden = post(srv, key="read", mode="annotate", item_cap=cap).json()["report"]
    for item in report["items"]:
        item["first_ngram"] = None
    for s in report["sets"]:
        s["capped"]["list"] = None
    assert hidden == report


def test_a_read_key_sees_ids_and_counts_never_protected_text_nor_offsets(srv):
    served = post(srv, key="read", mode="annotate", item_cap=1).json()
    text = json.dumps(served)
    assert "shiny red shell" not in text.replace(TWO, "").replace(ELEVEN, "")
    assert "following question" not in text.replace(BOILER, "")
    [s] = served["report"]["sets"]
    assert s["capped"] == {"ngrams": 1, "list": None}
    assert served["report"]["items"][0]["first_ngram"] is None
    found = post(srv, key="read", mode="annotate").json()["documents"][0]["meta"]
    shown = post(srv, key="all", mode="annotate").json()["documents"][0]["meta"]
    assert shown["decontamination"]["spans"] == [[500, 500 + L], [650 + L, 650 + 2 * L]]
    assert found["decontamination"] == {**shown["decontamination"], "spans": None}
    cut = post(srv, key="read", mode="cut")
    assert cut.status_code == 403 and "protect scope" in cut.json()["detail"]


def test_no_key_gets_protected_text_in_the_documents(srv):
    served = post(srv, key="all", mode="annotate").json()
    rows = json.dumps([d["meta"] for d in served["documents"]])
    assert "shiny red shell" not in rows and "following question" not in rows


#: Three sets holding one 50-word passage each (different ids), and three documents of 1.3 KB
#: quoting three 300-character parts of it between fillers: the request that answered 169 KB.
PASSAGE = " ".join(f"p{i}word" for i in range(150))
PARTS = [PASSAGE[k * 350 : k * 350 + 300] for k in range(3)]


def test_a_cut_answer_of_three_small_documents_stays_small(srv):
    server, _ = srv
    headers = {"content-type": "text/plain", **auth("all")}
    for name in ("big-a", "big-b", "big-c"):
        put = httpx.put(f"{server.url}/v1/protected-sets/{name}", content=PASSAGE, headers=headers)
        assert put.status_code == 201, put.text
    filler = " " + "." * 80 + " "
    docs = [{"id": f"doc-{k}", "text": filler + filler.join(PARTS) + filler + f"end {k} " * 20}
            for k in range(3)]  # fmt: skip
    assert all(1200 <= len(d["text"]) <= 1400 for d in docs)
    try:
        response = post(srv, key="all", documents=docs, mode="cut", window=20, min_piece=20,
                        sets=["big-a", "big-b", "big-c"])  # fmt: skip
    finally:
        for name in ("big-a", "big-b", "big-c"):
            httpx.delete(f"{server.url}/v1/protected-sets/{name}", headers=auth("all"))
    assert response.status_code == 200, response.text
    served = response.json()
    pieces = served["documents"]
    assert len(pieces) == 3 * 4  # the four fillers' middles, in each document
    # The bound, from the caps: the pieces' text (at most the input), per piece a meta of at
    # most MAX_LISTED items and MAX_LISTED spans (about 1 KB), and a report of 3 items.
    meta = max(len(json.dumps(p["meta"])) for p in pieces)
    assert meta < 1024
    assert len(response.content) < sum(len(d["text"]) for d in docs) + len(pieces) * 1024 + 4096
    assert len(response.content) < 16_384
    for p in pieces:
        found = p["meta"]["decontamination"]
        assert found["match_count"] > 0 and len(found["removed"]) <= 2
        assert len(found["spans"]) <= 10 and len(found["items"]) <= 10
    # Counts whole, lists capped: every window of a part is a match in each of the 3 sets.
    assert served["report"]["contaminated"] == 3 and served["report"]["items_matched"] == 3


def _names(doc: str, start: str, end: str) -> set[str]:
    """The quoted field names of docs/api.md between ``start`` and ``end``."""
    text = doc[doc.index(start) : doc.index(end, doc.index(start))]
    return set(re.findall(r'"([a-z_ ]+)"', text))


def _keys(value: object) -> set[str]:
    """Every key of every object in ``value``, however deep."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_docs_api_md_names_exactly_the_answers_fields(srv):
    doc = (Path(__file__).parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    cut = post(srv, mode="cut").json()
    notes = post(srv, mode="annotate").json()
    metas = [d["meta"]["decontamination"] for d in cut["documents"] + notes["documents"]
             if "decontamination" in d["meta"]]  # fmt: skip
    assert _names(doc, "`meta.decontamination` holds", "`match_count` counts") == _keys(metas)
    report = _keys(cut["report"]) - set(cut["report"]["sets"][0]["subsets"])
    assert _names(doc, "`report` is `neardup contamination`", "Every list is") == report


def test_the_answer_counts_in_the_working_memory_estimate(tmp_path):
    from tests.e2e.conftest import start_server, stop_server

    server = start_server(tmp_path, "--workers", "1", "--max-batch-memory", str(8 * 2**20))
    try:
        docs = [{"id": f"d{i}", "text": f"text number {i} " * 6} for i in range(100)]
        body = {"documents": docs, "mode": "cut", "min_piece": 0, "window": 0}
        url = f"{server.url}/v1/decontamination"
        # 100 texts: about 1.3 MB of work, and 4 KB of answer a piece: 10 pieces fit in 8 MiB,
        # 100 pieces a document do not, and are refused before any work.
        assert httpx.post(url, json={**body, "max_pieces": 10}, timeout=60).status_code == 200
        refused = httpx.post(url, json={**body, "max_pieces": 100}, timeout=60)
        assert refused.status_code == 413 and "working memory" in refused.json()["detail"]
    finally:
        stop_server(server)


#: Pieces of documents dense with matches: the protected passages, fillers of no word and words.
CHUNKS = [M, SHELL, BOILER, f"{BOILER}. {SHELL}", " " + "." * 250 + " ", " plain words here "]


#: 15 items sharing SHELL: a document quoting it matches more items than a list holds.
MANY = [{"id": f"m{i}", "text": f"{SHELL} And then variant number {i} of it."} for i in range(15)]


@pytest.fixture
def many(srv):
    server, _ = srv
    body = "".join(json.dumps(e) + "\n" for e in MANY)
    headers = {"content-type": "application/x-ndjson", **auth("all")}
    url = f"{server.url}/v1/protected-sets/many.jsonl"
    assert httpx.put(url, content=body, headers=headers).status_code == 201
    yield
    assert httpx.delete(url, headers=auth("all")).status_code == 204


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.lists(st.sampled_from(CHUNKS), max_size=30).map("".join), min_size=1, max_size=14),
    st.sampled_from(["cut", "annotate"]),
    st.sampled_from([None, 1]),
    st.integers(0, 60),
    st.integers(0, 60),
)
# Every list past its cap: 12 documents (ids), 12 spans each, 16 items a span.
@example([(M + CHUNKS[4]) * 12] * 12, "annotate", None, 0, 0)
def test_every_list_of_an_answer_is_capped_and_counted_in_full(
    srv, many, texts, mode, cap, window, min_piece
):
    docs = [{"id": f"d{k:02}", "text": t} for k, t in enumerate(texts)]
    ask = {"documents": docs, "mode": mode, "item_cap": cap, "window": window,
           "min_piece": min_piece, "max_pieces": 100, "sets": ["evals.jsonl", "many.jsonl"],
           "top": 3}  # fmt: skip
    response = post(srv, key="all", **ask)
    assert response.status_code == 200, response.text
    served = response.json()
    sets = [
        parse_protected_set(name, "".join(json.dumps(e) + "\n" for e in rows), JSONL)
        for name, rows in (("evals.jsonl", EVALS), ("many.jsonl", MANY))
    ]
    local = Protection(sets, cap)
    found = {d["id"]: local.matches(d["text"]) for d in docs}
    by_id = {d["id"]: d["text"] for d in docs}
    for kept in served["documents"]:
        meta = kept["meta"].get("decontamination")
        source = meta["source"] if meta and mode == "cut" else kept["id"]
        matches = found[source]
        if meta is None:
            assert not matches
            continue
        own = matches
        if mode == "cut":
            near = meta["removed"]
            own = [m for m in matches if any(lo <= m.start and m.end <= hi for lo, hi in near)]
        check_meta(meta, own, len(by_id[source]), 10)
    report = served["report"]
    dirty = [d["id"] for d in docs if found[d["id"]]]
    assert (report["documents"], report["contaminated"]) == (len(docs), len(dirty))
    assert report["contaminated_ids"] == dirty[:10]
    keys = {(m.set, i) for ms in found.values() for m in ms for i in m.items}
    assert report["items_matched"] == len(keys) and len(report["items"]) == len(keys)
    for item in report["items"]:
        holding = [
            i for i in dirty if any(m.set == item["set"] and item["item"] in m.items
                                    for m in found[i])
        ]  # fmt: skip
        assert item["documents"] == len(holding)
        assert item["document_ids"] == holding[:10]
    for s in report["sets"]:
        matched = sum(1 for k in keys if k[0] == s["set"])
        assert s["items_matched"] == matched and len(s["top_items"]) == min(3, matched)
    metas = json.dumps([d["meta"] for d in served["documents"]])
    for matches in found.values():
        assert all(m.ngram not in metas for m in matches)
    # A read key: the same answer without offsets (annotate: spans null; cut: refused), and no
    # protected n-gram anywhere in it but inside the documents' own text.
    read = post(srv, key="read", **ask)
    if mode == "cut":
        assert read.status_code == 403, read.text
        return
    hidden = read.json()
    assert [d["meta"] for d in hidden["documents"]] == [
        {**d["meta"], "decontamination": {**d["meta"]["decontamination"], "spans": None}}
        if "decontamination" in d["meta"]
        else d["meta"]
        for d in served["documents"]
    ]
    meta_and_report = json.dumps([[d["meta"] for d in hidden["documents"]], hidden["report"]])
    for matches in found.values():
        assert all(m.ngram not in meta_and_report for m in matches)


def test_max_pieces_is_capped(srv):
    assert post(srv, mode="cut", max_pieces=100).status_code == 200
    assert post(srv, mode="cut", max_pieces=101).status_code == 422


def test_integral_floats_and_the_bounds_are_accepted(srv):
    body = {"window": 0.0, "min_piece": 0.0, "max_pieces": 1.0, "item_cap": 1.0, "top": 0.0,
            "clean_below": 0.0, "dirty_from": 0.0}  # fmt: skip
    response = post(srv, mode="cut", **body)
    assert response.status_code == 200, response.text
    assert response.json()["report"]["sets"][0]["top_items"] == []
    assert post(srv, clean_below=1.0, dirty_from=1.0, top=1000).status_code == 200


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"mode": "shred"}, 422),
        ({"max_pieces": 0}, 422),
        ({"window": -1}, 422),
        ({"clean_below": 0.9, "dirty_from": 0.5}, 422),
        ({"item_cap": 0}, 422),
        ({"item_cap": 1.5}, 422),
        ({"top": 1001}, 422),
        ({"sets": ["nope"]}, 404),
        ({"documents": [{"id": "x"}]}, 422),
    ],
)
def test_bad_requests_are_4xx(srv, body, status):
    response = post(srv, **body)
    assert response.status_code == status, response.text


def ui(srv, key="all", **form):
    server, _ = srv
    form.setdefault("docs", "\n".join(json.dumps(d) for d in DOCS))
    return httpx.post(f"{server.url}/ui/decontamination", data=form, headers=auth(key), timeout=60)


def test_the_ui_page_shows_the_report_by_item_id(srv):
    server, _ = srv
    assert httpx.get(f"{server.url}/ui/decontamination", headers=auth("read")).status_code == 200
    refused = ui(srv, key="read", mode="cut", item_cap="1")
    assert refused.status_code == 403 and "protect scope" in refused.text
    page = ui(srv, key="all", mode="cut", item_cap="1")
    assert page.status_code == 200, page.text
    # The boilerplate capped, the quiz is clean: two is cut in two pieces, eleven dropped.
    assert "2 of 4 document(s) contaminated; 4 kept, 1 dropped" in page.text
    assert "<td>evals.jsonl</td><td>q1</td><td>2</td>" in page.text
    assert "<td>two#2</td><td>298</td>" in page.text  # 300 less "c5" (the cut ends inside c52)
    assert "Dropped: eleven (too many pieces)</p>" in page.text  # and the rule that dropped it
    # Item ids and counts only: no protected text on the page beyond what was pasted.
    assert "shiny red shell" not in page.text.replace(json.dumps(TWO)[1:-1], "").replace(
        json.dumps(ELEVEN)[1:-1], ""
    )


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"docs": "not json"}, "line 1: not JSON"),
        ({"docs": "[" * 100_000 + "]" * 100_000}, "line 1: the JSON nests deeper than 512"),
        ({"docs": '{"text": "a", "n": ' + "7" * 5_001 + "}"}, "line 1: an integer of 5,001 digits"),
        ({"docs": '{"id": "x"}'}, "line 1"),
        ({"mode": "shred"}, "mode must be one of"),
        ({"item_cap": "many"}, "whole number"),
        ({"item_cap": "0"}, "item cap"),
    ],
)
def test_the_ui_page_says_what_is_wrong_with_a_form(srv, form, says):
    page = ui(srv, **form)
    assert page.status_code == 422 and says in page.text


def test_the_ui_page_shows_and_uses_the_cut_settings(srv):
    server, _ = srv
    form = httpx.get(f"{server.url}/ui/decontamination", headers=auth("read")).text
    for name, default in (("window", 200), ("min_piece", 200), ("max_pieces", 10)):
        assert f'name="{name}" id="{name}" value="{default}"' in form
    page = ui(srv, mode="cut", window="0", min_piece="0", max_pieces="20")
    assert page.status_code == 200, page.text
    assert "Mode cut: window 0 characters each side, min piece 0 characters, max pieces 20" in (
        page.text
    )
    served = post(srv, mode="cut", window=0, min_piece=0, max_pieces=20).json()
    kept = re.findall(r"<tr><td>([^<]*)</td><td>(\d+)</td>", page.text.split('id="kept"')[1])
    assert kept == [(d["id"], str(len(d["text"]))) for d in served["documents"]]
    assert kept != [(d["id"], str(len(d["text"]))) for d in post(srv, mode="cut").json()[
        "documents"]]  # fmt: skip


@pytest.mark.parametrize(
    ("form", "says"),
    [({"window": "x"}, "the window must be a whole number"),
     ({"min_piece": "-1"}, "the min piece must be a whole number"),
     ({"max_pieces": "0"}, "max_pieces must be a whole number >= 1")],
)  # fmt: skip
def test_the_ui_page_refuses_bad_cut_settings(srv, form, says):
    page = ui(srv, mode="cut", **form)
    assert page.status_code == 422 and says in html.unescape(page.text)


def report_download(srv, key, fmt, **form):
    server, _ = srv
    form.setdefault("docs", "\n".join(json.dumps(d) for d in DOCS))
    return httpx.post(f"{server.url}/ui/decontamination/report", data={**form, "format": fmt},
                      headers=auth(key), timeout=60)  # fmt: skip


@pytest.mark.parametrize("key", ["read", "all"])
def test_the_report_downloads_hold_the_api_report(srv, key):
    report = post(srv, key=key, mode="annotate", item_cap=1).json()["report"]
    got = report_download(srv, key, "jsonl", mode="annotate", item_cap="1")
    assert got.status_code == 200 and got.headers["content-type"] == "application/x-ndjson"
    assert got.headers["content-disposition"].startswith('attachment; filename="report.jsonl"')
    records = [json.loads(line) for line in got.text.splitlines()]
    assert records[0] == {"record": "report", "documents": 4, "contaminated": 2, "ngram": 13,
                          "item_cap": 1, "clean_below": 0.2, "dirty_from": 0.8}  # fmt: skip
    items = [
        {k: v for k, v in r.items() if k != "record"} for r in records if r["record"] == "item"
    ]
    assert items == report["items"]
    [one_set] = [r for r in records if r["record"] == "set"]
    [api_set] = report["sets"]
    assert {k: one_set[k] for k in api_set["subsets"]} == api_set["subsets"]
    assert (one_set["set"], one_set["capped_ngrams"], one_set["capped_list"]) == (
        api_set["set"], api_set["capped"]["ngrams"], api_set["capped"]["list"])  # fmt: skip
    as_csv = report_download(srv, key, "csv", mode="annotate", item_cap="1")
    assert as_csv.headers["content-type"] == "text/csv; charset=utf-8"
    assert as_csv.headers["content-disposition"].startswith('attachment; filename="report.csv"')
    rows = list(csv.DictReader(io.StringIO(as_csv.content.decode("utf-8"), newline="")))
    assert [r["record"] for r in rows] == [r["record"] for r in records]
    for row, item in zip([r for r in rows if r["record"] == "item"], items, strict=True):
        assert (row["item"], int(row["documents"]), json.loads(row["document_ids"])) == (
            item["item"], item["documents"], item["document_ids"])  # fmt: skip
        assert row["first_ngram"] == (item["first_ngram"] or "")


def test_a_report_download_of_a_bad_form_is_the_page_saying_so(srv):
    page = report_download(srv, "read", "csv", docs="not json")
    assert page.status_code == 422 and "line 1: not JSON" in page.text
    assert page.headers["content-type"].startswith("text/html")
    unknown = report_download(srv, "read", "csv", sets="nope")
    assert unknown.status_code == 404 and "no protected set" in html.unescape(unknown.text)
    assert report_download(srv, "read", "xml").status_code == 422


def test_a_cut_piece_id_that_equals_another_documents_id_is_a_422_naming_both(srv):
    """two#1 would be both a piece of "two" and the document sent as "two#1": refused before any
    work (drop and annotate make no piece ids, so they take the same documents)."""
    docs = [*DOCS, {"id": "two#1", "text": "an unrelated document"}]
    response = post(srv, mode="cut", documents=docs)
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == (
        "the id 'two#1' is the id cut mode gives a piece of 'two': the output would hold two "
        "rows of one id; rename one of them"
    )
    assert post(srv, mode="cut", documents=docs, max_pieces=1).status_code == 422
    assert post(srv, mode="annotate", documents=docs).status_code == 200
    odd = [*DOCS, {"id": "two#01", "text": "an unrelated document"}]  # no piece has a K of "01"
    assert post(srv, mode="cut", documents=odd).status_code == 200


def test_a_repeated_id_is_a_422_naming_it_as_a_registration_is(srv):
    """Two documents of one id in a request would be two answered documents of one id: refused
    as /v1/documents refuses them (and nothing registered there), before any work."""
    docs = [*DOCS, {"id": "clean", "text": "another text of the same id"}]
    for mode in ("drop", "cut", "annotate"):
        response = post(srv, mode=mode, documents=docs)
        assert response.status_code == 422, response.text
        assert response.json() == {"detail": "document id 'clean' appear(s) more than once"}
    server, _ = srv
    registered = httpx.post(f"{server.url}/v1/documents", json={"documents": docs},
                            headers=auth("all"))  # fmt: skip
    assert registered.status_code == 422 and registered.json() == response.json()


def test_pasted_rows_with_nan_are_refused_naming_line_and_field(srv):
    page = ui(srv, mode="cut", docs='{"id": "a", "text": "x"}\n{"id": "n", "text": "y", '
              '"meta": {"s": NaN}}')  # fmt: skip
    assert page.status_code in (400, 422), page.text
    assert "line 2: NaN is not JSON (field &#39;meta.s&#39;)" in page.text
