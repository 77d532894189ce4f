"""``POST /v1/decontamination`` through a real server: the modes and the report agree with the
batch commands on the same inputs; n-grams only for the protect scope; bad input is a 4xx."""

import csv
import html
import io
import json
import re

import httpx
import pytest

from tests.app.cli.test_cli import neardup
from tests.app.cli.test_decontamination import BOILER, CLEAN, ELEVEN, SHELL, TWO, L, M

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
    server = start_server(tmp, "--workers", "1", "--api-keys-file", str(keys))
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
    assert served["dropped"] == ["eleven", "quiz"]  # 11 pieces; the quiz is all boilerplate
    assert [d["id"] for d in served["documents"]] == ["two#1", "two#2", "clean"]
    assert served["documents"][0]["meta"]["decontamination"]["removed"] == [[300, 850 + 2 * L]]
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
def test_report_agrees_with_neardup_contamination(srv, cap):
    _, tmp = srv
    served = post(srv, mode="annotate", item_cap=cap, top=5).json()
    assert [d["id"] for d in served["documents"]] == [d["id"] for d in DOCS]
    flags = ["--item-cap", str(cap)] if cap else []
    result = neardup("contamination", "docs.jsonl", "--protected", "evals.jsonl", "--top", "5",
                     "--quiet", *flags, cwd=tmp)  # fmt: skip
    assert result.returncode == 0, result.stderr
    batch = json.loads(result.stdout)
    report = served["report"]
    assert report["sets"] == batch["sets"]
    assert (report["documents"], report["contaminated"]) == (4, batch["contaminated"])
    served_items = [
        (i["item"], i["document_ids"], i["coverage"], i["subsets"]) for i in report["items"]
    ]
    batch_items = [(i["item"], i["documents"], i["coverage"], i["subsets"]) for i in batch["items"]]
    assert served_items == batch_items
    assert batch["contaminated"] == (2 if cap else 3)


def test_a_read_key_sees_ids_and_offsets_never_protected_text(srv):
    served = post(srv, key="read", mode="annotate", item_cap=1).json()
    text = json.dumps(served)
    assert "shiny red shell" not in text.replace(TWO, "").replace(ELEVEN, "")
    assert "following question" not in text.replace(BOILER, "")
    [s] = served["report"]["sets"]
    assert s["capped"] == {"ngrams": 1, "list": None}
    matches = served["documents"][0]["meta"]["decontamination"]["matches"]
    assert [(m["start"], m["ngram"]) for m in matches] == [(500, None), (650 + len(M), None)]
    assert served["report"]["items"][0]["first_ngram"] is None


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
    page = ui(srv, key="read", mode="cut", item_cap="1")
    assert page.status_code == 200, page.text
    # The boilerplate capped, the quiz is clean: two is cut in two pieces, eleven dropped.
    assert "2 of 4 document(s) contaminated; 4 kept, 1 dropped" in page.text
    assert "<td>evals.jsonl</td><td>q1</td><td>2</td>" in page.text
    assert "<td>two#2</td><td>300</td>" in page.text and "Dropped: eleven</p>" in page.text
    # Item ids and counts only: no protected text on the page beyond what was pasted.
    assert "shiny red shell" not in page.text.replace(json.dumps(TWO)[1:-1], "").replace(
        json.dumps(ELEVEN)[1:-1], ""
    )


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"docs": "not json"}, "line 1: not JSON"),
        ({"docs": "[" * 100_000 + "]" * 100_000}, "line 1: the JSON is nested too deeply"),
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
