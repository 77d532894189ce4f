"""core/_signatures.py's plumbing, exactly: where slabs are cut, when a pool is used, what each
task is sent, how far a pool is read ahead, and what a stream starts and shuts down. The pools
here are in-process stand-ins that run each task as it is submitted and record everything."""

from __future__ import annotations

from concurrent.futures import Future
from functools import partial
from typing import Any

import numpy as np
import pytest

from neardup.core import _signatures
from neardup.core._params import MinhashParams
from neardup.core._signatures import batch_signatures, signature_stream, signatures, slab_bounds
from neardup.core._tokens import Utf8Texts
from neardup.core.errors import ParameterError
from tests.core.test_signatures import spec_signature


class _Future(Future):
    def __init__(self, pool: SyncPool) -> None:
        super().__init__()
        self.pool = pool

    def result(self, timeout: float | None = None) -> Any:
        # How many tasks had been submitted when this one's result was first asked for.
        self.pool.seen.append(len(self.pool.calls))
        return super().result(timeout)


class SyncPool:
    """Runs every task at once, in this thread; records the tasks, results asked and shutdowns."""

    def __init__(self, workers: int) -> None:
        self._max_workers = workers
        self.calls: list[tuple[Any, tuple[Any, ...]]] = []
        self.seen: list[int] = []
        self.shutdowns: list[tuple[bool, bool]] = []

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        self.calls.append((fn, args))
        future = _Future(self)
        future.set_result(fn(*args))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self.shutdowns.append((wait, cancel_futures))

    def __enter__(self) -> SyncPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=True)


@pytest.fixture
def spawned(monkeypatch):
    """``spawn_pool`` replaced: the stand-in pools it made, and the arguments it was given."""
    made: list[tuple[SyncPool, int, Any]] = []

    def spawn_pool(workers, *, warm=None):
        pool = SyncPool(workers)
        made.append((pool, workers, warm))
        return pool

    monkeypatch.setattr(_signatures, "spawn_pool", spawn_pool)
    return made


