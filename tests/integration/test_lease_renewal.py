"""The lease against a real NATS KV bucket: a renewal whose answer comes too late is tried again before the key
lapses, so one slow moment of the holder's event loop or of the server does not hand the lease to a standby."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from services.local.mesh import Mesh
from services.runtime.lease import Lease, LeaseLost
from tests.integration.conftest import FAST, bus_of

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

KEY = "renewal-test"
TTL = float(FAST["CORRAL_LEASE_TTL"])
"""The bucket's TTL too: the mesh's settings declare it."""
LONG_TTL = 4.0
"""A TTL whose steps leave a busy machine a second of slack: the retry comes at 3/4 of it, the key lapses at 1."""


def unanswered_once(update: Callable[..., Awaitable[int]], calls: list[float]) -> Callable[..., Awaitable[int]]:
    """`update`, except that its first call is never answered (it waits until the caller gives up): a renewal
    lost on the way, or answered after the holder stopped waiting. `calls` gets the loop's time of each call."""

    async def first_unanswered(*args: object, **kwargs: object) -> int:
        calls.append(asyncio.get_running_loop().time())
        if len(calls) == 1:
            await asyncio.Event().wait()
        return await update(*args, **kwargs)

    return first_unanswered


@pytest.mark.parametrize("servers", [{"CORRAL_LEASE_TTL": str(LONG_TTL)}], ids=["ttl 4 s"], indirect=True)
async def test_a_renewal_left_unanswered_is_tried_again_before_the_key_lapses(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder's first renewal (a third of the TTL after winning) gets no answer for a third of the TTL more.
    Before, the next try came a third of the TTL after that: a full TTL after the last write, when the key lapses
    (it survived only while the server was slow to expire it). Now it comes well before, and neither the epoch
    nor the holder changes over three TTLs."""
    async with bus_of(servers, "holder") as holder_bus, bus_of(servers, "standby") as standby_bus:
        holder = Lease(await holder_bus.lease_bucket(), KEY, "holder", LONG_TTL)
        standby = Lease(await standby_bus.lease_bucket(), KEY, "standby", LONG_TTL)
        epoch = await holder.acquire()
        won_at = asyncio.get_running_loop().time()
        calls: list[float] = []
        monkeypatch.setattr(holder.kv, "update", unanswered_once(holder.kv.update, calls))
        rewon: list[int] = []
        holding = asyncio.create_task(holder.hold(rewon.append))
        waiting = asyncio.create_task(standby.acquire())
        try:
            await asyncio.sleep(3 * LONG_TTL)  # what is shown: nothing changes meanwhile
            assert not waiting.done(), "the standby took the lease"
            assert not holding.done() and rewon == [] and holder.revision > epoch
            assert await holder.held()
            assert calls[1] - won_at < LONG_TTL, "the renewal was tried again only once the key could lapse"
        finally:
            for task in (holding, waiting):
                task.cancel()
            await asyncio.gather(holding, waiting, return_exceptions=True)


async def test_a_holder_whose_key_another_instance_took_learns_it_at_its_next_renewal(servers: Mesh) -> None:
    """Retrying sooner never makes two holders: once the key lapsed and a standby took it, the old holder's next
    renewal raises `LeaseLost`, naming the new holder."""
    async with bus_of(servers, "holder") as holder_bus, bus_of(servers, "standby") as standby_bus:
        holder = Lease(await holder_bus.lease_bucket(), KEY, "holder", TTL)
        standby = Lease(await standby_bus.lease_bucket(), KEY, "standby", TTL)
        await holder.acquire()
        taken = await standby.acquire()  # waits for the key to lapse: the holder does not renew meanwhile
        with pytest.raises(LeaseLost, match="held by standby"):
            await asyncio.wait_for(holder.hold(lambda _epoch: None), timeout=2 * TTL)
        assert standby.revision == taken and await standby.held()
