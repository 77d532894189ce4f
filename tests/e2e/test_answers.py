"""Every route of the OpenAPI schema, sent its worst case at the documented limits, keeps the
event loop free (``/healthz`` answers within a second, probed every 0.25 s from another
process) and answers within its documented bound (docs/api.md, "Bounded answers").

The worst requests are among them (docs/api.md, "Bounded requests"): bodies at MAX_BODY_BYTES of
meta, an unknown field of millions of small arrays (top level, and inside a document), a JSON
array of protected items, one document's meta of 13 M numbers (stored, then fetched back
whole by ``GET /v1/documents/{doc_id}``). A case slower than a second is run once more (a
loaded machine may stall once), and fails if it is slow again. With the body
read in one call (core's ``read_json`` as one scan, counted after), ``/healthz`` was held 17 to
22 s by the unknown fields, 1.4 to 2 s by the document's meta and 1.5 s by the JSON array.

A route without a registered worst case fails ``test_every_route_has_a_worst_case``: a route
added later must say how it is attacked here, and what bounds its answer. The server runs
without keys: every caller has the widest scopes (``protect``: n-grams echoed, the largest
contamination answers). On the code before answers were bounded (main at 3634d5a) the probe
saw /healthz held 4 s by the query of copies, the re-sent copies and the 10,000 texts of
boilerplate, whose answers were 110 MB, 56 MB and 120 MB.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

import httpx
import pytest

from neardup.app.api.answers import BASE_BYTES, answer_bound
from neardup.app.api.schemas import MAX_PIECES
from neardup.app.service.operations import DECONT_META_BYTES
from tests.e2e.conftest import HealthzProbe, Server, start_server, stop_server

#: MAX_BODY_BYTES, the default.
MAX_BODY = 64 * 2**20
#: Stored besides the COPIES: as many copies again, so that one cluster's members (5,000
#: widest ids, 1.3 MB) are more than a small request's budget (1 MiB).
EXTRA_COPIES = 3000
#: The widest document id (256 characters, the limit), numbered.
WIDE = "w" * 250


def wide(i: int) -> str:
    return f"{WIDE}{i:06d}"


#: One text stored 2,000 times under the widest ids (a cookie banner), and what is queried.
BANNER = " ".join(f"cookie{i % 40} banner" for i in range(60))
COPIES = 2000
#: A prompt boilerplate of short words shared by 120 protected items, and one of 13 very long
#: words (400 characters each) shared by 100.
SHORT = "answer the following question with one letter and nothing else before you think"
LONG = " ".join(chr(97 + i) * 400 for i in range(13))
NUM_PERM = 128
JSON = {"content-type": "application/json"}


@dataclass(frozen=True)
class Case:
    """One request: how it is sent, its items (texts, documents) and its answer's bound."""

    method: str
    path: str
    body: bytes | None = None
    content_type: str = "application/json"
    items: int = 0
    #: the documented bound of the answer, from the request's bytes and items
    bound: Callable[[int, int], int] = answer_bound
    #: the status expected (None: any 2xx)
    status: int | None = None


def _signatures_bound(request_bytes: int, items: int) -> int:
    """docs/api.md: NUM_PERM numbers of at most 10 digits a text."""
    return items * (11 * NUM_PERM + 3) + 64


#: What the decontamination cases' documents hold: both boilerplates.
DECONT_TEXT = f"{LONG} {SHORT}"


def _decont_bound(request_bytes: int, items: int) -> int:
    """docs/api.md: the request's texts again, each kept piece's meta, the base, and the
    report's up to 1,000 items' first n-gram (each at most the longest text)."""
    report = 1000 * len(DECONT_TEXT.encode("utf-8"))
    return 2 * request_bytes + items * MAX_PIECES * DECONT_META_BYTES + BASE_BYTES + report


def _constant(request_bytes: int, items: int) -> int:
    return BASE_BYTES


def _body(value: object) -> bytes:
    return json.dumps(value).encode("utf-8")


def _copies_docs() -> list[dict[str, str]]:
    return [{"id": wide(i), "text": BANNER} for i in range(COPIES)]


