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
