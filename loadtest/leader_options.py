"""What the two tools that measure the leading scheduler share: the services run beside it and their options."""

from __future__ import annotations

import argparse

from services.cli.args import non_negative_int, positive_int
from services.runtime.settings import COUNTS

FOLLOWERS = ("labels", "taints", "vclusters")
"""The services the mesh runs beside the scheduler the tool measures."""


def add_load_size(parser: argparse.ArgumentParser, users: int) -> None:
    """`--nodes` and `--users` (default `users`)."""
    parser.add_argument("--nodes", type=positive_int, default=1000, help="simulated nodes (default: 1000)")
    parser.add_argument("--users", type=positive_int, default=users, help=f"simulated users (default: {users})")


def add_decision_workers(parser: argparse.ArgumentParser) -> None:
    """`--decision-workers N`: the mesh runs N decision workers, and the leader measured is their applier."""
    parser.add_argument(
        "--decision-workers",
        type=non_negative_int,
        default=0,
        help="decision workers in the mesh; above 0, the scheduler measured is their applier (default: 0)",
    )


def check_decision_workers(parser: argparse.ArgumentParser, workers: int) -> None:
    """Refuse more decision workers than the settings allow (before any mesh starts)."""
    most = COUNTS["decision_workers"][1]
    if workers > most:
        parser.error(f"argument --decision-workers: {workers} must be at most {most}")
