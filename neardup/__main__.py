"""``python -m neardup``: the ``neardup`` command."""

from neardup.app.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
