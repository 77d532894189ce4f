"""What a read key can learn of a protected passage by probing, through a real server.

The attack of issue 23: an eval item's first 12 words are known (a public prompt); the next 28
are secret. Knowing 12 words, a caller tries every candidate next word of a dictionary and
asks which 13-gram is protected; the word found extends the seed, and so on, 28 times.

- The dictionary: the ``--words`` most frequent words (letters only) of the installed packages'
  metadata (``*.dist-info/METADATA`` of this interpreter's site-packages: READMEs and licence
  texts), most frequent first.
- The passage: the first 40-word window of that same text whose words are all in the
  dictionary, uploaded as a protected set by a protect key.

Two attacks, against one ``neardup serve`` with a read key and a protect key:

- **offsets** (what a read key could do before): one text a word, the seed followed by each
  candidate in turn (and a word of digits: 14 words a candidate), through ``POST
  /v1/decontamination`` in annotate mode; the first offset of ``meta.decontamination.spans``
  names the candidate. Run with both keys: a read key gets ``spans: null`` (and 403 for the
  cut mode) and learns nothing; the protect key shows what the attack was.
- **verdicts** (what a read key can still do): one 13-word text a candidate (one n-gram, the
  cheapest verdict there is: 13 words charged), in frequency order, in requests of 64, 128,
  256, ... texts through ``POST /v1/contamination``, stopping at the first contaminated text;
  and the same with the whole dictionary in one request a word (no order assumed).

The server runs with rates high enough never to refuse, so nothing waits: the words each
attack is charged are computed with ``neardup.core.engine.charged_words`` (what the server
charges: a text's words, at least NGRAM; tests/e2e/test_read_keys.py), and the time it would
take under a budget of B words a minute is its run time plus ``max(0, charged - B) / B``
minutes (the bucket starts full, holding one minute's worth).

Run from the repository root::

    python -m bench.probing [--words N] [--quick] [--markdown]

About 20 s on 2 cores (N = 5,000; --quick: 1,000).
"""

from __future__ import annotations

import math
import re
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common import options
from bench.common.options import Size
from bench.common.server import Server, serving
from neardup.app.config import Settings
from neardup.core.engine import charged_words, words

SIZES = {"words": Size("dictionary words (N)", 5_000, 1_000)}
SEED_WORDS = 12
SECRET_WORDS = 28
KEYS = {"read": "bench-read-0123456789", "protect": "bench-protect-0123456789"}
#: Budgets (words a minute) the time is given for, besides the default.
BUDGETS = (1_000, 10_000, 100_000, 1_000_000)
_WORD = re.compile(r"[a-z]+")


def corpus() -> list[tuple[str, list[str]]]:
    """The installed packages' descriptions (their metadata after the header fields), each as
    (package, its words as the service's tokenizer reads them)."""
    site = Path(sysconfig.get_paths()["purelib"])
    out = []
    for path in sorted(site.glob("*.dist-info/METADATA")):
        body = path.read_text(errors="replace").partition("\n\n")[2]
        out.append((path.parent.name, words(body)))
    return out


def dictionary(texts: list[tuple[str, list[str]]], size: int) -> list[str]:
    """The ``size`` most frequent words of letters only, most frequent first (ties by word)."""
    counts = Counter(w for _, found in texts for w in found if _WORD.fullmatch(w))
    return sorted(counts, key=lambda w: (-counts[w], w))[:size]


def passage(texts: list[tuple[str, list[str]]], known: set[str]) -> tuple[str, list[str]]:
    """The first window of SEED_WORDS + SECRET_WORDS words all in ``known``, and where from."""
    size = SEED_WORDS + SECRET_WORDS
    for name, found in texts:
        for start in range(len(found) - size + 1):
            window = found[start : start + size]
            if all(w in known for w in window):
                return name, window
    raise SystemExit("no passage of dictionary words in the installed metadata: raise --words")


@dataclass
class Run:
    """One attack's outcome: the words it recovered, its requests, words charged, seconds."""

    recovered: list[str]
    requests: int = 0
    charged: int = 0
    seconds: float = 0.0

    def minutes_under(self, budget: int) -> float:
        """Minutes it takes under ``budget`` words a minute (a bucket starting full)."""
        return self.seconds / 60 + max(0, self.charged - budget) / budget


