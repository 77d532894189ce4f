"""The Host header check: only configured names are served (no DNS rebinding)."""

import pytest
from pydantic import ValidationError

from neardup.app.config import Settings
from neardup.app.main import create_app
from tests.app.api.asgi import call


@pytest.mark.parametrize(
    ("host", "status"),
    [("127.0.0.1:8000", 200), ("localhost:8000", 200), ("[::1]:8000", 200), ("localhost", 200),
     ("evil.example:8000", 400), ("127.0.0.1.nip.io:8000", 400), ("testserver", 400)],
)  # fmt: skip
def test_hosts_by_default_only_loopback_names_are_served(tmp_path, host, status):
    app = create_app(Settings(data_dir=tmp_path, workers=1))
    (response,) = call(app, ("GET", "/healthz"), host=host)
    assert response.status_code == status


def test_hosts_configured_names_and_wildcards(tmp_path):
    settings = Settings(data_dir=tmp_path, workers=1, allowed_hosts="neardup.internal,*.corp")
    app = create_app(settings)
    assert call(app, ("GET", "/healthz"), host="neardup.internal:80")[0].status_code == 200
    assert call(app, ("GET", "/healthz"), host="a.corp")[0].status_code == 200
    assert call(app, ("GET", "/healthz"), host="127.0.0.1")[0].status_code == 400
    anything = create_app(Settings(data_dir=tmp_path, workers=1, allowed_hosts="*"))
    assert call(anything, ("GET", "/healthz"), host="whatever")[0].status_code == 200


def test_hosts_default_adds_the_listening_name_unless_a_wildcard(monkeypatch):
    loopback = ["localhost", "127.0.0.1", "[::1]"]
    assert Settings().host_names == loopback
    assert Settings(host="0.0.0.0").host_names == loopback
    assert Settings(host="::").host_names == loopback
    assert Settings(host="10.1.2.3").host_names == [*loopback, "10.1.2.3"]
    assert Settings(host="fd00::7").host_names == [*loopback, "[fd00::7]"]
    assert Settings(host="Box.Example").host_names == [*loopback, "box.example"]
    monkeypatch.setenv("NEARDUP_ALLOWED_HOSTS", "a.example, ::1")
    assert Settings().host_names == ["a.example", "[::1]"]
    with pytest.raises(ValidationError, match="wildcard"):
        Settings(allowed_hosts="a*.example")
