"""What a key without the protect scope can learn of the protected sets, through a real server:
per-document verdicts and counts, never an offset into a protected match (the API's JSON, the
/ui pages, the report download), and its checks charged by the words checked, at least one
whole n-gram a text (issue 23).

The attack this guards against: knowing a protected item's first 12 words, one text holding the
seed followed by each candidate next word names the protected candidate by the offset of its
match (bench/probing measures it with a 5,000-word dictionary)."""

import json
import re
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import start_server, stop_server

SEED = ["the", "committee", "agreed", "that", "every", "new", "member", "should", "receive", "a",
        "printed", "copy"]  # fmt: skip
SECRET = ["of", "the", "annual", "report", "before", "the"]
CANDIDATES = ["house", "river", "of", "green", "table", "under", "paper", "simple"]
#: Each key's own bucket (a rate is per key): one key a test.
KEYS = {"protect": "rk-protect-0123456789", "protect2": "rk-protect2-0123456789",
        "offsets": "rk-read-offsets-0123456789", "charged": "rk-read-charged-0123456789",
        "ui": "rk-read-ui-0123456789"}  # fmt: skip
#: Two items sharing their first 12 words (an eval set's boilerplate).
BOILER = ["answer", "the", "question", "below", "with", "one", "word", "and", "nothing", "else",
          "please", "now"]  # fmt: skip
WORDS_PER_MINUTE = 400
TEXTS_PER_MINUTE = 5


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readkeys")
    keys = tmp / "keys.txt"
    keys.write_text("".join(f"{key} {'read,protect' if name.startswith('protect') else 'read'}\n"
                            for name, key in KEYS.items()), encoding="utf-8")  # fmt: skip
    server = start_server(tmp, "--workers", "1", "--api-keys-file", str(keys),
                          "--contamination-words-per-minute", str(WORDS_PER_MINUTE),
                          "--contamination-texts-per-minute", str(TEXTS_PER_MINUTE))  # fmt: skip
    put = httpx.put(f"{server.url}/v1/protected-sets/evals", content=" ".join(SEED + SECRET),
                    headers={"content-type": "text/plain", **auth("protect2")})  # fmt: skip
    assert put.status_code == 201, put.text
    pair = "".join(
        json.dumps({"id": i, "question": " ".join([*BOILER, *rest])}) + "\n"
        for i, rest in (("a", ["zebra", "crossing"]), ("b", ["yellow", "submarine"]))
    )
    put = httpx.put(
        f"{server.url}/v1/protected-sets/pair",
        content=pair,
        headers={"content-type": "application/x-ndjson", **auth("protect2")},
    )
    assert put.status_code == 201, put.text
    yield server
    stop_server(server)


def auth(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[name]}"}


def probe() -> tuple[str, list[int]]:
    """The seed followed by each candidate (and a word of digits, so that no n-gram runs into
    the next candidate), and where each candidate's 13 words start."""
    starts, text = [], ""
    for word in CANDIDATES:
        starts.append(len(text))
        text += " ".join([*SEED, word, "0"]) + " "
    return text, starts


def named_by_offsets(answer: dict[str, Any], starts: list[int]) -> str | None:
    """The candidate an annotate answer's first span names, or None without spans."""
    spans = answer["documents"][0]["meta"]["decontamination"]["spans"]
    if not spans:
        return None
    return CANDIDATES[max(i for i, s in enumerate(starts) if s <= spans[0][0])]


def offsets_in(value: Any) -> list[Any]:
    """Every offset an answer holds: the values of ``spans``, ``span`` and ``removed`` keys."""
    if isinstance(value, dict):
        here = [v for k, v in value.items() if k in ("spans", "span", "removed") and v is not None]
        return here + [o for v in value.values() for o in offsets_in(v)]
    if isinstance(value, list):
        return [o for v in value for o in offsets_in(v)]
    return []


def test_offsets_name_the_next_protected_word_to_a_protect_key_only(srv):
    text, starts = probe()
    # A clean document's meta is the caller's own, whatever it holds.
    own = {"id": "own", "text": "a clean text", "meta": {"decontamination": {"spans": [[0, 1]]}}}
    doc = {"documents": [{"id": "probe", "text": text}, own], "mode": "annotate"}
    shown = httpx.post(f"{srv.url}/v1/decontamination", json=doc, headers=auth("protect"))
    assert shown.status_code == 200, shown.text
    assert named_by_offsets(shown.json(), starts) == SECRET[0]  # the attack, with offsets
    hidden = httpx.post(f"{srv.url}/v1/decontamination", json=doc, headers=auth("offsets"))
    assert hidden.status_code == 200, hidden.text
    answer = hidden.json()
    assert offsets_in([answer["documents"][0], answer["report"]]) == []
    assert named_by_offsets(answer, starts) is None
    assert answer["documents"][1] == own
    # Verdicts and counts only: one matching window of one item.
    found = answer["documents"][0]["meta"]["decontamination"]
    assert (found["match_count"], found["item_count"], found["span_count"]) == (1, 1, 1)
    assert found["items"] == [{"set": "evals", "item": "1", "matches": 1}]
    assert answer["report"]["contaminated"] == 1
    assert answer["report"]["items"][0]["first_ngram"] is None
    # The protected text appears nowhere but in the text sent.
    assert " ".join(SEED + SECRET[:1]) not in json.dumps(answer).replace(text, "")
    # A cut piece's edges are match edges: refused, and nothing charged for it.
    cut = httpx.post(f"{srv.url}/v1/decontamination", json={**doc, "mode": "cut"},
                     headers=auth("offsets"))  # fmt: skip
    assert cut.status_code == 403 and "protect scope" in cut.json()["detail"]
    checked = httpx.post(f"{srv.url}/v1/contamination", json={"texts": [text]},
                         headers=auth("offsets"))  # fmt: skip
    assert checked.status_code == 200, checked.text
    [result] = checked.json()["results"]
    assert result["hit_count"] == 1
    assert result["hits"] == [{"set": "evals", "item": "1", "ngram": None}]


