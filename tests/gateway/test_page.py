"""The page's HTML pieces: values escaped, amounts readable, and which events refresh which sections."""

from __future__ import annotations

from typing import get_args

from schemas import AnyEvent, Pending, Taint
from services.gateway.cluster import NodeView
from services.gateway.page import amount, event_sections, nodes_section, pending_section


def test_every_event_that_changes_what_the_page_shows_refreshes_its_sections() -> None:
    kinds = event_sections()
    assert kinds["TaintsChanged"] == ["nodes", "pending"]
    assert "groups" in kinds["PlacementGroupPlaced"] and "vclusters" in kinds["VirtualNodesReserved"]
    assert set(kinds) <= {kind.__name__ for kind in get_args(AnyEvent)}
    assert "SchedulerElected" not in kinds


def test_free_text_is_escaped_and_amounts_read_well() -> None:
    node = NodeView(
        node_id="n1",
        address='"><script>x()</script>',
        resources={"<b>": 2.0, "memory": 16e9},
        available={"<b>": 1.0, "memory": 16e9},
        labels={"disk": "ssd"},
        taints=[Taint("gpu", "true", "NoSchedule")],
        state="cordoned",
    )
    html = nodes_section([node], token_required=True)
    assert "<script>" not in html and "<b>" not in html and "&lt;script&gt;" in html
    assert 'name="token"' in html and "gpu=true:NoSchedule" in html and "1 / 2" in html
    assert nodes_section([node], token_required=False).count('name="token"') == 0
    waiting = Pending("<i>a</i>", "0/1 nodes", {"Insufficient CPU": 1}, {"Insufficient CPU": ["<u>n</u>"]})
    assert "<i>" not in pending_section([waiting]) and "&lt;u&gt;n&lt;/u&gt;" in pending_section([waiting])
    assert (amount(16e9), amount(1.5), amount(None)) == ("16G", "1.5", "∞")
