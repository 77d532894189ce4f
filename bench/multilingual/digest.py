"""What the tokenizers make of the whole benchmark corpus, as digests to compare across
versions of the code: ``python -m bench.multilingual.digest``.

Per language (``catalogs.LANGUAGES``), the documents ``bench.multilingual`` measures and every
copy it plants (1/3/5 % word edits, diacritic-only edits, NFD, full-width: the paths of the
kernel that compose, reorder marks or hand a text back to ``normalize``), and under each
tokenizer, one SHA-256 over the tokens (the bytes, word spans and words per document) of the
compiled kernel (its arrays as they are), of the numpy path, and over the MinHash signatures
(defaults). A change of speed that must not change a bit is checked by running this before
and after it and comparing the lines (``diff``); a line also says whether the compiled and
numpy paths give the same words.

Run from the repository root::

    python -m bench.multilingual.digest [--languages zh_CN,ta,...] [--docs N] [--copies C]
"""

from __future__ import annotations

import argparse
import hashlib

import numpy as np

from bench.multilingual.__main__ import COPIES, TOKENIZERS, _copies
from bench.multilingual.catalogs import LANGUAGES, ROOTS, documents, language_messages
from neardup.core._tokens import Tokens
from neardup.core.minhash import signatures

__all__ = ["corpus", "digests", "main"]


def corpus(language: str, docs: int, copies: int, roots: tuple[str, ...] = ROOTS) -> list[str]:
    """The language's documents and their planted copies (``bench.multilingual``'s, seed 0);
    every message of a language with too little text for one document; none if not
    installed."""
    found, _ = language_messages(language, roots)
    grouped = documents(found, docs)
    if not grouped:
        return [m.text for m in found]
    texts = [" ".join(m.text for m in doc) for doc in grouped]
    planted = _copies(language, texts, copies)
    return texts + [c for kind in COPIES for c, _ in planted[kind]]


def _arrays_digest(tokens: Tokens) -> str:
    """Of the arrays as they are (the buffer's layout between words too)."""
    h = hashlib.sha256()
    for array in (tokens.buf, tokens.word_start, tokens.word_end, tokens.doc_words):
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()[:16]


def _words_digest(tokens: Tokens) -> str:
    """Of the words alone, document by document (the compiled and numpy buffers of ``words``
    lay them out differently)."""
    buf = tokens.buf.tobytes()
    spans = zip(tokens.word_start.tolist(), tokens.word_end.tolist(), strict=True)
    words = [buf[a:b] for a, b in spans]
    h = hashlib.sha256(np.ascontiguousarray(tokens.doc_words).tobytes())
    h.update(b"\0".join(words))
    return h.hexdigest()[:16]


def digests(texts: list[str], tokenizer: str) -> tuple[str, str, str, bool]:
    """Digests of ``texts`` under ``tokenizer``: the compiled tokens' arrays, the numpy ones',
    the signatures; and whether both paths give the same words."""
    compiled = Tokens(texts, jit=True, tokenizer=tokenizer)
    plain = Tokens(texts, jit=False, tokenizer=tokenizer)
    sigs = hashlib.sha256(signatures(texts, tokenizer=tokenizer).tobytes()).hexdigest()[:16]
    agree = _words_digest(compiled) == _words_digest(plain)
    return _arrays_digest(compiled), _arrays_digest(plain), sigs, agree


def main(argv: list[str] | None = None) -> int:
    """Print one line per language and tokenizer: texts, bytes, the three digests."""
    parser = argparse.ArgumentParser(prog="python -m bench.multilingual.digest")
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--copies", type=int, default=120)
    parser.add_argument(
        "--catalogs",
        default=":".join(ROOTS),
        help="colon-separated roots of LOCALE/LC_MESSAGES/*.mo (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    roots = tuple(root for root in args.catalogs.split(":") if root)
    print("language tokenizer texts bytes compiled numpy signatures same-words")
    for language in args.languages.split(","):
        texts = corpus(language, args.docs, args.copies, roots)
        if not texts:
            print(f"{language} not installed")
            continue
        size = sum(len(t.encode("utf-8")) for t in texts)
        for tokenizer in TOKENIZERS:
            compiled, plain, sigs, agree = digests(texts, tokenizer)
            same = "yes" if agree else "NO"
            print(f"{language} {tokenizer} {len(texts)} {size} {compiled} {plain} {sigs} {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
