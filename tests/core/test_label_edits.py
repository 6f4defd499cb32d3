"""`kubectl label`'s edits in one change: set and remove single keys, a value changed only with overwrite."""

from __future__ import annotations

import pytest

from services.core import Cluster
from services.core.errors import ConflictError, RejectedError
from services.core.node_events import labels_changed


def labelled_cluster() -> Cluster:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 1}, {"team": "infra", "tier": "web", "keep": "yes"})
    return cluster


def test_a_merge_sets_and_removes_single_keys_and_keeps_the_rest_and_the_system_labels() -> None:
    cluster = labelled_cluster()
    event = labels_changed(cluster.view, "n0", {"zone-x": "z1", "tier": "web"}, merge=True, remove=["team", "gone"])
    user = {key: value for key, value in event.labels.items() if not key.startswith("corral.io/")}
    assert user == {"tier": "web", "keep": "yes", "zone-x": "z1"}
    assert event.labels["corral.io/node-id"] == "n0"


def test_changing_a_value_needs_overwrite_and_the_refusal_names_the_key() -> None:
    cluster = labelled_cluster()
    with pytest.raises(ConflictError, match=r"label 'tier' already has a value \('web'\): overwrite"):
        labels_changed(cluster.view, "n0", {"tier": "batch"}, merge=True)
    event = labels_changed(cluster.view, "n0", {"tier": "batch"}, merge=True, overwrite=True)
    assert event.labels["tier"] == "batch"


@pytest.mark.parametrize(
    ("labels", "merge", "remove", "rule"),
    [
        ({"tier": "x"}, True, ["tier"], "a key cannot be both set and removed"),
        ({}, False, ["tier"], "removes keys only with merge"),
        ({}, True, "tier", "must be a list of label keys"),
    ],
    ids=["a key both set and removed", "a removal in a replacement", "a string for the keys to remove"],
)
def test_a_bad_edit_is_refused_naming_the_field(
    labels: dict[str, str], merge: bool, remove: list[str], rule: str
) -> None:
    with pytest.raises(RejectedError, match=rule):
        labels_changed(labelled_cluster().view, "n0", labels, merge=merge, remove=remove)
