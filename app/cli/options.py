"""What one ``neardup dedup`` run is asked to do, built once from the flags.

An engine takes a ``DedupOptions`` and says which options it supports (``unsupported``), so a
flag an engine cannot honour is a clear error rather than silently ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from neardup.core.engine import (
    RECRAWL_POLICIES,
    DecontParams,
    KeepPolicy,
    MinhashParams,
    ParameterError,
    Schema,
    recrawl_policy,
)

__all__ = ["INDEX_MODES", "DedupOptions", "DedupParams", "default_workers", "id_prefix"]

#: What a run does with its ``--index``: add its survivors to it, or only read it.
INDEX_MODES = ("append", "read")


def id_prefix(spelled: str) -> bool | str:
    """``--id-prefix`` as ``Schema`` takes it: ``none`` False, ``file`` True, else a template
    (checked by ``Schema``)."""
    return {"none": False, "file": True}.get(spelled, spelled)


def default_workers() -> int:
    """Signature processes when ``--workers`` is not given: the CPUs, as ``serve`` does."""
    return os.cpu_count() or 1


@dataclass(frozen=True)
class DedupParams:
    """The knobs of ``neardup dedup``: core's parameters, the worker count, what to keep, and
    what the decontamination stage does (``decont``, ``item_cap``)."""

    minhash: MinhashParams = field(default_factory=MinhashParams)
    workers: int = 1
    keep_duplicates: bool = False
    keep: KeepPolicy = field(default_factory=KeepPolicy)
    decont: DecontParams = field(default_factory=DecontParams)
    item_cap: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """Flat, as the flags are spelled (for the manifest)."""
        d = self.decont
        return {**self.minhash.as_dict(), "tokenizer_version": self.minhash.tokenizer_version,
                "window_version": self.minhash.window_version,
                "workers": self.workers,
                "keep_duplicates": self.keep_duplicates, "keep": str(self.keep),
                "decontamination": d.mode.value, "cut_window": d.window,
                "min_piece": d.min_piece, "max_pieces": d.max_pieces,
                "item_cap": self.item_cap}  # fmt: skip


@dataclass(frozen=True)
class DedupOptions:
    """One batch run: where the rows come from and go, how they are read, what is kept.

    Attributes:
        inputs: paths, directories, globs, ``-`` or URLs (expanded by ``expand_inputs``).
        output: where the survivors go (``-``: standard output, JSON Lines).
        protected: protected sets (same kinds of names).
        removed: where every dropped row goes, with why (``--removed``).
        manifest: where the manifest goes; default ``OUTPUT.manifest.json`` (none for ``-``).
        schema: the id and text fields, and ``--id-prefix``.
        params: MinHash parameters, workers, ``--keep``, ``--keep-duplicates``.
        dry_run: count, write nothing.
        quiet: no progress or summary on stderr.
        command: the command line, for the manifest.
        index: the persistent index to dedup against (``--index``), or None.
        index_mode: ``append`` (add the survivors to the index as a new part) or ``read``.
        recrawled: what a new row whose id is indexed, with a text changed beyond the threshold,
            becomes (``--recrawled``: ``keep-both``, ``keep-indexed`` or ``replace``).
    """

    inputs: tuple[str, ...]
    output: str
    protected: tuple[str, ...] = ()
    removed: str | None = None
    manifest: str | None = None
    schema: Schema = field(default_factory=Schema)
    params: DedupParams = field(default_factory=DedupParams)
    dry_run: bool = False
    quiet: bool = False
    command: tuple[str, ...] = ()
    index: str | None = None
    index_mode: str = "append"
    recrawled: str = RECRAWL_POLICIES[0]

    def __post_init__(self) -> None:
        recrawl_policy(self.recrawled)
        if self.index_mode not in INDEX_MODES:
            raise ParameterError(
                f"--index-mode {self.index_mode!r}: use one of {', '.join(INDEX_MODES)}"
            )
        if self.removed is not None and self.removed == self.output == "-":
            raise ParameterError("--output and --removed cannot both be standard output ('-')")
        if (*self.inputs, *self.protected).count("-") > 1:
            raise ParameterError("standard input ('-') can be read once: name it once")
        mode = self.params.decont.mode.value
        if mode != "drop":
            if not self.protected:
                raise ParameterError(f"--decontamination {mode} needs --protected sets")
            targets = (self.output, self.removed or "")
            if any(t.lower().endswith(".parquet") for t in targets):
                raise ParameterError(
                    f"--decontamination {mode} writes meta.decontamination, nested lists of "
                    "spans: write JSON Lines (a .parquet output is for drop)"
                )

    def reads_and_writes(self) -> tuple[list[tuple[str, str]], list[tuple[str, str | None]]]:
        """``(flag, target)`` of every file the run reads and writes, for ``check_apart``."""
        reads = [("INPUT", t) for t in self.inputs] + [("--protected", t) for t in self.protected]
        writes = [
            ("--output", self.output),
            ("--removed", self.removed),
            ("--manifest", self.manifest_target),
        ]
        return reads, writes

    @property
    def writes_reasons(self) -> bool:
        """Whether the run writes rows' ``neardup`` objects (why a row is, or would be,
        dropped): with ``--removed`` or ``--keep-duplicates``."""
        return self.removed is not None or self.params.keep_duplicates

    @property
    def manifest_target(self) -> str | None:
        """Where the manifest is written, if anywhere."""
        if self.manifest is not None:
            return self.manifest
        return None if self.output == "-" else self.output + ".manifest.json"

    def given(self) -> set[str]:
        """The options set away from their defaults (``schema.id_field``, ``params.keep``, ...):
        what an engine must support to run these options."""
        out = {"inputs", "output"}
        for name in ("protected", "removed", "manifest", "dry_run", "index"):
            if getattr(self, name):
                out.add(name)
        if self.recrawled != RECRAWL_POLICIES[0]:
            out.add("recrawled")
        for part, default in (("schema", Schema()), ("params", DedupParams())):
            for f in fields(default):
                if getattr(getattr(self, part), f.name) != getattr(default, f.name):
                    out.add(f"{part}.{f.name}")
        return out

    def unsupported(self, supported: set[str]) -> list[str]:
        """The given options an engine that supports ``supported`` cannot honour, sorted."""
        return sorted(self.given() - supported)
