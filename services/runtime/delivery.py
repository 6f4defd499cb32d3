"""Where JetStream delivered a message, read from its `$JS.ACK` reply subject without building `msg.metadata`."""

from __future__ import annotations

from typing import NamedTuple

from nats.aio.msg import Msg


class Delivery(NamedTuple):
    """A JetStream message's consumer, its sequence in the stream and in the consumer (the consumer's how-manieth
    message it is), how many the consumer had left to deliver after it, and when the stream stored it (Unix ns)."""

    consumer: str
    stream_sequence: int
    consumer_sequence: int
    pending: int
    time_ns: int


def delivery_of(msg: Msg) -> Delivery:
    """The delivery of a message a JetStream consumer delivered (its stream sequence is the same at every
    redelivery)."""
    # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
    tokens = msg.reply.split(".")
    if len(tokens) == 9 and tokens[1] == "ACK":
        return Delivery(tokens[3], int(tokens[5]), int(tokens[6]), int(tokens[8]), int(tokens[7]))
    metadata = msg.metadata  # the longer form, with a domain and an account hash
    sequence = metadata.sequence
    stored = metadata.timestamp
    time_ns = round(stored.timestamp() * 1e9) if stored is not None else 0
    consumer = metadata.consumer or ""
    return Delivery(consumer, int(sequence.stream), int(sequence.consumer), int(metadata.num_pending or 0), time_ns)
