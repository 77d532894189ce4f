"""``neardup store-settings``: show, or change for every replica at once, the answer settings
locked in a store (THRESHOLD, NGRAM, MAX_MATCHES: ``ANSWER_SETTINGS``).

A store records them at its first start, refuses a replica (or a restart) set to others, and
gives one that does not set them the stored values. This
command rewrites them: on PostgreSQL while replicas run (those serving the old values stop
answering, 503 and not ready, until restarted with the new ones); on SQLite only while no
server holds the data directory (its lock refuses otherwise).
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["store_settings"]


def store_settings(args: argparse.Namespace) -> int:
    """Print the store's answer settings, after changing those given; 2 for a bad value or a
    store that cannot be changed (held, away, never started)."""
    from pydantic import ValidationError

    from neardup.app.cli.serve import _given, _one_line
    from neardup.app.config import ANSWER_SETTINGS, Settings
    from neardup.app.service.store import open_store
    from neardup.core.engine import ParameterError

    place = _given(args, ("data_dir", "store_url", "store_schema"))
    wanted = _given(args, ANSWER_SETTINGS)
    try:  # each value checked as serve checks it (a threshold in (0, 1], ...)
        Settings(**place, **wanted)
    except ValidationError as exc:
        raise ParameterError(f"invalid settings: {_one_line(exc)}") from None
    settings = Settings(**place)
    if not settings.store_url and not (settings.data_dir / "neardup.sqlite3").is_file():
        raise ParameterError(f"{settings.data_dir} holds no store (start neardup serve there)")
    store = open_store(settings)
    try:
        values = {k: str(v) for k, v in wanted.items()}
        before = store.set_settings({})
        if "num_perm" not in before:
            raise ParameterError("the store has never been started: start neardup serve with them")
        changed = {k: v for k, v in values.items() if before.get(k) != v}
        if changed:
            store.set_settings(changed)
    finally:
        store.close()
    now = {k: before.get(k) for k in ANSWER_SETTINGS} | values
    for key, value in changed.items():
        print(
            f"neardup store-settings: {key.upper()} {before.get(key)} -> {value}", file=sys.stderr
        )
    if changed:
        print(
            "neardup store-settings: restart every replica (those that set these settings "
            "with the new values; those that do not adopt them from the store); replicas still "
            "serving the old ones answer 503 and are not ready",
            file=sys.stderr,
        )
    sys.stdout.write(json.dumps(now) + "\n")
    return 0
