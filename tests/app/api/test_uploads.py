"""Protected-set uploads through the HTTP app: a text sent as one plain text that is plainly
items is refused naming its count; Parquet is read as the CLI reads it; a semicolon CSV reads as
its columns; a set protecting no n-gram is refused unless allowed; /docs gets a file picker."""

from __future__ import annotations

import io
import json
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from starlette.exceptions import StarletteDeprecationWarning

from neardup.app.client import Client, ClientError
from neardup.app.config import Settings
from neardup.app.main import create_app
from neardup.core.engine import read_protected_set

with warnings.catch_warnings():  # starlette would rather drive httpx2; httpx serves here
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

#: 20 items of 15 words each, all distinct.
ITEMS = [
    {"id": f"q{i}", "question": " ".join(f"item{i}word{j}" for j in range(15))} for i in range(20)
]
JSONL = "".join(json.dumps(item) + "\n" for item in ITEMS)
CSV = "id,question\n" + "".join(f"{i['id']},{i['question']}\n" for i in ITEMS)
PROSE = "It began when Tom found a shiny red shell by the river, and carried it home, they say."


@contextmanager
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path / "data", workers=1, allowed_hosts="testserver")
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        deadline = time.monotonic() + 60  # the server listens while it recovers
        while c.get("/readyz").json()["status"] == "starting" and time.monotonic() < deadline:
            time.sleep(0.01)
        yield c


@pytest.fixture
def c(tmp_path: Path) -> Iterator[TestClient]:
    with client(tmp_path) as found:
        yield found


def _stored(c: TestClient) -> list[str]:
    return [s["name"] for s in c.get("/v1/protected-sets").json()]


@pytest.mark.parametrize(
    ("how", "kind", "count"),
    [
        ({"files": {"file": (None, JSONL)}}, "JSON Lines", 20),  # /docs' old text box: a form field
        ({"files": {"file": ("evals.txt", JSONL, "text/plain")}}, "JSON Lines", 20),
        ({"content": JSONL, "headers": {"content-type": "text/plain"}}, "JSON Lines", 20),
        ({"content": CSV, "headers": {"content-type": "text/plain"}}, "CSV", 20),
        ({"files": {"file": (None, json.dumps(ITEMS))}}, "a JSON array", 20),
    ],
)
def test_upload_of_items_as_one_plain_text_is_refused_naming_the_count(c, how, kind, count):
    answer = c.put("/v1/protected-sets/evals", **how)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith(f"this looks like {kind} with {count} item(s)")
    assert "format=text" in detail
    assert _stored(c) == []  # nothing stored


def test_upload_of_items_as_text_is_one_item_when_asked(c):
    answer = c.put("/v1/protected-sets/evals?format=text", files={"file": (None, JSONL)})
    assert answer.status_code == 201 and answer.json()["items"] == 1


def test_upload_format_parameter_reads_a_text_field_as_json_lines(c):
    answer = c.put("/v1/protected-sets/evals?format=jsonl", files={"file": (None, JSONL)})
    assert answer.status_code == 201 and answer.json()["items"] == 20
    hit = c.post("/v1/contamination", json={"texts": [ITEMS[7]["question"]]}).json()
    assert [h["item"] for h in hit["results"][0]["hits"]] == ["q7"]


def test_upload_of_plain_text_that_is_not_items_is_one_item(c):
    for body in (PROSE, f"[Verse 1] {PROSE}", f"{PROSE}\n{PROSE}, again, and again"):
        answer = c.put("/v1/protected-sets/prose", content=body,
                       headers={"content-type": "text/plain"})  # fmt: skip
        assert answer.status_code == 201 and answer.json()["items"] == 1, body


def test_upload_of_plain_json_lines_with_a_bad_line_names_it(c):
    answer = c.put("/v1/protected-sets/evals", files={"file": (None, JSONL + "not json\n")})
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("evals:21: not valid JSON")


