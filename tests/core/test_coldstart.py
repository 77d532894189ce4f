"""Cold starts (issue 22): small work is signed here, with the same signatures as on a pool of
compiled workers; the compiled kernels are cached where decided, one specialisation each, and a
second process reads them from the cache instead of compiling."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.core import _signatures
from neardup.core._params import MinhashParams
from neardup.core._signatures import POOL_AFTER_CHARS, batch_signatures, signature_stream
from tests.strategies import texts

ROOT = Path(__file__).resolve().parents[2]
PARAMS = MinhashParams(num_perm=32)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    batches=st.lists(st.lists(texts(), min_size=1, max_size=12), min_size=1, max_size=5),
    after=st.integers(0, 600),
)
def test_a_stream_is_signed_the_same_below_and_above_the_pool_threshold(
    jit, monkeypatch, batches, after
):
    # Below ``after`` characters the batches are signed here, by the numpy kernel; from the
    # batch that reaches it on, on a spawn pool of warm workers (compiled kernels).
    monkeypatch.setattr(_signatures, "POOL_AFTER_CHARS", after)
    got = np.concatenate(list(signature_stream(batches, PARAMS, workers=2)))
    flat = [t for batch in batches for t in batch]
    numpy_path = _signatures._kernel(flat, PARAMS.num_perm, PARAMS.seed, PARAMS.k, jit=False)
    compiled_path = batch_signatures(flat, PARAMS)  # ``jit`` loaded the compiled kernels
    assert np.array_equal(got, numpy_path)
    assert np.array_equal(got, compiled_path)


def test_signatures_below_the_threshold_start_no_pool(monkeypatch):
    def no_pool(*args, **kwargs):
        raise AssertionError("a spawn pool was started for small work")

    monkeypatch.setattr(_signatures, "spawn_pool", no_pool)
    small = ["some words of a small text"] * 10
    assert np.array_equal(
        _signatures.signatures(small, num_perm=16, workers=4),
        _signatures.signatures(small, num_perm=16, workers=1),
    )
    assert len(list(signature_stream([small, small], PARAMS, workers=4))) == 2
    large = ["x" * POOL_AFTER_CHARS]
    try:  # the control: above it, a pool is asked for
        _signatures.signatures(large + large, num_perm=16, workers=2)
    except AssertionError as exc:
        assert "spawn pool" in str(exc)
    else:
        raise AssertionError("no pool was asked for above POOL_AFTER_CHARS")


#: In a fresh interpreter: the kernels loaded and run as a batch run loads and runs them (a
#: batch tokenised by numpy loads them, then warm_worker, then batches through the compiled
#: tokeniser, ASCII and not), then what numba says of each kernel.
CACHE_PROBE = """
import json, os
from neardup.core import _compiled, _jit
from neardup.core._params import MinhashParams
from neardup.core._signatures import batch_signatures, warm_worker

params = MinhashParams()
_compiled._State.work = _compiled.LOAD_AFTER - 1  # the next batch loads the kernels
batch_signatures(["plain ascii words for the numpy tokeniser"] * 3, params)
assert _compiled.loaded() is not None
warm_worker()
batch_signatures(["plain ascii words " * 20, "café Москва Σίσυφος " * 20], params)
kernels = {
    f.__name__: {
        "specialisations": len(f.signatures),
        "hits": sum(f.stats.cache_hits.values()),
        "misses": sum(f.stats.cache_misses.values()),
        "path": os.path.realpath(f.stats.cache_path),
    }
    for f in (_jit.tokenise, _jit.shingle_spans, _jit.shingle_values, _jit.minima)
}
print(json.dumps({"kernels": kernels, "module": os.path.realpath(_jit.__file__)}))
"""


def _cache_probe() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "NEARDUP_"))}
    done = subprocess.run(
        [sys.executable, "-c", CACHE_PROBE], capture_output=True, text=True, cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)}, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_kernels_are_cached_beside_the_module_and_a_second_process_compiles_nothing():
    _cache_probe()  # compiles what the cache lacks (a fresh clone, an edited core/_jit.py)
    second = _cache_probe()
    cache = str(Path(second["module"]).parent / "__pycache__")
    for name, kernel in second["kernels"].items():
        # One specialisation a kernel: warm_up compiles exactly what a run calls.
        assert kernel["specialisations"] == 1, (name, kernel)
        assert kernel["path"] == cache, (name, kernel)
        assert kernel["misses"] == 0 and kernel["hits"] == 1, (name, kernel)
