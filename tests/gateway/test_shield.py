"""The gateway's edges without a server: the names a gateway without a token answers to, and client text in logs."""

from __future__ import annotations

from services.gateway.errors import escaped
from services.gateway.shield import allowed_hosts, host_name
from services.runtime.settings import Settings


def test_host_names_are_compared_without_their_port_and_ipv6_in_brackets() -> None:
    hosts = allowed_hosts(Settings(http_host="::", http_allowed_hosts=("Corral.Internal",)))
    assert {"127.0.0.1", "localhost", "[::1]", "[::]", "corral.internal"} == hosts
    assert host_name("[::1]:8265") == "[::1]" and host_name("LOCALHOST:80") == "localhost"
    assert host_name("evil.example") == "evil.example" and host_name("127.0.0.1.evil:1") == "127.0.0.1.evil"


def test_client_text_in_a_log_line_has_no_line_break() -> None:
    for sent in ("/x\nFORGED", "/x\r\nFORGED", "/x\u2028FORGED", "/x\x85FORGED", "/x\x00y"):
        shown = escaped(sent)
        assert shown.isprintable() and shown.isascii(), shown
    assert escaped("/x\nFORGED") == "/x\\nFORGED"
    assert escaped("a" * 400).endswith("...") and len(escaped("a" * 400)) == 303