def _numbers(size: int) -> str:
    """The JSON list (as ``json.dumps`` writes it) of numbers of 3 digits, 100 to 999 over and
    over, taking about ``size`` bytes (5 bytes each). Written by repeating the text of one
    cycle: dumping the 13 M numbers one by one took seconds a body."""
    count = size // 5
    cycles, rest = divmod(count, 900)
    parts = [", ".join(map(str, range(100, 1000)))] * cycles
    if rest:
        parts.append(", ".join(map(str, range(100, 100 + rest))))
    return "[" + ", ".join(parts) + "]"


def _meta_docs() -> bytes:
    """10,000 documents (MAX_BATCH) whose meta fills MAX_BODY_BYTES: 13 M values."""
    per_doc = _numbers((MAX_BODY - 2**20) // 10_000)
    docs = [f'{{"id": "meta{i}", "text": "meta {i} words", "meta": {{"n": {per_doc}}}}}'
            for i in range(10_000)]  # fmt: skip
    body = ('{"documents": [' + ", ".join(docs) + "]}").encode("utf-8")
    assert len(body) <= MAX_BODY, len(body)
    return body


def _small_arrays(size: int) -> str:
    """A JSON array of ``[0]`` arrays taking ``size`` bytes."""
    return "[" + "[0]," * (size // 4 - 1) + "[0]]"


def _unknown_top_level() -> bytes:
    """An unknown top-level field of 16 M small arrays: refused before it is read."""
    return ('{"texts": ["a b c"], "junk": ' + _small_arrays(MAX_BODY - 1024) + "}").encode()


def _unknown_in_a_document() -> bytes:
    """An unknown field of small arrays inside a document: over MAX_JSON_CONTAINERS (413)."""
    arrays = _small_arrays(MAX_BODY - 1024)
    return ('{"documents": [{"id": "x", "text": "a b", "junk": ' + arrays + "}]}").encode()


def _array_set() -> bytes:
    """A protected set as one JSON array near MAX_BODY_BYTES: items with a short text and a
    long list of numbers (not text: nothing to protect in them)."""
    numbers = _numbers(3200)
    items = [f'{{"id": "a{i}", "text": "{SHORT} array {i}", "scores": {numbers}}}'
             for i in range((MAX_BODY - 2**20) // 3300)]  # fmt: skip
    return ("[" + ", ".join(items) + "]").encode("utf-8")


@cache
def _big_meta() -> bytes:
    """One document's meta of 13 M numbers (within MAX_JSON_VALUES), at MAX_BODY_BYTES."""
    meta = _numbers(MAX_BODY - 2**20)
    return ('{"text": "a document of much meta", "meta": {"n": ' + meta + "}}").encode("utf-8")


def _with_big_meta(request_bytes: int, items: int) -> int:
    """docs/api.md: a document's answer, plus its meta as registered (here ``_big_meta``'s,
    at most that whole body)."""
    return answer_bound(request_bytes, items) + len(_big_meta())


def _set_body(boilerplate: str, items: int, prefix: str) -> bytes:
    rows = [{"id": f"{prefix}{i}", "text": f"{boilerplate} question {i}"} for i in range(items)]
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


#: The worst cases, by (method, path template) of the OpenAPI schema, in the order they run.
WORST: dict[tuple[str, str], Callable[[], list[Case]]] = {
    ("get", "/healthz"): lambda: [Case("GET", "/healthz", bound=_constant)],
    ("get", "/readyz"): lambda: [Case("GET", "/readyz", bound=_constant)],
    ("get", "/v1/config"): lambda: [Case("GET", "/v1/config", bound=_constant)],
    ("get", "/v1/stats"): lambda: [Case("GET", "/v1/stats", bound=_constant)],
    ("post", "/v1/signatures"): lambda: [
        Case(
            "POST",
            "/v1/signatures",
            _body({"texts": [f"t{i} x" for i in range(10_000)]}),
            items=10_000,
            bound=_signatures_bound,
        )
    ],
    # Registering the stored copies again: each answers its 100 earlier copies.
    ("post", "/v1/documents"): lambda: [
        Case("POST", "/v1/documents", _body({"documents": _copies_docs()}), items=COPIES),
        Case("POST", "/v1/documents", _meta_docs(), items=10_000),
        Case("POST", "/v1/documents", _unknown_in_a_document(), items=1, status=413),
    ],
    ("post", "/v1/query"): lambda: [
        # Copies of the stored text, with the widest limit: each matches every stored copy.
        Case(
            "POST", "/v1/query", _body({"texts": [BANNER] * COPIES, "limit": 10**9}), items=COPIES
        ),
        # 10,000 distinct texts.
        Case(
            "POST",
            "/v1/query",
            _body({"texts": [f"q{i} y z" for i in range(10_000)]}),
            items=10_000,
        ),
        Case("POST", "/v1/query", _unknown_top_level(), items=1, status=422),
    ],
    ("put", "/v1/documents/{doc_id}"): lambda: [
        Case("PUT", f"/v1/documents/{wide(COPIES - 1)}", _body({"text": BANNER}), items=1),
        Case("PUT", "/v1/documents/big-meta", _big_meta(), items=1),
        # The same again: unchanged, once its meta is compared with the stored one.
        Case("PUT", "/v1/documents/big-meta", _big_meta(), items=1),
    ],
    ("get", "/v1/documents/{doc_id}"): lambda: [
        Case("GET", f"/v1/documents/{wide(0)}", items=1),
        # The document PUT above with meta of 13 M numbers: its meta is served back whole.
        Case("GET", "/v1/documents/big-meta", items=1, bound=_with_big_meta),
    ],
    ("get", "/v1/clusters"): lambda: [Case("GET", "/v1/clusters?min_size=1&limit=10000")],
    ("get", "/v1/clusters/{root}"): lambda: [Case("GET", f"/v1/clusters/{wide(0)}")],
    ("put", "/v1/protected-sets/{name}"): lambda: [
        Case("PUT", "/v1/protected-sets/upload", _array_set(), bound=_constant, status=201),
        Case(
            "PUT",
            "/v1/protected-sets/upload",
            _set_body(SHORT, 2_000, "u"),
            "application/x-ndjson",
            bound=_constant,
            status=201,
        ),
    ],
    ("get", "/v1/protected-sets"): lambda: [Case("GET", "/v1/protected-sets", bound=_constant)],
    ("get", "/v1/protected-sets/{name}"): lambda: [
        Case("GET", "/v1/protected-sets/short", bound=_constant)
    ],
    ("post", "/v1/contamination"): lambda: [
        # 10,000 short texts sharing the boilerplate with 120 items: 1,200,000 hits.
        Case(
            "POST",
            "/v1/contamination",
            _body({"texts": [f"{SHORT} {i}" for i in range(10_000)], "sets": ["short"]}),
            items=10_000,
        ),
        # 50 texts of the boilerplate of long words, each hit naming a 5 KB n-gram.
        Case(
            "POST",
            "/v1/contamination",
            _body({"texts": [f"{LONG} {i}" for i in range(50)], "sets": ["long"]}),
            items=50,
        ),
    ],
    ("post", "/v1/decontamination"): lambda: [
        Case(
            "POST",
            "/v1/decontamination",
            _body(
                {
                    "documents": [
                        {"id": f"d{i}", "text": f"{DECONT_TEXT} {i}"} for i in range(200)
                    ],
                    "sets": ["short", "long"],
                    "mode": mode,
                    "window": 0,
                    "min_piece": 0,
                    "max_pieces": MAX_PIECES,
                }
            ),
            items=200,
            bound=_decont_bound,
        )
        for mode in ("annotate", "cut")
    ],
    ("delete", "/v1/protected-sets/{name}"): lambda: [
        Case("DELETE", "/v1/protected-sets/upload", bound=_constant)
    ],
    ("delete", "/v1/documents/{doc_id}"): lambda: [
        Case("DELETE", f"/v1/documents/{wide(COPIES - 1)}", bound=_constant)
    ],
}


@pytest.fixture(scope="module")
def stocked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {"NEARDUP_CONTAMINATION_TEXTS_PER_MINUTE": "1000000"}
    server = start_server(tmp_path_factory.mktemp("answers"), "--workers", "1", env=env)
    with httpx.Client(base_url=server.url, timeout=300) as client:
        extra = [{"id": wide(10_000 + i), "text": BANNER} for i in range(EXTRA_COPIES)]
        for docs in (_copies_docs(), extra):
            stored = client.post("/v1/documents", content=_body({"documents": docs}),
                                 headers=JSON)  # fmt: skip
            assert stored.status_code == 200, stored.text
        sets = {"short": _set_body(SHORT, 120, "s"), "long": _set_body(LONG, 100, "l")}
        for name, body in sets.items():
            put = client.put(f"/v1/protected-sets/{name}", content=body,
                             headers={"content-type": "application/x-ndjson"})  # fmt: skip
            assert put.status_code == 201, put.text
    yield server
    stop_server(server)


def test_every_route_has_a_worst_case(stocked: Server) -> None:
    schema = httpx.get(f"{stocked.url}/openapi.json", timeout=30).json()
    routes = {(m, p) for p, ops in schema["paths"].items() for m in ops}
    missing = sorted(routes - set(WORST))
    assert not missing, f"register a worst case (and document a bound) for: {missing}"
    assert not set(WORST) - routes, "a worst case for a route the schema does not have"


def _run(client: httpx.Client, case: Case, probe: HealthzProbe) -> tuple[httpx.Response, float]:
    """``case``'s answer, and the slowest /healthz probe while it was served."""
    started = time.time()
    got = client.request(
        case.method, case.path, content=case.body,
        headers={"content-type": case.content_type} if case.body else {},
    )  # fmt: skip
    return got, probe.slowest(started, time.time())


def test_every_route_keeps_the_loop_free_and_its_answer_within_its_bound(stocked: Server) -> None:
    slow: list[str] = []
    wrong: list[str] = []
    over: list[str] = []
    probe = HealthzProbe(stocked.url)
    try:
        with httpx.Client(base_url=stocked.url, timeout=600) as client:
            for (method, template), cases in WORST.items():
                for case in cases():
                    name = f"{method.upper()} {template} ({len(case.body or b'')} bytes)"
                    got, slowest = _run(client, case, probe)
                    ok = got.is_success if case.status is None else got.status_code == case.status
                    if not ok:
                        wrong.append(f"{name}: {got.status_code} {got.text[:300]}")
                    if slowest >= 1.0:  # once more: a loaded machine may stall once
                        got, again = _run(client, case, probe)
                        if again >= 1.0:
                            slow.append(f"{name}: {slowest:.2f} s, then {again:.2f} s")
                    sent = len(case.body or b"") + len(got.request.url.raw_path)
                    bound = case.bound(sent, case.items)
                    if len(got.content) > bound:
                        over.append(f"{name}: {len(got.content)} bytes, bound {bound}")
    finally:
        probe.close()
    assert not slow, f"/healthz held a second or more: {slow}; unexpected answers: {wrong}"
    assert not wrong, wrong
    assert not over, over


def test_a_cluster_larger_than_the_budget_is_paged(stocked: Server) -> None:
    """5,000 members of 256-character ids (1.3 MB) do not fit a GET's 1 MiB budget: its first
    members are listed, with the cursor of the rest, and the size is complete."""
    got = httpx.get(f"{stocked.url}/v1/clusters/{wide(0)}", timeout=120)
    cluster = got.json()
    stored = COPIES + EXTRA_COPIES  # less the one the DELETE case removes, if it ran before
    assert got.status_code == 200 and cluster["size"] in (stored, stored - 1)
    assert 0 < len(cluster["members"]) < cluster["size"] and cluster["members_next"]
    assert len(got.content) <= BASE_BYTES + 8 * len(got.request.url.raw_path)


def test_the_contamination_page_grows_with_the_text_not_with_its_hits(stocked: Server) -> None:
    """100 items share one n-gram of 400-character words with the text: the page shows it once
    (it was 100 times: a 65 KB text gave a 6.6 MB page)."""
    form = {"text": f"{LONG} tail", "sets": "long"}
    page = httpx.post(f"{stocked.url}/ui/contamination", data=form, timeout=120)
    assert page.status_code == 200 and "Contaminated: 100 protected item" in page.text
    assert page.text.count("as row 1") == 99
    assert len(page.content) < 4 * len(form["text"]) + 64 * 1024
