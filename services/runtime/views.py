"""A `ClusterView` kept by a service, with the snapshot codec every service shares."""

from __future__ import annotations

from schemas.snapshots import SNAPSHOT_VERSION
from services.core.state import ClusterView
from services.core.state.snapshot import decode, dump, encode, restore


class SnapshotVersionError(ValueError):
    """A snapshot written by another version of the records."""


def dump_view(view: ClusterView, sequence: int) -> bytes:
    """The view, as of `sequence`, as snapshot bytes."""
    return encode(dump(view, sequence))


def load_view(blob: bytes) -> tuple[ClusterView, int]:
    """The view in a snapshot and the sequence it reflects; raises on corrupt or other-version blobs."""
    snapshot = decode(blob)
    if snapshot.snapshot_version != SNAPSHOT_VERSION:
        raise SnapshotVersionError(
            f"snapshot version {snapshot.snapshot_version}: this build reads version {SNAPSHOT_VERSION}"
        )
    return restore(snapshot), snapshot.sequence
