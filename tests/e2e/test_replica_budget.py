"""A read key's contamination budget is the service's, not each replica's: two ``neardup serve``
replicas on one PostgreSQL together give the key CONTAMINATION_WORDS_PER_MINUTE (plus what the
bucket refilled meanwhile), a round-robin over them no more than one alone, and a replica
restarted does not start the key with a full minute (issue 32, finding 6)."""

import time

import httpx

from tests.e2e.conftest import start_server, stop_server

WORDS_PER_MINUTE = 1200
#: Words a check costs: a text of this many words (over NGRAM, so charged as they are).
COST = 100
READ_KEY = "rk-budget-read-0123456789"
PROTECT_KEY = "rk-budget-protect-0123456789"


def _check(server):
    text = " ".join(f"w{i}" for i in range(COST))
    return httpx.post(
        f"{server.url}/v1/contamination",
        json={"texts": [text]},
        headers={"authorization": f"Bearer {READ_KEY}"},
        timeout=30,
    )


def _spend(servers):
    """Checks sent round-robin until every replica refuses (429); the words accepted."""
    accepted, refused = 0, set()
    while len(refused) < len(servers):
        for i, server in enumerate(servers):
            if i in refused:
                continue
            answer = _check(server)
            if answer.status_code == 429:
                assert 1 <= int(answer.headers["retry-after"]) <= 60
                refused.add(i)
            else:
                assert answer.status_code == 200, answer.text
                accepted += COST
    return accepted


def test_replicas_share_a_read_keys_budget_and_a_restart_does_not_refill_it(tmp_path, postgres):
    url = postgres.database()
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{READ_KEY} read\n{PROTECT_KEY} read,write,protect\n", encoding="utf-8")
    args = ("--workers", "1", "--store-url", url, "--api-keys-file", str(keys),
            "--contamination-words-per-minute", str(WORDS_PER_MINUTE))  # fmt: skip
    servers = [start_server(tmp_path / f"r{i}", *args) for i in range(2)]
    rate = WORDS_PER_MINUTE / 60.0
    try:
        put = httpx.put(
            f"{servers[0].url}/v1/protected-sets/evals",
            content="an evaluation item that nobody should train on " * 3,
            headers={"content-type": "text/plain", "authorization": f"Bearer {PROTECT_KEY}"},
            timeout=30,
        )
        assert put.status_code == 201, put.text
        started = time.monotonic()
        accepted = _spend(servers)
        spent = time.monotonic() - started
        # One minute's worth, plus what refilled while the checks ran and the check that found
        # it short; each replica's own bucket would have given twice the minute.
        assert WORDS_PER_MINUTE - COST <= accepted <= WORDS_PER_MINUTE + rate * spent + COST
        # A restarted replica goes on from the store's bucket, not from a full minute.
        stop_server(servers[0])
        servers[0] = start_server(tmp_path / "r0", *args)
        again = _spend(servers[:1])
        since = time.monotonic() - started - spent
        assert again <= rate * since + COST, (again, since)
    finally:
        for server in servers:
            stop_server(server)


def test_a_restart_on_sqlite_does_not_refill_a_read_keys_budget(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{READ_KEY} read\n{PROTECT_KEY} read,write,protect\n", encoding="utf-8")
    args = ("--workers", "1", "--api-keys-file", str(keys),
            "--contamination-words-per-minute", str(WORDS_PER_MINUTE))  # fmt: skip
    data = tmp_path / "data"
    server = start_server(tmp_path, *args, data_dir=data)
    rate = WORDS_PER_MINUTE / 60.0
    try:
        put = httpx.put(
            f"{server.url}/v1/protected-sets/evals",
            content="an evaluation item that nobody should train on " * 3,
            headers={"content-type": "text/plain", "authorization": f"Bearer {PROTECT_KEY}"},
            timeout=30,
        )
        assert put.status_code == 201, put.text
        assert _spend([server]) >= WORDS_PER_MINUTE - COST
        spent = time.monotonic()
        stop_server(server)
        server = start_server(tmp_path, *args, data_dir=data)
        again = _spend([server])
        assert again <= rate * (time.monotonic() - spent) + COST, again
        assert (data / "budgets.sqlite3").is_file()
    finally:
        stop_server(server)
