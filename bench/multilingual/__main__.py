"""Tokenizers on real translated text, per language: copies found, false merges,
decontamination and speed, for ``words`` and ``multilingual``.

Per language (``catalogs.LANGUAGES``), documents of real translated messages from the gettext
catalogs installed on this machine (``bench.multilingual.catalogs``; a language without any is
a "not installed" row), each of about 120 words in English (counted on the messages' English
sources, so every language holds the same amount of text). Under each tokenizer, at the
defaults (128 permutations, 16 bands, threshold 0.8, k = 5):

- copies found: a seeded sample of the documents is copied with 1, 3 and 5 % of their words
  replaced, with the language's diacritic-only edit on 5 % of their words
  (``edits.DIACRITICS``), in NFD, and (Chinese, Japanese, Korean) in full-width forms
  (``bench.multilingual.edits``); each kind of copy is clustered with the originals on its own
  (``cluster_roots``), and a copy is found when it shares its original's cluster. A NFD or
  full-width copy identical to its original is not planted.
- false merges: of the pairs the LSH bands propose and the estimate confirms (>= 0.8) among the
  originals and all their copies, those whose exact Jaccard of the same shingles is below 0.8.
- decontamination (``bench.multilingual.decont``): clean documents flagged and quotes of an
  item of 13 to 20 English words caught, at the n-gram length core uses for the tokenizer; the
  same messages in English as the baseline.
- speed: the tokenising of the language's documents (where the tokenizers differ), CPU
  seconds per MB of UTF-8, with the compiled kernel and with numpy, and the whole signature
  (compiled); the fastest of ``--repeats`` runs (others load the machine).

Run from the repository root::

    python -m bench.multilingual [--docs N] [--copies C] [--items I] [--clean D] [--quick]
        [--markdown]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from numpy.typing import NDArray

from bench.common import options
from bench.common.machine import at_start, facts, load_average
from bench.common.options import Size
from bench.multilingual.catalogs import (
    LANGUAGES,
    ROOTS,
    documents,
    english_words,
    language_messages,
)
from bench.multilingual.decont import Flags, case, flags
from bench.multilingual.edits import (
    DIACRITICS,
    FULLWIDTH_LANGUAGES,
    diacritic_copy,
    fullwidth_copy,
    near_copy,
    nfd_copy,
)
from neardup.core._multilingual import normalize
from neardup.core._tokens import Tokens
from neardup.core.engine import (
    MinhashParams,
    candidate_pairs,
    cluster_roots,
    confirm,
    jaccard,
    shingles,
)
from neardup.core.minhash import signatures

__all__ = ["COPIES", "TOKENIZERS", "Language", "main", "measure"]

SIZES = {
    "docs": Size("documents per language", 400, 60),
    "copies": Size("documents copied per kind of copy", 120, 25),
    "items": Size("eval items per language", 100, 25),
    "clean": Size("clean documents per language", 300, 50),
    "repeats": Size("timed runs per figure (the fastest is kept)", 5, 2),
    "speed_kb": Size("KB of UTF-8 timed per language (its documents, repeated)", 1000, 200),
}
TOKENIZERS = ("words", "multilingual")
#: The kinds of copy, in the tables' order.
COPIES = ("1 %", "3 %", "5 %", "diacritics", "NFD", "full-width")
_SHARES = {"1 %": 0.01, "3 %": 0.03, "5 %": 0.05}
#: The languages written without spaces: the issue's goal for decontamination is theirs.
UNSPACED = ("zh_CN", "zh_TW", "ja", "th", "km", "my", "lo", "bo", "dz")


@dataclass
class Language:
    """What was measured for one language (``catalogs == 0``: not installed; ``docs == 0``:
    too little text for one document, ``messages`` messages of ``english`` English words)."""

    language: str
    catalogs: int
    messages: int = 0
    english: int = 0
    docs: int = 0
    copies: dict[str, int] = field(default_factory=dict)
    found: dict[tuple[str, str], float] = field(default_factory=dict)
    #: Share of the copies whose exact Jaccard with their original is >= 0.8 (reachable).
    reachable: dict[tuple[str, str], float] = field(default_factory=dict)
    merges: dict[str, tuple[int, int]] = field(default_factory=dict)
    decont: dict[tuple[str, bool], Flags] = field(default_factory=dict)
    speed: dict[tuple[str, str], float] = field(default_factory=dict)
    megabytes: float = 0.0


def _copies(
    language: str, texts: list[str], count: int, seed: int = 0
) -> dict[str, list[tuple[str, int]]]:
    """Per kind of copy, (copy, row of its original) for a seeded sample of the documents."""
    rng = np.random.default_rng([seed, len(texts)])
    sample = rng.permutation(len(texts))[:count].tolist()
    out: dict[str, list[tuple[str, int]]] = {kind: [] for kind in COPIES}
    for row in sample:
        text = texts[row]
        for kind, share in _SHARES.items():
            out[kind].append((near_copy(text, share, rng), row))
        marked = diacritic_copy(text, language, 0.05, rng)
        if marked is not None and marked != text:
            out["diacritics"].append((marked, row))
        if (nfd := nfd_copy(text)) != text:
            out["NFD"].append((nfd, row))
        if language in FULLWIDTH_LANGUAGES and (wide := fullwidth_copy(text)) != text:
            out["full-width"].append((wide, row))
    return out


def _found(
    texts: list[str], base: NDArray[np.uint32], copies: list[tuple[str, int]], tokenizer: str
) -> tuple[float, float]:
    """The share of the copies in their original's cluster (originals and these copies), and
    the share whose exact Jaccard with their original is at least the threshold."""
    params = MinhashParams()
    sigs = signatures([c for c, _ in copies], tokenizer=tokenizer)
    roots = cluster_roots(np.concatenate([base, sigs]), params)
    n = len(base)
    found = sum(roots[n + j] == roots[row] for j, (_, row) in enumerate(copies))
    close = sum(
        jaccard(shingles(c, params.k, tokenizer), shingles(texts[row], params.k, tokenizer))
        >= params.threshold
        for c, row in copies
    )
    return found / len(copies), close / len(copies)


def _false_merges(texts: list[str], tokenizer: str) -> tuple[int, int]:
    """(pairs confirmed by the bands and the estimate, those of exact Jaccard below 0.8)."""
    params = MinhashParams()
    sigs = signatures(texts, tokenizer=tokenizer)
    pairs = confirm(sigs, candidate_pairs(sigs, params.bands), params.threshold)
    sets: dict[int, set[str]] = {}

    def own(i: int) -> set[str]:
        if i not in sets:
            sets[i] = shingles(texts[i], params.k, tokenizer)
        return sets[i]

    wrong = sum(jaccard(own(a), own(b)) < params.threshold for a, b in pairs.tolist())
    return len(pairs), wrong


def _seconds_per_mb(work: Callable[[], object], megabytes: float, repeats: int) -> float:
    work()  # tables built, kernels warm
    runs = []
    for _ in range(repeats):
        # CPU seconds of this process (all of the work runs in it): on a machine others load,
        # wall time measures them too. The fastest run, for the same reason.
        started = time.process_time()
        work()
        runs.append(time.process_time() - started)
    return min(runs) / megabytes


def _speed(texts: list[str], repeats: int) -> dict[tuple[str, str], float]:
    """Seconds per MB, by (tokenizer, path): tokenising compiled and numpy, signature compiled,
    and the multilingual tokenizer's normalization alone (NFKC, case folding, dropped marks)."""
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    out = {}
    for tokenizer in TOKENIZERS:
        for path, jit in (("compiled", True), ("numpy", False)):
            out[tokenizer, path] = _seconds_per_mb(
                partial(Tokens, texts, jit=jit, tokenizer=tokenizer), megabytes, repeats
            )
        out[tokenizer, "signature"] = _seconds_per_mb(
            partial(signatures, texts, tokenizer=tokenizer), megabytes, repeats
        )
    out["multilingual", "normalize"] = _seconds_per_mb(
        partial(_normalized, texts), megabytes, repeats
    )
    return out


