"""The Docker image holds the whole ``neardup`` package and can run as a replica, checked without
a container engine: the Dockerfile's COPY steps are replayed from the build context (less
.dockerignore) into a directory as Docker does them (links kept as links), every link must
resolve inside it, the package must import from it alone, and the install must take the
``postgres`` extra."""

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from bench.common.machine import REPO_ROOT

DOCKERFILE = REPO_ROOT / "Dockerfile"


def _instructions(text):
    """(keyword, arguments) of each instruction, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in text.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        current += raw
        if current.strip():
            keyword, _, rest = current.strip().partition(" ")
            lines.append((keyword.upper(), rest.strip()))
        current = ""
    return lines


def _ignored(relative, patterns):
    """Whether .dockerignore's patterns (top-level names and ``**/NAME``) drop this path."""
    parts = relative.parts
    for pattern in patterns:
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatch(part, pattern[3:]) for part in parts):
                return True
        elif fnmatch.fnmatch(parts[0], pattern):
            return True
    return False


def _replay(instructions, image):
    """Do the WORKDIR and COPY steps into ``image`` (a root directory); the last WORKDIR."""
    patterns = [
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    workdir = Path("/")
    for keyword, args in instructions:
        if keyword == "WORKDIR":
            workdir = workdir / args
        elif keyword == "COPY":
            *sources, dest = args.split()
            assert not any(s.startswith("--") for s in sources), args
            target = image / (workdir / dest).relative_to("/")
            for source in sources:
                origin = REPO_ROOT / source
                assert not _ignored(Path(source), patterns), f"{source} is in .dockerignore"
                if origin.is_dir():  # its contents go into the destination
                    shutil.copytree(
                        origin,
                        target,
                        symlinks=True,  # as Docker's COPY does
                        ignore=lambda d, names: [
                            n
                            for n in names
                            if _ignored((Path(d) / n).relative_to(REPO_ROOT), patterns)
                        ],
                        dirs_exist_ok=True,
                    )
                else:
                    into = target / origin.name if dest.endswith("/") else target
                    into.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, into)
    return image / workdir.relative_to("/")


def test_the_image_copies_the_whole_package_and_its_links_resolve(tmp_path):
    instructions = _instructions(DOCKERFILE.read_text())
    app = _replay(instructions, tmp_path)
    assert (app / "neardup" / "__init__.py").is_file()
    for path in app.rglob("*"):
        if path.is_symlink():
            resolved = path.resolve()
            assert resolved.exists(), f"{path.relative_to(tmp_path)} points nowhere in the image"
            assert resolved.is_relative_to(tmp_path.resolve()), path
    # What the build backend reads: the readme, and the package data.
    project = tomllib.loads((app / "pyproject.toml").read_text())
    assert (app / project["project"]["readme"]).is_file()
    assert list((app / "neardup" / "app" / "api" / "ui" / "templates").glob("*.html"))
    # The package imports from the copy alone (not from the repository), the replica's store too.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = (
        "import neardup, neardup.app.main, neardup.app.service.pgstore, neardup.core.engine; "
        "print(neardup.app.service.pgstore.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=app, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve().is_relative_to(tmp_path.resolve())


def test_the_image_installs_the_postgres_extra():
    runs = [args for keyword, args in _instructions(DOCKERFILE.read_text()) if keyword == "RUN"]
    installs = [re.search(r"pip install\s+['\"]?\.\[([^\]]*)\]", run) for run in runs]
    extras = [set(m.group(1).split(",")) for m in installs if m]
    assert extras and "postgres" in extras[0], runs
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "postgres" in project["project"]["optional-dependencies"]
