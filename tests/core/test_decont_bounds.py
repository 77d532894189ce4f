"""Every list a decontamination output holds is capped and counted, and none holds protected
text: the ``cut`` and ``annotate`` rows' meta and the contamination report, on random corpora
dense with matches (3-grams of a five-word vocabulary), against counts computed here."""

import json
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from neardup.core._corpus import Doc
from neardup.core._cutting import DECONT_KEY, DecontMode, DecontParams, apply_mode
from neardup.core._matches import MAX_LISTED, Match, Protection
from neardup.core._protected import ProtectedFormat, parse_protected_set
from neardup.core._report import ContaminationReport

N = 3
VOCAB = ["alpha", "beta", "gamma", "delta", "omega"]
word = st.sampled_from(VOCAB)
gap = st.sampled_from([" ", ", ", ". ", " -- ", " ...... ", " " + "." * 60 + " "])


@st.composite
def passage(draw: st.DrawFn, most: int = 30) -> str:
    words = draw(st.lists(word, max_size=most))
    return "".join(w + draw(gap) for w in words)


@st.composite
def protections(draw: st.DrawFn) -> Protection:
    sets = []
    for name in draw(st.lists(st.sampled_from(["evals", "mmlu", "gsm"]), min_size=1, unique=True)):
        items = draw(st.lists(passage(12).filter(lambda t: len(t.split()) >= N), min_size=1,
                              max_size=6))  # fmt: skip
        body = "\n".join(json.dumps({"id": f"{name}-q{i}", "text": t}) for i, t in enumerate(items))
        sets.append(parse_protected_set(name, body, ProtectedFormat.JSONL, N))
    return Protection(sets, item_cap=draw(st.one_of(st.none(), st.integers(1, 3))))


def covered(length: int, spans: list[tuple[int, int]]) -> list[list[int]]:
    """The runs of covered characters (an independent merge: one flag a character)."""
    flags = [False] * (length + 1)
    for start, end in spans:
        for c in range(start, end):
            flags[c] = True
    runs: list[list[int]] = []
    for c in range(length):
        if flags[c] and (c == 0 or not flags[c - 1]):
            runs.append([c, c])
        if flags[c]:
            runs[-1][1] = c + 1
    return runs


def check_meta(meta: dict, own: list[Match], length: int, cap: int) -> None:
    """``meta``'s lists against the matches it speaks of: capped, counted, best first."""
    per_item = Counter((m.set, i) for m in own for i in m.items)
    assert meta["match_count"] == len(own)
    assert meta["item_count"] == len(per_item)
    assert len(meta["items"]) == min(cap, len(per_item))
    counts = [i["matches"] for i in meta["items"]]
    assert counts == sorted(per_item.values(), reverse=True)[:cap]
    assert all(per_item[(i["set"], i["item"])] == i["matches"] for i in meta["items"])
    runs = covered(length, [(m.start, m.end) for m in own])
    # Windows of a text never touch without overlapping (words are apart): merged runs are the
    # covered characters' runs.
    assert meta["span_count"] == len(runs)
    assert meta["spans"] == runs[:cap]
    assert meta["sets"] == sorted({m.set for m in own})


def no_protected_text(out: object, matches: list[Match]) -> None:
    text = json.dumps(out, ensure_ascii=False)
    for m in matches:
        assert m.ngram not in text


