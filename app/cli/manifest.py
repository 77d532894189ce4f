"""The manifest of a batch run: what ran (version, command line, parameters), on what, what it
did (counts, cluster sizes, seconds) and what it wrote (bytes and SHA-256 of every file)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from neardup.app.cli.options import DedupOptions
from neardup.app.cli.version import neardup_version
from neardup.core.engine import Source, atomic_output

__all__ = ["Manifest", "write_manifest"]


@dataclass
class Manifest:
    """What a run did; ``cluster_sizes`` maps a size (2 and up) to how many clusters have it."""

    version: str
    command: list[str]
    parameters: dict[str, Any]
    schema: dict[str, Any]
    inputs: list[dict[str, Any]]
    protected: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    #: Clusters of two or more members; ``cluster_sizes`` counts them by size (its values add
    #: up to ``clusters``), and ``singletons`` the documents that near-duplicate none.
    clusters: int = 0
    cluster_sizes: dict[str, int] = field(default_factory=dict)
    singletons: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)
    removed: dict[str, Any] | None = None
    #: The contamination report of the rows the decontamination stage checked (with sets).
    contamination: dict[str, Any] | None = None
    #: With ``--index``: its url and mode, the version read and written, the part added, its
    #: rows, the indexed documents and how many the rows matched.
    index: dict[str, Any] | None = None

    @classmethod
    def start(cls, options: DedupOptions, sources: list[Source]) -> Manifest:
        """The manifest of a run about to start."""
        return cls(
            version=neardup_version(),
            command=list(options.command),
            parameters=options.params.as_dict(),
            schema=asdict(options.schema),
            inputs=[{"path": s.name, "bytes": s.size} for s in sources],
        )

    def as_json(self) -> dict[str, Any]:
        """The manifest as a JSON-ready dict."""
        return asdict(self)


def write_manifest(target: str, manifest: Manifest) -> None:
    """Write the manifest (JSON) to ``target``, atomically."""
    body = json.dumps(manifest.as_json(), indent=2, ensure_ascii=False) + "\n"
    with atomic_output(target) as (handle, _):
        handle.write(body.encode("utf-8"))
