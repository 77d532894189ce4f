"""``python -m neardup.app.cli``, the same as ``python -m neardup``: the ``neardup`` command."""

import sys

from neardup.app.cli.main import main

if __name__ == "__main__":  # spawned workers re-import this module; they must not re-run main
    sys.exit(main())
