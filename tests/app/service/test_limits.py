"""The per-caller rate of contamination checks."""

import asyncio

import pytest

from neardup.app.config import Settings
from neardup.app.service import Overloaded, RateLimited, TooLarge
from neardup.app.service.limits import BatchLimits, Budgets, ProbeLimiter
from neardup.app.service.store import SQLiteStore


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _take(limiter: ProbeLimiter, caller: str, amount: int) -> None:
    asyncio.run(limiter.take(caller, amount))


@pytest.fixture
def budgets(tmp_path):
    """Budgets in a SQLite store in ``tmp_path`` on a clock the test moves (``budgets.clock``)."""
    store = SQLiteStore(tmp_path)
    store.clock = Clock()
    found = Budgets(store)
    found.clock = store.clock
    yield found
    found.close()
    store.close()


def test_probe_limiter_is_a_token_bucket_per_caller(budgets):
    limiter = ProbeLimiter(60, budgets)  # one text a second
    _take(limiter, "a", 60)
    with pytest.raises(RateLimited) as refused:
        _take(limiter, "a", 2)
    assert refused.value.retry_after == 2
    _take(limiter, "b", 60)  # another caller has its own bucket
    budgets.clock.now = 2.0
    _take(limiter, "a", 2)
    with pytest.raises(RateLimited):
        _take(limiter, "a", 1)


def test_a_check_over_a_whole_minute_is_too_large_and_one_refused_costs_nothing(budgets):
    """More than the bucket holds could never pass (413, not a 429 to retry forever); a
    refused check spends nothing, so a smaller one still fits."""
    limiter = ProbeLimiter(60, budgets, unit="words", setting="NEARDUP_X")
    with pytest.raises(TooLarge) as refused:
        _take(limiter, "c", 61)
    assert str(refused.value) == (
        "this check is 61 words; a key may check at most 60 words a minute for "
        "contamination (NEARDUP_X): send fewer or shorter texts a request"
    )
    _take(limiter, "c", 50)
    with pytest.raises(RateLimited, match=r"for contamination and this check is 11.*NEARDUP_X"):
        _take(limiter, "c", 11)
    _take(limiter, "c", 10)
    with pytest.raises(RateLimited) as refused:
        _take(limiter, "c", 1)
    assert refused.value.retry_after == 1


def test_the_two_rates_of_a_caller_are_two_buckets(budgets):
    texts = ProbeLimiter(10, budgets)
    words = ProbeLimiter(10, budgets, unit="words", setting="NEARDUP_X")
    _take(texts, "a", 10)
    _take(words, "a", 10)  # not charged to its texts' bucket
    with pytest.raises(RateLimited):
        _take(words, "a", 1)


def test_probe_limiter_refills_at_its_rate_and_says_when_to_retry(budgets):
    limiter = ProbeLimiter(120, budgets)  # two texts a second
    _take(limiter, "a", 120)
    budgets.clock.now = 1.5
    _take(limiter, "a", 3)  # refilled 3
    with pytest.raises(RateLimited) as empty:
        _take(limiter, "a", 5)
    assert empty.value.retry_after == 3  # 5 texts at 2 a second
    assert str(empty.value) == (
        "this key may check 120 texts a minute for contamination and this check is 5; retry in 3 s "
        "(NEARDUP_CONTAMINATION_TEXTS_PER_MINUTE)"
    )
    budgets.clock.now = 2.0
    with pytest.raises(RateLimited) as short:
        _take(limiter, "a", 5)  # 1 token back: 4 to wait for
    assert short.value.retry_after == 2
    budgets.clock.now = 12.0  # 21 tokens: a whole minute's worth still waits for the 99 missing
    with pytest.raises(RateLimited) as whole:
        _take(limiter, "a", 120)
    assert whole.value.retry_after == 50


