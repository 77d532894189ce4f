"""neardup as a user installs it: ``python -m build`` makes an sdist and a wheel (built from the
sdist), the wheel goes into a fresh venv, and the installed package runs outside the repository.

The fresh venv finds its dependencies, offline, in a folder of links to this venv's installed
distributions (all but neardup's own editable install), so pip resolves every requirement of
the wheel and installs exactly one distribution: neardup.
"""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(cmd: list[str | Path], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, **kw
    )  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, REPO], REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("fresh")
    deps = root / "deps"
    deps.mkdir()
    for sp in site.getsitepackages():
        for entry in Path(sp).iterdir():
            if entry.name.lower().startswith(("neardup", "__editable__")):
                continue
            if not (deps / entry.name).exists():
                (deps / entry.name).symlink_to(entry)
    env = root / "venv"
    made = _run([sys.executable, "-m", "venv", env], root)
    assert made.returncode == 0, made.stderr
    py = env / "bin" / "python"
    purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], root)
    (Path(purelib.stdout.strip()) / "_neardup_test_deps.pth").write_text(f"{deps}\n")
    wheel = next(dist.glob("neardup-*.whl"))
    installed = _run([py, "-m", "pip", "install", "--no-index", "--no-cache-dir", wheel], root)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    yield env


def test_the_wheel_installs_one_import_package(dist: Path) -> None:
    wheel = next(dist.glob("neardup-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "neardup",
        f"{wheel.name.split('-py3')[0]}.dist-info",
    }
    top_level = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    if top_level:
        assert zipfile.ZipFile(wheel).read(top_level[0]).decode().split() == ["neardup"]
    # Every module of the source tree, and the UI's files, under neardup/.
    for part in ("core", "app"):
        for path in (REPO / part).rglob("*"):
            if path.suffix in (".py", ".html", ".css") and "__pycache__" not in path.parts:
                assert f"neardup/{path.relative_to(REPO).as_posix()}" in names, path
    assert "neardup/py.typed" in names


def test_the_sdist_holds_the_package_once(dist: Path) -> None:
    sdist = next(dist.glob("neardup-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert "neardup/core/engine.py" in members
    assert "pyproject.toml" in members
    assert not any(m.startswith(("core/", "app/")) for m in members)


def test_the_installed_command_runs_outside_the_repository(venv: Path, tmp_path: Path) -> None:
    neardup = venv / "bin" / "neardup"
    helped = _run([neardup, "--help"], tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "dedup" in helped.stdout
    text = "the quick brown fox jumps over the lazy dog while the cat sleeps in the sun"
    rows = [{"id": f"d{i}", "text": text if i < 4 else f"{text} {i} unrelated words {i * i}"}
            for i in range(8)]  # fmt: skip
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ran = _run([neardup, "dedup", "in.jsonl", "--output", "out.jsonl"], tmp_path)
    assert ran.returncode == 0, ran.stderr
    kept = [json.loads(line)["id"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert "d0" in kept
    assert not {"d1", "d2", "d3"} & set(kept)


def test_the_installed_library_imports_from_neardup_only(venv: Path, tmp_path: Path) -> None:
    code = (
        "import importlib.util, neardup\n"
        "from neardup import Client, Doc, clusters, decontaminate, near_dedup\n"
        "print(neardup.__file__)\n"
        "print(importlib.util.find_spec('core'), importlib.util.find_spec('app'))\n"
        "print(sorted(map(sorted, clusters({'a': 'x y z w v u', 'b': 'x y z w v u', 'c': 'q'}))))\n"
    )
    ran = _run([venv / "bin" / "python", "-c", code], tmp_path)
    assert ran.returncode == 0, ran.stderr
    where, specs, found = ran.stdout.splitlines()
    assert Path(where).is_relative_to(venv), where
    assert specs == "None None"
    assert found == "[['a', 'b'], ['c']]"


def test_no_page_or_message_tells_users_to_install_from_an_index_we_are_not_on() -> None:
    """``pip install 'neardup[spark]'`` fails (no such distribution on the index): every hint is a
    clone's ``-e '.[EXTRA]'`` or the wheel's ``neardup-VERSION-py3-none-any.whl[EXTRA]``."""
    pattern = re.compile(r"pip install [\"']?neardup\[")
    pages = [REPO / "README.md", REPO / "Dockerfile", *(REPO / "docs").glob("*.md")]
    sources = [*(REPO / "app").rglob("*.py"), *(REPO / "core").rglob("*.py")]
    offenders = [str(p) for p in pages + sources if pattern.search(p.read_text())]
    assert offenders == []


def test_a_missing_extra_names_what_installs_it(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "x"}\n')
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = sys.modules['pyspark.sql'] = None\n"  # as if not installed
        "from neardup.app.cli.main import main\n"
        "sys.exit(main(['dedup', 'in.jsonl', '--output', 'out.jsonl', '--engine', 'spark']))\n"
    )
    ran = _run([sys.executable, "-c", code], tmp_path)
    assert ran.returncode == 2
    [line] = ran.stderr.splitlines()
    assert line.startswith("neardup dedup: error: the Spark engine needs the spark extra")
    assert "pip install -e '.[spark]'" in line
    assert re.search(r"neardup-\d[^ ]*-py3-none-any\.whl\[spark\]", line), line
