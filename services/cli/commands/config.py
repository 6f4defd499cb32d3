"""`corral config view`: the mesh a command would talk to, each value with where it comes from."""

from __future__ import annotations

import argparse

from services.cli.common import add_connection_arguments, chosen, json_text, say
from services.cli.registry import Subcommands
from services.cli.sources import Chosen, Sourced, file_source
from services.cli.table import format_table

HEADERS = ("NAME", "VALUE", "SOURCE")


def add_parsers(commands: Subcommands) -> None:
    """Register `config view`."""
    config = commands.add_parser(
        "config",
        help="show the mesh `corral` commands talk to (`config view`)",
        description="Show what `corral` commands use.",
    )
    verbs = config.add_subparsers(dest="verb", metavar="VERB", required=True)
    view = verbs.add_parser(
        "view",
        help="print the NATS and Redis URLs a command would use, and where each comes from",
        description="Print what a command given these flags would use: the data directory, the NATS URL and the Redis "
        "URL, each with its source (a flag, a CORRAL_* environment variable, the endpoints file `corral up` writes "
        "in its data directory, or the default), and what the endpoints file also says (the HTTP API, each "
        "service's /metrics port, whether the autoscaler runs). An endpoints file that cannot be used (its `corral "
        "up` no longer runs, or it is not what `corral up` writes) is named, with why, and not used.",
    )
    view.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table, or JSON")
    add_connection_arguments(view, service="mesh")
    view.set_defaults(run=run_view, parser=view)


def rows(found: Chosen) -> list[tuple[str, Sourced]]:
    """Each value shown, named, in the order printed."""
    shown = [("data-dir", found.data_dir), ("nats-url", found.nats_url), ("redis-url", found.redis_url)]
    endpoints = found.endpoints
    if endpoints is None:
        return shown
    source = file_source(found.data_dir.value)
    shown.append(("http-url", Sourced(endpoints.http_url, source)))
    shown.extend(
        (f"metrics.{key}", Sourced(str(port), source)) for key, port in sorted(endpoints.metrics_ports.items())
    )
    shown.append(("autoscaler", Sourced("runs" if endpoints.autoscaler else "not run", source)))
    return shown


def run_view(args: argparse.Namespace) -> int:
    """`corral config view`."""
    found = chosen(args, warn_always=True)
    shown = rows(found)
    if args.output == "json":
        record = {name: {"value": value.value, "source": value.source} for name, value in shown}
        say(json_text({**record, "endpoints_file_unused": found.warning}))
    else:
        say(format_table(HEADERS, [(name, value.value, value.source) for name, value in shown]))
    return 0
