"""Protected sets and contamination checks through a real server, on either store."""

import json

import httpx
import pytest

from tests.e2e.conftest import start_server, stop_server
from tests.fixtures import PROTECTED_ITEMS

SHELL_HIT = "and then TOM FOUND A SHINY, RED shell by the river and carried it home to show"
JSONL = "\n".join(json.dumps(item) for item in PROTECTED_ITEMS) + "\n"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def srv(request, tmp_path_factory):
    args = ["--workers", "1"]
    if request.param == "postgres":  # the same behaviour on the shared store
        args += ["--store-url", request.getfixturevalue("postgres").database()]
    server = start_server(tmp_path_factory.mktemp("protected"), *args)
    yield server
    stop_server(server)


def put(srv, name, content, content_type):
    return httpx.put(
        f"{srv.url}/v1/protected-sets/{name}", content=content,
        headers={"content-type": content_type},
    )  # fmt: skip


def check(srv, texts, sets=None):
    body = {"texts": texts} if sets is None else {"texts": texts, "sets": sets}
    return httpx.post(f"{srv.url}/v1/contamination", json=body)


def test_upload_jsonl_and_check(srv):
    response = put(srv, "evals.v1", JSONL, "application/x-ndjson")
    assert response.status_code == 201
    assert response.json()["name"] == "evals.v1" and response.json()["items"] == 2
    answer = check(srv, [SHELL_HIT, "nothing protected here at all"]).json()
    results = answer["results"]
    assert results[0] == {
        "status": "contaminated",
        "contaminated": True,
        "hit_count": 1,
        "hits": [{
            "set": "evals.v1", "item": "math-001 the quick brown fox jumps over the lazy dog "
            "again and again today",
            "ngram": 0,
        }],
    }  # fmt: skip
    assert answer["ngrams"] == ["tom found a shiny red shell by the river and carried it home"]
    assert answer["truncated"] is False
    assert results[1] == {"status": "clean", "contaminated": False, "hit_count": 0, "hits": []}
    # id-like keys are labels, not protected text
    assert not check(srv, [PROTECTED_ITEMS[1]["id"]]).json()["results"][0]["contaminated"]


def test_plain_text_and_multipart_uploads(srv):
    text = "In a hole in the ground there lived a hobbit, not a nasty dirty wet hole at all."
    assert put(srv, "plain", text, "text/plain").status_code == 201
    files = {"file": ("set.jsonl", json.dumps({"case_id": "c7", "prompt": text}) + "\n")}
    response = httpx.put(f"{srv.url}/v1/protected-sets/multi", files=files)
    assert response.status_code == 201, response.text
    hits = check(srv, [text.upper()], ["plain", "multi"]).json()["results"][0]["hits"]
    assert [(h["set"], h["item"]) for h in hits] == [("plain", "1"), ("multi", "c7")]
    # A plain form field named 'file' (what the schema's multipart body allows) is the text.
    field = httpx.put(f"{srv.url}/v1/protected-sets/field", files={"file": (None, text)})
    assert field.status_code == 201 and field.json()["items"] == 1


def test_bad_uploads_are_rejected_and_store_nothing(srv):
    bad = put(srv, "broken", '{"q": "fine"}\n[1, 2]\n', "application/jsonl")
    assert bad.status_code == 422 and ":2:" in bad.json()["detail"]
    assert httpx.get(f"{srv.url}/v1/protected-sets/broken").status_code == 404
    assert put(srv, "empty", "", "application/jsonl").status_code == 422
    assert put(srv, "bad name!", "text", "text/plain").status_code in (404, 422)
    assert put(srv, "x" * 129, "text", "text/plain").status_code == 422
    assert put(srv, "wrongtype", "text", "application/xml").status_code == 415
    assert put(srv, "notjson", "text", "application/json").status_code == 422
    assert put(srv, "latin1", "caf\xe9".encode("latin-1"), "text/plain").status_code == 400


#: 13 words: each question is one protected n-gram, its own.
QUESTION = "which statement about the river crossing near old mill number {i} is true"


