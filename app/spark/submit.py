"""The file to give ``spark-submit``: ``neardup dedup --engine spark`` with the same flags.

    spark-submit --py-files neardup.zip app/spark/submit.py INPUT... --output OUT [...]

Without ``--spark-master``, the session is the one ``spark-submit`` configured (YARN,
Kubernetes, a standalone cluster...). Exit codes are the CLI's: 0 done, 2 bad input.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """``neardup dedup --engine spark ARGV...``."""
    from neardup.app.cli.main import main as cli

    args = list(sys.argv[1:] if argv is None else argv)
    return cli(["dedup", "--engine", "spark", *args])


if __name__ == "__main__":
    sys.exit(main())
