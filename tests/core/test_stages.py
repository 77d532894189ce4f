"""exact_dedup and near_dedup: tags, drop flag, order and meta, repeated ids."""

import pytest

from neardup.core.errors import DuplicateIdError, ParameterError
from neardup.core.minhash import Doc, exact_dedup, near_dedup
from tests.fixtures import planted_corpus


def _docs(corpus):
    return [Doc(i, t, {"source": "test", "n": n}) for n, (i, t) in enumerate(corpus.docs.items())]


def test_doc_is_positional_or_keyword():
    assert Doc("a", "t", {"x": 1}) == Doc(id="a", text="t", meta={"x": 1})
    assert Doc("a", "t").meta == {}


def test_exact_dedup_keeps_the_smallest_id_in_input_order():
    docs = [Doc("c", "same"), Doc("b", "other"), Doc("a", "same"), Doc("d", "Same")]
    assert [d.id for d in exact_dedup(docs)] == ["b", "a", "d"]


def test_stages_raise_on_repeated_ids():
    with pytest.raises(DuplicateIdError, match="'a'"):
        list(exact_dedup([Doc("a", "x"), Doc("a", "y")]))
    with pytest.raises(DuplicateIdError, match="'a'"):
        list(near_dedup([Doc("a", "x"), Doc("b", "x"), Doc("a", "z")]))


def test_near_dedup_tags_every_doc_and_keeps_order_and_meta():
    corpus = planted_corpus(0)
    docs = _docs(corpus)
    tagged = list(near_dedup(docs, drop=False))
    assert [d.id for d in tagged] == [d.id for d in docs]
    root_of = {m: min(g) for g in corpus.expected_clusters() for m in g}
    for before, after in zip(docs, tagged, strict=True):
        assert after.text == before.text
        assert after.meta == {**before.meta, "minhash_cluster": root_of[before.id]}
        assert "minhash_cluster" not in before.meta  # the input is not modified


def test_near_dedup_drop_yields_only_roots_in_input_order():
    corpus = planted_corpus(1)
    docs = _docs(corpus)
    kept = list(near_dedup(docs))
    roots = {min(g) for g in corpus.expected_clusters()}
    assert [d.id for d in kept] == [d.id for d in docs if d.id in roots]
    assert all(d.meta["minhash_cluster"] == d.id for d in kept)


def test_forward_and_reversed_input_keep_the_same_documents():
    docs = _docs(planted_corpus(2))
    forward = {d.id for d in near_dedup(docs)}
    backward = {d.id for d in near_dedup(list(reversed(docs)))}
    assert forward == backward


def test_near_dedup_workers_do_not_change_the_survivors():
    docs = _docs(planted_corpus(3))
    assert list(near_dedup(docs, workers=1)) == list(near_dedup(docs, workers=2))


def test_exact_then_near_dedup_drops_exactly_the_planted_near_duplicates():
    corpus = planted_corpus(0)
    after_exact = list(exact_dedup(_docs(corpus)))
    dropped_exact = set(corpus.docs) - {d.id for d in after_exact}
    assert dropped_exact == {m for g in corpus.copies for m in g if m != min(g)}
    kept = {d.id for d in near_dedup(after_exact)}
    dropped_near = {d.id for d in after_exact} - kept
    assert dropped_near == {m for g in corpus.clusters for m in g if m != min(g)}


def test_near_dedup_refuses_a_worker_count_below_one():
    docs = _docs(planted_corpus(3))[:3]
    for workers in (0, -1, True):
        with pytest.raises(ParameterError, match=r"^workers must be a whole number >= 1, got "):
            list(near_dedup(docs, workers=workers))


def test_near_dedup_passes_its_documented_defaults_on(monkeypatch):
    from neardup.core import _stages

    seen = {}
    real_signatures, real_roots = _stages.signatures, _stages.cluster_roots

    def signatures(texts, **kwargs):
        seen["signatures"] = kwargs
        return real_signatures(texts, **kwargs)

    def cluster_roots(sigs, params, rank):
        seen["params"] = params
        return real_roots(sigs, params, rank)

    monkeypatch.setattr(_stages, "signatures", signatures)
    monkeypatch.setattr(_stages, "cluster_roots", cluster_roots)
    docs = [Doc("b", "one two three four five six"), Doc("a", "one two three four five six")]
    assert [(d.id, d.meta) for d in near_dedup(docs)] == [("a", {"minhash_cluster": "a"})]
    assert seen["signatures"] == {
        "num_perm": 128, "seed": 0, "k": 5, "workers": 1, "tokenizer": "words"}  # fmt: skip
    assert seen["params"] == _stages.MinhashParams(
        num_perm=128, bands=16, threshold=0.8, k=5, seed=0, tokenizer="words"
    )
    # And every one it is given.
    given = {"num_perm": 64, "bands": 8, "threshold": 0.5, "k": 3, "seed": 7}
    list(near_dedup(docs, **given, workers=1, tokenizer="multilingual", drop=False))
    assert seen["signatures"] == {
        "num_perm": 64, "seed": 7, "k": 3, "workers": 1, "tokenizer": "multilingual"}  # fmt: skip
    assert seen["params"] == _stages.MinhashParams(**given, tokenizer="multilingual")


def test_exact_dedup_reads_all_ids_first_and_names_the_repeated_one():
    docs = [Doc("b", "x", {"m": 1}), Doc("a", "y"), Doc("c", "x")]
    assert list(exact_dedup(iter(docs))) == [Doc("b", "x", {"m": 1}), Doc("a", "y")]
    with pytest.raises(DuplicateIdError) as caught:
        exact_dedup([Doc("a", "x"), Doc("b", "y"), Doc("b", "z")])
    assert str(caught.value) == "document id 'b' appear(s) more than once"
    assert caught.value.doc_ids == ("b",)


def test_stage_results_can_be_looked_at_then_passed_on(tmp_path):
    """The README's flow: look at near_dedup's survivors, then decontaminate them (issue 33)."""
    from neardup.core.minhash import decontaminate

    docs = _docs(planted_corpus(4))
    for kept in (near_dedup(docs), exact_dedup(docs)):
        assert isinstance(kept, list)
        looked = [d.id for d in kept]  # a first look must not use the result up
        protected = tmp_path / "eval.jsonl"
        protected.write_text('{"q": "no text of the corpus is quoted here at all"}\n')
        assert [d.id for d in decontaminate(kept, [protected])] == looked
        assert len(looked) > 0
