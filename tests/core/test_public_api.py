"""The public surface of core is locked, and core never imports the web layer."""

import subprocess
import sys

import core.minhash

CORE_NAMES = {
    "MERSENNE31", "words", "shingles", "jaccard", "shingle_hashes", "perm_params", "minhash",
    "estimate", "LSH", "UnionFind", "Doc", "exact_dedup", "signatures", "clusters",
    "near_dedup", "protected_ngrams", "contaminated", "decontaminate", "PCG32", "fnv1a64",
}  # fmt: skip


def test_every_core_md_name_imports_from_core_minhash():
    assert set(core.minhash.__all__) == CORE_NAMES
    for name in CORE_NAMES:
        assert getattr(core.minhash, name) is not None
    assert core.minhash.MERSENNE31 == 2**31 - 1


def test_core_never_imports_the_web_layer():
    code = (
        "import sys, core.minhash, core._corpus\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('app', 'fastapi', 'starlette', 'pydantic', 'uvicorn', 'httpx')]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
