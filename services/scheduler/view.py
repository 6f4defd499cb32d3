"""The scheduler view: the core `Cluster` folded from the log, reacting to events only while it leads."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from nats.aio.msg import Msg

from schemas import ActorPlaced, AnyEvent, Pending, Placed, SchedulerElected
from schemas import subjects as s
from schemas.queries import DecisionQuery, StatusQuery, StatusReply
from services.core.recording import CommandFailedError
from services.core.state.view import SCHEDULER_EVENTS
from services.runtime.log_reader import Recognise
from services.runtime.views import FoldedCluster, actor_info, node_info

T = TypeVar("T")

OWN_EVENT_SUBJECTS = tuple(f"{s.PREFIX}.evt.{aggregate}." for aggregate in (s.ACTOR, s.PLACEMENT_GROUP, s.VNODE))
"""Where only the scheduler appends, and only scheduler (epoch-fenced) events (see `own_events`)."""


def own_events(msg_id_prefix: str, stand_in: AnyEvent) -> Recognise:
    """What a leader's log reader asks first (`LogReader.recognise`): `stand_in`, undecoded, for the leader's own
    events, None for any other message.

    An own event is one on an actor, placement-group or virtual-node subject whose `Nats-Msg-Id` starts with
    `msg_id_prefix` (a leading scheduler's prefix names its instance and epoch, so only it wrote those: it folded
    them when it decided them, and its view skips their echo; decoding them first would be wasted).
    """

    def recognise(msg: Msg) -> AnyEvent | None:
        if msg.subject.startswith(OWN_EVENT_SUBJECTS):
            msg_id = msg.headers.get("Nats-Msg-Id", "") if msg.headers else ""
            if msg_id.startswith(msg_id_prefix):
                return stand_in
        return None

    return recognise


class SchedulerView(FoldedCluster):
    """A follower folds every event; the leader also reacts, and skips its own events when the log echoes them."""

    def __init__(self, seed: int, rare_resources: tuple[str, ...]) -> None:
        super().__init__(seed, rare_resources)
        self.leading = False
        self.unwritten: list[AnyEvent] = []
        """What this leader decided and the writer has not taken for the log yet, in the order it was decided."""
        self.on_decided: Callable[[], None] = lambda: None
        """Called when the leader decided something in reaction to the log (the writer appends it)."""
        self.own_echo: AnyEvent | None = None
        """While leading: what the log reader hands back, undecoded, for an event this leader wrote."""
        self.awaited_election = ""
        """The event id of this instance's election on its way to the log: folding it makes this view lead."""

    def fold(self, event: AnyEvent, sequence: int, _time_ns: int = 0) -> None:
        """Fold one event from the log (the leader's own events were applied when it decided them)."""
        self.sequence = self.cluster.folded = sequence
        if event is self.own_echo:  # the bus hands back the stand-in for every event this leader wrote
            return
        reacted = self.cluster.fold(event, react=self.leading and not isinstance(event, SCHEDULER_EVENTS))
        self.unwritten += reacted
        if isinstance(event, SchedulerElected) and event.event_id == self.awaited_election:
            self.awaited_election = ""
            self.lead(event.epoch, event.instance)  # in the same step as the fold: never deposed in between
        if self.leading and self.unwritten:
            self.on_decided()

    def decide(self, command: Callable[[], T]) -> T:
        """Run a command of the cluster; its events join `unwritten` in the same step, so the log gets everything
        in the order the view folded it (also what a command that failed midway wrote)."""
        try:
            outcome = self.cluster.decided(command)
        except CommandFailedError as failed:
            self.unwritten += failed.events
            assert failed.__cause__ is not None
            raise failed.__cause__ from None
        self.unwritten += outcome.events
        return outcome.result

    def take_unwritten(self) -> list[AnyEvent]:
        """What was decided since the last call, in order (for the writer to append)."""
        taken, self.unwritten = self.unwritten, []
        return taken

    def deposed(self) -> bool:
        """While leading: the log already holds a newer election (every fold ignores what this leader writes)."""
        return self.leading and self.cluster.view.epoch != self.cluster.epoch

    def lead(self, epoch: int, instance: str) -> None:
        """Take over as the writer of epoch `epoch`: catch up on reactions a follower only folded."""
        self.cluster.epoch = epoch
        self.cluster.event_prefix = f"scheduler-{instance}-e{epoch}-"
        self.own_echo = ActorPlaced(actor_id="", node_id="", epoch=epoch, event_id=f"{self.cluster.event_prefix}echo")
        self.leading = True
        self.unwritten += self.cluster.reconcile()

    def status(self, _query: StatusQuery) -> StatusReply:
        """Physical nodes, every actor (virtual clusters' too), placement groups and the pending queue."""
        view = self.cluster.view
        return StatusReply(
            nodes=[node_info(view.nodes[n]) for n in sorted(view.nodes)],
            actors=[actor_info(a) for a in sorted(view.every_actor(), key=lambda actor: actor.request.actor_id)],
            placement_groups=self.cluster.placement_groups(),
            pending=self.cluster.pending(),
            sequence=self.sequence,
        )

    def decision(self, query: DecisionQuery) -> Placed | Pending:
        """The current decision for one actor or placement group."""
        return self.cluster.decision(query.id, query.kind)