def _normalized(texts: list[str]) -> list[str]:
    return [normalize(t) for t in texts]


def measure(language: str, sizes: dict[str, int], roots: tuple[str, ...] = ROOTS) -> Language:
    """Every figure of one language; a row of ``catalogs == 0`` if none is installed."""
    found, read = language_messages(language, roots)
    docs = documents(found, sizes["docs"])
    if not docs:
        return Language(language, read, len(found), sum(english_words(m.english) for m in found))
    texts = [" ".join(m.text for m in doc) for doc in docs]
    out = Language(language, read, docs=len(texts))
    planted = _copies(language, texts, sizes["copies"])
    out.copies = {kind: len(c) for kind, c in planted.items()}
    everything = texts + [c for kind in COPIES for c, _ in planted[kind]]
    data = case(found, sizes["items"], sizes["clean"])
    for tokenizer in TOKENIZERS:
        base = signatures(texts, tokenizer=tokenizer)
        for kind in COPIES:
            if planted[kind]:
                got = _found(texts, base, planted[kind], tokenizer)
                out.found[tokenizer, kind], out.reachable[tokenizer, kind] = got
        out.merges[tokenizer] = _false_merges(everything, tokenizer)
        for english in (False, True):
            out.decont[tokenizer, english] = flags(data, tokenizer, english)
    own = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    timed = texts * max(1, round(sizes["speed_kb"] / 1000 / own))
    out.megabytes = own * len(timed) / len(texts)
    out.speed = _speed(timed, sizes["repeats"])
    return out


