"""Seeded test corpora: planted near-duplicate clusters, borderline pairs, copies, edge texts.

Everything is generated from ``random.Random(seed)`` (test data only; the hash family never
uses it), so a seed always gives the same corpus.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, field
from pathlib import Path

from neardup.core.minhash import jaccard, shingles


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """``size`` distinct lowercase pseudo-words."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))))
    return sorted(words)


def edit_to(
    rng: random.Random, base: list[str], fresh: list[str], lo: float, hi: float
) -> list[str]:
    """A copy of ``base`` with single-word substitutions until shingle Jaccard is in [lo, hi]."""
    base_sh = shingles(" ".join(base))
    while True:
        target = rng.uniform(lo, hi)
        words = list(base)
        j = 1.0
        while j > target:
            words[rng.randrange(len(words))] = rng.choice(fresh)
            j = jaccard(base_sh, shingles(" ".join(words)))
        if lo <= j <= hi:
            return words


@dataclass
class Corpus:
    """A generated corpus and what was planted in it."""

    docs: dict[str, str] = field(default_factory=dict)
    #: planted near-duplicate clusters (each a set of ids, J to its base in 0.85-0.98)
    clusters: list[set[str]] = field(default_factory=list)
    #: pairs at J 0.5-0.65 that must stay apart
    borderline: list[tuple[str, str]] = field(default_factory=list)
    #: groups of byte-identical texts
    copies: list[set[str]] = field(default_factory=list)
    #: the ids whose texts have fewer than 5 words, or none
    short: set[str] = field(default_factory=set)

    def expected_clusters(self) -> list[set[str]]:
        """The partition the planted structure implies, singletons included, sorted by root."""
        grouped = [*self.clusters, *self.copies]
        seen = set().union(*grouped) if grouped else set()
        groups = grouped + [{i} for i in self.docs if i not in seen]
        return sorted(groups, key=min)


def planted_corpus(
    seed: int,
    *,
    n_clusters: int = 8,
    n_borderline: int = 6,
    n_copies: int = 3,
    n_singletons: int = 20,
    words_per_doc: int = 300,
) -> Corpus:
    """A corpus with planted clusters at J 0.85-0.98, borderline pairs at 0.5-0.65, copies,
    unrelated singletons, and short and wordless texts. Ids are shuffled relative to structure."""
    rng = random.Random(seed)
    vocab = vocabulary(rng, 3000)
    fresh = vocabulary(random.Random(seed + 10_000), 500)
    corpus = Corpus()
    ids = iter(rng.sample(range(100_000), 10_000))

    def new_id() -> str:
        return f"doc-{next(ids):05d}"

    def base() -> list[str]:
        return rng.choices(vocab, k=words_per_doc)

    for _ in range(n_clusters):
        root = base()
        members = [root] + [edit_to(rng, root, fresh, 0.85, 0.98) for _ in range(rng.randint(1, 3))]
        group = set()
        for words in members:
            doc_id = new_id()
            corpus.docs[doc_id] = _punctuate(rng, words)
            group.add(doc_id)
        corpus.clusters.append(group)
    for _ in range(n_borderline):
        a = base()
        b = edit_to(rng, a, fresh, 0.5, 0.65)
        pair = (new_id(), new_id())
        corpus.docs[pair[0]], corpus.docs[pair[1]] = " ".join(a), " ".join(b)
        corpus.borderline.append(pair)
    for _ in range(n_copies):
        text = " ".join(base())
        group = {new_id() for _ in range(rng.randint(2, 3))}
        corpus.docs.update(dict.fromkeys(group, text))
        corpus.copies.append(group)
    for _ in range(n_singletons):
        corpus.docs[new_id()] = " ".join(base())
    for text in [
        "",
        "   ",
        "!!! ... ???",
        "one",
        "two words",
        "three little words",
        "four words in all",
    ]:
        doc_id = new_id()
        corpus.docs[doc_id] = text
        corpus.short.add(doc_id)
    return corpus


def _punctuate(rng: random.Random, words: list[str]) -> str:
    """Join words with random case and punctuation, which must never change the shingles."""
    out = []
    for w in words:
        w = w.upper() if rng.random() < 0.05 else w
        out.append(w + rng.choice(["", "", "", ",", ".", ";", " -"]))
    return " ".join(out)


SHELL_SENTENCE = "Tom found a shiny red shell by the river and carried it home to show his sister."

PROTECTED_ITEMS = [
    {
        "case_id": "math-001 the quick brown fox jumps over the lazy dog again and again today",
        "question": "Tom found a shiny red shell by the river and carried it home to show his "
        "sister.",
        "tags": ["alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi"],
        "scorer_args": {
            "rubric": "one two three four five six seven eight nine ten eleven twelve thirteen"
        },
    },
    {
        "id": "q2 never protected because ids are labels and not text that a model sees",
        "context": {
            "passage": "In the middle of the night the old lighthouse keeper climbed the stairs "
            "one last time before dawn"
        },
        "choices": [
            "a short choice",
            "the river ran quietly past the mill while the children played games in the tall grass",
        ],
    },
]


def write_protected(tmp: Path) -> tuple[Path, Path]:
    """A JSONL eval set (with id-like keys and nested values) and a plain-text one."""
    jsonl = tmp / "eval.jsonl"
    jsonl.write_text(
        "\n".join(json.dumps(item) for item in PROTECTED_ITEMS) + "\n\n", encoding="utf-8"
    )
    plain = tmp / "held_out.txt"
    plain.write_text(
        "Once upon a time,\nin a kingdom by the sea, there lived a baker who sang every "
        "single morning.\n",
        encoding="utf-8",
    )
    return jsonl, plain
