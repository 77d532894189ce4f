"""Batch limits: per batch its size, text lengths and estimated working memory (TooLarge), and
the batches being computed or stored (the ``inflight`` stat; Overloaded past MAX_INFLIGHT).

The HTTP layer admits requests before reading their bodies (``app.api.admission``); the count
here is what the service itself is busy with, and a backstop for callers that come another way
(the /ui contamination page)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from app.config import Settings
from app.service.errors import Overloaded, TooLarge

__all__ = ["BatchLimits"]

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

    def check_texts(self, texts: Sequence[str]) -> None:
        """TooLarge for too many texts, a text over MAX_TEXT_CHARS, or a batch whose estimated
        working memory is over MAX_BATCH_MEMORY (refused before any work, never an OOM kill)."""
        self.check_batch(len(texts))
        limit = self.settings.max_text_chars
        total = 0
        for i, text in enumerate(texts):
            if len(text) > limit:
                raise TooLarge(f"text {i} has {len(text)} characters; the limit is {limit}")
            total += len(text)
        estimate = _WORK_BYTES_PER_CHAR * total + _WORK_BYTES_PER_TEXT * len(texts)
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
