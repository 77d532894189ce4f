"""``neardup dedup`` and ``neardup contamination`` through a real subprocess."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neardup.app.cli.pause import PAUSE_ENV
from neardup.core.engine import read_docs, write_docs
from neardup.core.minhash import Doc
from tests.fixtures import SHELL_SENTENCE, planted_corpus, write_protected
from tests.procs import pool_workers, stopped_at

ROOT = Path(__file__).resolve().parents[3]


def neardup(*args, cwd, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "neardup", *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def protected_flags(paths):
    """``--protected P`` for each of ``paths`` (the flag takes one file)."""
    return [arg for path in paths for arg in ("--protected", path)]


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    corpus = planted_corpus(0)
    docs = [Doc(i, t, {"n": n}) for n, (i, t) in enumerate(corpus.docs.items())]
    docs.append(Doc("zz-contaminated", "prefix " + SHELL_SENTENCE, {"n": -1}))
    write_docs(tmp / "part1.jsonl", docs[:25])
    write_docs(tmp / "part2.jsonl.gz", docs[25:50])
    write_docs(tmp / "part3.parquet", docs[50:])
    jsonl, plain = write_protected(tmp)
    return tmp, corpus, docs, [jsonl, plain]


def expected_survivors(corpus, docs):
    root = {m: min(g) for g in corpus.expected_clusters() for m in g}
    return [d for d in docs if d.id == root.get(d.id, d.id) and d.id != "zz-contaminated"]


def test_dedup_writes_exactly_the_survivors_with_tags_and_a_manifest(corpus_files):
    tmp, corpus, docs, protected = corpus_files
    inputs = ["part1.jsonl", "part2.jsonl.gz", "part3.parquet"]
    result = neardup("dedup", *inputs, "--output", "out.jsonl",
                     *protected_flags(protected), "--workers", "1", cwd=tmp)  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = list(read_docs(tmp / "out.jsonl"))
    survivors = expected_survivors(corpus, docs)
    assert [d.id for d in out] == [d.id for d in survivors]  # input order kept
    for d in out:
        assert d.meta == {
            **next(s.meta for s in survivors if s.id == d.id),
            "minhash_cluster": d.id,
        }
    manifest = json.loads((tmp / "out.jsonl.manifest.json").read_text())
    copies = sum(len(g) - 1 for g in corpus.copies)
    assert manifest["counts"] == {
        "read": len(docs), "exact_dropped": copies,
        "near_dropped": sum(len(g) - 1 for g in corpus.clusters),
        "decontaminated": 1, "written": len(out),
    }  # fmt: skip
    assert (
        manifest["output"]["sha256"] == hashlib.sha256((tmp / "out.jsonl").read_bytes()).hexdigest()
    )
    assert [i["path"] for i in manifest["inputs"]] == inputs
    assert manifest["clusters"] == len(corpus.clusters) + len(corpus.copies)
    assert set(manifest["seconds"]) >= {"signatures", "cluster", "write"}


def test_dedup_output_is_identical_for_1_and_4_workers_and_any_format(corpus_files):
    tmp = corpus_files[0]
    inputs = ["part1.jsonl", "part2.jsonl.gz", "part3.parquet"]
    digests = []
    for workers, out in [("1", "w1.jsonl.zst"), ("4", "w4.jsonl.zst")]:
        result = neardup(
            "dedup", *inputs, "--output", out, "--workers", workers, "--quiet", cwd=tmp
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        digests.append(hashlib.sha256((tmp / out).read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    result = neardup("dedup", *inputs, "--output", "w.parquet", "--quiet", cwd=tmp)
    assert result.returncode == 0
    assert list(read_docs(tmp / "w.parquet")) == list(read_docs(tmp / "w1.jsonl.zst"))


def test_reversed_input_keeps_the_same_documents(corpus_files):
    tmp, _, docs, _ = corpus_files
    write_docs(tmp / "reversed.jsonl", list(reversed(docs)))
    write_docs(tmp / "forward.jsonl", docs)
    for name in ("forward", "reversed"):
        assert neardup("dedup", f"{name}.jsonl", "--output", f"{name}-out.jsonl", "--quiet",
                       cwd=tmp).returncode == 0  # fmt: skip
    forward = {d.id for d in read_docs(tmp / "forward-out.jsonl")}
    backward = {d.id for d in read_docs(tmp / "reversed-out.jsonl")}
    assert forward == backward


def test_keep_duplicates_tags_without_dropping(corpus_files):
    tmp, _, docs, _ = corpus_files
    result = neardup("dedup", "part1.jsonl", "--output", "kept.jsonl", "--keep-duplicates",
                     "--quiet", cwd=tmp)  # fmt: skip
    assert result.returncode == 0
    out = list(read_docs(tmp / "kept.jsonl"))
    assert [d.id for d in out] == [d.id for d in docs[:25]]
    assert all("minhash_cluster" in d.meta for d in out)


def test_a_malformed_line_names_file_and_line_and_leaves_no_output(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": \n')
    result = neardup("dedup", "bad.jsonl", "--output", "out.jsonl", cwd=tmp_path)
    assert result.returncode == 2
    assert "bad.jsonl:2" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_repeated_ids_across_files_are_an_error(tmp_path):
    write_docs(tmp_path / "a.jsonl", [Doc("x", "one two")])
    write_docs(tmp_path / "b.jsonl", [Doc("x", "three four")])
    result = neardup("dedup", "a.jsonl", "b.jsonl", "--output", "o.jsonl", cwd=tmp_path)
    assert result.returncode == 2 and "'x'" in result.stderr


def _big_corpus(path: Path, n: int) -> None:
    write_docs(
        path, (Doc(f"d{i}", " ".join(f"w{i % 997}x{j}" for j in range(250))) for i in range(n))
    )


def _wait_for_workers(pid: int) -> list[int]:
    deadline = time.monotonic() + 60
    while not (workers := pool_workers(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert workers, "no spawn workers appeared"
    time.sleep(0.3)
    return workers


def test_ctrl_c_leaves_no_partial_output(tmp_path):
    """Ctrl-C in pass 1 (the run stopped there by NEARDUP_TEST_PAUSE, so a fast machine or a
    slow one cannot let it finish first): exit 130, nothing but the input left."""
    _big_corpus(tmp_path / "big.jsonl", 30_000)
    env = {**os.environ, "PYTHONPATH": str(ROOT), PAUSE_ENV: "read"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "neardup", "dedup", "big.jsonl", "--output", "out.jsonl",
         "--workers", "2"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        stopped_at(proc, "read")  # pass 1 is running: its first signatures are in
        assert pool_workers(proc.pid)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGCONT)
    except BaseException:
        proc.kill()
        raise
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jsonl"]


def test_a_dead_worker_is_an_error_not_a_hang(tmp_path):
    _big_corpus(tmp_path / "big.jsonl", 30_000)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "neardup", "dedup", "big.jsonl", "--output", "out.jsonl",
         "--workers", "2", "--quiet"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    workers = _wait_for_workers(proc.pid)
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert "worker" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jsonl"]


def test_contamination_report(corpus_files):
    tmp, _, docs, protected = corpus_files
    result = neardup("contamination", "part1.jsonl", "part2.jsonl.gz", "part3.parquet",
                     *protected_flags(protected), "--quiet", cwd=tmp)  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["contaminated"] == 1
    assert report["documents"] == len(docs)
    assert report["contaminated_ids"] == ["zz-contaminated"]
    [item] = report["items"]
    assert (item["documents"], item["document_ids"]) == (1, ["zz-contaminated"])
    assert item["first_ngram"] == "tom found a shiny red shell by the river and carried it home"
    assert item["item"].startswith("math-001")
