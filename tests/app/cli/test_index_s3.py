"""``neardup dedup --index s3://...`` and ``neardup index info|query|delete|compact`` on a real
S3 protocol (moto's server through s3fs, configured by the AWS environment variables as a user
configures it: tests/s3.py), each compared with the same commands on a local directory; and a
run losing its commit to another on S3 (exit 3, nothing added; its rerun dedups against the
winner)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import fsspec
import pytest

from neardup.app.cli import main
from neardup.core.engine import (
    Doc,
    DocIndex,
    MinhashParams,
    batch_signatures,
    run_info,
    text_digests,
    write_docs,
    write_part,
)
from tests.indexes import env, index_table, latest_manifest, neardup
from tests.s3 import S3Server

FLAGS = ["--num-perm", "32", "--bands", "8", "--threshold", "0.5", "--k", "2", "--workers", "1",
         "--quiet"]  # fmt: skip
PARAMS = MinhashParams(num_perm=32, bands=8, threshold=0.5, k=2)
#: 12 texts of 30 words, no two alike (word numbers drawn from a seeded generator).
BASE = [
    " ".join(f"w{random.Random(i).randrange(10_000) + j}" for j in range(30)) for i in range(12)
]


def _near(text: str) -> str:
    """``text`` with its last word changed: one shingle of about 30 differs."""
    return text.rsplit(" ", 1)[0] + " changed"


def _corpora(tmp: Path) -> None:
    """dump0: 8 texts and an exact copy; dump1: 4 new texts, a copy and a near copy of dump0's;
    q.jsonl: a copy, a near copy and a new text; del.txt: two indexed ids and one never
    indexed."""
    write_docs(
        tmp / "dump0.jsonl", [*(Doc(f"a{i}", BASE[i]) for i in range(8)), Doc("a8", BASE[0])]
    )
    write_docs(tmp / "dump1.jsonl", [
        *(Doc(f"b{i}", BASE[8 + i]) for i in range(4)),
        Doc("b4", BASE[2]), Doc("b5", _near(BASE[3])),
    ])  # fmt: skip
    write_docs(tmp / "q.jsonl", [
        Doc("q0", BASE[1]), Doc("q1", _near(BASE[9])), Doc("q2", "nothing like any indexed text"),
    ])  # fmt: skip
    (tmp / "del.txt").write_text("a5\nb1\nnever\n")


def _placed(answer: str, idx: str) -> list[dict[str, Any]]:
    """``index query``'s JSON lines with each part named by its place in ``idx``'s manifest
    (part names are random)."""
    place = {p.name: k for k, p in enumerate(DocIndex.open(idx).parts)}
    rows = [json.loads(line) for line in answer.splitlines()]
    for row in rows:
        for match in row["matches"]:
            match["part"] = place[match["part"]]
    return rows


def _info(text: str) -> dict[str, Any]:
    """``index info --json`` less what differs between two runs (times, random names)."""
    info = json.loads(text)
    for part in info["parts"]:
        part.pop("name")
        part["run"].pop("created")
        part["run"].pop("from_parts", None)
        part["run"]["inputs"] = [re.sub(r".*/", "", i) for i in part["run"]["inputs"]]
    info.pop("index")
    return info


def _unnamed(data: bytes) -> bytes:
    """``data`` with the random part of each part name left out."""
    return re.sub(rb"(p[0-9]{8})-[0-9a-f]{12}", rb"\1-X", data)


def _dedup(k: int, idx: str, tmp: Path, output: str) -> list[str]:
    """The arguments of ``neardup dedup`` of ``tmp/dumpK.jsonl`` into ``idx``."""
    removed = str(tmp / f"removed{k}.jsonl")
    dump = str(tmp / f"dump{k}.jsonl")
    return ["dedup", dump, "--output", output, "--removed", removed, "--index", idx, *FLAGS]


def _commands(idx: str, tmp: Path, capsys, out: str) -> list[Any]:
    """The second dedup run (appending to ``idx``, its output written to ``out``), then
    ``index info``, ``query``, ``delete``, ``compact``, ``query`` and ``info`` again: what each
    printed (parts named by their place)."""
    said: list[Any] = []
    capsys.readouterr()
    assert main(_dedup(1, idx, tmp, out)) == 0, capsys.readouterr().err
    with fsspec.open(f"{out}.manifest.json", "rb") as handle:  # on S3 too
        record = json.load(handle)["index"]
    assert record.pop("url") == idx and record.pop("part").startswith("p00000002-")
    said.append(record)
    query = ["query", idx, str(tmp / "q.jsonl"), "--quiet"]
    for args in (["info", idx, "--json"], query, ["delete", idx, "--ids", str(tmp / "del.txt")],
                 ["compact", idx], query, ["info", idx, "--json"]):  # fmt: skip
        assert main(["index", *args]) == 0, capsys.readouterr().err
        done = capsys.readouterr()
        if args[0] == "query":
            said.append(_placed(done.out, idx))
        elif args[0] == "info":
            said.append(_info(done.out))
        else:
            said.append(done.err.replace(idx, "IDX"))
    return said


def test_dedup_and_the_index_commands_on_s3_answer_as_on_a_local_directory(
    s3_server: S3Server, s3, tmp_path: Path, capsys
) -> None:
    """The same corpora and commands on ``s3://BUCKET/idx`` (the first run a fresh process
    configured by the environment alone; the second run's output written to S3 too: no rename
    there) and on a local directory: the same outputs, the same answers and reports, the same
    rows in the index; after the compaction, the objects under the index are the files its
    version lists, nothing left of the parts compacted away."""
    on_s3, here = tmp_path / "s3", tmp_path / "local"
    idx, local = f"{s3}/idx", str(here / "idx")
    for side in (on_s3, here):
        side.mkdir()
        _corpora(side)
    first = neardup(*_dedup(0, idx, on_s3, str(on_s3 / "out0.jsonl")), cwd=on_s3)
    assert first.returncode == 0, first.stderr
    assert main(_dedup(0, local, here, str(here / "out0.jsonl"))) == 0
    got = _commands(idx, on_s3, capsys, f"{s3}/out1.jsonl")
    want = _commands(local, here, capsys, str(here / "out1.jsonl"))
    assert got == want
    fs = s3_server.filesystem()
    bucket = s3.removeprefix("s3://")
    assert fs.cat_file(f"{bucket}/out1.jsonl") == (here / "out1.jsonl").read_bytes()
    for name in ("out0.jsonl", "removed0.jsonl", "removed1.jsonl"):
        # byte for byte but the part names (``index_part``), which are random
        assert _unnamed((on_s3 / name).read_bytes()) == _unnamed((here / name).read_bytes())
    copy = s3_server.download(idx, tmp_path / "copy")
    assert index_table(copy).equals(index_table(here / "idx"))
    _, manifest = latest_manifest(copy)
    [part] = manifest["parts"]
    listed = {f["path"] for f in [*part["files"], part["keys"], part["ids"]]}
    found = {str(p.relative_to(copy)) for p in (copy / "parts").rglob("*") if p.is_file()}
    assert found == listed | {f"parts/{part['name']}/_committed"}


def test_a_dedup_run_losing_its_commit_on_s3_is_exit_3_and_its_rerun_dedups_against_the_winner(
    s3_server: S3Server, s3, tmp_path: Path, capsys, monkeypatch
) -> None:
    """Another run (another client) commits the version this run read first: this run exits 3
    saying so, the index holds the winner's part only, and the rerun drops the copy of the
    winner's document and commits the next version."""
    import neardup.app.cli.dedup as dedup

    idx = f"{s3}/idx"
    write_docs(tmp_path / "d0.jsonl", [Doc("a0", BASE[0])])
    write_docs(tmp_path / "d1.jsonl", [Doc("n0", BASE[1]), Doc("n1", BASE[2])])
    run = ["--index", idx, *FLAGS]
    assert (
        main(["dedup", str(tmp_path / "d0.jsonl"), "--output", str(tmp_path / "o0.jsonl"), *run])
        == 0
    )
    real, winner = dedup.commit_index, []

    def racing(index, params, add=(), drop=(), **kw):
        other = DocIndex(idx, s3_server.filesystem(), index.root, index.version, index.manifest)
        sigs = batch_signatures([BASE[2]], params)
        made = run_info("local", "t", [])
        part = write_part(other, params, ["w0"], text_digests([BASE[2]]), sigs, made)
        winner.append(part.name)
        real(other, params, [part])
        return real(index, params, add, drop, **kw)

    monkeypatch.setattr(dedup, "commit_index", racing)
    capsys.readouterr()
    out = ["--output", str(tmp_path / "o1.jsonl")]
    assert main(["dedup", str(tmp_path / "d1.jsonl"), *out, *run]) == 3
    err = capsys.readouterr().err
    assert f"another run added version 2 (part {winner[0]}) while this run ran" in err
    assert "nothing was added to the index" in err
    index = DocIndex.open(idx)
    assert index.version == 2 and [p.name for p in index.parts][1:] == winner
    monkeypatch.setattr(dedup, "commit_index", real)
    assert main(["dedup", str(tmp_path / "d1.jsonl"), *out, *run]) == 0
    assert [
        json.loads(line)["id"] for line in (tmp_path / "o1.jsonl").read_text().splitlines()
    ] == ["n0"]
    after = DocIndex.open(idx)
    assert after.version == 3 and sorted(after.id_parts(["a0", "w0", "n0", "n1"])) == [
        "a0",
        "n0",
        "w0",
    ]


