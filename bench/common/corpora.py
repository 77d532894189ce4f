"""The four benchmark corpora: web-like English, multilingual, ASCII, and real text on this machine.

- ``web`` (a): the ASCII documents of ``bench.common.corpus`` dressed the way web text is:
  typographic apostrophes, quotes, dashes and ellipses, accented names and loanwords, a few
  prices, no-break spaces and, rarely, a word of another script. Nearly every document holds a
  non-ASCII character.
- ``multilingual`` (b): each document mostly in one of Latin with diacritics, Cyrillic, Greek
  (final sigma, capital sigma, all-caps headings), Arabic or CJK (runs without spaces), with
  English words and emoji mixed in.
- ``ascii`` (c): ``bench.common.corpus.documents``, the corpus of the earlier results.
- ``real`` (d): documentation and licence files of the packages installed on this machine
  (``/usr/share/doc``, ``/usr/share/common-licenses``, the interpreter's ``*.dist-info``), read
  at run time (never committed) and cut into documents at paragraph breaks.

The generated ones are seeded (``numpy.random.default_rng``); the real one depends on what is
installed, so its size and make-up are reported with the results.
"""

from __future__ import annotations

import gzip
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.common.corpus import documents, vocabulary, zipf_probabilities

__all__ = [
    "CORPORA",
    "Corpus",
    "ascii_documents",
    "corpus",
    "multilingual_documents",
    "real_documents",
    "web_documents",
]

_NAMES = [
    *("José", "Zoë", "Renée", "Müller", "François", "Ångström", "Dvořák", "Łukasz", "Søren"),
    *("Núñez", "Björk", "Chloé", "Gödel", "Škoda", "Nguyễn", "Øyvind", "Ibáñez", "Çelik"),
    *("Brontë", "Saint-Saëns", "Erdős", "Đorđević", "Jürgen", "Siân", "Małgorzata", "Tomás"),
]
_LOANWORDS = ["café", "naïve", "façade", "résumé", "déjà", "vu", "jalapeño", "über", "coöp"]
_OTHER_SCRIPTS = ["Москва", "Αθήνα", "東京", "서울", "القاهرة", "Київ", "मुंबई", "ΣΟΦΙΑ", "北京市"]
_SYMBOLS = ["€{}", "£{}", "{}°C", "{} ©", "№{}", "{}™", "±{}", "{}×{}"]
_APOSTROPHE_SUFFIXES = ["\u2019s", "n\u2019t", "\u2019ll", "\u2019re", "\u2019d"]
_QUOTES = [("\u201c", "\u201d"), ("\u2018", "\u2019"), ("«\u00a0", "\u00a0»")]
# Per-word rates of each touch in the web corpus (about 6 % of words are touched).
_WEB_RATES = {
    "name": 0.012,
    "apostrophe": 0.012,
    "quote": 0.008,
    "dash": 0.008,
    "loanword": 0.005,
    "nbsp": 0.005,
    "symbol": 0.003,
    "ellipsis": 0.003,
    "script": 0.002,
}


def ascii_documents(n: int, seed: int = 0) -> list[str]:
    """Corpus (c): ``bench.common.corpus.documents(n, seed=seed)``, ASCII only."""
    return documents(n, seed=seed)


def web_documents(n: int, seed: int = 0) -> list[str]:
    """Corpus (a): the ASCII documents of the same seed, dressed as web text.

    Args:
        n: how many documents.
        seed: the seed of the ASCII documents and of the touches.

    Returns:
        ``n`` documents; the same list for the same arguments.
    """
    rng = np.random.default_rng([seed, 2])
    kinds = list(_WEB_RATES)
    cdf = np.cumsum(list(_WEB_RATES.values()))
    out = []
    for text in documents(n, seed=seed):
        words = text.split(" ")
        touch = np.searchsorted(cdf, rng.random(len(words)), side="right")
        for pos in np.flatnonzero(touch < len(kinds)).tolist():
            words[pos] = _touch(kinds[int(touch[pos])], words[pos], rng)
        out.append(" ".join(words))
    return out


def _pick(rng: np.random.Generator, items: list[str]) -> str:
    return items[int(rng.integers(len(items)))]


def _touch(kind: str, word: str, rng: np.random.Generator) -> str:
    """One web-text touch of ``word``."""
    if kind == "name":
        return f"{word} {_pick(rng, _NAMES)}"
    if kind == "apostrophe":
        stem = word.rstrip(".,;!?")
        return stem + _pick(rng, _APOSTROPHE_SUFFIXES) + word[len(stem) :]
    if kind == "quote":
        left, right = _QUOTES[int(rng.integers(len(_QUOTES)))]
        return f"{left}{word}{right}"
    if kind == "dash":
        return f"{word} {'—' if rng.random() < 0.8 else '–'}"
    if kind == "loanword":
        return f"{word} {_pick(rng, _LOANWORDS)}"
    if kind == "nbsp":
        return f"{word}\u00a0{_pick(rng, ['km', 'kg', '%', 'MB', 'h'])}"
    if kind == "symbol":
        amount = str(int(rng.integers(1, 1000)))
        return f"{word} {_pick(rng, _SYMBOLS).format(amount, amount)}"
    if kind == "ellipsis":
        return f"{word.rstrip('.,;!?')}…"
    return f"{word} {_pick(rng, _OTHER_SCRIPTS)}"


