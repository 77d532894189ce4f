"""Request metrics: bounded labels whatever methods and paths clients send."""

import re

from prometheus_client import generate_latest

from neardup.app.config import Settings
from neardup.app.main import create_app
from tests.app.api.asgi import call


def test_metrics_labels_are_standard_methods_and_route_templates(tmp_path):
    settings = Settings(data_dir=tmp_path, workers=1, allowed_hosts="testserver")
    app = create_app(settings)  # no lifespan: these requests never reach the service
    requests = []
    for i in range(200):
        requests += [(f"BREW{i}", f"/v1/documents/doc-{i}"), ("get", f"/no/such/{i}"),
                     ("PATCH", f"/v1/documents/doc-{i}"), ("GET", f"/nowhere-{i}")]  # fmt: skip
    call(app, *requests)
    exposition = generate_latest(app.state.metrics.registry).decode()
    samples = re.findall(r"^neardup_requests_total\{(.*)\} ", exposition, re.MULTILINE)
    methods = {m for s in samples for m in re.findall(r'method="([^"]*)"', s)}
    routes = {r for s in samples for r in re.findall(r'route="([^"]*)"', s)}
    assert methods == {"OTHER", "PATCH", "GET"}
    assert routes == {"/v1/documents/{doc_id}", "unmatched"}
    assert len(samples) <= 6
    assert len(exposition) < 20_000
