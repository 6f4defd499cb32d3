"""`corral loadtest [LOCUST ARGS...]`: locust with Corral's locustfile (`loadtest/locustfile.py`), from any folder.

Every argument goes to locust as it is (`--help` prints locust's help; the locustfile adds `--corral-nodes`,
`--corral-hold` and `--corral-timeout`, see docs/benchmarks.md). The locustfile is found where the `loadtest`
package is installed; it is not imported here, so the CLI never loads gevent.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from services.cli.common import CliError
from services.cli.registry import Subcommands

LOCUSTFILE = "loadtest.locustfile"
NO_LOCUST = "locust is not installed: pip install 'corral[loadtest]'"


def locustfile_path() -> str:
    """Where the installed `loadtest/locustfile.py` is."""
    try:
        spec = importlib.util.find_spec(LOCUSTFILE)
    except ModuleNotFoundError:
        spec = None
    if spec is None or spec.origin is None:
        raise CliError(f"the {LOCUSTFILE} module is not installed with corral (reinstall corral)")
    return spec.origin


def add_parsers(commands: Subcommands) -> None:
    """Register `loadtest`: no options of its own, so every word is locust's."""
    parser = commands.add_parser(
        "loadtest",
        help="run locust with Corral's locustfile (arguments go to locust)",
        description=__doc__,
        usage="corral loadtest [LOCUST ARGS...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    parser.set_defaults(run=run_loadtest, parser=parser, passthrough="locust_args")


def run_loadtest(args: argparse.Namespace) -> int:
    """`corral loadtest`: this process becomes `python -m locust -f LOCUSTFILE ARGS...` (Ctrl-C reaches locust)."""
    if importlib.util.find_spec("locust") is None:
        raise CliError(NO_LOCUST)
    command = [sys.executable, "-m", "locust", "-f", locustfile_path(), *args.locust_args]
    sys.stdout.flush()
    os.execv(sys.executable, command)
