"""``neardup push`` and ``neardup query`` against a real server."""

import json

import httpx

from neardup.core.engine import write_docs
from neardup.core.minhash import Doc, words
from neardup.core.minhash import clusters as core_clusters
from tests.app.cli.test_cli import neardup
from tests.e2e.test_documents import api_clusters
from tests.fixtures import planted_corpus


def test_push_then_query(server, tmp_path):
    corpus = planted_corpus(9, n_clusters=4, n_singletons=5)
    docs = [Doc(f"push-{i}", t, {"k": i}) for i, t in corpus.docs.items()]
    write_docs(tmp_path / "corpus.jsonl.gz", docs)
    first = neardup(
        "push", "corpus.jsonl.gz", "--url", server.url, "--batch-size", "7", cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    assert f"created {len(docs)}, unchanged 0" in first.stderr
    again = neardup("push", "corpus.jsonl.gz", "--url", server.url, "--quiet", cwd=tmp_path)
    assert again.returncode == 0 and again.stderr == ""
    pushed = {d.id: d.text for d in docs}
    registered = [g for g in api_clusters(server) if any(m.startswith("push-") for m in g)]
    assert registered == core_clusters(pushed)
    result = neardup("query", "corpus.jsonl.gz", "--url", server.url, "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["id"] for line in lines] == [d.id for d in docs]
    wordless = {d.id for d in docs if not words(d.text)}
    assert wordless
    for line in lines:  # every document with words finds itself, with estimate 1.0
        if line["id"] in wordless:
            assert line["matches"] == []
            continue
        assert {"id": line["id"], "estimate": 1.0} in [
            {"id": m["id"], "estimate": m["estimate"]} for m in line["matches"]
        ]


def test_push_of_a_parquet_meta_with_nan_sends_null_counted_with_one_warning(server, tmp_path):
    """Parquet keeps NaN and infinities, JSON has no number for them: the service refused the
    whole batch (400). push sends them as null, as dedup writes them to JSON Lines."""
    docs = [Doc("nan-0", "first text", {"score": float("nan"), "ok": 1.5}),
            Doc("nan-1", "second text", {"score": float("inf"), "ok": float("-inf")}),
            Doc("nan-2", "third text", {"score": 2.0, "ok": 0.5})]  # fmt: skip
    write_docs(tmp_path / "scores.parquet", docs)
    result = neardup("push", "scores.parquet", "--url", server.url, "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        "neardup push: warning: 3 NaN or infinite values sent as null (JSON has no number for "
        "them)\n"
    )
    metas = [httpx.get(f"{server.url}/v1/documents/{d.id}").json()["meta"] for d in docs]
    assert metas == [{"score": None, "ok": 1.5}, {"score": None, "ok": None},
                     {"score": 2.0, "ok": 0.5}]  # fmt: skip


def test_push_to_nowhere_is_a_clear_error(tmp_path):
    write_docs(tmp_path / "c.jsonl", [Doc("a", "text")])
    result = neardup("push", "c.jsonl", "--url", "http://127.0.0.1:9", "--retries", "1",
                     "--quiet", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert "no response" in result.stderr


def test_push_and_query_take_directories_and_globs_as_dedup_does(server, tmp_path):
    shards = tmp_path / "dump"
    (shards / "2026-11").mkdir(parents=True)
    write_docs(shards / "2026-11" / "shard-0.jsonl", [Doc("dir-a", "alpha beta gamma delta")])
    write_docs(shards / "2026-11" / "shard-1.jsonl.gz", [Doc("dir-b", "one two three four")])
    pushed = neardup("push", "dump", "--url", server.url, cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    assert "created 2, unchanged 0" in pushed.stderr
    result = neardup("query", "dump/*/shard-*.jsonl*", "--url", server.url, "--quiet",
                     cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(x["id"], x["match_count"]) for x in lines] == [("dir-a", 1), ("dir-b", 1)]
    assert [x["matches"][0]["id"] for x in lines] == ["dir-a", "dir-b"]


def test_push_of_a_changed_text_stops_skips_or_replaces_as_asked(server, tmp_path):
    old = "the first version of a page that was crawled last month and kept its url"
    new = "a rewritten page under the same url with nothing of the first version left"
    write_docs(tmp_path / "m1.jsonl", [Doc("url-1", old), Doc("url-2", "another page text")])
    assert neardup("push", "m1.jsonl", "--url", server.url, cwd=tmp_path).returncode == 0
    write_docs(tmp_path / "m2.jsonl", [Doc("url-1", new), Doc("url-3", "a third page here")])

    stopped = neardup("push", "m2.jsonl", "--url", server.url, cwd=tmp_path)
    assert stopped.returncode == 2
    assert "409" in stopped.stderr and "url-1" in stopped.stderr
    assert "--changed skip" in stopped.stderr
    assert httpx.get(f"{server.url}/v1/documents/url-3").status_code == 404  # nothing stored

    skipped = neardup("push", "m2.jsonl", "--url", server.url, "--changed", "skip", cwd=tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    assert "created 1, unchanged 0, skipped (registered with another text) 1" in skipped.stderr
    assert httpx.get(f"{server.url}/v1/documents/url-3").status_code == 200
    found = httpx.post(f"{server.url}/v1/query", json={"texts": [old, new]}).json()["results"]
    assert [[m["id"] for m in r["matches"]] for r in found] == [["url-1"], []]

    replaced = neardup("push", "m2.jsonl", "--url", server.url, "--changed", "replace",
                       cwd=tmp_path)  # fmt: skip
    assert replaced.returncode == 0, replaced.stderr
    assert "created 0, unchanged 1, replaced 1" in replaced.stderr
    found = httpx.post(f"{server.url}/v1/query", json={"texts": [old, new]}).json()["results"]
    assert [[m["id"] for m in r["matches"]] for r in found] == [[], ["url-1"]]
