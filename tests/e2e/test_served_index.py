"""``neardup dedup CORPUS --output OUT --index IDX`` then ``neardup serve --index IDX``, real
processes (issue 30, part 7's first step): a query finds an indexed document by its real id,
``if_new`` refuses a near copy of it, a registered near copy joins its cluster, the answers
survive a SIGKILL and a restart, the /ui pages answer for indexed documents, a batch append is
served within INDEX_REFRESH, and an index of other parameters stops the start (exit 2, one
line)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from tests.e2e.conftest import start_server, stop_server
from tests.fixtures import planted_corpus
from tests.indexes import neardup


def _post(url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=60)


def _answers(url: str, texts: list[str]) -> tuple:
    """Queries of ``texts``, the clusters of two or more, and the stats' index numbers."""
    found = _post(url, "/v1/query", {"texts": texts}).json()["results"]
    clusters = httpx.get(f"{url}/v1/clusters?min_size=2&limit=100", timeout=60).json()
    stats = httpx.get(f"{url}/v1/stats", timeout=60).json()
    keys = ("documents", "indexed_documents", "index_version", "indexed_linked")
    return found, clusters, {k: stats[k] for k in keys}


def test_a_deduplicated_corpus_is_served_by_its_index(tmp_path: Path) -> None:
    corpus = planted_corpus(5)
    lines = [json.dumps({"id": i, "text": t}) for i, t in sorted(corpus.docs.items())]
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    done = neardup("dedup", "corpus.jsonl", "--output", "out.jsonl", "--index", "idx",
                   "--workers", "1", "--quiet", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    kept = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    target = max(kept, key=lambda d: len(d["text"]))  # a long text: its copies are near
    near = target["text"] + " and one more word"
    idx = str(tmp_path / "idx")

    server = start_server(tmp_path, "--workers", "1", "--index", idx)
    try:
        config = httpx.get(f"{server.url}/v1/config", timeout=60).json()
        assert config["index_served"] is True and idx not in json.dumps(config)
        [found] = _post(server.url, "/v1/query", {"texts": [near]}).json()["results"]
        assert found["match_count"] == 1
        assert found["matches"][0]["id"] == target["id"]
        assert found["matches"][0]["cluster"] == target["id"]
        dup = _post(server.url, "/v1/documents",
                    {"documents": [{"id": "zz-new", "text": near}], "if_new": True})  # fmt: skip
        [result] = dup.json()["results"]
        assert (result["status"], result["cluster"]) == ("duplicate", target["id"])
        got = httpx.get(f"{server.url}/v1/documents/{target['id']}", timeout=60).json()
        assert got == {"id": target["id"], "cluster": target["id"], "meta": None, "indexed": True}
        made = _post(server.url, "/v1/documents", {"documents": [{"id": "zz-copy", "text": near}]})
        [result] = made.json()["results"]
        assert (result["status"], result["cluster"]) == ("created", target["id"])
        gone = httpx.delete(f"{server.url}/v1/documents/{target['id']}", timeout=60)
        assert gone.status_code == 409 and gone.json()["conflicts"] == [target["id"]]
        before = _answers(server.url, [near, kept[0]["text"]])
        server.kill_group()  # SIGKILL: the registration was acknowledged, so it is durable
    finally:
        stop_server(server)
    assert before[1]["clusters"] == [
        {"root": target["id"], "size": 2, "members": [target["id"], "zz-copy"],
         "members_next": None},
    ]  # fmt: skip
    assert before[2] == {"documents": 1, "indexed_documents": len(kept), "index_version": 1,
                         "indexed_linked": 1}  # fmt: skip

    server = start_server(tmp_path, "--workers", "1", "--index-refresh", "0.2",
                          env={"NEARDUP_INDEX": idx})  # fmt: skip
    try:
        assert _answers(server.url, [near, kept[0]["text"]]) == before
        # The pages answer for an indexed document nothing here matches (alone), as GET does.
        alone = next(d["id"] for d in kept if d["id"] != target["id"])
        page = httpx.get(f"{server.url}/ui/documents/{alone}", timeout=60)
        assert page.status_code == 200 and 'id="indexed"' in page.text
        assert "Alone: no other document is in its cluster." in page.text
        for path in (f"/ui/find?id={alone}", f"/ui/clusters/{alone}"):
            moved = httpx.get(f"{server.url}{path}", timeout=60)
            assert moved.status_code == 303, path
            assert moved.headers["location"] == f"/ui/documents/{alone}"
        linked = httpx.get(f"{server.url}/ui/documents/{target['id']}", timeout=60)
        assert linked.status_code == 200 and 'id="indexed"' in linked.text
        assert httpx.get(f"{server.url}/ui/documents/no-such-id", timeout=60).status_code == 404
        # A batch append while it serves: its new part is served within INDEX_REFRESH.
        fresh = " ".join(f"fresh{i} word{i * 7}" for i in range(150))
        (tmp_path / "new.jsonl").write_text(json.dumps({"id": "new-1", "text": fresh}) + "\n")
        done = neardup("dedup", "new.jsonl", "--output", "new.out.jsonl", "--index", "idx",
                       "--workers", "1", "--quiet", cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        for _ in range(600):
            stats = httpx.get(f"{server.url}/v1/stats", timeout=60).json()
            if stats["index_version"] == 2:
                break
            time.sleep(0.1)
        [found] = _post(server.url, "/v1/query", {"texts": [fresh]}).json()["results"]
        assert [m["id"] for m in found["matches"]] == ["new-1"]
        assert stats["indexed_documents"] == len(kept) + 1
    finally:
        stop_server(server)

    refused = neardup("serve", "--port", "0", "--data-dir", tmp_path / "d2", "--index", idx,
                      "--threshold", "0.7", cwd=tmp_path, timeout=120)  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "parameter threshold is locked to the index: the index has 0.8, this run 0.7" in (
        refused.stderr
    )
    missing = neardup("serve", "--port", "0", "--data-dir", tmp_path / "d3", "--index",
                      tmp_path / "none", cwd=tmp_path, timeout=120)  # fmt: skip
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no index here (no committed version under" in missing.stderr