def _post(client: httpx.Client, path: str, key: str, body: dict[str, object]) -> httpx.Response:
    return client.post(path, json=body, headers={"authorization": f"Bearer {KEYS[key]}"})


def by_offsets(client: httpx.Client, key: str, seed: list[str], vocab: list[str]) -> Run:
    """The offsets attack with ``key``: one annotate request a word; stops at the first word
    it cannot name (a read key: at once, its spans being null). Each candidate's 13 words are
    followed by a word of digits, so that no n-gram runs from one candidate into the next."""
    run = Run([])
    started = time.perf_counter()
    window = list(seed[-SEED_WORDS:])
    for _ in range(SECRET_WORDS):
        segments = [" ".join([*window, w, "0"]) + " " for w in vocab]
        starts, at = [], 0
        for segment in segments:
            starts.append(at)
            at += len(segment)
        text = "".join(segments)
        doc = {"id": "probe", "text": text}
        answer = _post(client, "/v1/decontamination", key, {"documents": [doc], "mode": "annotate"})
        answer.raise_for_status()
        run.requests += 1
        run.charged += int(charged_words([text]).sum())
        spans = answer.json()["documents"][0]["meta"].get("decontamination", {}).get("spans")
        if not spans:
            break
        # The first protected window starts where a candidate's segment starts.
        found = vocab[max(i for i, s in enumerate(starts) if s <= spans[0][0])]
        run.recovered.append(found)
        window = [*window[1:], found]
    run.seconds = time.perf_counter() - started
    return run


def by_verdicts(client: httpx.Client, seed: list[str], vocab: list[str], first: int) -> Run:
    """The verdicts attack with the read key: one 13-word text a candidate (13 words charged,
    the least a verdict costs), ``first`` texts in
    the first request of a word, twice as many in each next one, until one is contaminated."""
    run = Run([])
    started = time.perf_counter()
    window = list(seed[-SEED_WORDS:])
    for _ in range(SECRET_WORDS):
        at, size, found = 0, first, None
        while found is None and at < len(vocab):
            chunk = vocab[at : at + size]
            texts = [" ".join([*window, w]) for w in chunk]
            answer = _post(client, "/v1/contamination", "read", {"texts": texts})
            answer.raise_for_status()
            run.requests += 1
            run.charged += int(charged_words(texts).sum())
            verdicts = [r["contaminated"] for r in answer.json()["results"]]
            if any(verdicts):
                found = chunk[verdicts.index(True)]
            at, size = at + size, size * 2
        if found is None:
            break
        run.recovered.append(found)
        window = [*window[1:], found]
    run.seconds = time.perf_counter() - started
    return run


def _duration(minutes: float) -> str:
    if minutes < 1:
        return f"{minutes * 60:.0f} s"
    if minutes < 120:
        return f"{minutes:.1f} min"
    return f"{minutes / 60:.1f} h"


