"""Decontamination: drop every document sharing a word n-gram with protected eval sets
(docs/algorithm.md section 5), streaming one document at a time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from os import PathLike

from neardup.core._corpus import Doc
from neardup.core._ngrams import NgramIndex, check_n
from neardup.core._protected import protected_paths, read_protected_set

__all__ = ["decontaminate", "decontaminate_with"]


def decontaminate(
    docs: Iterable[Doc],
    protected: Sequence[str | PathLike[str]],
    n: int = 13,
    tokenizer: str = "words",
) -> Iterator[Doc]:
    """Drop every document sharing a word n-gram (words by ``tokenizer``) with the protected
    FILES ``protected``.

    The files are read (and every misuse raised) when this is called: a lone path or string, a
    set of n-grams, or a path that is not a readable file is an error, never a silent pass.
    The documents then stream: one is read at a time and yielded before the next, so an
    endless input works.

    Raises:
        ParameterError: ``protected`` is not a list of paths, or ``n`` < 1.
        CorpusError: a protected file is missing, unreadable or has a bad JSONL line.
    """
    check_n(n)
    sets = [read_protected_set(path, n, tokenizer=tokenizer) for path in protected_paths(protected)]
    grams = {g for s in sets for g in s.grams}
    # the sets know their whole items: the index need not weigh every n-gram to find them
    wholes = {g for s in sets for g in s.wholes or ()}
    return decontaminate_with(docs, NgramIndex(grams, n, tokenizer, wholes))


def decontaminate_with(docs: Iterable[Doc], index: NgramIndex) -> Iterator[Doc]:
    """``decontaminate`` against a prepared ``NgramIndex`` (n-grams already in hand); streams."""
    for doc in docs:
        if not index.contaminated(doc.text):
            yield doc
