"""``neardup index info|compact|query`` through a real subprocess, on indexes built by
``neardup dedup --index``; and docs/index.md's pyarrow snippet, run against one."""

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from neardup.core.engine import (
    Doc,
    DocIndex,
    MinhashParams,
    batch_signatures,
    commit_index,
    run_info,
    text_digests,
    write_docs,
    write_part,
)
from tests.indexes import ROOT, flat_layout, index_table, latest_manifest, neardup, version_file

#: Four texts of 60 words, no two alike (word numbers drawn from a seeded generator).
BASE = [
    " ".join(f"w{random.Random(i).randrange(100_000) + j}" for j in range(60)) for i in range(4)
]


def _near(text: str) -> str:
    """``text`` with its last word changed: one 5-word shingle of about 60 differs."""
    return text.rsplit(" ", 1)[0] + " changed"


@pytest.fixture(scope="module")
def idx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three parts: base (4 documents), then two dumps of one new document each."""
    tmp = tmp_path_factory.mktemp("indexcmd")
    dumps = [
        [Doc(f"b{i}", t) for i, t in enumerate(BASE)],
        [Doc("c0", "one more document that is like nothing else in the index at all here")],
        [Doc("d0", "and a last one that talks about the weather in the northern hills now")],
    ]
    for k, docs in enumerate(dumps):
        write_docs(tmp / f"dump{k}.jsonl", docs)
        done = neardup("dedup", f"dump{k}.jsonl", "--output", f"out{k}.jsonl", "--index", "idx",
                       "--workers", "1", "--quiet", cwd=tmp)  # fmt: skip
        assert done.returncode == 0, done.stderr
    return tmp / "idx"


def test_info_prints_the_version_parameters_parts_and_leftovers(idx, tmp_path):
    done = neardup("index", "info", idx, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _, manifest = latest_manifest(idx)
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        f"index {idx}: version 3 (3 committed), 6 documents in 3 parts (3 files, "
    )
    assert lines[1] == "parameters: bands=16 k=5 num_perm=128 seed=0 threshold=0.8 tokenizer=words"
    for part, line in zip(manifest["parts"], lines[3:6], strict=True):
        assert line.split()[:3] == [part["name"], str(part["rows"]), "rows"]
        assert line.endswith(f": dump{manifest['parts'].index(part)}.jsonl")
    assert lines[-1] == "leftovers (killed runs, parts compacted away): none"


def test_info_names_parts_of_the_first_layout_and_compact_rewrites_them(idx, tmp_path):
    """A part without a key table (an index an older neardup wrote) is said to be scanned;
    ``index compact`` rewrites it with one, and queries answer the same before and after."""
    old = tmp_path / "old"
    shutil.copytree(idx, old)
    flat_layout(old)  # as an older neardup left it
    version, manifest = latest_manifest(old)
    path = old / "_index" / f"{version:08d}.json"
    for part in manifest["parts"]:
        (old / part.pop("keys")["path"]).unlink()
        (old / part.pop("ids")["path"]).unlink()
    manifest["format_version"] = 1
    path.write_text(json.dumps(manifest))
    lines = neardup("index", "info", old, cwd=tmp_path).stdout.splitlines()
    assert all("first layout (scanned; compact it)" in line for line in lines[3:6])
    write_docs(tmp_path / "q.jsonl", [Doc("q", _near(BASE[1]))])
    before = neardup("index", "query", old, "q.jsonl", cwd=tmp_path)
    assert before.returncode == 0 and '"match_count": 1' in before.stdout, before.stderr
    done = neardup("index", "compact", old, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    latest, after = latest_manifest(old)
    assert after["format_version"] == 4 and all("keys" in p and "ids" in p for p in after["parts"])
    assert after["sealed"] == latest  # the log migrated: the seal, and its copy opening the log
    assert (old / "_index" / "log" / "00000" / f"{latest:08d}.json").exists()
    lines = neardup("index", "info", old, cwd=tmp_path).stdout.splitlines()
    assert not any("first layout" in line for line in lines)
    again = neardup("index", "query", old, "q.jsonl", cwd=tmp_path)
    part = re.compile(r'"part": "p\d{8}-[0-9a-f]{12}"')
    assert part.sub("", again.stdout) == part.sub("", before.stdout)


def test_info_json_is_the_manifest_summed_and_lists_are_capped(idx, tmp_path):
    done = neardup("index", "info", idx, "--json", "--limit", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    version, manifest = latest_manifest(idx)
    assert (info["version"], info["rows"], info["parts_total"]) == (version, 6, 3)
    assert (info["versions_total"], info["versions"]) == (3, [2, 3])
    assert [p["name"] for p in info["parts"]] == [p["name"] for p in manifest["parts"][:2]]
    assert info["bytes"] == sum(
        f["bytes"] for p in manifest["parts"] for f in [*p["files"], p["keys"], p["ids"]]
    )
    assert info["params"] == manifest["params"]
    assert info["parts"][0]["run"] == manifest["parts"][0]["run"]
    assert info["leftovers_total"] == 0


def test_query_lists_each_texts_indexed_near_duplicates_with_exact_copies_flagged(idx, tmp_path):
    write_docs(tmp_path / "q.jsonl", [
        Doc("q-exact", BASE[0]), Doc("q-near", _near(BASE[1])),
        Doc("q-none", "nothing like any indexed text at all, just some words put together"),
    ])  # fmt: skip
    done = neardup("index", "query", idx, "q.jsonl", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["q-exact", "q-near", "q-none"]
    parts = {p["name"] for p in latest_manifest(idx)[1]["parts"]}
    [exact] = rows[0]["matches"]
    assert (exact["id"], exact["estimate"], exact["exact"]) == ("b0", 1.0, True)
    assert exact["part"] in parts
    [near] = rows[1]["matches"]
    assert near["id"] == "b1" and not near["exact"] and 0.8 <= near["estimate"] < 1.0
    assert rows[1]["match_count"] == 1
    assert rows[2] == {"id": "q-none", "match_count": 0, "matches": []}
    assert not list(idx.glob("parts/*/*.json"))  # a query adds nothing
    assert latest_manifest(idx)[0] == 3


def test_query_caps_the_matches_listed_and_counts_them_all(tmp_path):
    # an index neardup would not build (three documents of one text), written with the engine
    index = DocIndex.open(str(tmp_path / "idx"), missing_ok=True)
    params, texts = MinhashParams(), [BASE[3]] * 3
    part = write_part(index, params, ["x2", "x0", "x1"], text_digests(texts),
                      batch_signatures(texts, params), run_info("local", "t", []))  # fmt: skip
    commit_index(index, params, [part])
    write_docs(tmp_path / "q.jsonl", [Doc("q", BASE[3])])
    done = neardup("index", "query", "idx", "q.jsonl", "--limit", "1", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in done.stdout.splitlines()]
    assert row["match_count"] == 3
    assert row["matches"] == [{"id": "x0", "estimate": 1.0, "part": part.name, "exact": True}]


def test_compact_merges_the_parts_and_keeps_every_row(idx, tmp_path):
    shutil.copytree(idx, tmp_path / "idx")
    before = index_table(tmp_path / "idx")
    done = neardup("index", "compact", "idx", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == (
        "neardup index compact: version 4: 3 parts rewritten as 1 (3 parts before, 1 after; "
        "6 documents)"
    )
    version, manifest = latest_manifest(tmp_path / "idx")
    assert version == 4 and len(manifest["parts"]) == 1
    assert index_table(tmp_path / "idx").equals(before)
    assert [p.name for p in (tmp_path / "idx" / "parts").iterdir()] == [
        manifest["parts"][0]["name"]
    ]
    again = neardup("index", "compact", "idx", cwd=tmp_path)
    assert again.returncode == 0 and "nothing to compact (version 4, 1 parts)" in again.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["info", "nowhere"], "nowhere: no index here"),
        (["compact", "nowhere"], "nowhere: no index here"),
        (["query", "nowhere", "q.jsonl"], "nowhere: no index here"),
        (["info", "idx", "--limit", "-1"], "--limit -1: give 0 or more"),
        (["compact", "idx", "--part-rows", "0"], "--part-rows 0: give at least 1"),
        (["query", "idx", "missing.jsonl"], "missing.jsonl"),
        (["query", "idx", "q.jsonl", "--output", "q.jsonl"], "q.jsonl"),
        (["query", "idx", "q.jsonl", "--output", "idx/q.jsonl"], "idx"),
        (["query", "idx", "idx/_index/00000003.json"], "idx"),
    ],
)
def test_errors_are_one_line_and_exit_2(idx, tmp_path, args, message):
    shutil.copytree(idx, tmp_path / "idx")
    write_docs(tmp_path / "q.jsonl", [Doc("q", BASE[0])])
    done = neardup("index", *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"neardup index {args[0]}: error: ") and message in line
    assert (tmp_path / "q.jsonl").read_text().startswith('{"id": "q"')


def _doc_snippet(heading: str, nth: int = 0) -> str:
    """The ``nth`` python block after ``heading`` in docs/index.md."""
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)[nth]


def test_the_band_key_snippet_of_the_docs_finds_the_first_row_by_its_key(idx):
    scope = {"IDX": str(idx)}
    heading = "## Reading an index without neardup"
    exec(_doc_snippet(heading), scope)  # the pyarrow snippet (the DuckDB one, 1, needs duckdb)
    exec(_doc_snippet(heading, 2), scope)
    first = scope["table"]["id"][0].as_py()
    # The first row shares its own band 3 key: found through the key table, with its id.
    assert first in scope["ids"] and 0 in scope["rows"].tolist()
    assert len(scope["ids"]) == len(scope["rows"]) >= 1


def test_the_id_snippet_of_the_docs_finds_the_first_row_by_its_id(idx):
    from neardup.core.engine import index_id_hashes

    scope = {"IDX": str(idx)}
    heading = "## Reading an index without neardup"
    exec(_doc_snippet(heading), scope)
    exec(_doc_snippet(heading, 3), scope)  # it asserts the id is found at a row of its hash
    doc_id = scope["doc_id"]
    assert scope["id_hash"](doc_id) == index_id_hashes([doc_id])[0]
    assert len(scope["found"]) >= 1


def test_the_pyarrow_snippet_of_the_docs_reads_an_index_built_by_dedup(idx):
    scope = {"IDX": str(idx)}
    exec(_doc_snippet("## Reading an index without neardup"), scope)
    assert scope["table"].num_rows == 6
    assert sorted(scope["table"]["id"].to_pylist()) == ["b0", "b1", "b2", "b3", "c0", "d0"]
    assert scope["sigs"].shape == (6, 128)


def test_the_pyarrow_snippet_of_the_docs_leaves_deleted_documents_out(idx, tmp_path):
    import shutil

    from neardup.core.engine import delete_ids

    copy = tmp_path / "idx"
    shutil.copytree(idx, copy)
    assert delete_ids(str(copy), ["b1", "d0"]).deleted == ("b1", "d0")
    scope = {"IDX": str(copy)}
    exec(_doc_snippet("## Reading an index without neardup"), scope)
    assert scope["table"].num_rows == 4  # its own assert: the manifest's rows
    assert sorted(scope["table"]["id"].to_pylist()) == ["b0", "b2", "b3", "c0"]
    assert scope["sigs"].shape == (4, 128)


def test_every_index_flag_has_help_and_shows_its_default():
    from neardup.app.cli.main import build_parser

    def choices(parser, name):
        return next(a for a in parser._actions if a.choices and name in a.choices).choices

    index = choices(build_parser(), "index")["index"]
    for command, sub in choices(index, "info").items():
        formatter = sub.formatter_class(command)
        for action in sub._actions:
            if action.dest == "help":
                continue
            text = formatter._get_help_string(action) or ""
            assert action.help, f"index {command} {action.option_strings} has no help"
            if action.option_strings and action.default not in (None, False):
                assert "default" in text, f"index {command} {action.option_strings}: {text}"


def _lose_newest(idx: Path) -> str:
    version_file(idx, 3).unlink()
    return "_index/log/00000/00000003.json is missing but parts/p00000003-"


def _edit_newest(change) -> Any:
    def damage(idx: Path) -> str:
        path = version_file(idx, 3)
        body = json.loads(path.read_text())
        problem = change(body)
        path.write_text(json.dumps(body))
        return f"_index/log/00000/00000003.json is malformed ({problem}"

    return damage


def _no_params(body: dict) -> str:
    del body["params"]
    return "params is NoneType, not an object"


def _part_twice(body: dict) -> str:
    body["parts"].append(body["parts"][0])
    body["rows"] += body["parts"][0]["rows"]
    return f"part {body['parts'][0]['name']} is listed twice"


def _corrupt_pages(idx: Path) -> str:
    _, manifest = latest_manifest(idx)
    listed = manifest["parts"][0]["files"][0]["path"]
    data = bytearray((idx / listed).read_bytes())
    data[4:200] = b"\xff" * 196  # data pages; the footer and the size intact
    (idx / listed).write_bytes(bytes(data))
    return f"{listed} cannot be read ("


@pytest.mark.parametrize(
    ("damage", "command"),
    [
        (_lose_newest, ["dedup", "q.jsonl", "--output", "out.jsonl", "--index", "idx"]),
        (_lose_newest, ["index", "info", "idx"]),
        (_lose_newest, ["index", "compact", "idx"]),
        (_edit_newest(_no_params),
         ["dedup", "q.jsonl", "--output", "out.jsonl", "--index", "idx", "--k", "3"]),
        (_edit_newest(_no_params), ["index", "query", "idx", "q.jsonl"]),
        (_edit_newest(_part_twice), ["index", "compact", "idx"]),
        (_corrupt_pages, ["index", "compact", "idx"]),
    ],
    ids=["lost-dedup", "lost-info", "lost-compact", "params-dedup", "params-query",
         "twice-compact", "pages-compact"],
)  # fmt: skip
def test_a_damaged_index_is_one_line_exit_2_and_left_as_it_is(idx, tmp_path, damage, command):
    """Never a rollback, a new index, parameters taken from the run, duplicated rows or a
    traceback (issue 32)."""
    shutil.copytree(idx, tmp_path / "idx")
    problem = damage(tmp_path / "idx")
    write_docs(tmp_path / "q.jsonl", [Doc("q", "a text that is in no index part whatsoever here")])
    tree = sorted((str(p), p.read_bytes()) for p in (tmp_path / "idx").rglob("*") if p.is_file())
    done = neardup(*command, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    name = " ".join(command[:2]) if command[0] == "index" else "dedup"
    assert line.startswith(f"neardup {name}: error: idx: the index is damaged: {problem}"), line
    assert not (tmp_path / "out.jsonl").exists()
    assert (
        sorted((str(p), p.read_bytes()) for p in (tmp_path / "idx").rglob("*") if p.is_file())
        == tree
    )


def test_info_names_parts_without_an_id_table(idx, tmp_path):
    """A part with a key table but no id table (format_version 2) is named; its ids are still
    found, by the data files' statistics, and ``index compact`` gives it an id table."""
    old = tmp_path / "old"
    shutil.copytree(idx, old)
    flat_layout(old)  # as an older neardup left it
    version, manifest = latest_manifest(old)
    path = old / "_index" / f"{version:08d}.json"
    for part in manifest["parts"]:
        (old / part.pop("ids")["path"]).unlink()
    manifest["format_version"] = 2
    path.write_text(json.dumps(manifest))
    lines = neardup("index", "info", old, cwd=tmp_path).stdout.splitlines()
    assert all("no id table (ids checked by statistics; compact it)" in x for x in lines[3:6])
    assert DocIndex.open(str(old)).id_parts(["b0", "zz"]) == {"b0": manifest["parts"][0]["name"]}
    assert neardup("index", "compact", old, cwd=tmp_path).returncode == 0
    lines = neardup("index", "info", old, cwd=tmp_path).stdout.splitlines()
    assert not any("no id table" in line for line in lines)
