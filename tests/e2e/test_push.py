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