def _missing(row: Language) -> str | None:
    """Why a language has no figures, or None."""
    if not row.catalogs:
        return "not installed"
    if not row.docs:
        return f"too little text ({row.messages} messages, {row.english} English words)"
    return None


def _rate(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "-"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def _quality_table(rows: list[Language]) -> list[str]:
    diacritic_names = ", ".join(f"{lang}: {name}" for lang, (name, _) in DIACRITICS.items())
    out = [
        "### Copies found and false merges",
        "",
        "Share of planted copies found in their original's cluster (copies of each kind: the "
        "`copies` column, in the order 1/3/5 %, diacritics, NFD, full-width; `-`: none planted, "
        "the edit is not defined for the language or leaves its text as it is); in brackets, the "
        "share of them whose exact Jaccard with their original is >= 0.8 (what the threshold "
        "lets be found: with k = 5, 3 % of the words replaced already leaves about 0.75). "
        f"Diacritic-only edits on 5 % of the words ({diacritic_names}). False merges: confirmed "
        "pairs (bands + estimate >= 0.8) among originals and all copies whose exact Jaccard of "
        "the same shingles is below 0.8.",
        "",
        "| language | catalogs | documents | copies | tokenizer | 1 % | 3 % | 5 % | diacritics "
        "| NFD | full-width | confirmed pairs | false merges |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if why := _missing(row):
            out.append(f"| {row.language} | {row.catalogs} | {why} | | | | | | | | | | |")
            continue
        counts = "/".join(str(row.copies[k]) for k in COPIES)
        for tokenizer in TOKENIZERS:
            cells = [
                f"{row.found[tokenizer, k]:.2f} ({row.reachable[tokenizer, k]:.2f})"
                if (tokenizer, k) in row.found
                else "-"
                for k in COPIES
            ]
            pairs, wrong = row.merges[tokenizer]
            out.append(
                f"| {row.language} | {row.catalogs} | {row.docs} | {counts} | {tokenizer} | "
                + " | ".join(cells)
                + f" | {pairs} | {wrong} |"
            )
    return out


def _decont_table(rows: list[Language]) -> list[str]:
    out = [
        "### Decontamination: false flags on clean documents, catches of quotes",
        "",
        "Eval items: messages of 13 to 20 English words; clean documents (about 120 English "
        "words) quote none; a quote is one whole item inserted into a clean document. `n`: "
        "the n-gram length core used (its default for the tokenizer: under `multilingual` a "
        "window is the shortest run of words weighing n English words, each word weighed by its "
        "script, docs/algorithm.md section 5). English: the same items "
        "and documents in their English source. Ratio: the language's false-flag rate over "
        "English's. Goal (scripts written without spaces): at most twice English's false flags "
        "(2 allowed when English has 0 or 1) and at least as many quotes caught as in English. "
        "`short`: items too short for one window under the tokenizer (they have no n-gram: "
        "never caught).",
        "",
        "| language | items | tokenizer | n | short | false flags | false flags, English | ratio "
        "| quotes caught | quotes caught, English | goal |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        if why := _missing(row):
            out.append(f"| {row.language} | {why} | | | | | | | | | |")
            continue
        for tokenizer in TOKENIZERS:
            own, en = row.decont[tokenizer, False], row.decont[tokenizer, True]
            mine = own.false_flags / own.clean if own.clean else 0.0
            base = en.false_flags / en.clean if en.clean else 0.0
            ratio = _ratio(mine, base) if base else ("-" if not mine else "inf")
            goal = ""
            if row.language in UNSPACED and tokenizer == "multilingual":
                allowed = 2 * max(en.false_flags, 1) / en.clean if en.clean else 0.0
                met = mine <= allowed and own.caught >= en.caught
                goal = "met" if met else "NOT met"
            out.append(
                f"| {row.language} | {own.quotes} | {tokenizer} | {own.n} | {own.short} | "
                f"{_rate(own.false_flags, own.clean)} | {_rate(en.false_flags, en.clean)} | "
                f"{ratio} | {_rate(own.caught, own.quotes)} | {_rate(en.caught, en.quotes)} "
                f"| {goal} |"
            )
    return out


def _speed_table(rows: list[Language], load: str) -> list[str]:
    out = [
        "### Speed per byte: `multilingual` against `words` on the same texts",
        "",
        "CPU seconds per MB of UTF-8 (the language's documents, repeated to the MB shown; the "
        f"fastest of `--repeats` runs; load average {load} when timed). Tokenising: "
        "`Tokens` with the compiled kernel and with numpy; signature: `signatures`, compiled. "
        "Ratio: `multilingual` over `words` (goal: at most 1.3). Normalization: "
        "`multilingual`'s NFKC, case folding and dropping alone (part of its tokenising).",
        "",
        "| language | MB | words, compiled | multilingual, compiled | ratio | words, numpy "
        "| multilingual, numpy | ratio | normalization | signature ratio, compiled |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if _missing(row):
            continue
        s = row.speed
        out.append(
            f"| {row.language} | {row.megabytes:.2f} | {s['words', 'compiled']:.4f} | "
            f"{s['multilingual', 'compiled']:.4f} | "
            f"{_ratio(s['multilingual', 'compiled'], s['words', 'compiled'])} | "
            f"{s['words', 'numpy']:.4f} | {s['multilingual', 'numpy']:.4f} | "
            f"{_ratio(s['multilingual', 'numpy'], s['words', 'numpy'])} | "
            f"{s['multilingual', 'normalize']:.4f} | "
            f"{_ratio(s['multilingual', 'signature'], s['words', 'signature'])} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = options.parser("bench.multilingual", __doc__, SIZES, "print markdown tables")
    parser.add_argument(
        "--languages", default=",".join(LANGUAGES), help="comma-separated (default: all)"
    )
    parser.add_argument(
        "--catalogs",
        default=":".join(ROOTS),
        help="colon-separated roots of LOCALE/LC_MESSAGES/*.mo (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    _, command = options.command_line("bench.multilingual", argv)
    sizes = options.sizes(args, SIZES)
    roots = tuple(root for root in args.catalogs.split(":") if root)
    wanted = [lang for lang in args.languages.split(",") if lang]
    unknown = [lang for lang in wanted if lang not in LANGUAGES]
    if unknown:
        parser.error(f"unknown language(s) {', '.join(unknown)}: one of {', '.join(LANGUAGES)}")
    from neardup.core import _compiled

    if _compiled.load() is None:
        print("the compiled kernels did not load: 'compiled' figures are numpy's", file=sys.stderr)
    start = at_start()
    rows = []
    loads = []
    for language in wanted:
        loads.append(load_average())
        row = measure(language, sizes, roots)
        rows.append(row)
        found = " ".join(f"{t[:5]}/{k}={v:.2f}" for (t, k), v in row.found.items())
        print(f"{language:6} {_missing(row) or f'{row.docs} documents'} {found}", file=sys.stderr)
    if args.markdown:
        print("## Tokenizers on real translated text, per language (`bench.multilingual`)\n")
        print(f"- command: `{command}`")
        for key, value in facts(start).items():
            print(f"- {key}: {value}")
        params = MinhashParams(tokenizer="multilingual")
        version = f"{params.tokenizer_version}`, its windows `{params.window_version}"
        print(
            f"- corpus: the gettext catalogs under {', '.join(roots)} (`LOCALE/LC_MESSAGES/*.mo`),"
            " each message with its English source; `en` is the English sources of the `de` "
            f"catalogs. `multilingual` is `{version}`.\n"
        )
        lines = [*_quality_table(rows), "", *_decont_table(rows), ""]
        lines += _speed_table(rows, f"{loads[0]} to {load_average()}" if loads else "-")
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
