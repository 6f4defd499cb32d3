"""Does each running service's view equal a fresh replay of the log? Ask its live digest, replay the log in a new
instance of the same view through the real start-up path (`service_shell`, no snapshot), compare at one sequence.

Used by the fuzz test and by `python -m loadtest.chaos`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import nats.errors

from schemas.queries import DigestQuery, DigestReply
from schemas.subjects import digest_subject
from services.autoscaler.view import AutoscalerView
from services.labels.view import LabelsView
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from services.runtime.service import View, service_shell
from services.runtime.settings import Settings
from services.scheduler.view import SchedulerView
from services.taints.view import SUBJECTS as TAINT_SUBJECTS
from services.taints.view import TaintsView
from services.vclusters.view import VClustersView

REPLAY_REDIS_DB = 15
"""The Redis database a replay reads its (absent) snapshot from: never one a service writes, so it replays all."""

ViewFactory = Callable[[Settings], tuple[View, Sequence[str]]]

VIEWS: dict[str, ViewFactory] = {
    "labels": lambda settings: (LabelsView(time.monotonic, settings.seed), ()),
    "taints": lambda settings: (TaintsView(settings.seed), TAINT_SUBJECTS),
    "vclusters": lambda settings: (VClustersView(settings.seed, settings.rare_resources), ()),
    "scheduler": lambda settings: (SchedulerView(settings.seed, settings.rare_resources), ()),
    "autoscaler": lambda settings: (AutoscalerView(settings.seed), ()),
}
"""Each service's view as its app.py builds it, and the subjects its follower reads (empty: all)."""
MESH_SERVICES = ("labels", "taints", "vclusters", "scheduler")
"""The services every mesh runs (the autoscaler runs only when node types are given)."""


@dataclass(frozen=True)
class DigestCheck:
    """One service: its live digest, a replay's, and whether they are equal at the same sequence."""

    service: str
    equal: bool
    sequence: int
    live: str
    replay: str
    detail: str = ""


async def live_digest(bus: Bus, service: str, timeout: float = 5.0) -> DigestReply | None:
    """The running service's digest and sequence; None when it does not answer."""
    try:
        reply = await bus.nc.request(digest_subject(service), encode(DigestQuery()), timeout=timeout)
    except (nats.errors.NoRespondersError, nats.errors.TimeoutError, TimeoutError):
        return None
    answer: DigestReply = decode(reply.data, DigestReply)
    return answer


async def live_digests(bus: Bus, service: str, answers: int, timeout: float = 10.0) -> list[DigestReply]:
    """The digests of the processes of `service` that answer within `timeout` (every decision worker answers the
    same subject), up to `answers` of them."""
    inbox = bus.nc.new_inbox()
    sub = await bus.nc.subscribe(inbox)
    replies: list[DigestReply] = []
    try:
        await bus.nc.publish(digest_subject(service), encode(DigestQuery()), reply=inbox)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while len(replies) < answers:
                    replies.append(decode((await sub.next_msg(timeout=timeout)).data, DigestReply))
        return replies
    finally:
        await sub.unsubscribe()


def replay_settings(settings: Settings) -> Settings:
    """The settings of a replaying instance: the same bus, a Redis database with no snapshot in it."""
    base = settings.redis_url.rsplit("/", 1)[0] if settings.redis_url.count("/") > 2 else settings.redis_url
    return dataclasses.replace(settings, redis_url=f"{base}/{REPLAY_REDIS_DB}", instance=f"{settings.instance}-replay")


async def replay_digest(settings: Settings, service: str) -> DigestReply:
    """Start a fresh instance of `service`'s view as the service does (load no snapshot, replay the whole log),
    and return its digest at the sequence it reached; it saves no snapshot and is stopped at once."""
    view, subjects = VIEWS[service](settings)
    async with service_shell(replay_settings(settings), service, view, ready=lambda: False, subjects=subjects) as shell:
        return DigestReply(view.digest(), shell.follower.sequence)


async def check_digest(settings: Settings, bus: Bus, service: str, timeout: float = 30.0) -> DigestCheck:
    """Compare the live digest with a replay's at the same sequence (the log may still grow: replay again until
    both stand at one sequence, or `timeout` seconds pass)."""
    deadline = time.monotonic() + timeout
    live: DigestReply | None = None
    replay = DigestReply("", 0)
    while time.monotonic() < deadline:
        try:
            replay = await asyncio.wait_for(replay_digest(settings, service), max(1.0, deadline - time.monotonic()))
        except Exception as error:  # a replay that cannot finish is the finding itself
            return DigestCheck(service, False, 0, "", "", f"the replay failed: {type(error).__name__}: {error}")
        live = await live_digest(bus, service)
        while live is not None and live.sequence < replay.sequence and time.monotonic() < deadline:
            await asyncio.sleep(0.1)  # the live view has not folded the log's end yet
            live = await live_digest(bus, service)
        if live is None:
            return DigestCheck(service, False, replay.sequence, "", replay.digest, "the service does not answer")
        if live.sequence == replay.sequence:
            detail = "" if live.digest == replay.digest else "the live view differs from a replay of the same log"
            return DigestCheck(service, live.digest == replay.digest, live.sequence, live.digest, replay.digest, detail)
    seen = f"live at {live.sequence}" if live is not None else "live unknown"
    detail = f"never at one sequence ({seen}, replay at {replay.sequence})"
    return DigestCheck(service, False, replay.sequence, "", replay.digest, detail)


async def check_digests(
    settings: Settings, bus: Bus, services: Sequence[str] = MESH_SERVICES, timeout: float = 30.0
) -> list[DigestCheck]:
    """`check_digest` for each service, one after the other."""
    return [await check_digest(settings, bus, service, timeout) for service in services]
