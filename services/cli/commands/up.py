"""`corral up`: run the embedded dev mesh (nats-server, redis-server, the services) in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from pathlib import Path

from services.cli import args as types
from services.cli.common import CliError, ConfigFileError, progress, read_input, say, stop_signals
from services.cli.datadir import data_dir_lock
from services.cli.endpoints import Endpoints, remove_endpoints, write_endpoints
from services.cli.registry import Subcommands
from services.cli.sources import DATA_DIR_ENV, DEFAULT_DATA_DIR, NATS_URL_ENV
from services.cli.supervisor import (
    RESTART_WINDOW_S,
    SERVER_RESTARTS,
    ServerWatch,
    exited_server,
    how_it_ended,
    last_line,
)
from services.client import Client, CorralError
from services.core.autoscale import parse_config
from services.core.errors import RejectedError
from services.local.mesh import (
    AUTOSCALER,
    FIRST_BACK_OFF_S,
    GATEWAY,
    LONGEST_BACK_OFF_S,
    SERVICES,
    STABLE_S,
    Mesh,
    start_mesh,
)
from services.local.servers import ServerError
from services.runtime.settings import Settings, SettingsError

DEFAULT_NATS_PORT = 4222
DEFAULT_HTTP_PORT = Settings().http_port
WATCH_EVERY_S = 0.5
"""How often `corral up` looks at its servers and services (a server's exit is noticed and it is started again
within a second)."""


def add_parsers(commands: Subcommands) -> None:
    """Register `up`."""
    up = commands.add_parser(
        "up",
        help="start the embedded dev mesh (NATS, Redis, the services) and run it until Ctrl-C",
        description="Start nats-server (JetStream), redis-server and the labels, taints, vclusters and scheduler "
        "services (and the autoscaler, with --autoscaler) and the gateway (the web page and the HTTP API) on this "
        "machine, wait until every service answers (dots on stderr), print where NATS, Redis and the HTTP API listen "
        "and write them to endpoints.json in --data-dir (where the other commands find them; removed at exit), then "
        "run until SIGINT or SIGTERM and stop everything. The event log, "
        "Redis's snapshots (append-only file) and "
        "the logs live in --data-dir, so a restart keeps the cluster's history and starts from the snapshots; one "
        "`corral up` at a time may use a data directory. A service that exits, whatever its exit code (3: a "
        "scheduler lost its lease, 4: the event log was replaced, 1: it failed), is said on stderr and started "
        "again: at once, then, while it keeps exiting within "
        f"{STABLE_S:g} s of starting, after {FIRST_BACK_OFF_S:g} s, twice as long each time, up to "
        f"{LONGEST_BACK_OFF_S:g} s. A nats-server or redis-server that exits is noticed within {WATCH_EVERY_S:g} s, "
        "said on stderr (how it ended, the last line of its log) and started again on its port and data (JetStream's "
        f"store and Redis's append-only file); one that fails to start, or exits more than {SERVER_RESTARTS} times "
        f"within {RESTART_WINDOW_S:g} s, stops the mesh (exit status 1). With CORRAL_METRICS_PORT=N each service "
        "serves /metrics on its own port from N on (printed). With CORRAL_CORE=compiled the services run the core's "
        "compiled build (`make compiled` in a checkout; each service's log names the build it runs).",
    )
    up.add_argument(
        "--nats-port",
        type=types.port,
        default=DEFAULT_NATS_PORT,
        metavar="N",
        help="NATS client port (default: %(default)s)",
    )
    up.add_argument(
        "--http-port",
        type=types.port,
        default=DEFAULT_HTTP_PORT,
        metavar="N",
        help="the port of the web page and the HTTP API on 127.0.0.1 (default: %(default)s: open "
        "http://127.0.0.1:%(default)s/ in a browser; CORRAL_HTTP_TOKEN, when set, guards its changes: the page asks "
        "for it)",
    )
    up.add_argument("--redis-port", type=types.port, metavar="N", help="Redis port (default: a free port)")
    up.add_argument(
        "--data-dir",
        default=os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR,
        metavar="DIR",
        help=f"where the servers keep their data, every process its log and `corral up` its endpoints file (for the "
        f"other commands; default: ${DATA_DIR_ENV}, else {DEFAULT_DATA_DIR}/; now %(default)s)",
    )
    up.add_argument(
        "--autoscaler",
        metavar="CONFIG.yaml",
        help=(
            "also run the autoscaler with the node types of this YAML file (at most 1 MiB, no anchors, 1,000 types;"
            " checked before anything starts: exit 2 if bad)"
        ),
    )
    up.add_argument(
        "--timeout",
        type=types.seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for every service to answer (default: %(default)g)",
    )
    up.set_defaults(run=run_up, parser=up)


def port_in_use(port: int) -> bool:
    """Whether something already listens on 127.0.0.1:`port`."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def exited_service(mesh: Mesh) -> str | None:
    """A message about the first service process that has exited, if any."""
    for key, process in mesh.processes.items():
        code = process.poll()
        if code is not None:
            return exit_report(mesh, key, code)
    return None


def exit_report(mesh: Mesh, key: str, code: int) -> str:
    """Service process `key` exited with `code`: said with the last line of its log (often why) and where it is."""
    log_path = mesh.data_dir / f"{key}.log"
    last = last_line(log_path)
    return f"the {key} service {how_it_ended(code)}{f': {last}' if last else ''} (its log: {log_path})"


def gateway_listens(mesh: Mesh) -> bool:
    """Whether the gateway (when it runs) accepts connections on its port."""
    return GATEWAY not in mesh.processes or port_in_use(int(mesh.settings["CORRAL_HTTP_PORT"]))