def test_a_json_array_and_a_csv_are_their_items_raw_or_multipart(srv):
    """They were one plain text each: `items: 1`, labels protected, a meaningless report."""
    array = json.dumps([{"id": f"q{i}", "question": QUESTION.format(i=i)} for i in range(60)])
    mmlu = "".join(f'"{QUESTION.format(i=i)}",yes,no,maybe,A\n' for i in range(60))  # no header
    uploads = {
        "arr": put(srv, "arr", array, "application/json"),
        "mmlu": put(srv, "mmlu", mmlu, "text/csv"),
        "arr-file": httpx.put(
            f"{srv.url}/v1/protected-sets/arr-file", files={"file": ("evals.json", array)}
        ),
        "mmlu-file": httpx.put(
            f"{srv.url}/v1/protected-sets/mmlu-file", files={"file": ("test.csv", mmlu)}
        ),
    }
    for name, response in uploads.items():
        assert response.status_code == 201, response.text
        assert response.json() == {"name": name, "items": 60, "ngrams": 60}
    [result] = check(srv, ["so " + QUESTION.format(i=7)], list(uploads)).json()["results"]
    assert sorted((h["set"], h["item"]) for h in result["hits"]) == [
        ("arr", "q7"), ("arr-file", "q7"), ("mmlu", "8"), ("mmlu-file", "8")]  # fmt: skip
    assert not check(srv, ["q7"], ["arr"]).json()["results"][0]["contaminated"]


def test_an_upload_that_cannot_be_read_as_items_is_refused_and_not_stored(srv):
    sheet = httpx.put(
        f"{srv.url}/v1/protected-sets/sheet", files={"file": ("evals.xlsx", b"PK\x03\x04")}
    )
    assert sheet.status_code == 415
    assert "cannot read this file as protected items" in sheet.json()["detail"]
    bad = put(srv, "badarray", '[{"q": "fine"}, 3]', "application/json")
    assert bad.status_code == 422 and "element 2" in bad.json()["detail"]
    for name in ("sheet", "badarray"):
        assert httpx.get(f"{srv.url}/v1/protected-sets/{name}").status_code == 404


def test_list_get_delete_never_return_contents(srv):
    put(srv, "to-delete", JSONL, "application/x-ndjson")
    listed = httpx.get(f"{srv.url}/v1/protected-sets").json()
    assert {"name": "to-delete", "items": 2, "ngrams": listed[-1]["ngrams"]} in listed
    assert all(set(entry) == {"name", "items", "ngrams"} for entry in listed)
    assert "shiny" not in httpx.get(f"{srv.url}/v1/protected-sets/to-delete").text
    assert httpx.delete(f"{srv.url}/v1/protected-sets/to-delete").status_code == 204
    assert httpx.get(f"{srv.url}/v1/protected-sets/to-delete").status_code == 404
    assert check(srv, ["x"], ["to-delete"]).status_code == 404


def test_replacing_a_set_is_atomic(srv):
    put(srv, "swap", "alpha " * 20, "text/plain")
    assert check(srv, ["alpha " * 13], ["swap"]).json()["results"][0]["contaminated"]
    put(srv, "swap", "beta " * 20, "text/plain")
    result = check(srv, ["alpha " * 13, "beta " * 13], ["swap"]).json()["results"]
    assert [r["contaminated"] for r in result] == [False, True]


def test_protected_sets_are_limited_in_number_and_size_with_507(tmp_path):
    server = start_server(tmp_path, "--workers", "1", "--max-protected-sets", "2",
                          "--max-protected-bytes", "1000")  # fmt: skip
    try:
        assert put(server, "a", "x " * 100, "text/plain").status_code == 201
        assert put(server, "b", "y " * 100, "text/plain").status_code == 201
        third = put(server, "c", "z", "text/plain")
        assert third.status_code == 507, third.text
        assert "MAX_PROTECTED_SETS" in third.json()["detail"]
        # Replacing a set counts its new size instead of its old one.
        assert put(server, "a", "x " * 300, "text/plain").status_code == 201
        big = put(server, "b", "y " * 300, "text/plain")
        assert big.status_code == 507 and "MAX_PROTECTED_BYTES" in big.json()["detail"]
        names = [s["name"] for s in httpx.get(f"{server.url}/v1/protected-sets").json()]
        assert names == ["a", "b"]
        assert httpx.delete(f"{server.url}/v1/protected-sets/b").status_code == 204
        assert put(server, "c", "z " * 100, "text/plain").status_code == 201
    finally:
        stop_server(server)


def test_a_check_without_sets_checks_every_set(srv):
    """Not only the first: each of several sets is consulted, by name order."""
    for name, sentence in [("s1", "alpha"), ("s2", "beta"), ("s3", "gamma")]:
        text = f"{sentence} one two three four five six seven eight nine ten eleven twelve"
        assert put(srv, f"several-{name}", text, "text/plain").status_code == 201
    probe = ("gamma one two three four five six seven eight nine ten eleven twelve and "
             "alpha one two three four five six seven eight nine ten eleven twelve")  # fmt: skip
    [result] = check(srv, [probe]).json()["results"]
    found = sorted(h["set"] for h in result["hits"] if h["set"].startswith("several-"))
    assert found == ["several-s1", "several-s3"]