# --- multilingual ---------------------------------------------------------------------------

_LATIN_ONSETS = ["b", "c", "d", "f", "g", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"]
_LATIN_ONSETS += ["ç", "ł", "ñ", "ř", "ș", "ț", "ż", "š", "č", "ğ", "ß", "sz", "cz", "gn"]
_LATIN_NUCLEI = ["a", "e", "i", "o", "u", "á", "é", "í", "ó", "ú", "à", "è", "ä", "ö", "ü"]
_LATIN_NUCLEI += ["â", "ê", "ô", "ã", "õ", "å", "ø", "æ", "ő", "ű", "ą", "ę", "ı", "ė"]
_CYRILLIC_ONSETS = [*"бвгджзклмнпрстфхцчшщ", "ст", "пр", "др"]
_CYRILLIC_NUCLEI = [*"аеиоуыэюяё", "ой", "ей", "ий", "ь", "ъе", "ї", "є", "і"]
_GREEK_ONSETS = [*"βγδζθκλμνξπρστφχψ", "στ", "πρ", "τρ"]
_GREEK_NUCLEI = [*"αεηιουωάέήίόύώ", "αι", "ει", "ου", "οι"]
_ARABIC_LETTERS = [*"ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "ة", "ى", "ء", "أ", "إ", "ؤ"]
_CJK_RANGES = [(0x4E00, 0x9FFF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3)]
_EMOJI = ["🙂", "😂", "👍", "🎉", "🔥", "❤️", "🚀", "🇫🇷", "👩‍💻", "✅", "🤔", "🌍"]
_SCRIPTS = ["latin", "cyrillic", "greek", "arabic", "cjk"]
_SCRIPT_END = {
    "latin": [".", ".", "!", "?", ";", "…"],
    "cyrillic": [".", ".", "!", "?", "…"],
    "greek": [".", ".", "!", ";", "·"],
    "arabic": [".", "؟", "،", "!"],
    "cjk": ["。", "。", "！", "？", "，"],
}


def _syllable_word(rng: np.random.Generator, onsets: list[str], nuclei: list[str]) -> str:
    parts = [_pick(rng, onsets) + _pick(rng, nuclei) for _ in range(int(rng.integers(1, 5)))]
    return "".join(parts)


def _script_word(script: str, rng: np.random.Generator) -> str:
    """One pseudo-word of ``script``."""
    if script == "latin":
        return _syllable_word(rng, _LATIN_ONSETS, _LATIN_NUCLEI)
    if script == "cyrillic":
        return _syllable_word(rng, _CYRILLIC_ONSETS, _CYRILLIC_NUCLEI)
    if script == "greek":
        word = _syllable_word(rng, _GREEK_ONSETS, _GREEK_NUCLEI)
        return word + "ς" if rng.random() < 0.3 else word
    if script == "arabic":
        return "".join(_pick(rng, _ARABIC_LETTERS) for _ in range(int(rng.integers(2, 8))))
    lo, hi = _CJK_RANGES[int(rng.integers(len(_CJK_RANGES)))]
    return "".join(chr(int(c)) for c in rng.integers(lo, hi + 1, size=int(rng.integers(1, 4))))


def _script_vocabulary(script: str, size: int, seed: int) -> list[str]:
    rng = np.random.default_rng([seed, 3, _SCRIPTS.index(script)])
    seen: dict[str, None] = {}
    while len(seen) < size:
        seen.setdefault(_script_word(script, rng), None)
    return sorted(seen, key=len)


def multilingual_documents(n: int, seed: int = 0, vocab_size: int = 5000) -> list[str]:
    """Corpus (b): documents mostly in one script each, with English words and emoji mixed in.

    CJK sentences are runs of characters without spaces (each run is one ``\\w+`` word), as in
    real CJK text; Greek has final sigmas, capital sigmas and, now and then, an all-caps
    heading.

    Args:
        n: how many documents.
        seed: the seed of the vocabularies and the documents.
        vocab_size: distinct pseudo-words per script.

    Returns:
        ``n`` documents; the same list for the same arguments.
    """
    vocab = {s: np.array(_script_vocabulary(s, vocab_size, seed), dtype=object) for s in _SCRIPTS}
    english = np.array(vocabulary(vocab_size, seed), dtype=object)
    cdf = np.cumsum(zipf_probabilities(vocab_size))
    rng = np.random.default_rng([seed, 4])
    out = []
    for _ in range(n):
        script = _SCRIPTS[int(rng.integers(len(_SCRIPTS)))]
        length = int(rng.integers(150, 401))
        ranks = np.minimum(np.searchsorted(cdf, rng.random(length) * cdf[-1]), vocab_size - 1)
        words = list(vocab[script][ranks])
        foreign = np.flatnonzero(rng.random(length) < 0.08)
        for pos in foreign.tolist():
            words[pos] = str(english[ranks[pos]])
        for pos in np.flatnonzero(rng.random(length) < 0.015).tolist():
            words[pos] += _pick(rng, _EMOJI)
        out.append(_render_script(words, script, rng))
    return out


def _render_script(words: list[str], script: str, rng: np.random.Generator) -> str:
    """Words as sentences in the conventions of ``script``."""
    sentences = []
    pos = 0
    joiner = "" if script == "cjk" else " "
    while pos < len(words):
        length = int(rng.integers(4, 25))
        sentence = words[pos : pos + length]
        pos += length
        if script == "cjk":
            # Runs of 2-6 CJK words without spaces; English words keep spaces around them.
            text = ""
            for w in sentence:
                text += (" " + w + " ") if w.isascii() else w
        else:
            if script == "greek" and rng.random() < 0.05:
                sentence = [w.upper() for w in sentence]
            else:
                sentence[0] = sentence[0].capitalize()
            text = joiner.join(sentence)
        sentences.append(text + _pick(rng, _SCRIPT_END[script]))
    return " ".join(sentences)


# --- real text ------------------------------------------------------------------------------

_REAL_ROOTS = [Path("/usr/share/common-licenses"), Path("/usr/share/doc")]
_REAL_DOC_CHARS = 1500
_REAL_MAX_FILE = 1 << 20
_DIST_INFO_TEXTS = ("*.dist-info/LICEN[CS]E*", "*.dist-info/licenses/**/*", "*.dist-info/METADATA")


def _real_files() -> list[Path]:
    """Candidate files, in path order: licences, package docs, and installed dist-info."""
    files: dict[Path, Path] = {}
    roots = list(_REAL_ROOTS)
    site = Path(sysconfig.get_paths()["purelib"])
    for root in roots:
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    files.setdefault(path.resolve(), path)
    if site.is_dir():
        for pattern in _DIST_INFO_TEXTS:
            for path in sorted(site.glob(pattern)):
                if path.is_file():
                    files.setdefault(path.resolve(), path)
    return sorted(files.values())


def _read_text(path: Path) -> str | None:
    """The text of a file (gunzipped if ``.gz``), or None if it is not UTF-8 text."""
    try:
        if path.stat().st_size > _REAL_MAX_FILE:
            return None
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        text = raw[:_REAL_MAX_FILE].decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile):
        return None
    return None if "\0" in text else text


def _paragraph_documents(text: str) -> Iterator[str]:
    """Consecutive paragraphs of ``text`` gathered into documents of about 1,500 characters."""
    current: list[str] = []
    size = 0
    for paragraph in text.split("\n\n"):
        current.append(paragraph)
        size += len(paragraph)
        if size >= _REAL_DOC_CHARS:
            yield "\n\n".join(current)
            current, size = [], 0
    if current and size >= _REAL_DOC_CHARS // 10:
        yield "\n\n".join(current)


def real_documents(n: int, seed: int = 0) -> list[str]:
    """Corpus (d): up to ``n`` documents cut from text files installed on this machine.

    Files are read in a seeded random order (of their sorted paths) until ``n`` documents are
    gathered; each file is cut at blank lines into documents of about 1,500 characters.

    Args:
        n: how many documents (fewer if the machine does not hold enough text).
        seed: the order the files are read in.

    Returns:
        The documents; the same list for the same seed on the same installation.
    """
    files = _real_files()
    order = np.random.default_rng([seed, 5]).permutation(len(files))
    out: list[str] = []
    for i in order.tolist():
        text = _read_text(files[i])
        if text is None:
            continue
        out.extend(_paragraph_documents(text))
        if len(out) >= n:
            break
    return out[:n]


@dataclass(frozen=True)
class Corpus:
    """A named corpus and how to make it.

    Attributes:
        key: the short name used on the command line and in tables.
        label: what it is, for the tables.
        make: ``make(n, seed)`` returns the documents.
    """

    key: str
    label: str
    make: Callable[[int, int], list[str]]


#: The four corpora, in the order every report lists them.
CORPORA = {
    "web": Corpus("web", "(a) web-like English, typographic punctuation, names", web_documents),
    "multilingual": Corpus(
        "multilingual",
        "(b) multilingual: Latin, Cyrillic, Greek, Arabic, CJK, emoji",
        multilingual_documents,
    ),
    "ascii": Corpus("ascii", "(c) ASCII pseudo-English (earlier results)", ascii_documents),
    "real": Corpus("real", "(d) real: installed docs and licences", real_documents),
}


def corpus(key: str, n: int, seed: int = 0) -> list[str]:
    """The documents of corpus ``key`` (one of ``CORPORA``)."""
    return CORPORA[key].make(n, seed)
