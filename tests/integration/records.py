"""Hypothesis strategies for hostile snapshot records: recipes applied to the real records a mesh saved.

A recipe names one service's key and what lies there: a hash whose fields start from that service's real record
and are then bent (the blob: random bytes, truncated, a bit flipped, another service's real blob, msgpack of
the wrong shape, the real snapshot with one part replaced; the sequence: huge, negative, not a number, empty,
other digits; a wrong log id, service, version or seal; fields dropped, extra fields), or a key of another
Redis type. Recipes, not bytes, are drawn (the real records exist only once the mesh runs), so a failing example
is reported as what was done to which record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import strategies as st

from schemas.snapshots import SNAPSHOT_VERSION, ViewSnapshot

SERVICES = ("labels", "taints", "vclusters", "scheduler", "autoscaler")
FIELDS = ("sequence", "blob", "log", "service", "version", "seal")

Record = dict[str, bytes]
"""A snapshot record as Redis returns it: field name -> value."""


@dataclass(frozen=True)
class Recipe:
    """What to store under `service`'s snapshot key: a hash (`redis_type` "hash") bent as the other fields say,
    or a string or list."""

    service: str
    redis_type: str = "hash"
    blob: tuple[Any, ...] = ("real",)
    fields: tuple[tuple[str, str], ...] = ()
    """Fields set to these texts after the blob is made."""
    dropped: tuple[str, ...] = ()
    extra: tuple[tuple[str, bytes], ...] = ()

    def record(self, real: dict[str, Record]) -> Record:
        """The hash to store, from the real records of every service."""
        record = dict(real[self.service])
        record["blob"] = _blob(self.blob, record, real)
        for name, text in self.fields:
            record[name] = text.encode(errors="surrogatepass")
        for name in self.dropped:
            record.pop(name, None)
        record.update(self.extra)
        return record


def _blob(recipe: tuple[Any, ...], record: Record, real: dict[str, Record]) -> bytes:
    kind, *args = recipe
    blob = record["blob"]
    if kind == "real":
        return blob
    if kind == "random":
        return bytes(args[0])
    if kind == "truncated":
        return blob[: int(len(blob) * args[0])]
    if kind == "flipped":
        position = min(int(len(blob) * args[0]), len(blob) - 1)
        return blob[:position] + bytes([blob[position] ^ (1 << args[1])]) + blob[position + 1 :]
    if kind == "other":
        return real[args[0]]["blob"]
    if kind == "shape":
        return msgspec.msgpack.encode(args[0])
    if kind == "part":
        snapshot = msgspec.msgpack.decode(blob)
        part, value = args
        if value is _DROP:
            snapshot.pop(part, None)
        else:
            snapshot[part] = value
        return msgspec.msgpack.encode(snapshot)
    raise AssertionError(f"unknown blob recipe {kind}")


class _Drop:
    def __repr__(self) -> str:
        return "DROP"


_DROP = _Drop()

msgpack_ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)
"""What msgpack can carry at all: a record holds only encodable values."""

leaves = st.none() | st.booleans() | msgpack_ints | st.floats() | st.text(max_size=20) | st.binary(max_size=20)
anything = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
snapshot_parts = st.sampled_from(ViewSnapshot.__struct_fields__)
shapes = anything | st.fixed_dictionaries(
    {"snapshot_version": st.just(SNAPSHOT_VERSION) | msgpack_ints, "sequence": st.integers(0, 2**64 - 1)},
    optional={"nodes": anything, "actors": anything, "pending": anything, "vclusters": anything},
)
blobs = st.one_of(
    st.just(("real",)),
    st.tuples(st.just("random"), st.binary(max_size=200)),
    st.tuples(st.just("truncated"), st.floats(0.0, 0.999)),
    st.tuples(st.just("flipped"), st.floats(0.0, 1.0), st.integers(0, 7)),
    st.tuples(st.just("other"), st.sampled_from(SERVICES)),
    st.tuples(st.just("shape"), shapes),
    st.tuples(st.just("part"), snapshot_parts, anything | st.just(_DROP)),
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", " 1", "1 ", "+1", "-0", "1e3", "0x10", "nan", "inf", "1.0", "٣", "²", "１", "0" * 40 + "1"]),
    st.text(max_size=12),
)
field_values = st.one_of(
    st.tuples(st.just("sequence"), numbers),
    st.tuples(st.just("log"), st.text(max_size=30) | st.just("")),
    st.tuples(st.just("seal"), st.text(max_size=32)),
    st.tuples(st.just("service"), st.sampled_from((*SERVICES, "", "Labels", "labels "))),
    st.tuples(st.just("version"), st.sampled_from(["", "0", str(SNAPSHOT_VERSION + 1), "4.0", " 4"]) | numbers),
)
hashes = st.builds(
    Recipe,
    service=st.sampled_from(SERVICES),
    blob=blobs,
    fields=st.lists(field_values, max_size=2).map(tuple),
    dropped=st.lists(st.sampled_from(FIELDS), max_size=2, unique=True).map(tuple),
    extra=st.lists(
        st.tuples(st.sampled_from(["refused", "x", "sequence2", ""]) | st.text(max_size=8), st.binary(max_size=20)),
        max_size=2,
    ).map(tuple),
)
other_types = st.builds(
    Recipe, service=st.sampled_from(SERVICES), redis_type=st.sampled_from(["string", "list", "set"])
)
recipes = st.one_of(hashes, other_types)
