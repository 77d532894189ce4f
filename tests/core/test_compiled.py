"""The fast paths against the references: the compiled (numba) kernels against the numpy ones,
value by value, and whole signatures (fast tokeniser, compiled or numpy kernels) against the
scalar reference, ``minhash`` over ``shingles`` (core/_sketch.py over core/_text.py)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import _compiled, _jit, _signatures
from neardup.core._fnv import fnv1a64_spans
from neardup.core._hashing import MERSENNE31, perm_params
from neardup.core._permute import minima
from neardup.core.minhash import minhash, shingles
from tests.core.test_permute import boundary_xs
from tests.strategies import any_text, texts, tricky_text

P = MERSENNE31


def compiled_minima(jit, x, per_doc, a, b):
    out = np.empty((len(per_doc), len(a)), dtype=np.uint32)
    jit.minima(x.astype(np.uint32), per_doc, a.astype(np.uint32), b, out)
    return out


def reference(batch, num_perm=128, seed=0, k=5):
    """The scalar reference: minhash over the shingle set, one text at a time."""
    rows = [minhash(shingles(t, k), num_perm, seed) for t in batch]
    return np.array(rows, dtype=np.uint64).reshape(len(batch), num_perm)


@pytest.mark.parametrize(("num_perm", "seed"), [(1, 0), (3, 5), (128, 0), (256, 2**40 + 1)])
def test_compiled_minima_equal_numpy_minima_at_every_boundary(jit, num_perm, seed):
    a, b = perm_params(num_perm, seed)
    rng = np.random.default_rng(seed)
    x = np.concatenate(
        [boundary_xs(a, b), rng.integers(0, P, 20_000, dtype=np.uint64),
         np.array([0, 1, 2, P - 2, P - 1], dtype=np.uint64)]
    )  # fmt: skip
    ones = np.ones(len(x), dtype=np.int64)
    assert np.array_equal(compiled_minima(jit, x, ones, a, b), minima(x, ones, a, b))
    # Documents of 0 to 9 shingles (0: the all-P row), over the same values.
    sizes = rng.integers(0, 10, len(x))
    sizes[-1] += len(x) - sizes.sum() if sizes.sum() < len(x) else 0
    per_doc = np.diff(np.minimum(np.concatenate(([0], np.cumsum(sizes))), len(x)))
    per_doc[-1] += len(x) - per_doc.sum()
    assert np.array_equal(compiled_minima(jit, x, per_doc, a, b), minima(x, per_doc, a, b))


@given(
    st.lists(st.tuples(st.integers(1, P - 1), st.integers(0, P - 1)), min_size=1, max_size=20),
    st.lists(st.integers(0, P - 1), min_size=1, max_size=200),
    st.lists(st.integers(0, 7), min_size=1, max_size=40),
)
def test_compiled_minima_equal_numpy_minima_for_any_parameters(jit, params, xs, sizes):
    a = np.array([p[0] for p in params], dtype=np.uint64)
    b = np.array([p[1] for p in params], dtype=np.uint64)
    x = np.array(xs, dtype=np.uint64)
    per_doc = np.diff(np.minimum(np.concatenate(([0], np.cumsum(sizes))), len(x)))
    per_doc = np.append(per_doc, len(x) - per_doc.sum()).astype(np.int64)
    assert np.array_equal(compiled_minima(jit, x, per_doc, a, b), minima(x, per_doc, a, b))


def test_compiled_shingle_values_equal_numpy_fnv(jit):
    rng = np.random.default_rng(3)
    buf = rng.integers(0, 256, 300_000, dtype=np.uint8)
    start = rng.integers(0, len(buf), 5_000)
    end = np.minimum(start + rng.integers(0, 90, len(start)), len(buf))
    start = np.append(start, [0, 5, 1_000])  # a 70,000-byte span (numpy: the closed form)
    end = np.append(end, [0, 5, 71_000])
    out = np.empty(len(start), dtype=np.uint64)
    jit.shingle_values(buf, start, end, out)
    assert np.array_equal(out, fnv1a64_spans(buf, start, end) % np.uint64(P))


@given(st.lists(any_text, max_size=6), st.sampled_from([(16, 0, 5), (8, 3, 1), (5, 9, 3)]))
def test_both_kernels_equal_the_scalar_reference_on_any_unicode(jit, batch, params):
    num_perm, seed, k = params
    expected = reference(batch, num_perm, seed, k)
    for use_jit in (True, False):
        got = _signatures._kernel(batch, num_perm, seed, k, jit=use_jit)
        assert np.array_equal(got, expected), use_jit


@given(st.lists(tricky_text, max_size=6))
def test_both_kernels_equal_the_scalar_reference_on_tricky_unicode(jit, batch):
    expected = reference(batch, 16)
    for use_jit in (True, False):
        assert np.array_equal(_signatures._kernel(batch, 16, 0, 5, jit=use_jit), expected)


@given(st.lists(st.one_of(texts(), tricky_text), min_size=1, max_size=12))
def test_slabs_do_not_change_signatures(monkeypatch_module, batch):
    expected = reference(batch, 8)
    monkeypatch_module.setattr(_signatures, "SLAB_TEXTS", 2)
    monkeypatch_module.setattr(_signatures, "SLAB_CHARS", 40)
    try:
        assert np.array_equal(_signatures._kernel(batch, 8, 0, 5), expected)
    finally:
        monkeypatch_module.undo()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@given(st.lists(st.integers(0, 5000), max_size=60), st.integers(1, 4))
def test_slab_bounds_cover_the_texts_in_bounded_slabs(monkeypatch_module, lengths, parts):
    monkeypatch_module.setattr(_signatures, "SLAB_TEXTS", 7)
    monkeypatch_module.setattr(_signatures, "SLAB_CHARS", 3500)  # a text weighs >= 500
    try:
        bounds = _signatures.slab_bounds(["x" * n for n in lengths], parts)
    finally:
        monkeypatch_module.undo()
    assert [lo for lo, _ in bounds] == [0, *(hi for _, hi in bounds[:-1])][: len(bounds)]
    assert (bounds[-1][1] if bounds else 0) == len(lengths)
    assert all(lo < hi for lo, hi in bounds)
    for lo, hi in bounds:
        # Within the limits but for its last text.
        assert hi - lo - 1 <= 7
        assert sum(lengths[lo : hi - 1]) <= 3500


def test_slabs_of_even_texts_are_even_and_a_multiple_of_the_workers():
    batch = ["word " * 300] * 9000
    chars = 1500 * _signatures.SLAB_TEXTS  # each text weighs its 1,500 characters
    one, two = _signatures.slab_bounds(batch, chars=chars), _signatures.slab_bounds(batch, 2, chars)
    # 9,000 texts of 1,500 characters make 4.4 slabs of SLAB_TEXTS.
    assert len(one) == 5 and len(two) == 6
    assert {hi - lo for lo, hi in two} == {1500}
    # Shorter texts weigh chars / SLAB_TEXTS: a slab still holds at most SLAB_TEXTS of them.
    short = _signatures.slab_bounds(["a few words"] * 9000, 1, chars)
    assert max(hi - lo for lo, hi in short) <= _signatures.SLAB_TEXTS


def test_the_compiled_kernels_load_only_after_enough_work(monkeypatch):
    monkeypatch.setattr(_compiled._State, "kernels", None)
    monkeypatch.setattr(_compiled._State, "failed", False)
    monkeypatch.setattr(_compiled._State, "work", 0)
    assert _compiled.compiled(_compiled.LOAD_AFTER // 2) is None
    assert _compiled.compiled(_compiled.LOAD_AFTER // 2) is not None


def test_neardup_jit_0_keeps_numpy(monkeypatch):
    monkeypatch.setenv(_compiled.JIT_VARIABLE, "0")
    assert _compiled._load() is None
    monkeypatch.setattr(_compiled._State, "kernels", None)
    monkeypatch.setattr(_compiled._State, "failed", False)
    assert _compiled.load() is None
    assert _compiled.compiled(_compiled.LOAD_AFTER) is None


def test_memory_of_one_call_does_not_grow_with_its_input(monkeypatch):
    # Slabs of 16 texts: beyond the result (512 bytes a text) and a few arrays of one number a
    # text, a call over 8x the texts must not take more memory. Unsliced, the kernel's scratch
    # is tens of bytes a character: here ~100 KB a text.
    import tracemalloc

    from neardup.core.minhash import signatures

    monkeypatch.setattr(_signatures, "SLAB_TEXTS", 16)
    monkeypatch.setattr(_signatures, "SLAB_CHARS", 16 * 4096)
    base = [f"text {i} " + "wörds and “more” words " * 150 for i in range(800)]
    signatures(base[:20])  # the code-point tables, built once a process

    def peak(batch):
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            signatures(batch)
            return tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()

    small, large = peak(base[:100]), peak(base)
    assert (large - small) / 700 < 2048


SIGMA_TEXTS = [
    "ΟΔΟΣ ΣΟΦΙΑ Σ ΑΣ. ΑΣ' ΑΣ'Α ΑΣ\u0301 Α\u0301Σ ΑΣ:Β ·Σ Α·Σ",
    "ΣΑΣ" * 200 + " ΑΣ " + "Α" * 300 + "Σ",  # runs longer than the window
    "x" * 300 + "ΑΣ" + "'" * 300,
    "İSTANBUL ΟΔΟΣ K\u212a",  # sigma with characters str.lower maps to another length
    "plain ascii words only here",
    "ΜΙΑ ΛΕΞΗ\tΑΣ\nΑΣ",
]


@pytest.mark.parametrize("use_jit", [True, False])
def test_capital_sigma_is_lowered_by_its_neighbours(jit, use_jit):
    for batch in (SIGMA_TEXTS, SIGMA_TEXTS[::-1], SIGMA_TEXTS[1:2]):
        got = _signatures._kernel(batch, 16, 0, 5, jit=use_jit)
        assert np.array_equal(got, reference(batch, 16))
        # And word by word: each text alone, k=1 (every word its own shingle).
        for text in batch:
            alone = _signatures._kernel([text], 16, 0, 1, jit=use_jit)
            assert np.array_equal(alone, reference([text], 16, 0, 1)), text


def test_warm_up_asks_for_exactly_the_argument_types_a_run_passes(jit, monkeypatch):
    # One specialisation a kernel, compiled (or read from the cache) at load: the types
    # warm_up passes each kernel must be those a run (both tokenizers) passes it.
    from numba import typeof

    seen: dict[str, set] = {"warm_up": set(), "run": set()}

    def recording(name, kernel, where):
        def call(*args):
            seen[where].add((name, tuple(typeof(a) for a in args)))
            return kernel(*args)

        return call

    for name in _compiled.Compiled._fields:
        monkeypatch.setattr(_jit, name, recording(name, getattr(_jit, name), "warm_up"))
    _jit.warm_up()
    run = {n: recording(n, getattr(jit, n), "run") for n in _compiled.Compiled._fields}
    monkeypatch.setattr(_compiled._State, "kernels", _compiled.Compiled(**run))
    texts = ["warm up with café and Москва and 中文 " * 3, "a plain ascii text of some words"]
    for tokenizer in ("words", "multilingual"):
        _signatures._kernel(texts, 16, 0, 5, tokenizer=tokenizer)
    assert {name for name, _ in seen["run"]} == set(_compiled.Compiled._fields)
    assert seen["warm_up"] == seen["run"]


def test_jit_false_signs_with_numpy_even_once_the_compiled_kernels_are_loaded(jit, monkeypatch):
    # What makes the compiled kernels' tests above a comparison with numpy at all.
    batch = ["the numpy reference kernel signs this", "and this café text"]
    expected = reference(batch, 16, 3, 2)

    def refused(work):
        raise AssertionError("jit=False asked for the compiled kernels")

    monkeypatch.setattr(_signatures, "compiled", refused)
    assert np.array_equal(_signatures._kernel(batch, 16, 3, 2, jit=False), expected)
    with pytest.raises(AssertionError, match="jit=False asked"):
        _signatures._kernel(batch, 16, 3, 2, jit=True)


@pytest.fixture
def fresh_state(monkeypatch):
    """The switch as a new process has it: nothing loaded, nothing failed, no work counted."""
    monkeypatch.setattr(_compiled._State, "kernels", None)
    monkeypatch.setattr(_compiled._State, "failed", False)
    monkeypatch.setattr(_compiled._State, "work", 0)
    monkeypatch.delenv(_compiled.JIT_VARIABLE, raising=False)
    return _compiled._State


def test_the_switch_counts_work_across_calls_and_loads_at_load_after(fresh_state, monkeypatch):
    loads = []
    monkeypatch.setattr(_compiled, "load", lambda: loads.append(1) or "kernels")
    assert _compiled.compiled(_compiled.LOAD_AFTER - 2) is None
    assert _compiled.compiled(1) is None
    assert fresh_state.work == _compiled.LOAD_AFTER - 1 and loads == []
    assert _compiled.compiled(1) == "kernels"  # exactly LOAD_AFTER
    assert loads == [1]
    assert _compiled.LOAD_AFTER == 1 << 28


def test_the_switch_asks_nothing_more_once_loaded_or_failed(fresh_state, monkeypatch, jit):
    def refused():
        raise AssertionError("load asked again")

    monkeypatch.setattr(_compiled, "load", refused)
    fresh_state.kernels = jit
    assert _compiled.compiled(1) is jit and _compiled.compiled(1 << 40) is jit
    assert _compiled.loaded() is jit
    fresh_state.kernels, fresh_state.failed = None, True
    assert _compiled.compiled(1 << 40) is None and _compiled.loaded() is None
    assert fresh_state.work == 0


def test_load_loads_once_and_remembers_a_failure(fresh_state, monkeypatch, jit):
    calls = []
    results = iter([None, jit])
    monkeypatch.setattr(_compiled, "_load", lambda: calls.append(1) or next(results))
    assert _compiled.load() is None and fresh_state.failed is True
    assert _compiled.load() is None and calls == [1]  # a failure is not tried again
    fresh_state.failed = False
    assert _compiled.load() is jit and fresh_state.failed is False
    assert _compiled.load() is jit and calls == [1, 1]  # loaded: not loaded again
    assert fresh_state.kernels is jit


@pytest.mark.parametrize(
    ("value", "numpy"),
    [("0", True), (" 0\n", True), ("1", False), ("", False), ("00", False), (None, False)],
)
def test_load_reads_neardup_jit(fresh_state, monkeypatch, jit, value, numpy):
    assert _compiled.JIT_VARIABLE == "NEARDUP_JIT"
    if value is not None:
        monkeypatch.setenv("NEARDUP_JIT", value)
    kernels = _compiled._load()
    if numpy:
        assert kernels is None
    else:
        assert kernels == _compiled.Compiled(
            _jit.shingle_values, _jit.minima, _jit.tokenise, _jit.shingle_spans, _jit.segment
        )


def test_a_kernel_that_fails_to_load_leaves_numpy(fresh_state, monkeypatch):
    def broken():
        raise RuntimeError("numba cannot compile here")

    monkeypatch.setattr(_jit, "warm_up", broken)
    assert _compiled._load() is None
    assert _compiled.load() is None and fresh_state.failed is True


def test_warm_up_runs_each_kernel_once_through_on_a_one_letter_text(jit, monkeypatch):
    # The kernels are compiled without bounds checks: warm_up's made-up arguments must be
    # whole, and each kernel must run through and give what numpy gives on them.
    from neardup.core import _tokens

    calls: dict[str, list] = {}

    def recording(name, kernel):
        def call(*args):
            result = kernel(*args)
            calls.setdefault(name, []).append((args, result))
            return result

        return call

    for name in _compiled.Compiled._fields:
        monkeypatch.setattr(_jit, name, recording(name, getattr(_jit, name)))
    _jit.warm_up()
    assert sorted(calls) == sorted(_compiled.Compiled._fields)
    assert all(len(made) == 1 for made in calls.values())
    [((text, start, end, x), _)] = calls["shingle_values"]
    assert text.tobytes() == b"a" and start.tolist() == [0] and end.tolist() == [1]
    assert x.tolist() == (fnv1a64_spans(text, start, end) % np.uint64(P)).tolist()
    [((x32, per_doc, a, b, out), _)] = calls["minima"]
    assert x32.tolist() == x.tolist() and per_doc.tolist() == [1] and out.shape == (1, 1)
    assert a.tolist() == [1] and b.tolist() == [0]
    assert out.tolist() == minima(x, per_doc, a.astype(np.uint64), b).tolist()
    [(args, stop)] = calls["tokenise"]
    src, ends, _alt, alt_doc, ascii, _table, grow, buf, edges, doc_edges, state = args
    assert src.tobytes() == b"a" and ends.tolist() == [1] and alt_doc == -1 and grow == 1
    assert len(ascii) == 256 and ascii[ord("a")] == ord("a")
    assert stop == _jit.DONE and state.tolist() == [1, 2, 2]
    assert buf.tobytes() == b"a\n" and edges[:2].tolist() == [0, 1]
    assert doc_edges.tolist() == [0, 2]
    [((word_start, word_end, m, k, start, end), _)] = calls["shingle_spans"]
    assert (word_start[0], word_end[0], m.tolist()) == (0, 1, [1])
    expected = _tokens.shingle_spans(_tokens.Tokens(["a"], jit=False), k)
    assert [start.tolist(), end.tolist()] == [expected[0].tolist(), expected[1].tolist()]
    assert start.tolist() == [0] and end.tolist() == [1]


@pytest.mark.parametrize("name", ["segment", "tokenise", "minima", "shingle_values"])
def test_kernels_hold_no_float(name):
    """numba types a variable given an int64 in one place and a uint64 in another (``int()``
    of a uint32 is one) as a float64: ``segment``'s combining class of the character before
    was one, converted and compared at every combining mark. No kernel variable is a float."""
    import numba
    from numba.core import types

    _jit.warm_up()
    kernel = getattr(_jit, name)
    signature = kernel.signatures[0]
    fresh = numba.njit(nogil=True, boundscheck=False)(kernel.py_func)  # typed here, not cached
    fresh.compile(signature)
    typemap = fresh.overloads[signature].type_annotation.typemap
    assert len(typemap) > 10
    assert sorted(v for v, t in typemap.items() if isinstance(t, types.Float)) == []
