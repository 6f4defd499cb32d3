"""A polling wait ends at its deadline even when the cancellation that `asyncio.timeout` sends is lost (as Python
3.11's `asyncio.wait_for` inside nats-py loses one when its answer arrives in the same moment)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from schemas import ScheduleRequest
from schemas.commands import SubmitActor
from services.client import Client
from services.core.errors import NotFoundError, UnavailableError


def test_a_resent_request_s_wait_ends_at_its_timeout_when_a_cancellation_is_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = Client("nats://127.0.0.1:1")
    lost: list[bool] = []

    async def ask(*_args: Any, **_kwargs: Any) -> Any:
        try:
            await asyncio.sleep(1.0)  # the timeout (0.3 s) falls inside the first question
        except asyncio.CancelledError:
            if lost:
                raise
            lost.append(True)  # the first cancellation is dropped, as the race in wait_for does
        raise NotFoundError("no decision yet")

    async def no_refusal(_sequence: int) -> None:
        return None

    monkeypatch.setattr(client, "_ask", ask)
    monkeypatch.setattr(client, "_raise_refusal", no_refusal)
    request = SubmitActor(request=ScheduleRequest("a1", {"CPU": 1}), command_id="k1")

    async def wait() -> None:
        with pytest.raises(UnavailableError, match=r"no decision for it is known within 0\.3s"):
            await asyncio.wait_for(client._resent_answer(request, 7, timeout=0.3), timeout=5)

    asyncio.run(wait())
    assert lost == [True], "the timeout's cancellation was lost once"