async def wait_until_ready(mesh: Mesh, timeout: float, stop: asyncio.Event) -> bool:
    """Poll every service (scheduler, labels, taints, vclusters, the autoscaler when it runs) until all answer,
    and the gateway until it listens; False if stopped meanwhile."""
    deadline = time.monotonic() + timeout
    progress("starting Corral")
    async with Client(mesh.nats_url, name="corral-up", timeout=1.0) as client:
        while not stop.is_set():
            try:
                await client.ready()
                if AUTOSCALER in mesh.processes:
                    await client.autoscaler_status()
            except CorralError:
                progress(".")
            else:
                if gateway_listens(mesh):
                    progress(" ready\n")
                    return True
                progress(".")
            if (failed := exited_service(mesh) or exited_server((mesh.nats, mesh.redis))) is not None:
                raise CliError(failed)
            if time.monotonic() > deadline:
                raise CliError(f"the services did not answer within {timeout:g}s; see the logs in {mesh.data_dir}")
            await asyncio.sleep(0.25)
    progress(" stopped\n")
    return False


async def watch(mesh: Mesh, stop: asyncio.Event) -> None:
    """Until stopped, every `WATCH_EVERY_S`: start again a server that exited (`ServerWatch`: `CliError` when it is
    given up) and a service that exits, whatever its exit code (backing off one that keeps exiting), and report
    each service's first exit with the last line of its log."""
    reported: set[str] = set()
    servers = ServerWatch((mesh.nats, mesh.redis))
    while not stop.is_set():
        for line in await asyncio.to_thread(servers.check):
            print(f"corral up: {line}", file=sys.stderr, flush=True)
        for line in mesh.revive():
            print(f"corral up: {line}; see {mesh.data_dir}", file=sys.stderr, flush=True)
        for key, process in mesh.processes.items():
            code = process.poll()
            if code is not None and key not in reported:
                reported.add(key)
                print(f"corral up: {exit_report(mesh, key, code)}", file=sys.stderr, flush=True)
        try:
            await asyncio.wait_for(stop.wait(), timeout=WATCH_EVERY_S)
        except TimeoutError:
            continue


def autoscaler_settings(config: str | None) -> dict[str, str]:
    """The autoscaler's `CORRAL_AUTOSCALER_CONFIG` (an absolute path), once the file is read and checked; {} when
    no file is given. A bad file stops `corral up` before anything starts, naming the field, value and rule."""
    if config is None:
        return {}
    path = Path(config).resolve()
    try:
        parse_config(read_input(config, f"--autoscaler {config}"), source=config)
    except RejectedError as error:
        raise ConfigFileError(f"--autoscaler {error}") from None
    except CliError as error:  # unreadable, or over the size limit
        raise ConfigFileError(str(error)) from None
    return {"CORRAL_AUTOSCALER_CONFIG": str(path)}


def run_up(args: argparse.Namespace) -> int:
    """`corral up`: one per data directory (a second one on the same directory is refused at once)."""
    args.metrics_from = Settings.from_env().metrics_port or None  # a bad CORRAL_* variable stops it here
    args.autoscaler_settings = autoscaler_settings(args.autoscaler)
    data_dir = Path(args.data_dir)
    with data_dir_lock(data_dir):
        ports = (("--nats-port", args.nats_port), ("--redis-port", args.redis_port), ("--http-port", args.http_port))
        for flag, port in ports:
            if port is not None and port_in_use(port):
                raise CliError(
                    f"{flag} {port}: something already listens there (another `corral up`?); pick another port"
                )
        asyncio.run(_run(data_dir, args))
    return 0


async def _run(data_dir: Path, args: argparse.Namespace) -> None:
    """Start the mesh, wait until it answers, run until stopped, stop it."""

    with stop_signals() as stop:
        try:
            autoscaler = args.autoscaler_settings
            mesh = start_mesh(
                data_dir,
                nats_port=args.nats_port,
                redis_port=args.redis_port,
                services=(*SERVICES, *([AUTOSCALER] if autoscaler else []), GATEWAY),
                settings={**autoscaler, "CORRAL_HTTP_PORT": str(args.http_port)},
                durable=True,
                metrics_from=args.metrics_from,
            )
        except (ServerError, OSError, SettingsError) as error:
            raise CliError(f"the mesh did not start: {error}") from None
        try:
            if not await wait_until_ready(mesh, args.timeout, stop):
                return
            http_url = f"http://127.0.0.1:{args.http_port}/"
            say(f"Corral is up: NATS at {mesh.nats_url}")
            say(f"  export {NATS_URL_ENV}={mesh.nats_url}")
            say(f"Redis at {mesh.redis_url} (the services' snapshots)")
            say(f"HTTP API at {http_url} (docs at /docs)")
            for key, port in mesh.metrics_ports.items():
                say(f"  metrics of {key}: http://127.0.0.1:{port}/metrics")
            ports, autoscaled = dict(mesh.metrics_ports), AUTOSCALER in mesh.processes
            path = write_endpoints(
                data_dir, Endpoints(os.getpid(), mesh.nats_url, mesh.redis_url, http_url, ports, autoscaled)
            )
            say(f"endpoints in {path}: `corral` commands read them (`corral config view`); from another directory:")
            say(f"  export {DATA_DIR_ENV}={data_dir.resolve()}")
            print(f"data and logs in {data_dir}/; Ctrl-C stops the mesh", file=sys.stderr, flush=True)
            await watch(mesh, stop)
        finally:
            progress("stopping Corral...")
            remove_endpoints(data_dir)
            await asyncio.to_thread(mesh.stop)
            progress(" stopped\n")
