"""Decontamination per language: false flags on clean documents and catches of quotes.

Eval items: messages whose English source has 13 to 20 words (the quote the goal speaks of: 13
English-word-equivalents or more), a seeded sample. Clean documents: documents
(``catalogs.documents``) of the other messages, leaving out every message whose English source
or text is that of an item, so that none quotes an item; a flag on one is false. Quotes: a clean
document with one whole item inserted between two of its messages; a flag is a catch.

The protected set is built by core's own ``parse_protected_set`` with its default n-gram length
for the tokenizer (``n`` is not passed: a length core chooses per tokenizer or script is what
is measured), and the length it used is reported (``ProtectedSet.n``). The same items and
documents in English (their messages' English sources) are the baseline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from bench.multilingual.catalogs import Message, documents, english_words
from neardup.core._windows import protected_grams
from neardup.core.engine import ProtectedFormat, parse_protected_set, words

__all__ = ["DecontCase", "Flags", "case", "flags"]

QUOTE_WORDS = (13, 20)


@dataclass
class DecontCase:
    """A language's eval items, clean documents and quoting documents (the i-th quotes the
    i-th item); each message holds its English source too."""

    items: list[Message]
    clean: list[list[Message]]
    quotes: list[list[Message]]


@dataclass(frozen=True)
class Flags:
    """Clean documents flagged and quotes caught, of how many, with the n-gram length used and
    the items too short for one n-gram window and not protected whole (never caught)."""

    n: int
    short: int
    false_flags: int
    clean: int
    caught: int
    quotes: int


def case(found: list[Message], items: int, clean: int, seed: int = 0) -> DecontCase:
    """Up to ``items`` eval items and ``clean`` clean documents of a language's messages, and
    one quoting document per item."""
    low, high = QUOTE_WORDS
    long = [m for m in found if low <= english_words(m.english) <= high]
    rng = np.random.default_rng([seed, len(found)])
    picked = [long[i] for i in sorted(rng.permutation(len(long))[:items].tolist())]
    english = {m.english for m in picked}
    texts = {m.text for m in picked}
    rest = [m for m in found if m.english not in english and m.text not in texts]
    docs = documents(rest, clean)
    quotes = []
    for i, item in enumerate(picked):
        if not docs:
            break
        doc = docs[i % len(docs)]
        middle = len(doc) // 2
        quotes.append([*doc[:middle], item, *doc[middle:]])
    return DecontCase(picked, docs, quotes)


def _text(doc: list[Message], english: bool) -> str:
    return " ".join(m.english if english else m.text for m in doc)


def flags(data: DecontCase, tokenizer: str, english: bool) -> Flags:
    """The flags of the protected set of the items, by ``tokenizer`` at core's n-gram length,
    on the clean and quoting documents (in English with ``english``)."""
    body = "\n".join(
        json.dumps({"id": str(i), "text": m.english if english else m.text})
        for i, m in enumerate(data.items)
    )
    protected = parse_protected_set("eval", body, ProtectedFormat.JSONL, tokenizer=tokenizer)
    clean = [_text(d, english) for d in data.clean]
    quotes = [_text(d, english) for d in data.quotes]
    flagged = sum(bool(hits) for hits in protected.hits_many(clean))
    # A quote is caught when the item it quotes is among its hits (not another item's).
    caught = sum(
        any(label == str(i) for label, _ in hits)
        for i, hits in enumerate(protected.hits_many(quotes))
    )
    short = sum(
        not protected_grams(words(_text([m], english), tokenizer), protected.n, tokenizer)
        for m in data.items
    )
    return Flags(protected.n, short, flagged, len(clean), caught, len(quotes))


def main(argv: list[str] | None = None) -> int:
    """Print the decontamination cells of ``bench.multilingual``'s table (its seed and sizes:
    100 items, up to 300 clean documents) under ``multilingual``, English's in brackets."""
    import argparse

    from bench.multilingual.catalogs import language_messages

    parser = argparse.ArgumentParser(prog="python -m bench.multilingual.decont",
                                     description=(main.__doc__ or "").split("\n")[0])  # fmt: skip
    parser.add_argument("--languages", default="zh_CN,zh_TW,ja,th,km,my,dz")
    args = parser.parse_args(argv)
    print("| language | short | false flags (English) | quotes caught (English) |")
    print("|---|---:|---:|---:|")
    for language in args.languages.split(","):
        found, _ = language_messages(language)
        data = case(found, 100, 300)
        own, en = flags(data, "multilingual", False), flags(data, "multilingual", True)
        print(f"| {language} | {own.short} | {own.false_flags}/{own.clean} "
              f"({en.false_flags}/{en.clean}) | {own.caught}/{own.quotes} "
              f"({en.caught}/{en.quotes}) |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
