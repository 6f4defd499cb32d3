"""How the client cuts a list of requests into batch messages."""

from __future__ import annotations

from schemas import ScheduleRequest
from schemas.commands import MAX_BATCH, RemoveActor, SubmitActor
from services.client.batches import batch_parts
from services.runtime.codec import encode


def test_parts_keep_the_order_and_hold_at_most_max_batch_requests_within_the_byte_limit() -> None:
    requests = [
        SubmitActor(request=ScheduleRequest(f"a{index:05d}", {"CPU": 1}, labels={"k": "v" * 50}))
        for index in range(2_500)
    ]
    size = len(encode(requests[0])) + 1
    parts = batch_parts(requests, 300 * size)
    assert [request for part in parts for request in part] == requests
    assert [len(part) for part in parts] == [300] * 8 + [100]
    assert [len(part) for part in batch_parts(requests, 10**9)] == [MAX_BATCH, MAX_BATCH, 500]


def test_a_request_over_the_limit_alone_is_a_part_of_its_own() -> None:
    small, big = RemoveActor(actor_id="s"), SubmitActor(request=ScheduleRequest("b", labels={"k": "v" * 500}))
    assert batch_parts([small, big, small], 100) == [[small], [big], [small]]
    assert batch_parts([], 100) == []
