"""API keys with scopes: ``Authorization: Bearer KEY``, checked in constant time.

Keys come from ``NEARDUP_API_KEYS_FILE``, one ``KEY SCOPE[,SCOPE...]`` a line (blank lines and
``#`` comments allowed), read once at start; only their SHA-256 is kept. A byte-order mark, a key
shorter than MIN_KEY_CHARS or a key given twice is refused (naming the line); a file that group
or others may read or write is used, with a warning. Without a keys file the service is open
(and then listens on loopback only, unless started with ``--insecure``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MIN_KEY_CHARS", "SCOPES", "Keyring", "KeysFileError"]

log = logging.getLogger("neardup")

#: read: query, signatures, contamination, GETs; write: register and delete documents;
#: protect: upload, replace and delete protected sets.
SCOPES = frozenset({"read", "write", "protect"})

#: The shortest key accepted (16 random characters of base64 are 96 bits).
MIN_KEY_CHARS = 16


class KeysFileError(ValueError):
    """A keys file that cannot be used; names the file and line."""


@dataclass(frozen=True)
class _Key:
    digest: bytes
    scopes: frozenset[str]


class Keyring:
    """The SHA-256 of every key and its scopes."""

    def __init__(self, keys: Iterable[tuple[str, Iterable[str]]]) -> None:
        self._keys = [_Key(_digest(k), frozenset(s)) for k, s in keys]

    @classmethod
    def from_file(cls, path: Path) -> Keyring:
        """Parse a keys file; KeysFileError naming the line of any malformed entry."""
        try:
            text = path.read_text(encoding="utf-8")
            mode = path.stat().st_mode
        except (OSError, UnicodeDecodeError) as exc:
            raise KeysFileError(f"{path}: cannot read the keys file: {exc}") from None
        if text.startswith("\ufeff"):
            raise KeysFileError(
                f"{path}:1: starts with a byte-order mark (BOM), which would become part of the "
                "first key: save the file as UTF-8 without a BOM"
            )
        if mode & 0o066:
            log.warning(
                "%s: the keys file can be read or written by group or others (mode %03o): "
                "chmod 600 it", path, mode & 0o777,
            )  # fmt: skip
        keys: dict[str, tuple[int, list[str]]] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            entry = _entry(path, number, line)
            if entry is None:
                continue
            key, scopes = entry
            if key in keys:
                raise KeysFileError(
                    f"{path}:{number}: the same key as on line {keys[key][0]}: give each key "
                    "once, with all its scopes"
                )
            keys[key] = (number, scopes)
        if not keys:
            raise KeysFileError(f"{path}: the keys file has no keys")
        return cls((key, scopes) for key, (_, scopes) in keys.items())

    def scopes(self, presented: str) -> frozenset[str] | None:
        """The scopes of a presented key, or None if unknown. Every stored key is compared
        (``hmac.compare_digest``), so the time does not depend on which key matched."""
        digest = _digest(presented)
        found: frozenset[str] | None = None
        for key in self._keys:
            if hmac.compare_digest(key.digest, digest):
                found = key.scopes
        return found


def _entry(path: Path, number: int, line: str) -> tuple[str, list[str]] | None:
    """The (key, scopes) of one line; None for a blank or comment line."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    parts = text.split()
    scopes = parts[1].split(",") if len(parts) == 2 else []
    if len(parts) != 2 or not scopes or not set(scopes) <= SCOPES:
        raise KeysFileError(
            f"{path}:{number}: expected 'KEY SCOPE[,SCOPE...]' with scopes from "
            f"{', '.join(sorted(SCOPES))}"
        )
    if len(parts[0]) < MIN_KEY_CHARS:
        raise KeysFileError(
            f"{path}:{number}: the key has {len(parts[0])} characters; at least "
            f"{MIN_KEY_CHARS} are needed (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(24))')"
        )
    return parts[0], scopes


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()