def test_batch_limits_refuse_a_batch_a_text_or_a_working_memory_over_the_settings(tmp_path):
    settings = Settings(
        data_dir=tmp_path, max_batch=3, max_text_chars=10, max_batch_memory=2**20, max_inflight=1
    )
    limits = BatchLimits(settings)
    limits.check_texts(["a" * 10] * 3)
    refusals = {
        "a batch holds at most 3 items, got 4": lambda: limits.check_texts(["a"] * 4),
        "text 1 has 11 characters; the limit is 10": lambda: limits.check_texts(["a", "b" * 11]),
        # 2 texts of 10 characters: 48 * 20 + 2 * (8 KiB + answer) bytes is 1 MiB + 2
        "the batch would need about 1 MiB of working memory; the limit is 1 MiB: send smaller "
        "batches": lambda: limits.check_texts(["a" * 10] * 2, answer_per_text=515_617),
    }
    for message, call in refusals.items():
        with pytest.raises(TooLarge) as refused:
            call()
        assert str(refused.value) == message
    limits.check_texts(["a" * 10] * 2, answer_per_text=515_616)  # exactly 1 MiB
    limits.check_batch(3)
    with limits.admit():
        assert limits.inflight == 1
        with pytest.raises(Overloaded, match="1 batches are in flight"), limits.admit():
            pass
    assert limits.inflight == 0


def test_batch_limits_count_no_answer_bytes_unless_told(tmp_path):
    # 2 texts of 10 characters: 48 * 20 + 2 * 8 KiB bytes, the limit exactly
    limits = BatchLimits(Settings(data_dir=tmp_path, max_batch_memory=48 * 20 + 2 * 8192))
    limits.check_texts(["a" * 10] * 2)
    with pytest.raises(TooLarge):
        limits.check_texts(["a" * 10] * 2, answer_per_text=1)


def test_contamination_ngrams_per_minute_is_a_deprecated_name_of_words_per_minute(
    monkeypatch, caplog
):
    """The setting was renamed when checks came to be charged by words: the old name (its
    variable or ``neardup serve`` flag) still sets the rate, as words, with a warning; both
    names at once are refused, naming the one to keep."""
    assert Settings().contamination_words_per_minute == 10_000
    assert Settings(contamination_words_per_minute=700).contamination_words_per_minute == 700
    assert "deprecated" not in caplog.text
    assert Settings(contamination_ngrams_per_minute=300).contamination_words_per_minute == 300
    monkeypatch.setenv("NEARDUP_CONTAMINATION_NGRAMS_PER_MINUTE", "500")
    assert Settings().contamination_words_per_minute == 500
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 2 and all(
        "NEARDUP_CONTAMINATION_NGRAMS_PER_MINUTE (--contamination-ngrams-per-minute) is deprecated"
        in w
        and "set that instead" in w
        for w in warned
    )
    assert "its value 500 is taken as NEARDUP_CONTAMINATION_WORDS_PER_MINUTE" in warned[1]
    with pytest.raises(ValueError, match="set only NEARDUP_CONTAMINATION_WORDS_PER_MINUTE"):
        Settings(contamination_words_per_minute=700)


def test_a_batch_that_cannot_succeed_is_refused_by_its_own_fault_before_admission(service_in):
    """A repeated id is the batch's own fault (422), found before the batch is admitted: a full
    server says 503 (retry) only to a batch that can succeed. Registration and decontamination
    check in one order (repeated ids, then the limits), so a batch with both faults gets the
    same answer from both."""
    import asyncio

    from neardup.app.service import DecontRequest, NewDoc
    from neardup.core.engine import DecontParams, Doc, DuplicateIdError, Thresholds

    ask = DecontRequest(DecontParams(), None, Thresholds(), 10, protect=True)
    repeated = [("a", "one text"), ("b", "another"), ("a", "a third")]
    both = [*repeated, ("c", "x" * 11)]  # and a text over max_text_chars

    async def run() -> list[str]:
        async with service_in(max_inflight=1, max_text_chars=10) as service:
            refusals = []
            with service.limits.admit():  # the one place taken: any admitted batch is 503
                for batch in (repeated, both):
                    with pytest.raises(DuplicateIdError) as registering:
                        await service.register([NewDoc(i, t, {}) for i, t in batch])
                    docs = [Doc(i, t) for i, t in batch]
                    with pytest.raises(DuplicateIdError) as decontaminating:
                        await service.decontamination(docs, None, ask, "k")
                    refusals += [str(registering.value), str(decontaminating.value)]
            return refusals

    assert asyncio.run(run()) == ["document id 'a' appear(s) more than once"] * 4
