"""The examples in core's docstrings run, under the names users import (``neardup.core``)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import neardup.core

MODULES = sorted(m.name for m in pkgutil.iter_modules(neardup.core.__path__, "neardup.core."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_the_examples_are_found() -> None:
    finder = doctest.DocTestFinder()
    examples = sum(
        len(t.examples) for m in MODULES for t in finder.find(importlib.import_module(m))
    )
    assert examples >= 20, examples
