"""How much text a multilingual word is, per language: ``python -m bench.multilingual.ratios``.

Every message of the installed gettext catalogs is a pair: the English source (``msgid``) and
its translation (``msgstr``). Over the pairs of at least three English words (``%`` formats
left out), the table gives the translation's words by the ``multilingual`` tokenizer per
English word (``words``), its characters per English word, and so how many multilingual
words cover what 13 English words do: the n a decontamination n-gram needs in that language
to mean the same amount of text (docs/algorithm.md section 5).
"""

from __future__ import annotations

import argparse

from bench.multilingual.catalogs import catalogs, read_mo
from neardup.core.engine import ParameterError, words

#: The languages measured (those of the issue).
LOCALES = (
    "de", "ru", "el", "vi", "ko", "zh_CN", "zh_TW", "ja", "th", "km", "my", "lo", "hi", "bn",
    "ta", "si", "ar", "he",
)  # fmt: skip


def ratios(locale: str) -> tuple[int, float, float] | None:
    """(English words, multilingual words per English word, characters per English word) of
    ``locale``'s catalogs, or None without any."""
    english = tokens = chars = 0
    for path in catalogs(locale):
        try:
            pairs = read_mo(path)
        except ParameterError:
            continue
        for msgid, msgstr in pairs:
            source, target = msgid.split("\0")[0], msgstr.split("\0")[0]
            if not source or not target or "%" in source:
                continue
            english_words = words(source)
            if len(english_words) < 3:
                continue
            english += len(english_words)
            tokens += len(words(target, "multilingual"))
            chars += len(target)
    return (english, tokens / english, chars / english) if english else None


def main(argv: list[str] | None = None) -> int:
    """Print the table (markdown) for ``--locales`` (default ``LOCALES``)."""
    parser = argparse.ArgumentParser(prog="python -m bench.multilingual.ratios")
    parser.add_argument("--locales", default=",".join(LOCALES))
    args = parser.parse_args(argv)
    print("| language | English words | words per English word | characters per English "
          "word | words for 13 English words |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: |")
    for locale in args.locales.split(","):
        found = ratios(locale)
        if found is None:
            print(f"| {locale} | no catalogs | | | |")
            continue
        english, per_word, chars = found
        print(f"| {locale} | {english:,} | {per_word:.2f} | {chars:.2f} | {round(13 * per_word)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
