"""Cold starts of ``neardup dedup``: a small run signs in its own process, starting no spawn pool
and loading no numba, and writes what a run on a pool writes (issue 22)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from neardup.core.engine import write_docs
from neardup.core.minhash import Doc
from tests.fixtures import planted_corpus

ROOT = Path(__file__).resolve().parents[3]

#: ``neardup dedup`` as the console script runs it (``neardup.app.cli.main.main``), in a fresh
#: interpreter that counts the process pools created (any, however imported) and says whether
#: numba was imported. ``--pool-after N`` first sets ``POOL_AFTER_CHARS`` (0: a pool always).
PROBE = """
import json, sys
import concurrent.futures.process as cfp

pools = []
_init = cfp.ProcessPoolExecutor.__init__

def _counting(self, *args, **kwargs):
    pools.append(kwargs.get("max_workers"))
    _init(self, *args, **kwargs)

cfp.ProcessPoolExecutor.__init__ = _counting
args = sys.argv[1:]
if args[0] == "--pool-after":
    import neardup.core._signatures
    neardup.core._signatures.POOL_AFTER_CHARS = int(args[1])
    args = args[2:]
from neardup.app.cli.main import main

code = main(args)
print(json.dumps({"code": code, "pools": len(pools), "numba": "numba" in sys.modules}))
"""


def probe(*args: object, cwd: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "NEARDUP_JIT"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, args)], cwd=cwd, capture_output=True, text=True,
        env={**env, "PYTHONPATH": str(ROOT)}, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_small_dedup_starts_no_pool_loads_no_numba_and_writes_what_a_pool_writes(tmp_path):
    corpus = planted_corpus(3)
    docs = [Doc(i, t, {"n": n}) for n, (i, t) in enumerate(corpus.docs.items())]
    write_docs(tmp_path / "in.jsonl", docs)
    run = ["dedup", "in.jsonl", "--workers", "2", "--quiet"]
    small = probe(*run, "--output", "small.jsonl", "--removed", "small-removed.jsonl",
                  cwd=tmp_path)  # fmt: skip
    assert small == {"code": 0, "pools": 0, "numba": False}
    # The same run made to sign on a pool (of warm workers, which load the compiled kernels).
    pooled = probe("--pool-after", 0, *run, "--output", "pool.jsonl",
                   "--removed", "pool-removed.jsonl", cwd=tmp_path)  # fmt: skip
    assert pooled == {"code": 0, "pools": 1, "numba": False}
    assert (tmp_path / "small.jsonl").read_bytes() == (tmp_path / "pool.jsonl").read_bytes()
    removed = (tmp_path / "small-removed.jsonl").read_bytes()
    assert removed and removed == (tmp_path / "pool-removed.jsonl").read_bytes()


def test_eight_documents_with_the_default_workers_start_no_pool(tmp_path):
    docs = [Doc(str(i), f"the quick brown fox jumps over the lazy dog {i % 3} again") for i in
            range(8)]  # fmt: skip
    write_docs(tmp_path / "eight.jsonl", docs)
    got = probe("dedup", "eight.jsonl", "--output", "out.jsonl", "--quiet", cwd=tmp_path)
    assert got == {"code": 0, "pools": 0, "numba": False}
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3


#: ``main`` of a usage error and of ``--help``, then ``--version``, in one fresh interpreter: the
#: exit codes, and the heavy modules loaded before ``--version`` (which reads the metadata).
USAGE = """
import json, sys
from neardup.app.cli.main import main

codes = []
for args in (["dedup", "in.jsonl"], ["--help"], ["--version"]):
    if args == ["--version"]:
        heavy = [m for m in ("numpy", "fsspec", "neardup.core.engine", "importlib.metadata")
                 if m in sys.modules]
    try:
        main(args)
    except SystemExit as exc:
        codes.append(exc.code)
print(json.dumps({"codes": codes, "heavy": heavy}))
"""


def test_a_usage_error_help_and_version_load_no_engine(tmp_path):
    """argparse's answers come before any heavy import: a usage error (exit 2, one error line),
    ``--help`` and ``--version`` (the installed version, read from the metadata when asked)."""
    done = subprocess.run(
        [sys.executable, "-c", USAGE], cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    *shown, last = done.stdout.strip().splitlines()
    assert json.loads(last) == {"codes": [2, 0, 0], "heavy": []}
    assert shown[0].startswith("usage: neardup") and shown[-1].startswith("neardup ")
    assert done.stderr.strip().splitlines()[-1] == (
        "neardup dedup: error: the following arguments are required: --output (or --dry-run, "
        "which writes nothing)"
    )
