"""A bug of the gateway (any exception no route expects) is a JSON 500 that names its type, never its trace."""

from __future__ import annotations

import pytest
from litestar import get
from litestar.testing import TestClient

from services.gateway.app import create_app
from services.runtime.settings import Settings

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Litestar 3's coming signature style

SECRET = "password=hunter2 in /srv/corral/secret.py"


@get("/boom")
async def boom() -> None:
    """A route that fails as a bug would."""
    raise RuntimeError(SECRET)


def test_an_unexpected_error_is_a_json_500_without_its_trace() -> None:
    app = create_app(Settings())
    app.register(boom)
    client = TestClient(app, raise_server_exceptions=False)  # no lifespan: the route needs no bus

    answer = client.get("/boom")

    assert answer.status_code == 500 and answer.headers["content-type"].startswith("application/json")
    assert answer.json() == {
        "error": "the gateway failed on this call (RuntimeError); its log has the trace",
        "kind": "failed",
        "status": 500,
    }
    assert SECRET not in answer.text and "Traceback" not in answer.text
