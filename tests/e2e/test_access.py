"""API keys and scopes: every endpoint against every kind of key, through a real server."""

import httpx
import pytest

from tests.e2e.conftest import start_server, stop_server

KEYS = {"read": "k-read-0123456789ab", "write": "k-write-456789abcd",
        "protect": "k-protect-89abcdef", "all": "k-all-cdef01234567"}  # fmt: skip

# (method, path, body kwargs, the scope it needs); None: open to everyone.
ENDPOINTS = [
    ("GET", "/healthz", {}, None),
    ("GET", "/readyz", {}, None),
    ("GET", "/metrics", {}, None),
    ("GET", "/v1/config", {}, "read"),
    ("GET", "/v1/stats", {}, "read"),
    ("POST", "/v1/signatures", {"json": {"texts": ["a b c"]}}, "read"),
    ("POST", "/v1/query", {"json": {"texts": ["a b c"]}}, "read"),
    ("POST", "/v1/contamination", {"json": {"texts": ["a b c"]}}, "read"),
    ("GET", "/v1/documents/doc-1", {}, "read"),
    ("GET", "/v1/clusters", {}, "read"),
    ("GET", "/v1/clusters/doc-1", {}, "read"),
    ("GET", "/v1/protected-sets", {}, "read"),
    ("GET", "/v1/protected-sets/evals", {}, "read"),
    ("POST", "/v1/documents", {"json": {"documents": [{"id": "doc-1", "text": "a b c"}]}}, "write"),
    ("DELETE", "/v1/documents/nobody", {}, "write"),
    ("PUT", "/v1/protected-sets/evals",
     {"content": "one two three", "headers": {"content-type": "text/plain"}}, "protect"),
    ("DELETE", "/v1/protected-sets/nothing", {}, "protect"),
    ("POST", "/v1/decontamination", {"json": {"documents": [{"id": "d", "text": "a b"}]}}, "read"),
]  # fmt: skip


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("access")
    keys = tmp / "keys.txt"
    keys.write_text(
        "# neardup keys\n\n"
        f"{KEYS['read']} read\n{KEYS['write']} write\n{KEYS['protect']} protect\n"
        f"{KEYS['all']} read,write,protect\n",
        encoding="utf-8",
    )
    server = start_server(tmp, "--workers", "1", "--api-keys-file", str(keys))
    yield server, keys
    stop_server(server)


def call(server, method, path, kwargs, key):
    headers = dict(kwargs.get("headers", {}))
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    rest = {k: v for k, v in kwargs.items() if k != "headers"}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **rest)


@pytest.mark.parametrize(("method", "path", "kwargs", "needed"), ENDPOINTS)
@pytest.mark.parametrize("who", ["none", "unknown", "read", "write", "protect", "all"])
def test_every_endpoint_against_every_key(secured, method, path, kwargs, needed, who):
    server, _ = secured
    key = {"none": None, "unknown": "not-a-key"}.get(who, KEYS.get(who))
    status = call(server, method, path, kwargs, key).status_code
    if needed is None:
        assert status == 200
    elif who in ("none", "unknown"):
        assert status == 401
    elif who == "all" or who == needed:
        assert status not in (401, 403)
    else:
        assert status == 403


def test_401_names_the_scheme_and_403_the_scope(secured):
    server, _ = secured
    missing = httpx.get(f"{server.url}/v1/stats")
    assert missing.headers["www-authenticate"] == "Bearer"
    assert "Authorization: Bearer" in missing.json()["detail"]
    lacking = call(server, "POST", "/v1/documents", ENDPOINTS[13][2], KEYS["read"])
    assert "'write'" in lacking.json()["detail"]


def test_the_keys_file_is_read_once_at_start(secured):
    server, keys = secured
    original = keys.read_text()
    keys.write_text("k-new-key-0123456789 read\n", encoding="utf-8")
    try:
        assert call(server, "GET", "/v1/stats", {}, "k-new-key-0123456789").status_code == 401
        assert call(server, "GET", "/v1/stats", {}, KEYS["read"]).status_code == 200
    finally:
        keys.write_text(original)


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("good-key-0123456789 read\nbad-line-without-scope\n", 2),
        ("k1-0123456789abcdef read,admin\n", 1),
        ("k1-0123456789abcdef read extra\n", 1),
    ],
)
def test_a_malformed_keys_file_refuses_to_start_naming_the_line(tmp_path, content, line):
    keys = tmp_path / "keys.txt"
    keys.write_text(content, encoding="utf-8")
    with pytest.raises(RuntimeError, match=rf"keys\.txt:{line}: expected 'KEY SCOPE"):
        start_server(tmp_path, "--api-keys-file", str(keys))


def test_no_keys_file_refuses_a_non_loopback_host(tmp_path):
    with pytest.raises(RuntimeError, match=r"refusing to listen on 0\.0\.0\.0 with no API keys"):
        start_server(tmp_path, "--host", "0.0.0.0")


def test_insecure_allows_it(tmp_path):
    # Bound to every interface, but the test only talks to it over loopback.
    server = start_server(tmp_path, "--host", "0.0.0.0", "--insecure", "--workers", "1")
    try:
        assert httpx.get(f"{server.url}/v1/stats").status_code == 200
    finally:
        stop_server(server)


def test_contamination_probing_is_rate_limited_and_ngrams_echo_only_to_protect(tmp_path):
    """A read key learns which of its texts are contaminated, at a bounded rate (words a
    minute), but not the shared n-gram (which would name the next protected word of a probed
    seed); a protect key is counted in texts."""
    reader, protector = "probe-read-0123456789", "probe-protect-0123456789"
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{reader} read\n{protector} read,protect\n", encoding="utf-8")
    server = start_server(tmp_path, "--workers", "1", "--api-keys-file", str(keys),
                          "--contamination-texts-per-minute", "5",
                          "--contamination-words-per-minute", "70")  # fmt: skip
    secret = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    try:
        put = httpx.put(f"{server.url}/v1/protected-sets/evals", content=secret,
                        headers={"content-type": "text/plain",
                                 "authorization": f"Bearer {protector}"})  # fmt: skip
        assert put.status_code == 201

        def check(key, texts):
            return httpx.post(f"{server.url}/v1/contamination", json={"texts": texts},
                              headers={"authorization": f"Bearer {key}"})  # fmt: skip

        probe = "zero " + " ".join(secret.split()[:13])
        read = check(reader, [probe])
        [hit] = read.json()["results"][0]["hits"]
        assert hit == {"set": "evals", "item": "1", "ngram": None}
        shown = check(protector, [probe]).json()
        assert shown["results"][0]["hits"][0]["ngram"] == 0  # sent once, named by position
        assert shown["ngrams"] == [" ".join(secret.split()[:13])]
        # A probe of 14 words costs 14: the reader has 56 of its 70 left; the protector is
        # counted in texts (5 a minute), in its own bucket.
        assert check(reader, [probe] * 4).status_code == 200
        limited = check(reader, [probe])
        assert limited.status_code == 429, limited.text
        assert int(limited.headers["retry-after"]) >= 1
        assert "70 words a minute" in limited.json()["detail"]
        assert check(protector, [probe] * 3).status_code == 200
        assert "5 texts a minute" in check(protector, [probe] * 2).json()["detail"]
    finally:
        stop_server(server)
