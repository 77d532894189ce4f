"""No request holds the service hostage: while the heaviest pages and requests run, /healthz
answers within a second, probed every 0.25 s, and the heavy answers say what they left out."""

import json
import random
from urllib.parse import urlencode

import httpx
import pytest

from neardup.app.api.answers import answer_bound
from tests.e2e.conftest import probe_healthz, start_server, stop_server

WORDS = [f"w{i}" for i in range(500)]
BOILERPLATE = "answer the following question with one letter and nothing else before you think"
FORM = {"content-type": "application/x-www-form-urlencoded"}
JSON = {"content-type": "application/json"}


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(WORDS, k=words))


@pytest.fixture(scope="module")
def heavy(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("bounded"), "--workers", "1")
    rng = random.Random(5)
    long_text = _text(rng, 20_000)
    big = _text(rng, 400_000)  # about 2 MB
    docs = [{"id": "pair-a", "text": long_text}, {"id": "pair-b", "text": long_text + " w1"}]
    docs += [{"id": f"copy-{i:03d}", "text": "the same cookie banner text " * 5} for i in range(80)]
    docs.append({"id": "big", "text": big})
    with httpx.Client(timeout=120) as client:
        assert client.post(f"{server.url}/v1/documents", json={"documents": docs}).is_success
        protected = " ".join(big.split()[1000:1100])
        put = client.put(f"{server.url}/v1/protected-sets/evals", content=protected,
                         headers={"content-type": "text/plain"})  # fmt: skip
        assert put.status_code == 201
        # 2,000 items sharing one 13-word prompt boilerplate, each with a question of its own.
        items = [{"id": f"q{i}", "text": f"{BOILERPLATE} question {i} " + _text(rng, 20)}
                 for i in range(2000)]  # fmt: skip
        body = "".join(json.dumps(item) + "\n" for item in items)
        put = client.put(f"{server.url}/v1/protected-sets/prompts", content=body,
                         headers={"content-type": "application/x-ndjson"})  # fmt: skip
        assert put.status_code == 201
    # 40 MB of a pasted form, encoded before /healthz is probed: encoding it meanwhile would
    # hold this process's GIL and slow the probe's own thread, not the server.
    pasted = urlencode({"docs": "not json\n" + "a+b%20c " * 5_000_000, "mode": "drop"}).encode()
    yield server, protected, pasted
    stop_server(server)


def test_healthz_answers_within_a_second_while_the_heaviest_work_runs(heavy, tmp_path):
    url, protected, pasted = heavy[0].url, heavy[1], heavy[2]
    stop = tmp_path / "stop"
    probe = probe_healthz(url, stop)
    try:
        with httpx.Client(timeout=120) as client:
            pair = client.get(f"{url}/ui/clusters/pair-a")
            copies = client.get(f"{url}/ui/clusters/copy-000")
            page = client.post(f"{url}/ui/contamination", data={"doc_id": "big"})
            named = {"texts": [protected], "sets": ["evals"] * 5000}
            repeated = client.post(f"{url}/v1/contamination", json=named)
            # 1,000 texts, each sharing the boilerplate with all 2,000 items: 2,000,000 hits,
            # counted; 100 a text listed (an answer of ~10 MB, not the ~256 MB of every hit).
            boiler = {"texts": [f"{BOILERPLATE} {i}" for i in range(1000)], "sets": ["prompts"]}
            boiler_bytes = json.dumps(boiler).encode()
            crowded = client.post(f"{url}/v1/contamination", content=boiler_bytes, headers=JSON)
            # 2,000 documents, then the same again (a resumed ingest): matched in one pass.
            rng = random.Random(7)
            batch = {"documents": [{"id": f"resent-{i}", "text": _text(rng, 50)}
                                   for i in range(2000)]}  # fmt: skip
            first = client.post(f"{url}/v1/documents", json=batch)
            again = client.post(f"{url}/v1/documents", json=batch)
            # A 40 MB pasted form (the first line not JSON): parsed off the loop, then refused.
            form = client.post(f"{url}/ui/decontamination", content=pasted, headers=FORM)
            fields = "&".join(f"f{i}=x" for i in range(1001))  # past MAX_FORM_FIELDS
            many = client.post(f"{url}/ui/decontamination", content=fields, headers=FORM)
            # 200 KB of documents quoting the protected passage 5 times each, cut and annotated.
            docs = [{"id": f"q{i}", "text": f" filler {i} ".join([protected] * 5)}
                    for i in range(100)]  # fmt: skip
            decont = {"documents": docs, "window": 0, "min_piece": 0, "max_pieces": 100}
            cut = client.post(f"{url}/v1/decontamination", json={**decont, "mode": "cut"})
            notes = client.post(f"{url}/v1/decontamination", json={**decont, "mode": "annotate"})
    finally:
        stop.touch()
        out, _ = probe.communicate(timeout=60)
    latencies = [took for _, took in json.loads(out)]
    assert latencies and max(latencies) < 1.0, max(latencies)
    # Two 20,000-word texts a word apart: diffed over their first words only, and it says so.
    assert pair.status_code == 200
    assert "more characters are not compared here" in pair.text
    # 80 copies of one text: one row that counts them, naming the first few.
    assert copies.status_code == 200
    assert "80 members · 1 distinct texts" in copies.text
    assert "×80" in copies.text and "and 69 more" in copies.text
    # A 2 MB text: checked whole, highlighted in part.
    assert page.status_code == 200
    assert 'id="verdict">Contaminated' in page.text
    assert 'id="not-shown"' in page.text
    assert len(page.content) < 2_000_000
    # A set named 5,000 times is one set: one answer, not 5,000.
    assert repeated.status_code == 200
    [result] = repeated.json()["results"]
    assert result["contaminated"] and [h["set"] for h in result["hits"]] == ["evals"]
    assert form.status_code == 422 and "line 1: not JSON" in form.text
    assert many.status_code == 400 and "the form cannot be read" in many.text
    assert first.status_code == again.status_code == 200
    assert {r["status"] for r in first.json()["results"]} == {"created"}
    assert {r["status"] for r in again.json()["results"]} == {"unchanged"}
    assert crowded.status_code == 200, crowded.text
    results = crowded.json()["results"]
    assert {r["hit_count"] for r in results} == {2000}
    # 100 a text listed (MAX_MATCHES) while they fit the answer's bound, the one n-gram once.
    listed = [len(r["hits"]) for r in results]
    assert listed[0] == 100 and max(listed) == 100
    assert crowded.json()["truncated"] is (sum(listed) < 100 * 1000)
    assert crowded.json()["ngrams"] == [" ".join(BOILERPLATE.split()[:13])]
    assert len(crowded.content) <= answer_bound(len(boiler_bytes), 1000)
    # Every kept piece or annotated document carries its own capped lists: the answers are
    # the documents' text and at most about 1 KB of meta each, not every window of every match.
    sent = sum(len(d["text"]) for d in docs)
    for answer in (cut, notes):
        assert answer.status_code == 200, answer.text
        kept = answer.json()["documents"]
        assert kept and len(answer.content) < sent + 1024 * len(kept) + 4096
