"""The adversarial corpus the Spark engine is held to the local engine on: planted clusters,
a chain a~b~c with a !~ c, one giant bucket of templated pages, exact copies, empty and wordless
texts, non-ASCII text and nested meta."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from neardup.core.engine import MinhashParams, band_digests, batch_signatures, estimates
from tests.fixtures import edit_to, planted_corpus, vocabulary

#: Templated pages sharing one giant bucket per band: more than kernels.BIG_BUCKET members.
TEMPLATED = 300


def _pair_ok(sigs: np.ndarray, i: int, j: int, params: MinhashParams) -> tuple[bool, bool]:
    """(shares a band, confirmed) for rows i and j."""
    d = band_digests(sigs[[i, j]], params.bands)
    est = estimates(sigs, np.array([[i, j]], dtype=np.int64))[0]
    return bool((d[0] == d[1]).any()), bool(est >= params.threshold)


def chain(params: MinhashParams) -> list[str]:
    """Texts a, b, c with a~b and b~c candidates and confirmed, but a and c not confirmed."""
    rng = random.Random(7)
    vocab, fresh = vocabulary(rng, 2000), vocabulary(random.Random(8), 400)
    while True:
        a = rng.choices(vocab, k=200)
        b = edit_to(rng, a, fresh, 0.84, 0.9)
        c = edit_to(rng, b, fresh, 0.84, 0.9)
        texts = [" ".join(w) for w in (a, b, c)]
        sigs = batch_signatures(texts, params)
        ab, bc, ac = _pair_ok(sigs, 0, 1, params), _pair_ok(sigs, 1, 2, params), None
        ac = _pair_ok(sigs, 0, 2, params)
        if ab == (True, True) and bc == (True, True) and not ac[1]:
            return texts


def adversarial_docs(params: MinhashParams | None = None) -> list[dict[str, Any]]:
    """The corpus as JSON-ready rows, in a fixed shuffled order."""
    params = params or MinhashParams()
    rng = random.Random(11)
    planted = planted_corpus(3, words_per_doc=120)
    docs: list[dict[str, Any]] = [{"id": i, "text": t} for i, t in planted.docs.items()]
    a, b, c = chain(params)
    # The middle of the chain has the largest id: c reaches the root a only through b.
    docs += [{"id": "chain-1", "text": a}, {"id": "chain-9", "text": b}]
    docs += [{"id": "chain-2", "text": c, "meta": {"lang": "en", "tags": [1, 2.5, None]}}]
    template = vocabulary(random.Random(12), 400)
    page = rng.choices(template, k=150)
    for n in range(TEMPLATED):
        words = list(page)
        words[rng.randrange(len(words))] = f"edit{n}"
        docs.append({"id": f"tpl-{rng.randrange(10**6):06d}-{n}", "text": " ".join(words)})
    copy = " ".join(rng.choices(template, k=80))
    docs += [{"id": f"copy-{n}", "text": copy, "meta": {"n": n}} for n in (5, 3, 8)]
    docs += [{"id": f"empty-{n}", "text": ""} for n in range(3)]
    docs += [{"id": "dots", "text": "... !!! ???"}, {"id": "dots-2", "text": "... !!! ???"}]
    greek = "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο " * 4
    docs += [
        {"id": "ünï-1", "text": greek + "και φεύγει", "meta": {"σ": "ω"}},
        {"id": "ünï-0", "text": greek + "και μένει"},
        {"id": "中文", "text": "数据 去重 " * 30},
    ]
    rng.shuffle(docs)
    return docs


def _near_copy(rng: random.Random, text: str, share: float = 0.04) -> str:
    """``text`` with about ``share`` of its words replaced (a near copy, above 0.8 usually)."""
    words = text.split()
    for _ in range(max(1, int(len(words) * share))):
        words[rng.randrange(len(words))] = f"w{rng.randrange(10**6)}"
    return " ".join(words)


def index_rounds(params: MinhashParams | None = None) -> list[list[dict[str, Any]]]:
    """Three dumps for incremental runs: the adversarial corpus split over the first two, then
    rounds holding near and exact copies of earlier rounds' documents (kept ones and dropped
    ones), a bridge between two documents the first round keeps (the middle of ``chain``),
    copies of indexed empty and wordless texts, and fresh documents."""
    params = params or MinhashParams()
    rng = random.Random(23)
    docs = [d for d in adversarial_docs(params) if not str(d["id"]).startswith("chain-")]
    a, b, c = chain(params)
    first = [*docs[::2], {"id": "chain-1", "text": a}, {"id": "chain-2", "text": c}]
    second = [*docs[1::2], {"id": "r2-bridge", "text": b}]
    fresh = planted_corpus(5, n_clusters=3, n_singletons=6, words_per_doc=90)
    extra = [{"id": f"r3-{i}", "text": t} for i, t in fresh.docs.items()]
    texts = [d for d in first if len(str(d["text"]).split()) > 20]
    second += [{"id": f"r2-exact-{n}", "text": d["text"]} for n, d in enumerate(texts[:3])]
    second += [
        {"id": f"r2-near-{n}", "text": _near_copy(rng, d["text"])} for n, d in enumerate(texts[3:7])
    ]
    second += [{"id": "r2-empty", "text": ""}, {"id": "0-dots", "text": "... !!! ???"}]
    later = [d for d in second if len(str(d["text"]).split()) > 20]
    third = extra + [{"id": f"r3-exact-{n}", "text": d["text"]} for n, d in enumerate(later[:3])]
    third += [
        {"id": f"r3-near-{n}", "text": _near_copy(rng, d["text"])} for n, d in enumerate(later[3:6])
    ]
    third += [
        {"id": f"r3-old-{n}", "text": _near_copy(rng, d["text"])} for n, d in enumerate(texts[7:9])
    ]
    third += [{"id": "a-first", "text": _near_copy(rng, texts[9]["text"])}]  # an id before all
    return [first, second, third]