#: How an object store's client error ends (app/cli/main.py).
HINT = """(the object store's credentials and endpoint: docs/index.md, "Object storage")"""


def _without_aws(**extra: str) -> dict[str, str]:
    """A ``neardup`` subprocess's environment with no AWS setting but ``extra`` (no credentials
    file either, nor the instance metadata service, which a machine off EC2 waits for)."""
    base = {k: v for k, v in env().items() if not k.startswith("AWS_")}
    return {**base, "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1", **extra}


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"},
         'Could not connect to the endpoint URL: "http://127.0.0.1:9/'),
        ({}, "Unable to locate credentials"),
    ],
    ids=["unreachable-endpoint", "no-credentials"],
)  # fmt: skip
def test_an_object_store_the_client_cannot_use_is_one_line_and_exit_2(
    tmp_path: Path, setting: dict[str, str], message: str
) -> None:
    """botocore's own errors (not OSError): a wrong endpoint (nothing listens on port 9: one
    attempt, ``AWS_MAX_ATTEMPTS``), or no credentials at all; never a traceback."""
    write_docs(tmp_path / "d.jsonl", [Doc("a", BASE[0])])
    none = str(tmp_path / "none")
    files = {"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none}
    place = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    idx = "s3://neardup-x/idx"
    commands = {
        "index info": ["index", "info", idx],
        "dedup": ["dedup", "d.jsonl", "--output", "o.jsonl", "--index", idx],
    }
    for name, args in commands.items():
        done = subprocess.run(
            [sys.executable, "-m", "neardup", *args], cwd=tmp_path, capture_output=True,
            text=True, timeout=300, env=_without_aws(**files, **place, **setting),
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()[-1:]
        assert line.startswith(f"neardup {name}: error: ") and message in line, line
        assert line.endswith(HINT) and "Traceback" not in done.stderr
        assert not (tmp_path / "o.jsonl").exists()


def test_a_new_index_in_a_bucket_that_does_not_exist_is_one_line_and_exit_2(
    s3_server: S3Server, s3: str, tmp_path: Path
) -> None:
    """A mistyped bucket: s3fs would create it at the run's first write (a new bucket holding
    the index); the run refuses before writing anything, the bucket is not made, and the same
    run on the bucket that exists creates the index."""
    write_docs(tmp_path / "d.jsonl", [Doc("a", BASE[0]), Doc("b", BASE[1])])
    typo = f"{s3}-typo"
    done = neardup("dedup", "d.jsonl", "--output", "o.jsonl", "--index", f"{typo}/idx", *FLAGS,
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    bucket = typo.removeprefix("s3://")
    assert line == (
        f"neardup dedup: error: {typo}/idx: the bucket '{bucket}' does not exist (neardup "
        "never creates a bucket: check the name, or create the bucket first)"
    )
    assert not (tmp_path / "o.jsonl").exists()
    assert not s3_server.filesystem().exists(bucket)
    done = neardup("dedup", "d.jsonl", "--output", "o.jsonl", "--index", f"{s3}/idx", *FLAGS,
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert DocIndex.open(f"{s3}/idx").rows == 2
