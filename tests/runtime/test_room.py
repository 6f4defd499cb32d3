"""A store without room, told apart from other JetStream errors, and named the same way at every edge."""

from __future__ import annotations

import nats.js.errors
import pytest

from schemas.replies import Rejected
from services.client.errors import raise_for
from services.core.errors import ServiceFailedError, StorageFullError, UnavailableError
from services.gateway.errors import status_of
from services.runtime.room import no_room


@pytest.mark.parametrize(
    ("code", "err_code", "description"),
    [
        (503, 10023, "insufficient resources"),
        (500, 10047, "insufficient storage resources available"),
        (503, 10077, "maximum bytes exceeded"),
    ],
)
def test_jetstream_refusing_to_store_for_lack_of_room_is_told_in_the_servers_words(
    code: int, err_code: int, description: str
) -> None:
    with pytest.raises(nats.js.errors.APIError) as raised:
        nats.js.errors.APIError.from_error({"code": code, "err_code": err_code, "description": description})
    assert no_room(raised.value) == f"{description} (JetStream error {err_code})"


@pytest.mark.parametrize(
    "error",
    [
        nats.js.errors.ServiceUnavailableError(),  # a 503 without a code: JetStream not ready, a leader being elected
        nats.js.errors.ServiceUnavailableError(code=503, err_code=10008, description="JetStream system unavailable"),
        nats.js.errors.NoStreamResponseError(),
        nats.js.errors.BadRequestError(code=400, err_code=10071, description="wrong last sequence: 3"),
        TimeoutError(),
    ],
)
def test_other_errors_are_not_a_lack_of_room(error: Exception) -> None:
    assert no_room(error) == ""


def test_a_full_store_is_unavailability_of_its_own_kind_answered_507() -> None:
    assert issubclass(StorageFullError, UnavailableError) and not issubclass(StorageFullError, ServiceFailedError)
    with pytest.raises(StorageFullError, match="the event log is full"):
        raise_for(Rejected("the event log is full: insufficient resources", "storage_full"))
    assert StorageFullError.kind == "storage_full"
    assert status_of(StorageFullError("full")) == 507
    assert status_of(UnavailableError("down")) == 503
