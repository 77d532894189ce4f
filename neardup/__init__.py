"""neardup: near-duplicate detection and decontamination for LLM training data.

The one import package. Its public names are here:

    from neardup import Client, Doc, clusters, decontaminate, near_dedup

``neardup.core`` holds the algorithms (``neardup.core.minhash`` is their contract, every name
of docs/algorithm.md section 7; ``neardup.core.engine`` is what engines build on) and
``neardup.app`` the interfaces (service, CLI, Spark engine, the typed HTTP client). In the
source tree they are the folders ``core/`` and ``app/``; the wheel installs them here.

Names are imported on first use, so ``import neardup`` stays cheap (spawned workers and the
CLI import ``neardup.core`` without the HTTP client, and the client without numba).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from neardup.app.client import Client, ClientError
    from neardup.core.minhash import (
        LSH,
        MERSENNE31,
        PCG32,
        Doc,
        UnionFind,
        clusters,
        contaminated,
        decontaminate,
        estimate,
        exact_dedup,
        fnv1a64,
        jaccard,
        minhash,
        near_dedup,
        perm_params,
        protected_ngrams,
        shingle_hashes,
        shingles,
        signatures,
        words,
    )

_CLIENT = frozenset({"Client", "ClientError"})
__all__ = [
    "LSH",
    "MERSENNE31",
    "PCG32",
    "Client",
    "ClientError",
    "Doc",
    "UnionFind",
    "clusters",
    "contaminated",
    "decontaminate",
    "estimate",
    "exact_dedup",
    "fnv1a64",
    "jaccard",
    "minhash",
    "near_dedup",
    "perm_params",
    "protected_ngrams",
    "shingle_hashes",
    "shingles",
    "signatures",
    "words",
]


def __getattr__(name: str) -> Any:
    """Import a public name from where it lives, the first time it is asked for."""
    if name not in __all__:
        raise AttributeError(f"module 'neardup' has no attribute {name!r}")
    module = "neardup.app.client" if name in _CLIENT else "neardup.core.minhash"
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