def words(n: int, tag: str = "w") -> str:
    """A text of ``n`` characters: words of four letters."""
    return " ".join(f"{tag}{i:03d}" for i in range(n // 5 + 1))[:n]


@pytest.mark.parametrize(
    ("lengths", "parts", "chars", "bounds"),
    [
        ([], 1, 20, []),
        ([10, 10, 10, 10], 1, 20, [(0, 2), (2, 4)]),
        ([10, 10, 10, 10], 1, 40, [(0, 4)]),
        ([10, 10, 10, 10], 1, 39, [(0, 2), (2, 4)]),
        ([10, 10, 10, 10], 3, 20, [(0, 2), (2, 3), (3, 4)]),
        ([10, 10, 10, 10], 2, 20, [(0, 2), (2, 4)]),
        ([10, 10, 10, 10], 8, 20, [(0, 1), (1, 2), (2, 3), (3, 4)]),
        ([10, 10, 10, 10], 4, 1000, [(0, 1), (1, 2), (2, 3), (3, 4)]),
        ([100, 1, 1], 1, 10, [(0, 1), (1, 3)]),
        ([1, 1, 100], 1, 10, [(0, 3)]),  # the long text ends the slab it is in
        ([5, 30, 5, 5, 5], 1, 20, [(0, 2), (2, 5)]),
        # Each text weighs at least max(1, chars // SLAB_TEXTS) = 1.
        ([0, 0, 0], 1, 2, [(0, 2), (2, 3)]),
        ([7], 5, 1, [(0, 1)]),
    ],
)
def test_slab_bounds_cut_where_the_weights_reach_each_share(lengths, parts, chars, bounds):
    texts = ["x" * n for n in lengths]
    assert slab_bounds(texts, parts, chars) == bounds


def test_slab_bounds_weigh_short_texts_chars_over_slab_texts(monkeypatch):
    monkeypatch.setattr(_signatures, "SLAB_TEXTS", 4)
    # chars 40 over 4 texts a slab: every text weighs at least 10.
    texts = [""] * 8 + ["x" * 30]
    assert slab_bounds(texts, 1, 40) == [(0, 4), (4, 8), (8, 9)]
    assert slab_bounds(["x" * 11] * 3 + ["x"] * 4, 1, 40) == [(0, 4), (4, 7)]


def test_slab_bounds_default_to_slab_chars_and_weigh_encoded_texts_by_their_bytes(monkeypatch):
    monkeypatch.setattr(_signatures, "SLAB_CHARS", 20)
    texts = ["é" * 10, "a" * 10, "a" * 10, "a" * 10]
    assert slab_bounds(texts) == [(0, 2), (2, 4)]
    assert slab_bounds(Utf8Texts.encode(texts)) == [(0, 1), (1, 3), (3, 4)]
    assert slab_bounds(Utf8Texts.encode(texts), 2) == [(0, 1), (1, 2), (2, 3), (3, 4)]


TEXTS = [
    "the quick brown fox jumps over the lazy dog again",
    "",
    "東京は日本の首都です そして 大阪",
    "one two three four five six seven",
    "café crème brûlée is a dessert of many words here",
    "a b c d e f g h i j k l m n o p",
    "東京は日本の首都です",
]


@pytest.mark.parametrize("tokenizer", ["words", "multilingual"])
@pytest.mark.parametrize("chars", [10, 1 << 19])
def test_the_kernel_signs_encoded_texts_slab_by_slab_like_strings(monkeypatch, tokenizer, chars):
    monkeypatch.setattr(_signatures, "SLAB_CHARS", chars)
    params = MinhashParams(num_perm=16, bands=4, k=2, seed=9, tokenizer=tokenizer)
    want = signatures(TEXTS, num_perm=16, k=2, seed=9, tokenizer=tokenizer)
    assert np.array_equal(batch_signatures(TEXTS, params), want)
    assert np.array_equal(batch_signatures(Utf8Texts.encode(TEXTS), params), want)
    got = _signatures._kernel(TEXTS, 16, 9, 2, False, tokenizer)
    assert got.dtype == np.uint32 and np.array_equal(got, want)


def test_batch_signatures_take_every_parameter():
    params = MinhashParams(num_perm=8, bands=2, k=2, seed=3, tokenizer="multilingual")
    got = batch_signatures(TEXTS, params)
    assert got.shape == (len(TEXTS), 8)
    assert not np.array_equal(got, batch_signatures(TEXTS, MinhashParams(8, 2, k=2, seed=3)))
    # The multilingual tokenizer's words of a Japanese text differ from \w runs.
    assert [r.tolist() for r in got[[0, 3, 5]]] == [
        spec_signature(TEXTS[i], 8, 3, 2) for i in (0, 3, 5)
    ]
    words_params = MinhashParams(num_perm=8, bands=2, k=2, seed=3)
    assert [r.tolist() for r in batch_signatures(TEXTS, words_params)] == [
        spec_signature(t, 8, 3, 2) for t in TEXTS
    ]


def test_the_kernel_defaults_to_the_words_tokenizer():
    assert np.array_equal(
        _signatures._kernel(TEXTS, 8, 0, 3), signatures(TEXTS, num_perm=8, k=3, tokenizer="words")
    )


@pytest.mark.parametrize(
    ("workers", "message"),
    [
        (0, "workers must be a whole number >= 1, got 0"),
        (-2, "workers must be a whole number >= 1, got -2"),
        (True, "workers must be a whole number >= 1, got True"),
        (2.0, "workers must be a whole number >= 1, got 2.0"),
        ("2", "workers must be a whole number >= 1, got '2'"),
    ],
)
def test_signatures_refuse_a_worker_count_that_is_not_a_whole_number(workers, message):
    with pytest.raises(ParameterError) as caught:
        signatures(["a b"], workers=workers)
    assert str(caught.value) == message


def test_signatures_check_the_tokenizer_and_the_parameters_first():
    with pytest.raises(ParameterError, match="tokenizer must be one of"):
        signatures(["a b"], tokenizer="chars")
    with pytest.raises(ParameterError, match="num_perm"):
        signatures(["a b"], num_perm=0, workers=0)
    with pytest.raises(ParameterError, match="seed"):
        signatures(["a b"], seed=-1)


@pytest.mark.parametrize(
    ("lengths", "workers", "pooled"),
    [
        ([60, 40], 2, True),  # 100 characters: the threshold reached
        ([60, 39], 2, False),
        ([50, 20, 30], 3, True),  # counted over every text, not the last only
        ([150], 2, False),  # one text: nothing to share
        ([60, 60], 1, False),
    ],
)
def test_signatures_use_a_pool_from_pool_after_chars_on(
    monkeypatch, spawned, lengths, workers, pooled
):
    monkeypatch.setattr(_signatures, "POOL_AFTER_CHARS", 100)
    texts = [words(n, f"t{i}") for i, n in enumerate(lengths)]
    got = signatures(texts, num_perm=16, workers=workers)
    assert [r.tolist() for r in got] == [spec_signature(t, 16) for t in texts]
    if pooled:
        ((pool, asked, warm),) = spawned
        assert (asked, warm) == (workers, None)
        assert len(pool.calls) % workers == 0 and pool.calls
    else:
        assert spawned == []


def test_a_given_pool_gets_slabs_a_multiple_of_its_size_each_with_every_parameter(monkeypatch):
    monkeypatch.setattr(_signatures, "SLAB_CHARS", 40)
    texts = [words(20, f"d{i}") for i in range(10)]
    pool = SyncPool(3)
    got = signatures(texts, num_perm=8, seed=4, k=3, tokenizer="multilingual", pool=pool)
    assert [r.tolist() for r in got] == [spec_signature(t, 8, 4, 3) for t in texts]
    assert len(pool.calls) == 6  # 5 slabs' weight, rounded up to 6 for 3 workers
    sent = []
    for fn, (slab, *rest) in pool.calls:
        assert fn is _signatures._kernel
        assert rest == [8, 4, 3, True, "multilingual"]
        sent += slab.texts()
    assert sent == texts
    assert pool.shutdowns == []  # a pool given is the caller's


def test_a_pool_counts_unencodable_texts_from_the_start_of_the_call(monkeypatch):
    monkeypatch.setattr(_signatures, "SLAB_CHARS", 40)
    texts = [words(40, f"d{i}") for i in range(6)]
    texts[4] = "bad \ud800 text"
    with pytest.raises(ParameterError) as caught:
        signatures(texts, num_perm=8, pool=SyncPool(2))
    assert str(caught.value).startswith("text 4 is not valid Unicode")


def test_a_pool_is_read_ahead_four_slabs_a_worker(monkeypatch):
    monkeypatch.setattr(_signatures, "SLAB_CHARS", 40)
    texts = [words(40, f"d{i}") for i in range(20)]
    pool = SyncPool(2)
    got = signatures(texts, num_perm=8, pool=pool)
    assert np.array_equal(got, signatures(texts, num_perm=8))
    assert len(pool.calls) == 20
    # The first result is waited for once 4 x 2 slabs are in flight and a ninth is sent.
    assert pool.seen[:3] == [9, 10, 11]
    assert pool.seen[-1] == 20


def test_own_pool_is_spawned_with_the_workers_asked_and_slabs_for_them(monkeypatch, spawned):
    monkeypatch.setattr(_signatures, "POOL_AFTER_CHARS", 10)
    monkeypatch.setattr(_signatures, "SLAB_CHARS", 40)
    texts = [words(20, f"d{i}") for i in range(10)]
    got = signatures(texts, num_perm=8, workers=3)
    assert np.array_equal(got, signatures(texts, num_perm=8))
    ((pool, asked, _),) = spawned
    assert asked == 3 and len(pool.calls) == 6
    assert pool.shutdowns == [(True, True)]  # the pool made for the call is stopped (stop_pool)
    assert pool.calls[0][1][1:] == (8, 0, 5, True, "words")


@pytest.mark.parametrize(
    ("lengths", "after", "total"), [([99], 100, 99), ([100], 100, None), ([30, 30, 40], 100, None)]
)
def test_small_counts_characters_up_to_pool_after_chars(monkeypatch, lengths, after, total):
    monkeypatch.setattr(_signatures, "POOL_AFTER_CHARS", after)
    assert _signatures._small(["x" * n for n in lengths]) is (total is not None)


PARAMS = MinhashParams(num_perm=8, bands=2, k=2)


def test_a_stream_below_pool_after_chars_is_signed_here(monkeypatch, spawned):
    monkeypatch.setattr(_signatures, "POOL_AFTER_CHARS", 100)
    batches = [[words(30, "a")], [words(30, "b"), words(39, "c")]]  # 99 characters
    got = list(signature_stream(batches, PARAMS, workers=2))
    assert [g.tolist() for g in got] == [batch_signatures(b, PARAMS).tolist() for b in batches]
    assert spawned == []
    # One worker never starts a pool, whatever the characters (the default).
    more = [*batches, [words(200, "d")]]
    assert len(list(signature_stream(more, PARAMS))) == 3
    assert spawned == []


@pytest.mark.parametrize("tokenizer", ["words", "multilingual"])
def test_a_stream_moves_to_a_warm_pool_from_the_batch_that_reaches_the_threshold(
    monkeypatch, spawned, tokenizer
):
    monkeypatch.setattr(_signatures, "POOL_AFTER_CHARS", 100)
    params = MinhashParams(num_perm=8, bands=2, k=2, tokenizer=tokenizer)
    batches = [[words(60, f"b{i}")] for i in range(9)]  # the second reaches 120 characters
    got = list(signature_stream(batches, params, workers=2))
    assert [g.tolist() for g in got] == [batch_signatures(b, params).tolist() for b in batches]
    ((pool, asked, warm),) = spawned
    assert asked == 2
    assert isinstance(warm, partial)
    assert (warm.func, warm.args, warm.keywords) == (_signatures.warm_worker, (tokenizer,), {})
    # Batches 1 to 8 on the pool, each sent encoded with the parameters.
    assert [c[1][0].texts() for c in pool.calls] == batches[1:]
    assert all(c[0] is batch_signatures and c[1][1:] == (params,) for c in pool.calls)
    # Two batches a worker ahead by default: the first result is asked for with 5 sent.
    assert pool.seen[:2] == [5, 6]
    assert pool.shutdowns == [(True, True)]


def test_a_stream_reads_ahead_as_asked_and_shuts_the_pool_down_when_closed(monkeypatch, spawned):
    monkeypatch.setattr(_signatures, "POOL_AFTER_CHARS", 0)
    batches = [[words(20, f"b{i}")] for i in range(12)]
    stream = signature_stream(batches, PARAMS, workers=3, ahead=1)
    first = next(stream)
    assert first.tolist() == batch_signatures(batches[0], PARAMS).tolist()
    ((pool, _, _),) = spawned
    assert pool.seen == [4]
    stream.close()
    assert pool.shutdowns == [(True, True)]


def test_signing_counts_its_work_towards_loading_the_compiled_kernels(monkeypatch):
    from neardup.core import _compiled

    monkeypatch.setattr(_compiled._State, "kernels", None)
    monkeypatch.setattr(_compiled._State, "failed", False)
    monkeypatch.setattr(_compiled._State, "work", 0)
    # Two shingles of 5 words, and a text shorter than k is one: 3 shingles, 8 permutations.
    batch_signatures(["a b c d e f", "x y z w"], MinhashParams(num_perm=8, bands=2, k=5))
    assert _compiled._State.work == 3 * 8
    signatures(["one two three four"], num_perm=16, k=2)
    assert _compiled._State.work == 3 * 8 + 3 * 16
    assert _compiled._State.kernels is None  # far below LOAD_AFTER


def test_pool_signatures_are_uint32(monkeypatch, spawned):
    monkeypatch.setattr(_signatures, "POOL_AFTER_CHARS", 10)
    texts = [words(20, f"d{i}") for i in range(4)]
    assert signatures(texts, num_perm=8, pool=SyncPool(2)).dtype == np.uint32
    assert signatures(texts, num_perm=8, workers=2).dtype == np.uint32


def test_a_stream_moves_to_the_pool_at_exactly_pool_after_chars(monkeypatch, spawned):
    monkeypatch.setattr(_signatures, "POOL_AFTER_CHARS", 100)
    batches = [[words(50, f"b{i}")] for i in range(4)]  # the second reaches 100 characters
    got = list(signature_stream(batches, PARAMS, workers=2))
    assert [g.tolist() for g in got] == [batch_signatures(b, PARAMS).tolist() for b in batches]
    ((pool, _, _),) = spawned
    assert [c[1][0].texts() for c in pool.calls] == batches[1:]


def test_jit_false_tokenises_with_numpy_without_looking_for_the_compiled_kernels(monkeypatch):
    from neardup.core import _compiled

    def looked(*args):
        raise AssertionError("jit=False looked for the compiled kernels")

    monkeypatch.setattr(_compiled, "loaded", looked)
    monkeypatch.setattr(_compiled, "load", looked)
    monkeypatch.setattr(_signatures, "compiled", looked)
    got = _signatures._kernel(TEXTS, 8, 0, 2, jit=False)
    assert [r.tolist() for r in got] == [spec_signature(t, 8, 0, 2) for t in TEXTS]


def test_jit_true_tokenises_with_the_compiled_kernels_once_this_process_has_them(monkeypatch):
    from neardup.core import _compiled

    asked = []
    monkeypatch.setattr(_compiled, "loaded", lambda: asked.append("loaded"))
    monkeypatch.setattr(_signatures, "compiled", lambda work: asked.append(work))
    got = _signatures._kernel(["a b c d"], 8, 0, 2)
    assert got.tolist() == [spec_signature("a b c d", 8, 0, 2)]
    assert asked == ["loaded", 3 * 8]  # the tokeniser asks first, then the kernel, with its work


class _Kernels:
    """A stand-in for the compiled kernels (numpy inside) that checks what it is given."""

    def __init__(self) -> None:
        from neardup.core._fnv import fnv1a64_spans
        from neardup.core._permute import minima

        self.fnv, self.minima_of, self.calls = fnv1a64_spans, minima, []

    def shingle_values(self, buf, start, end, out):
        assert buf.dtype == np.uint8 and not buf.flags.writeable
        assert start.dtype == end.dtype == np.int64 and out.dtype == np.uint64
        assert len(start) == len(end) == len(out)
        out[:] = self.fnv(buf, start, end) % np.uint64(2**31 - 1)
        self.calls.append("shingle_values")

    def minima(self, x, per_doc, a, b, out):
        assert x.dtype == a.dtype == out.dtype == np.uint32 and b.dtype == np.uint64
        assert per_doc.dtype == np.int64 and out.shape == (len(per_doc), len(a))
        out[:] = self.minima_of(x.astype(np.uint64), per_doc, a.astype(np.uint64), b)
        self.calls.append("minima")


def test_the_compiled_path_passes_its_kernels_what_they_take(monkeypatch):
    kernels = _Kernels()
    monkeypatch.setattr(_signatures, "compiled", lambda work: kernels)
    got = _signatures._kernel(TEXTS, 16, 5, 2)
    assert got.dtype == np.uint32
    assert [r.tolist() for r in got] == [spec_signature(t, 16, 5, 2) for t in TEXTS]
    assert kernels.calls == ["shingle_values", "minima"]


def test_signatures_default_to_128_permutations_of_seed_0_and_shingles_of_5():
    got = signatures(["one two three four five six"])
    assert got.shape == (1, 128)
    assert got.tolist() == [spec_signature("one two three four five six", 128, 0, 5)]


def test_warm_worker_loads_the_kernels_and_signs_a_batch_with_its_tokenizer(monkeypatch):
    # The kernels' load stood in for (test_fanout.py loads them for real).
    signed = []
    real = _signatures._kernel

    def kernel(texts, *args, **kwargs):
        signed.append(kwargs["tokenizer"])
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(_signatures, "_kernel", kernel)
    monkeypatch.setattr(_signatures, "load", lambda: None)
    assert _signatures.warm_worker() is False  # no compiled kernels: numpy
    monkeypatch.setattr(_signatures, "load", lambda: object())
    assert _signatures.warm_worker("multilingual") is True
    assert signed == ["words", "multilingual"]
