"""The per-caller rate of contamination checks."""

import pytest

from neardup.app.service import RateLimited, TooLarge
from neardup.app.service.limits import ProbeLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_probe_limiter_is_a_token_bucket_per_caller():
    clock = Clock()
    limiter = ProbeLimiter(60, clock=clock)  # one text a second
    limiter.take("a", 60)
    with pytest.raises(RateLimited) as refused:
        limiter.take("a", 2)
    assert refused.value.retry_after == 2
    limiter.take("b", 60)  # another caller has its own bucket
    clock.now = 2.0
    limiter.take("a", 2)
    with pytest.raises(RateLimited):
        limiter.take("a", 1)


def test_a_check_over_a_whole_minute_is_too_large_and_one_refused_costs_nothing():
    """More than the bucket holds could never pass (413, not a 429 to retry forever); a
    refused check spends nothing, so a smaller one still fits."""
    clock = Clock()
    limiter = ProbeLimiter(60, clock=clock, unit="n-grams", setting="NEARDUP_X")
    with pytest.raises(TooLarge, match=r"this check is 61 n-grams; .* at most 60 n-grams a minute"):
        limiter.take("c", 61)
    limiter.take("c", 50)
    with pytest.raises(RateLimited, match=r"for contamination and this check is 11.*NEARDUP_X"):
        limiter.take("c", 11)
    limiter.take("c", 10)
    with pytest.raises(RateLimited) as refused:
        limiter.take("c", 1)
    assert refused.value.retry_after == 1


def test_probe_limiter_forgets_the_least_recently_seen_callers():
    clock = Clock()
    limiter = ProbeLimiter(10, callers=2, clock=clock)
    limiter.take("a", 10)
    limiter.take("b", 1)
    limiter.take("c", 1)  # "a" is forgotten: a full bucket again
    limiter.take("a", 10)
