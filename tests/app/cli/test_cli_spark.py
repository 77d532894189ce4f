"""``neardup dedup --engine spark`` through a real subprocess (its own JVM)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from neardup.core.engine import Doc, write_docs
from tests.fixtures import SHELL_SENTENCE, planted_corpus, write_protected

ROOT = Path(__file__).resolve().parents[3]


def neardup(*args: object, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "neardup", *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_cli_spark_default_master_writes_what_the_local_engine_writes(tmp_path: Path) -> None:
    """One Spark run through the CLI (a JVM start is most of its cost) for all a user sees:

    - JSON Lines and gzip inputs, three protected sets and the multilingual tokenizer: the
      local engine's output, in order, and its counts;
    - no --spark-master (Spark's default, local[*]) and no PYSPARK_PYTHON: the executors run
      the interpreter neardup is installed in, not ``python3`` from the PATH (here one that
      cannot import neardup, as outside an activated virtual environment);
    - issue 33.10: a glob input prints no FileNotFoundException trace (Spark's FileStreamSink
      looks for a sink's metadata under it) and Spark's console bar is off;
    - issue 33.2: each of neardup's stages ends with its own done line counting tasks, and the
      summary after them has a line of its own (Spark's bar ended without a newline).
    """
    from tests.app.cli.test_multilingual import LOCALES, one_percent_changed
    from tests.catalogs import MESSAGES, document

    corpus = planted_corpus(5)
    docs = [Doc(i, t, {"n": n}) for n, (i, t) in enumerate(corpus.docs.items())]
    docs.append(Doc("zz-contaminated", "prefix " + SHELL_SENTENCE, {"n": -1}))
    # Texts the default tokenizer cannot tell apart or match: the multilingual one must reach
    # the Spark job, or its output is not the local one.
    multi = [Doc(f"{loc}-{p}", document(loc, 12 * p, 12)) for loc in LOCALES for p in range(2)]
    multi += [Doc(f"{loc}~near", one_percent_changed(document(loc, 0, 12))) for loc in LOCALES]
    item = MESSAGES["zh_CN"][30]
    multi.append(Doc("planted", document("zh_CN", 24, 6) + item + document("zh_CN", 30, 6)))
    # A short item (18 Han characters: no window of 13 English words' worth, weighted-3) is
    # protected whole: quoted whole it is caught, with one character changed it is not.
    short = "评估集中的这道题目不应该出现在训练数据里"
    changed = short.replace("题目", "问题")
    multi.append(Doc("planted-short", document("zh_CN", 6, 6) + short + document("zh_CN", 18, 6)))
    multi.append(Doc("changed-short", document("zh_CN", 12, 6) + changed + document("zh_CN", 0, 6)))
    work = tmp_path / "elsewhere"
    (work / "shards").mkdir(parents=True)
    write_docs(work / "shards" / "a.jsonl", docs[:30])
    write_docs(work / "shards" / "b.jsonl.gz", docs[30:] + multi)
    (work / "evals.jsonl").write_text(
        json.dumps({"id": "zh1", "question": item}, ensure_ascii=False)
        + "\n"
        + json.dumps({"id": "zh2", "question": short}, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    jsonl, plain = write_protected(work)
    protected = ["--protected", jsonl, "--protected", plain, "--protected", "evals.jsonl"]
    common = ["shards/*.jsonl*", *protected, "--tokenizer", "multilingual"]
    local = neardup("dedup", *common, "--output", "local.jsonl", "--quiet", cwd=work)
    assert local.returncode == 0, local.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYTHONPATH")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    run = subprocess.run(
        [sys.executable, "-m", "neardup", "dedup", *map(str, common), "--output", "spark.jsonl",
         "--engine", "spark"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Exception" not in run.stderr and "\tat " not in run.stderr, run.stderr[-3000:]
    assert "[Stage" not in run.stderr and "\r" not in run.stderr
    stderr = run.stderr.splitlines()
    done = [line for line in stderr if line.startswith("neardup: ") and ": done: " in line]
    stages = [line.split(":")[1].strip() for line in done]
    assert stages[:4] == ["signatures", "classes", "candidates", "components"], run.stderr
    assert all(line.endswith("tasks/s)") for line in done)
    assert stderr[-1].startswith("neardup dedup (spark, local"), run.stderr
    local_manifest = json.loads((work / "local.jsonl.manifest.json").read_text())
    assert f": read {local_manifest['counts']['read']}, " in stderr[-1], run.stderr
    parts = sorted((work / "spark.jsonl").glob("part-*"))
    assert parts and all(p.name.endswith(".jsonl") for p in parts)
    lines = []
    for part in parts:
        lines.extend(part.read_text(encoding="utf-8").splitlines())
    expected = (work / "local.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines == expected  # the parts in name order are the local output, in order
    kept = {json.loads(line)["id"] for line in lines}
    assert kept & {d.id for d in multi} == {
        *(f"{loc}-{p}" for loc in LOCALES for p in range(2)),
        "changed-short",
    }
    assert "zz-contaminated" not in kept  # copies and planted items out
    # The Spark output directory (_SUCCESS, .crc files) is an input to neardup itself.
    again = neardup("dedup", "spark.jsonl", "--output", "again.jsonl", "--quiet", cwd=work)
    assert again.returncode == 0, again.stderr
    assert (work / "again.jsonl").read_text(encoding="utf-8").splitlines() == expected
    report = neardup("contamination", "spark.jsonl", *protected, cwd=work)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["documents"] == len(expected)  # every part read back
    manifest = json.loads((work / "spark.jsonl.manifest.json").read_text(encoding="utf-8"))
    assert manifest["engine"] == "spark" and manifest["master"] == "local[*]"
    assert manifest["spark_version"].startswith("4.")
    assert manifest["parameters"]["tokenizer"] == "multilingual"
    assert manifest["parameters"]["window_version"] == "weighted-3"
    assert local_manifest["parameters"]["window_version"] == "weighted-3"
    for key in ("read", "exact_dropped", "near_dropped", "decontaminated", "written"):
        assert manifest["counts"][key] == local_manifest["counts"][key], key
    assert manifest["clusters"] == local_manifest["clusters"]
    assert manifest["counts"]["decontaminated"] == 3
    shuffled = manifest["shuffle_bytes"]
    assert set(shuffled) == set(manifest["seconds"]), shuffled
    assert all(s["write"] > 0 and s["read"] > 0 for s in shuffled.values()), shuffled


def _in_process(*args: object, cwd: Path, capsys: Any, monkeypatch: Any) -> tuple[Any, str]:
    """``neardup ARGS`` through its entry function in this process (no interpreter start):
    (exit code, standard error). For runs refused before any engine starts."""
    from neardup.app.cli.main import main

    monkeypatch.chdir(cwd)
    capsys.readouterr()
    try:
        code: Any = main([str(a) for a in args])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    return code, capsys.readouterr().err


def test_cli_spark_engine_refuses_local_only_flags_naming_them(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """One refusal through a real ``neardup`` process; the others through the same entry
    function in this process (each refused before any engine starts: an interpreter start
    apiece bought nothing)."""
    (tmp_path / "a.jsonl").write_text('{"id": "a", "text": "x"}\n', encoding="utf-8")
    result = neardup(
        "dedup", "a.jsonl", "--output", "o.jsonl", "--engine", "spark", "--workers", "2",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--engine spark does not take --workers" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr

    def refused(*flags: str, output: str = "o.jsonl") -> str:
        code, err = _in_process(
            "dedup", "a.jsonl", "--output", output, "--engine", "spark", *flags, cwd=tmp_path,
            capsys=capsys, monkeypatch=monkeypatch,
        )  # fmt: skip
        assert code == 2, err
        return err

    for flag, why in ((["--item-cap", "3"], "--item-cap runs on --engine local only"),):
        assert f"--engine spark does not take {flag[0]}: {why}" in refused(*flag)
    # The outputs Spark takes now are checked as locally, before any JVM starts.
    for flags, says in (
        (["--keep", "max:q"], "does not take --keep max:q: it keeps smallest-id, first or"),
        (["--keep", "first", "--index", "idx"], "takes --keep first without --index only"),
        (["--keep", "biggest"], "--keep 'biggest' is not a policy"),
        (["--removed", "r.parquet"], "--removed to JSON Lines only"),
        (["--removed", "a.jsonl", "--id-field", "k"], "--removed a.jsonl is INPUT"),
        (["--removed", "o.jsonl", "--dry-run"], "--output o.jsonl and --removed o.jsonl are"),
    ):
        err = refused(*flags)
        assert says in err and err.count("\n") == 1, err
    assert "JSON Lines only, not Parquet" in refused("--keep-duplicates", output="o.parquet")
    code, err = _in_process(
        "dedup", "a.jsonl", "--output", "o.jsonl", "--spark-master", "local[1]", cwd=tmp_path,
        capsys=capsys, monkeypatch=monkeypatch,
    )  # fmt: skip
    assert code == 2 and "--spark-master needs --engine spark" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_cli_spark_bad_or_unreachable_master_is_one_line_exit_2(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """The unreachable master through a real ``neardup`` process, the malformed ones through
    the same entry function in this process (all refused before any JVM starts)."""
    (tmp_path / "a.jsonl").write_text('{"id": "a", "text": "x"}\n', encoding="utf-8")
    for master, says in (
        ("bogus://x", "'bogus://x' is not a Spark master URL"),
        ("local[abc]", "'local[abc]' is not a Spark master URL"),
        ("spark://127.0.0.1:1", "spark://127.0.0.1:1: cannot reach the Spark master"),
    ):
        args = ("dedup", "a.jsonl", "--output", "o.jsonl", "--engine", "spark",
                "--spark-master", master)  # fmt: skip
        if master.startswith("spark://"):
            result = neardup(*args, cwd=tmp_path, timeout=300)
            code, err = result.returncode, result.stderr
        else:
            code, err = _in_process(*args, cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
        assert code == 2, err[-2000:]
        assert err.count("\n") == 1, err[-2000:]
        assert err.startswith("neardup dedup: error: ") and says in err
        assert "Traceback" not in err and "java." not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]
