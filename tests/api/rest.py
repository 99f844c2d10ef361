"""The real app over REST for answer tests: one module-scoped client on the shared index, and a
POST /v1/ask that must answer 200."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from oomkb.api.core.assistant import Assistant
from oomkb.api.http.app import create_app
from oomkb.settings import Settings
from tests.conftest import LOCAL


@pytest.fixture(scope="module")
def client(searcher):
    with TestClient(create_app(Settings(), Assistant(searcher)), base_url=LOCAL) as c:
        yield c


def ask_json(client, body: dict) -> dict:
    r = client.post("/v1/ask", json=body)
    assert r.status_code == 200, r.text
    return r.json()
