"""The page's HTML pieces: values escaped, amounts readable, and which events refresh which sections."""

from __future__ import annotations

from typing import get_args

import msgspec

from schemas import AnyEvent, Pending, Taint
from services.gateway.cluster import NodeView
from services.gateway.page import amount, detail_section, event_sections, node_links, pending_section, summary_section


def test_every_event_that_changes_what_the_page_shows_refreshes_its_sections() -> None:
    kinds = event_sections()
    assert kinds["TaintsChanged"] == ["nodes", "summary", "pending"]
    assert kinds["NodesLaunchRequested"] == ["nodes", "summary", "pending"] and kinds["LaunchesNominated"] == [
        "summary"
    ]
    assert "groups" in kinds["PlacementGroupPlaced"] and "vclusters" in kinds["VirtualNodesReserved"]
    assert set(kinds) <= {kind.__name__ for kind in get_args(AnyEvent)}
    assert "SchedulerElected" not in kinds


def test_free_text_is_escaped_and_amounts_read_well() -> None:
    node = NodeView(
        node_id="n1",
        address='"><script>x()</script>',
        resources={"<em>": 2.0, "memory": 16e9},
        available={"<em>": 1.0, "memory": 16e9},
        labels={"disk": "ssd"},
        taints=[Taint("gpu", "true", "NoSchedule")],
        state="cordoned",
    )
    html = detail_section(node, "n1", ["<i>actor</i>"], [(7, "TaintsChanged", "<u>x</u>")], token_required=True)
    assert "<script>" not in html and "<em>" not in html and "<i>" not in html and "<u>" not in html
    assert "&lt;script&gt;" in html and 'name="token"' in html and "gpu=true:NoSchedule" in html and "1 / 2" in html
    assert detail_section(node, "n1", [], [], token_required=False).count('name="token"') == 0
    links = node_links([msgspec.structs.replace(node, node_id="<i>&n")])
    assert 'href="/?node=%3Ci%3E%26n#detail">&lt;i&gt;&amp;n</a>' in links
    summary = summary_section([node], [], None)
    assert "<b>1</b> cordoned" in summary and "14.9Gi / 14.9Gi" not in summary and "not running" in summary
    waiting = Pending("<i>a</i>", "0/1 nodes", {"Insufficient CPU": 1}, {"Insufficient CPU": ["<u>n</u>"]})
    assert "<i>" not in pending_section([waiting]) and "&lt;u&gt;n&lt;/u&gt;" in pending_section([waiting])
    assert (amount("memory", 4 * 2**30), amount("CPU", 0.5), amount("CPU", 2000), amount("CPU", None)) == (
        "4Gi",
        "500m",
        "2000",
        "∞",
    )
