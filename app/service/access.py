"""API keys with scopes: ``Authorization: Bearer KEY``, checked in constant time.

Keys come from ``NEARDUP_API_KEYS_FILE``, one ``KEY SCOPE[,SCOPE...]`` a line (blank lines and
``#`` comments allowed), read once at start; only their SHA-256 is kept. Without a keys file the
service is open (and then listens on loopback only, unless started with ``--insecure``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SCOPES", "Keyring", "KeysFileError"]

#: read: query, signatures, contamination, GETs; write: register and delete documents;
#: protect: upload, replace and delete protected sets.
SCOPES = frozenset({"read", "write", "protect"})


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
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise KeysFileError(f"{path}: cannot read the keys file: {exc}") from None
        keys = []
        for number, line in enumerate(lines, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            parts = text.split()
            scopes = parts[1].split(",") if len(parts) == 2 else []
            if len(parts) != 2 or not scopes or not set(scopes) <= SCOPES:
                raise KeysFileError(
                    f"{path}:{number}: expected 'KEY SCOPE[,SCOPE...]' with scopes from "
                    f"{', '.join(sorted(SCOPES))}"
                )
            keys.append((parts[0], scopes))
        if not keys:
            raise KeysFileError(f"{path}: the keys file has no keys")
        return cls(keys)

    def scopes(self, presented: str) -> frozenset[str] | None:
        """The scopes of a presented key, or None if unknown. Every stored key is compared
        (``hmac.compare_digest``), so the time does not depend on which key matched."""
        digest = _digest(presented)
        found: frozenset[str] | None = None
        for key in self._keys:
            if hmac.compare_digest(key.digest, digest):
                found = key.scopes
        return found


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()