def _parquet(rows: list[dict[str, object]]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue()


def test_upload_of_parquet_reads_the_rows_as_the_cli_does(c, tmp_path):
    rows = [{**item, "score": 0.5, "raw": b"\x00\x01"} for item in ITEMS]
    raw = _parquet(rows)
    (tmp_path / "evals.parquet").write_bytes(raw)
    cli = read_protected_set(tmp_path / "evals.parquet")
    as_file = c.put("/v1/protected-sets/a", files={"file": ("evals.parquet", raw)})
    as_raw = c.put("/v1/protected-sets/b", content=raw,
                   headers={"content-type": "application/vnd.apache.parquet"})  # fmt: skip
    as_asked = c.put("/v1/protected-sets/c?format=parquet", content=raw,
                     headers={"content-type": "application/octet-stream"})  # fmt: skip
    for answer in (as_file, as_raw, as_asked):
        assert answer.status_code == 201, answer.text
        assert answer.json()["items"] == cli.items == 20
        assert answer.json()["ngrams"] == cli.ngrams
    hit = c.post("/v1/contamination", json={"texts": [ITEMS[3]["question"]], "sets": ["a"]})
    assert [h["item"] for h in hit.json()["results"][0]["hits"]] == ["q3"]


def test_upload_of_bytes_that_are_not_parquet_is_422(c):
    answer = c.put("/v1/protected-sets/a", files={"file": ("evals.parquet", b"PAR1 not really")})
    assert answer.status_code == 422 and "cannot read as Parquet" in answer.json()["detail"]


def test_upload_that_is_not_utf8_names_its_line_and_byte(c):
    """As the CLI names a protected file's bad line (issue 33.6), not only a byte of the body."""
    body = JSONL.encode() + '{"id": "late", "question": "caf\xe9 au lait"}\n'.encode("latin-1")
    answer = c.put("/v1/protected-sets/evals", files={"file": ("evals.jsonl", body)})
    assert answer.status_code == 400
    assert answer.json()["detail"] == (
        f"evals:21: not UTF-8 (invalid continuation byte at byte 31 of the line, byte "
        f"{len(JSONL.encode()) + 31} of the file)"
    )
    assert _stored(c) == []


def test_upload_of_a_semicolon_csv_reads_its_columns(c):
    body = CSV.replace(",", ";")
    answer = c.put("/v1/protected-sets/evals", content=body, headers={"content-type": "text/csv"})
    assert answer.status_code == 201 and answer.json()["items"] == 20
    hit = c.post("/v1/contamination", json={"texts": [ITEMS[4]["question"]]}).json()
    assert [h["item"] for h in hit["results"][0]["hits"]] == ["q4"]  # the id column, not "5"


@pytest.mark.parametrize(
    ("body", "kind", "why"),
    [
        ("{}", "text/csv", "hold no text"),
        ('{"id": "a", "tags": ["x"]}\n', "application/x-ndjson", "hold no text"),
        ('{"q": "only five short words here"}\n', "application/x-ndjson", "under 13 words"),
    ],
)
def test_upload_of_a_set_protecting_nothing_is_refused_unless_allowed(c, body, kind, why):
    answer = c.put("/v1/protected-sets/none", content=body, headers={"content-type": kind})
    assert answer.status_code == 422 and why in answer.json()["detail"], answer.text
    assert "allow_no_ngrams=true" in answer.json()["detail"]
    assert _stored(c) == []
    allowed = c.put("/v1/protected-sets/none?allow_no_ngrams=true", content=body,
                    headers={"content-type": kind})  # fmt: skip
    assert allowed.status_code == 201 and allowed.json()["ngrams"] == 0


def test_upload_without_a_format_nothing_tells_is_415(c):
    answer = c.put("/v1/protected-sets/a", content=b"x", headers={"content-type": "image/png"})
    assert answer.status_code == 415 and "format=" in answer.json()["detail"]
    named = c.put("/v1/protected-sets/a", files={"file": ("evals.xlsx", b"x")})
    assert named.status_code == 415 and "evals.xlsx" in named.json()["detail"]


def test_upload_schema_gives_docs_a_file_picker_and_the_parameters(c):
    put = c.get("/openapi.json").json()["paths"]["/v1/protected-sets/{name}"]["put"]
    form = put["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert form["properties"]["file"]["format"] == "binary"
    params = {p["name"]: p for p in put["parameters"]}
    assert params["allow_no_ngrams"]["in"] == "query"
    assert set(params["format"]["schema"]["anyOf"][0]["enum"]) == {
        "jsonl", "json", "csv", "text", "parquet",
    }  # fmt: skip


def test_client_uploads_by_format_and_says_when_a_set_protects_nothing(c):
    def through_app(request: httpx.Request) -> httpx.Response:
        url = str(request.url.copy_with(scheme="http", host="testserver"))
        headers = {k: v for k, v in request.headers.items() if k != "host"}
        answer = c.request(request.method, url, content=request.content, headers=headers)
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    with Client("http://svc", transport=httpx.MockTransport(through_app), retries=0) as client:
        assert client.put_protected_set("a", JSONL.encode(), jsonl=True)["items"] == 20
        assert client.put_protected_set("b", JSONL.encode(), jsonl=False)["items"] == 1
        assert client.put_protected_set("c", CSV.encode(), format="csv")["items"] == 20
        with pytest.raises(ClientError, match="under 13 words") as info:
            client.put_protected_set("d", b"a few words", format="text")
        assert info.value.status == 422
        empty = client.put_protected_set("d", b"a few words", format="text", allow_no_ngrams=True)
        assert empty["ngrams"] == 0


#: Small JSON limits, so that a body over them is small (the defaults are 16 Mi and 1 Mi).
SMALL_VALUES, SMALL_CONTAINERS = 2_000, 300


@pytest.fixture
def small(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path / "data", workers=1, allowed_hosts="testserver",
        max_json_values=SMALL_VALUES, max_json_containers=SMALL_CONTAINERS,
    )  # fmt: skip
    with TestClient(create_app(settings), raise_server_exceptions=False) as found:
        deadline = time.monotonic() + 60
        while found.get("/readyz").json()["status"] == "starting" and time.monotonic() < deadline:
            time.sleep(0.01)
        yield found


def _lines(items: list[dict[str, object]]) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


#: Over MAX_JSON_VALUES only with all the lines together (each line holds 13 values).
MANY_LINES = _lines([{**ITEMS[i % 20], "n": list(range(10))} for i in range(200)])
#: Over MAX_JSON_CONTAINERS in one item of a JSON array.
DEEP_ARRAY = json.dumps([{**ITEMS[0], "m": [[] for _ in range(SMALL_CONTAINERS)]}])
#: One line longer than a piece (read a piece at a time) over MAX_JSON_VALUES.
LONG_LINE = _lines([{**ITEMS[0], "n": list(range(100_000, 130_000))}])


@pytest.mark.parametrize(
    ("how", "setting"),
    [
        ({"content": MANY_LINES, "headers": {"content-type": "application/x-ndjson"}},
         "MAX_JSON_VALUES"),
        ({"files": {"file": ("evals.jsonl", MANY_LINES)}}, "MAX_JSON_VALUES"),
        ({"content": DEEP_ARRAY, "headers": {"content-type": "application/json"}},
         "MAX_JSON_CONTAINERS"),
        ({"files": {"file": ("evals.json", DEEP_ARRAY)}}, "MAX_JSON_CONTAINERS"),
        ({"content": LONG_LINE, "headers": {"content-type": "application/x-ndjson"}},
         "MAX_JSON_VALUES"),
        # sent as one plain text: read to see whether it is plainly items, under the same caps
        ({"content": MANY_LINES, "headers": {"content-type": "text/plain"}}, "MAX_JSON_VALUES"),
        ({"files": {"file": (None, DEEP_ARRAY)}}, "MAX_JSON_CONTAINERS"),
    ],
    ids=["jsonl", "jsonl-file", "array", "array-file", "long-line", "plain-jsonl", "plain-array"],
)  # fmt: skip
def test_upload_over_the_json_limits_is_413_naming_the_setting(small, how, setting):
    answer = small.put("/v1/protected-sets/evals", **how)
    assert answer.status_code == 413, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith("the protected set is over a limit: the JSON holds more than")
    assert detail.endswith(f"({setting})")
    assert _stored(small) == []  # nothing stored


def test_upload_under_the_json_limits_is_stored(small):
    """A JSON array set of 20 items (about 100 values) and the same as JSON Lines: 201."""
    as_array = small.put("/v1/protected-sets/a", content=json.dumps(ITEMS),
                         headers={"content-type": "application/json"})  # fmt: skip
    as_lines = small.put("/v1/protected-sets/b", files={"file": ("evals.jsonl", JSONL)})
    for answer in (as_array, as_lines):
        assert answer.status_code == 201, answer.text
        assert answer.json()["items"] == 20
