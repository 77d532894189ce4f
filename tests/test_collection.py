"""The suite collects the same tests in every process: `make test` runs pytest-xdist, whose
workers each collect the tests and refuse to run when their lists differ. A parametrize value
made at collection from the clock or a random source (a gzip member's header holds the time
it was written) names another test in each worker, and fails the whole run."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: Modules whose calls give another value at each collection.
_VARYING = {"time", "random", "uuid", "datetime", "secrets", "tempfile"}


def _varying_calls(tree: ast.AST) -> list[int]:
    """Lines of calls in ``tree`` whose value depends on when or where they run."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        name = owner.id if isinstance(owner, ast.Name) else None
        stamped = (name, node.func.attr) == ("gzip", "compress") and not any(
            k.arg == "mtime" for k in node.keywords
        )
        if name in _VARYING or stamped:
            found.append(node.lineno)
    return found


def _parametrize_args(tree: ast.AST) -> list[ast.AST]:
    """The arguments of every ``pytest.mark.parametrize`` decorator in ``tree``."""
    args: list[ast.AST] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for deco in node.decorator_list:
            if (
                isinstance(deco, ast.Call)
                and isinstance(deco.func, ast.Attribute)
                and deco.func.attr == "parametrize"
            ):
                args.extend(deco.args)
    return args


def test_parametrize_values_are_the_same_at_every_collection():
    strays = {}
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lines = [line for arg in _parametrize_args(tree) for line in _varying_calls(arg)]
        if lines:
            strays[str(path.relative_to(TESTS))] = lines
    assert strays == {}, "make parametrize values without the clock (gzip: mtime=0)"


def test_the_check_sees_a_gzip_member_stamped_at_collection():
    planted = ast.parse(
        "import gzip, pytest\n"
        "@pytest.mark.parametrize('data', [gzip.compress(b'x')])\n"
        "def test_x(data): pass\n"
    )
    assert [line for a in _parametrize_args(planted) for line in _varying_calls(a)] == [2]
    fixed = ast.parse(
        "import gzip, pytest\n"
        "@pytest.mark.parametrize('data', [gzip.compress(b'x', mtime=0)])\n"
        "def test_x(data): pass\n"
    )
    assert [line for a in _parametrize_args(fixed) for line in _varying_calls(a)] == []