def test_a_read_key_is_charged_by_words_and_refused_before_any_work(srv):
    def check(texts: list[str], key: str = "charged") -> httpx.Response:
        return httpx.post(f"{srv.url}/v1/contamination", json={"texts": texts},
                          headers=auth(key))  # fmt: skip

    def words(n: int) -> str:
        return " ".join(f"w{i}" for i in range(n))

    # One text of 380 words costs 380 of the key's 400 words a minute.
    assert check([words(380)]).status_code == 200
    refused = check([words(150)])  # more than the ~20 left
    assert refused.status_code == 429, refused.text
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    detail = refused.json()["detail"]
    assert "400 words a minute" in detail and "this check is 150" in detail
    assert "NEARDUP_CONTAMINATION_WORDS_PER_MINUTE" in detail
    # A text costs at least one whole n-gram: a 13-word probe 13, a 2-word text 13 too (they
    # were 1 n-gram each: a verdict for the price of one word).
    probe = " ".join([*SEED, "house"])
    for texts, cost in (([probe] * 10, 130), (["short text"] * 15, 195)):
        charged = check(texts)
        assert charged.status_code == 429 and f"this check is {cost};" in charged.json()["detail"]
    # The refusals cost nothing: a 13-word probe still fits in what is left.
    assert check([probe]).status_code == 200
    # Decontamination is charged from the same bucket.
    doc = {"documents": [{"id": "d", "text": words(112)}], "mode": "drop"}
    again = httpx.post(f"{srv.url}/v1/decontamination", json=doc, headers=auth("charged"))
    assert again.status_code == 429 and "this check is 112" in again.json()["detail"]
    # More than a whole minute's words could never pass: 413, not a 429 to retry forever.
    huge = check([words(401)], key="offsets")
    assert huge.status_code == 413 and "this check is 401 words" in huge.json()["detail"]
    # A protect key keeps its rate in texts: long texts, five a minute.
    for _ in range(TEXTS_PER_MINUTE):
        assert check([words(400)], key="protect2").status_code == 200
    texts = check([words(400)], key="protect2")
    assert texts.status_code == 429 and "5 texts a minute" in texts.json()["detail"]


def test_ui_pages_of_a_read_session_show_no_offsets(srv):
    text, _ = probe()
    pasted = json.dumps({"id": "probe", "text": text})
    with httpx.Client(base_url=srv.url, timeout=60) as browser:
        login = browser.post("/ui/login", data={"key": KEYS["ui"]},
                             headers={"origin": srv.url})  # fmt: skip
        assert login.status_code == 303
        cut = browser.post("/ui/decontamination", data={"docs": pasted, "mode": "cut"})
        assert cut.status_code == 403 and "protect scope" in cut.text
        page = browser.post("/ui/decontamination", data={"docs": pasted, "mode": "annotate"})
        assert page.status_code == 200, page.text
        result = page.text.split('id="summary"', 1)[1]
        assert "1 of 1 document(s) contaminated; 1 kept, 0 dropped" in result
        assert not re.search(r"characters \d+ to \d+", result)
        assert " ".join(SEED[1:] + SECRET[:1]) not in result  # the protected 13-gram
        download = browser.post(
            "/ui/decontamination/report",
            data={"docs": pasted, "mode": "annotate", "format": "jsonl"},
        )
        assert download.status_code == 200, download.text
        records = [json.loads(line) for line in download.text.splitlines()]
        assert offsets_in(records) == [] and " ".join(SEED) not in download.text
        assert [r["first_ngram"] for r in records if r["record"] == "item"] == [None]
        checked = browser.post("/ui/contamination", data={"text": text})
        assert checked.status_code == 200 and "Contaminated: 1 protected item" in checked.text
        assert "<mark>" not in checked.text


def test_the_order_of_a_read_keys_hits_says_nothing_of_where_they_matched(srv):
    """Hits are listed as found in the text to a protect key; by item to others (in text order,
    two items' next words after a shared seed would be told apart by where each matched)."""

    def hits(key: str, first: str, then: str) -> list[str]:
        text = " ".join([*BOILER, first, "0", *BOILER, then, "0"])
        answer = httpx.post(f"{srv.url}/v1/contamination", json={"texts": [text], "sets": ["pair"]},
                            headers=auth(key))  # fmt: skip
        assert answer.status_code == 200, answer.text
        return [h["item"] for h in answer.json()["results"][0]["hits"]]

    assert hits("protect", "yellow", "zebra") == ["b", "a"]
    assert hits("protect", "zebra", "yellow") == ["a", "b"]
    assert hits("offsets", "yellow", "zebra") == hits("offsets", "zebra", "yellow") == ["a", "b"]