def main(argv: Sequence[str] | None = None) -> int:
    """Run both attacks against one server and print what each needs."""
    parser = options.parser("bench.probing", __doc__, SIZES, "print a markdown table")
    args = parser.parse_args(argv)
    _, command = options.command_line("bench.probing", argv)
    size = options.sizes(args, SIZES)
    texts = corpus()
    vocab = dictionary(texts, size["words"])
    source, window = passage(texts, set(vocab))
    seed, secret = window[:SEED_WORDS], window[SEED_WORDS:]
    default = Settings.model_fields["contamination_words_per_minute"].default
    ngram = Settings.model_fields["ngram"].default
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys.txt"
        keys.write_text(f"{KEYS['read']} read\n{KEYS['protect']} read,protect\n")
        keys.chmod(0o600)
        flags = ("--workers", "1", "--api-keys-file", str(keys),
                 "--contamination-words-per-minute", str(10**12),
                 "--contamination-texts-per-minute", str(10**12))  # fmt: skip
        with serving(Path(tmp), *flags) as server:
            runs = _attack(server, seed, secret, vocab)
    offsets_read, offsets_protect, verdicts, whole = runs
    bits = SECRET_WORDS * math.log2(len(vocab))
    rows = [
        ("offsets, read key (now)", offsets_read),
        ("offsets, protect key (a read key before)", offsets_protect),
        ("verdicts, read key, frequency order (now)", verdicts),
        ("verdicts, read key, whole dictionary a word (now)", whole),
    ]
    head = (f"a {SEED_WORDS}-word seed and {SECRET_WORDS} secret words from {source}; "
            f"{len(vocab):,} dictionary words ({bits:.0f} bits of choice)")  # fmt: skip
    if args.markdown:
        print(f"### Probing a protected passage with a read key: {head}\n\n`{command}`\n")
        print(f"The passage: *{' '.join(seed)}* | {' '.join(secret)}\n")
        print(
            f"| attack | words recovered | requests | words charged | run | under the "
            f"default {default:,} words/min | "
            + " | ".join(f"at {b:,}/min" for b in BUDGETS)
            + " |"
        )
        print("|---|---:|---:|---:|---:|---:|" + "---:|" * len(BUDGETS))
        for label, run in rows:
            times = [_duration(run.minutes_under(b)) if run.recovered else "-"
                     for b in (default, *BUDGETS)]  # fmt: skip
            print(
                f"| {label} | {len(run.recovered)} of {SECRET_WORDS} | {run.requests} | "
                f"{run.charged:,} | {run.seconds:.1f} s | " + " | ".join(times) + " |"
            )
        per_word, per_whole = verdicts.charged / SECRET_WORDS, whole.charged / SECRET_WORDS
        print(
            f"\nA request over B words is refused (413): an attack splits it into requests "
            f"of at most B, which takes as long. Once a key's first minute is spent, the "
            f"default lets it learn about {default / per_word:.1f} words a minute of this "
            f"passage in frequency order ({per_word:,.0f} words charged a word), "
            f"{default / per_whole:.2f} trying the whole dictionary. Bits of choice per word "
            f"charged, frequency order: {bits / max(verdicts.charged, 1):.4f}; a verdict is "
            f"about one bit and costs at least NGRAM = {ngram} words: the default allows a read "
            f"key at most about {default // ngram:,} verdicts a minute."
        )
    else:
        print(head)
        for label, run in rows:
            print(
                f"{label}: {len(run.recovered)}/{SECRET_WORDS} words, {run.requests} "
                f"requests, {run.charged:,} words, {run.seconds:.1f} s run, "
                f"{_duration(run.minutes_under(default))} under {default:,}/min"
            )
    return 0


def _attack(
    server: Server, seed: list[str], secret: list[str], vocab: list[str]
) -> tuple[Run, Run, Run, Run]:
    """Upload the passage, then run the four attacks; each that recovers words recovers the
    secret ones (checked)."""
    with httpx.Client(base_url=server.url, timeout=300) as client:
        put = client.put("/v1/protected-sets/evals", content=" ".join([*seed, *secret]),
                         headers={"content-type": "text/plain",
                                  "authorization": f"Bearer {KEYS['protect']}"})  # fmt: skip
        put.raise_for_status()
        cut = _post(client, "/v1/decontamination", "read",
                    {"documents": [{"id": "p", "text": " ".join(seed + secret[:1])}],
                     "mode": "cut"})  # fmt: skip
        if cut.status_code != 403:
            raise SystemExit(f"a read key's cut request answered {cut.status_code}, not 403")
        print("[bench.probing] offsets, read key ...", file=sys.stderr, flush=True)
        offsets_read = by_offsets(client, "read", seed, vocab)
        print("[bench.probing] offsets, protect key ...", file=sys.stderr, flush=True)
        offsets_protect = by_offsets(client, "protect", seed, vocab)
        print("[bench.probing] verdicts, frequency order ...", file=sys.stderr, flush=True)
        verdicts = by_verdicts(client, seed, vocab, first=64)
        print("[bench.probing] verdicts, whole dictionary ...", file=sys.stderr, flush=True)
        whole = by_verdicts(client, seed, vocab, first=len(vocab))
    for run in (offsets_read, offsets_protect, verdicts, whole):
        if run.recovered != secret[: len(run.recovered)]:
            raise SystemExit(f"recovered {run.recovered}, not the passage {secret}")
    return offsets_read, offsets_protect, verdicts, whole


if __name__ == "__main__":
    sys.exit(main())
