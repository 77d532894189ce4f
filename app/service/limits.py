"""Batch limits: per batch its size, text lengths and estimated working memory (TooLarge), and
the batches being computed or stored (the ``inflight`` stat; Overloaded past MAX_INFLIGHT);
the per-caller rate of contamination checks, whose buckets live in the store.

The HTTP layer admits requests before reading their bodies (``app.api.admission``); the count
here is what the service itself is busy with, and a backstop for callers that come another way
(the /ui contamination page)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from neardup.app.config import Settings
from neardup.app.service.errors import Overloaded, RateLimited, TooLarge
from neardup.app.service.store import Store, queued_call

__all__ = ["BatchLimits", "Budgets", "ProbeLimiter"]

# Working memory of a batch, estimated from its size: the tokeniser and hashing scratch per
# character (UTF-32 codes, masks, byte buffers, 8-byte words) and the per-text arrays.
_WORK_BYTES_PER_CHAR = 48
_WORK_BYTES_PER_TEXT = 8 * 1024


class BatchLimits:
    """The per-batch limits of the settings, and the count of batches in flight."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.inflight = 0

    def check_batch(self, size: int) -> None:
        """TooLarge for a batch over MAX_BATCH."""
        if size > self.settings.max_batch:
            raise TooLarge(f"a batch holds at most {self.settings.max_batch} items, got {size}")

    def check_texts(self, texts: Sequence[str], answer_per_text: int = 0) -> None:
        """TooLarge for too many texts, a text over MAX_TEXT_CHARS, or a batch whose estimated
        working memory is over MAX_BATCH_MEMORY (refused before any work, never an OOM kill);
        ``answer_per_text``: the bytes an answer may hold per text besides its text (counted)."""
        self.check_batch(len(texts))
        limit = self.settings.max_text_chars
        total = 0
        for i, text in enumerate(texts):
            if len(text) > limit:
                raise TooLarge(f"text {i} has {len(text)} characters; the limit is {limit}")
            total += len(text)
        per_text = _WORK_BYTES_PER_TEXT + answer_per_text
        estimate = _WORK_BYTES_PER_CHAR * total + per_text * len(texts)
        if estimate > self.settings.max_batch_memory:
            raise TooLarge(
                f"the batch would need about {estimate >> 20} MiB of working memory; the limit "
                f"is {self.settings.max_batch_memory >> 20} MiB: send smaller batches"
            )

    @contextmanager
    def admit(self) -> Iterator[None]:
        """Hold one of MAX_INFLIGHT places for a batch, or raise Overloaded at once."""
        if self.inflight >= self.settings.max_inflight:
            raise Overloaded(
                f"{self.inflight} batches are in flight (the limit is "
                f"{self.settings.max_inflight}); retry shortly"
            )
        self.inflight += 1
        try:
            yield
        finally:
            self.inflight -= 1


class Budgets:
    """The contamination budgets' buckets, in the store (``Store.take_budget``): shared by
    every replica of a shared store, kept across restarts. One store call a check, on a
    thread of its own (a check never waits for a registration's store calls), within
    STORE_TIMEOUT from when it was queued."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="budget")

    async def take(self, caller: str, unit: str, amount: int, per_minute: int) -> float | None:
        """``Store.take_budget`` off the event loop: None if taken, else the units there are."""
        queued = time.monotonic()
        take = self._store.take_budget
        args = (queued, take, caller, unit, amount, per_minute)
        return await asyncio.get_running_loop().run_in_executor(self._thread, queued_call, *args)

    def close(self) -> None:
        """Wait for the check in progress, if any; stop the thread."""
        self._thread.shutdown(wait=True)


class ProbeLimiter:
    """What a caller may check for contamination per minute: a token bucket per caller.

    A contamination check answers whether a text shares an n-gram with a protected set, so a
    caller can extend a seed of protected text a word at a time by probing; the rate bounds how
    fast. Each check is charged ``unit``s (words, at least NGRAM a text, for keys without the
    protect scope; texts for keys with it); the bucket holds a minute's worth. Callers are named
    by a digest of their key ("open" without keys); their buckets live in the store
    (``Budgets``), so every replica of a shared store charges the same ones, and a restart
    does not refill them.
    """

    def __init__(
        self,
        per_minute: int,
        budgets: Budgets,
        *,
        unit: str = "texts",
        setting: str = "NEARDUP_CONTAMINATION_TEXTS_PER_MINUTE",
    ) -> None:
        self.per_minute = per_minute
        self.unit = unit
        self.setting = setting
        self._budgets = budgets

    async def take(self, caller: str, amount: int) -> None:
        """Spend ``amount`` units of ``caller``'s minute, or spend nothing and raise:
        RateLimited (with Retry-After: when they will be there) if short, TooLarge if more than
        a whole minute's (never there: retrying could not help). StoreUnavailable (or
        StoreFull) when the store cannot charge it: the check is refused, never free."""
        if amount > self.per_minute:
            raise TooLarge(
                f"this check is {amount} {self.unit}; a key may check at most {self.per_minute} "
                f"{self.unit} a minute for contamination ({self.setting}): send fewer or "
                "shorter texts a request"
            )
        there = await self._budgets.take(caller, self.unit, amount, self.per_minute)
        if there is None:
            return
        rate = self.per_minute / 60.0
        wait = max(1, math.ceil((amount - there) / rate))
        raise RateLimited(
            f"this key may check {self.per_minute} {self.unit} a minute for contamination "
            f"and this check is {amount}; retry in {wait} s ({self.setting})",
            retry_after=wait,
        )