@given(
    protections(),
    st.lists(passage(40), min_size=1, max_size=6),
    st.integers(1, 4),
    st.integers(0, 40),
    st.integers(0, 30),
    st.integers(1, 12),
)
def test_cut_and_annotate_meta_lists_are_capped_counted_and_name_no_ngram(
    prot, texts, cap, window, min_piece, max_pieces
):
    params = {"window": window, "min_piece": min_piece, "max_pieces": max_pieces}
    for k, text in enumerate(texts):
        doc = Doc(f"d{k}", text, {"src": "web"})
        matches = prot.matches(text)
        [annotated] = apply_mode(doc, matches, DecontParams(DecontMode.ANNOTATE), cap=cap)
        if matches:
            check_meta(annotated.meta[DECONT_KEY], matches, len(text), cap)
        no_protected_text(annotated.meta, matches)
        pieces = apply_mode(doc, matches, DecontParams(DecontMode.CUT, **params), cap=cap)
        for piece in pieces if matches else []:
            meta = piece.meta[DECONT_KEY]
            near = [tuple(r) for r in meta["removed"]]
            start, end = meta["span"]
            # A piece's own matches: those of the (at most two) removed spans bordering it.
            assert 1 <= len(near) <= 2 and all(hi == start or lo == end for lo, hi in near)
            own = [m for m in matches if any(lo <= m.start and m.end <= hi for lo, hi in near)]
            check_meta(meta, own, len(text), cap)
            no_protected_text(meta, matches)
            assert piece.meta["src"] == "web"


@given(
    protections(),
    st.lists(passage(40), min_size=1, max_size=12),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
)
def test_report_lists_are_capped_and_counts_are_the_uncapped_ones(
    prot, texts, examples, max_items, top
):
    docs = [Doc(f"d{k}", t) for k, t in enumerate(texts)]
    capped = ContaminationReport(prot, examples=examples, top=top, max_items=max_items)
    whole = ContaminationReport(prot, examples=None, top=10**6, max_items=None)
    found = [prot.matches(t) for t in texts]
    lines = []
    for doc, matches in zip(docs, found, strict=True):
        lines.append(capped.add(doc, matches))
        whole.add(doc, matches)
    out, full = capped.as_dict(), whole.as_dict()
    # Counts, computed here from the matches.
    dirty = [d.id for d, m in zip(docs, found, strict=True) if m]
    per_item = Counter(key for m in found for key in {(x.set, i) for x in m for i in x.items})
    assert (out["documents"], out["contaminated"]) == (len(docs), len(dirty))
    assert out["items_matched"] == len(per_item) == len(full["items"])
    assert out["contaminated_ids"] == dirty[:examples] and full["contaminated_ids"] == dirty
    assert out["items"] == [
        {**i, "document_ids": i["document_ids"][:examples]} for i in full["items"][:max_items]
    ]
    for item in full["items"]:
        assert item["documents"] == per_item[(item["set"], item["item"])]
        assert item["documents"] == len(item["document_ids"])
    for s, whole_set in zip(out["sets"], full["sets"], strict=True):
        assert s["capped"]["ngrams"] == len(whole_set["capped"]["list"])
        assert s["capped"]["list"] == whole_set["capped"]["list"][:examples]
        assert s["top_items"] == whole_set["top_items"][:top]
        assert len(whole_set["top_items"]) == s["items_matched"]
        assert s["items_matched"] == sum(1 for k in per_item if k[0] == s["set"])
    # The full lists, one entry a contaminated document, hold every id the report counts.
    entries = [e for e in lines if e is not None]
    assert [e["id"] for e in entries] == dirty
    assert Counter((i["set"], i["item"]) for e in entries for i in e["items"]) == per_item
    # Without n-grams, no protected text at all: items by id, counts and offsets only.
    no_protected_text(capped.as_dict(ngrams=False), [m for ms in found for m in ms])


def test_the_default_caps_are_the_documented_ones():
    assert MAX_LISTED == 10
    prot = Protection([parse_protected_set("e", "alpha beta gamma", ProtectedFormat.TEXT, N)])
    docs = [Doc(f"d{k:02}", "alpha beta gamma") for k in range(25)]
    report = ContaminationReport(prot)
    for doc in docs:
        report.add(doc, prot.matches(doc.text))
    out = report.as_dict()
    [item] = out["items"]
    assert (item["documents"], len(item["document_ids"])) == (25, MAX_LISTED)
    assert (out["contaminated"], out["contaminated_ids"]) == (25, [d.id for d in docs[:10]])
