"""``python -m app.cli``: the ``neardup`` command."""

import sys

from app.cli.main import main

if __name__ == "__main__":  # spawned workers re-import this module; they must not re-run main
    sys.exit(main())
