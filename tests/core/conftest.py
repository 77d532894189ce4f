"""Fixtures the core tests share."""

import pytest

from neardup.core import _compiled


@pytest.fixture(scope="module")
def jit() -> _compiled.Compiled:
    """The compiled kernels; numba is a dependency, so they must load (no skip)."""
    kernels = _compiled.load()
    assert kernels is not None, "numba is installed, so the compiled kernels must load"
    return kernels
