"""The installed neardup's version, without importing the engine (``neardup --version``)."""

from __future__ import annotations

from importlib import metadata

__all__ = ["neardup_version"]


def neardup_version() -> str:
    """The installed neardup's version (``0+unknown`` when run from a source tree only)."""
    try:
        return metadata.version("neardup")
    except metadata.PackageNotFoundError:
        return "0+unknown"
