"""Where generated batch corpora are kept between runs: a 1M-document corpus takes about 25 s
to write and 1.3 GiB to hold, so ``bench.batch`` writes it once per generator version.

The cache directory is ``--cache-dir``, else ``$NEARDUP_BENCH_CACHE``, else
``$XDG_CACHE_HOME/neardup-bench`` (``~/.cache/neardup-bench``). A corpus is named by its pool,
size, seed and datasketch prefix and by a digest of the generator's sources, so an edited
generator writes a new file; the stale files of the same name are removed then.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common.machine import sources_digest

__all__ = ["GENERATOR_SOURCES", "cached_corpus", "default_cache_dir"]

#: The sources a generated corpus depends on.
GENERATOR_SOURCES = ("bench/batch/corpus.py", "bench/common/corpus.py", "bench/common/corpora.py")


def default_cache_dir() -> Path:
    """``$NEARDUP_BENCH_CACHE``, else ``$XDG_CACHE_HOME/neardup-bench`` (``~/.cache/...``)."""
    given = os.environ.get("NEARDUP_BENCH_CACHE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "neardup-bench"


def cached_corpus(
    directory: Path, stem: str, make: Callable[[Path], dict[str, Any]]
) -> tuple[Path, dict[str, Any]]:
    """The corpus ``stem`` (``stem-<digest>.jsonl``) and what ``make`` reported when it wrote
    it: read from ``directory`` if there, else written there by ``make(path)`` (under a
    temporary name, renamed when complete). The report says ``"cached": true`` when reused."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{stem}-{sources_digest(*GENERATOR_SOURCES)}"
    corpus, record = directory / f"{name}.jsonl", directory / f"{name}.json"
    if corpus.exists() and record.exists():
        return corpus, {**json.loads(record.read_text()), "cached": True}
    for stale in directory.glob(f"{stem}-*"):
        stale.unlink()
    partial = directory / f".{name}.jsonl.partial-{os.getpid()}"
    try:
        made = make(partial)
        partial.rename(corpus)
    finally:
        partial.unlink(missing_ok=True)
    record.write_text(json.dumps(made))
    return corpus, {**made, "cached": False}
