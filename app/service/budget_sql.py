"""The contamination budgets' table and statement in both stores' dialects (``take_budget``):
a token bucket a (caller, unit), its level and when it was last charged (seconds of the store's
clock). One statement takes or refuses: the level refilled since (a minute's worth a minute, at
most a minute's worth), less the amount if it is there; ``taken`` says which. Every right-hand
side reads the row as it was."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["BUDGET_FULL_AFTER", "BUDGET_SWEEP_SECONDS", "budget_schema", "budget_take_sql"]

#: Seconds after which a contamination budget's bucket is full again whatever its level (it
#: refills a minute's worth a minute): such rows are as good as none, and are deleted.
BUDGET_FULL_AFTER = 60.0
#: How often (seconds) a store deletes the budget rows that are full again.
BUDGET_SWEEP_SECONDS = 60.0

_BUDGET_SCHEMA = """
CREATE TABLE IF NOT EXISTS budgets (
    caller TEXT NOT NULL,
    unit TEXT NOT NULL,
    level {real} NOT NULL,
    at {real} NOT NULL,
    taken BOOLEAN NOT NULL,
    PRIMARY KEY (caller, unit)
);
"""
_BUDGET_TAKE = """
INSERT INTO budgets AS b (caller, unit, level, at, taken)
    VALUES ({caller}, {unit}, {cap} - {amount}, {now}, true)
ON CONFLICT (caller, unit) DO UPDATE SET
    level = {refilled} - CASE WHEN {refilled} >= {amount} THEN {amount} ELSE 0 END,
    taken = {refilled} >= {amount},
    at = excluded.at
RETURNING level, taken
"""
_BUDGET_REFILLED = "{least}({cap}, b.level + {greatest}(0, excluded.at - b.at) * {rate})"


def budget_take_sql(
    param: Callable[[str], str], now: str, least: str, greatest: str, real: str
) -> str:
    """``_BUDGET_TAKE`` in a dialect: ``param(name)`` spells a named parameter."""
    names = {n: param(n) for n in ("caller", "unit", "cap", "amount", "rate")}
    names["cap"] = f"CAST({names['cap']} AS {real})"
    refilled = _BUDGET_REFILLED.format(least=least, greatest=greatest, **names)
    return _BUDGET_TAKE.format(now=now, refilled=refilled, **names)


def budget_schema(real: str) -> str:
    """The budgets table in a dialect (``real``: its floating-point type)."""
    return _BUDGET_SCHEMA.format(real=real)
