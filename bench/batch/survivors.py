"""Reading a dedup run's survivors back: which documents were kept, and of which planted kind.

Lines are not parsed as JSON: the id is the first key of every line (``{"id": "d00000123", ``,
as ``bench.batch.corpus`` writes it and as neardup and the datasketch peer write it back), and
the planted kind, if any, is in the meta at the end of the line. A line that does not start
that way is parsed as JSON instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["Overlap", "Survivors", "overlap", "read_survivors"]

_ID = re.compile(r'\{"id": "d(\d+)"')
_KIND = re.compile(r'"kind": "(exact|near)"')
_TAIL = 200  # the meta is within the last characters of a line


@dataclass
class Survivors:
    """The documents a run kept.

    Attributes:
        kept: ``kept[i]`` for document ``d{i:08d}``.
        originals: kept documents that are no planted copy.
        exact: kept planted exact copies (a correct dedup keeps none).
        near: kept planted near copies (each one a near duplicate the run missed).
    """

    kept: NDArray[np.bool_]
    originals: int = 0
    exact: int = 0
    near: int = 0

    @property
    def written(self) -> int:
        """How many documents were kept."""
        return int(self.kept.sum())


def _parse(line: str) -> tuple[int, str]:
    """(document number, planted kind or "") of one output line."""
    found = _ID.match(line)
    if found is None:
        item = json.loads(line)
        return int(item["id"][1:]), str((item.get("meta") or {}).get("kind", ""))
    kind = _KIND.search(line, max(0, len(line) - _TAIL))
    return int(found.group(1)), kind.group(1) if kind else ""


def read_survivors(path: Path, docs: int) -> Survivors:
    """The survivors written to ``path`` by a run over the first ``docs`` documents."""
    out = Survivors(np.zeros(docs, dtype=np.bool_))
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            i, kind = _parse(line)
            out.kept[i] = True
            if kind == "exact":
                out.exact += 1
            elif kind == "near":
                out.near += 1
            else:
                out.originals += 1
    return out


@dataclass
class Overlap:
    """How two runs' survivor ids agree (over the first ``docs`` documents).

    Attributes:
        docs: the documents compared.
        both: kept by both.
        only_a: kept by the first only.
        only_b: kept by the second only.
    """

    docs: int
    both: int
    only_a: int
    only_b: int


def overlap(a: Survivors, b: Survivors, docs: int) -> Overlap:
    """Compare the survivors of two runs over their first ``docs`` documents."""
    ka, kb = a.kept[:docs], b.kept[:docs]
    return Overlap(
        docs=docs,
        both=int(np.count_nonzero(ka & kb)),
        only_a=int(np.count_nonzero(ka & ~kb)),
        only_b=int(np.count_nonzero(~ka & kb)),
    )
