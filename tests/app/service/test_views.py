"""What a cluster page shows, against core: the chain joining a member below the threshold is a
path of confirmed pairs from the root; copies collapse by digest; rows sort borderline first."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.service.views import _chains, _copies
from neardup.core.engine import MinhashParams
from neardup.core.minhash import clusters, signatures
from tests.fixtures import planted_corpus

PARAMS = MinhashParams()


def _estimate(a, b) -> float:
    return float(np.mean(a == b))


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000))
def test_every_member_below_the_threshold_has_a_chain_of_confirmed_pairs(seed):
    corpus = planted_corpus(seed, n_clusters=4, n_borderline=2, n_singletons=2)
    for group in clusters(corpus.docs):
        if len(group) < 2:
            continue
        ids = sorted(group)
        sigs = np.asarray(signatures([corpus.docs[i] for i in ids]), dtype=np.uint32)
        est = (sigs == sigs[0]).mean(axis=1)
        chains = _chains(ids, sigs, est, 0, PARAMS.bands, PARAMS.threshold)
        below = {ids[k] for k in np.flatnonzero(est < PARAMS.threshold).tolist()}
        assert set(chains) == below  # a cluster is connected by confirmed pairs: all traced
        row = {i: k for k, i in enumerate(ids)}
        for member, chain in chains.items():
            hops = [ids[0], *(hop for hop, _ in chain)]
            assert hops[-1] == member and len(set(hops)) == len(hops)
            for (a, b), (_, e) in zip(itertools.pairwise(hops), chain, strict=True):
                assert _estimate(sigs[row[a]], sigs[row[b]]) == e >= PARAMS.threshold


def test_copies_group_by_digest_under_their_smallest_id():
    members = ["a", "b", "c", "d", "e"]
    digests = {"a": b"1", "b": b"2", "c": b"1", "e": b"2"}  # "d" was deleted meanwhile
    assert _copies(members, digests) == [["a", "c"], ["b", "e"], ["d"]]
