"""What every mesh command shares: the connection flags and `--timeout`, the connection, errors, and stop signals."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import nats.errors

from services.cli import args as types
from services.cli.sources import (
    DATA_DIR_ENV,
    DEFAULT_DATA_DIR,
    DEFAULT_NATS_URL,
    DEFAULT_REDIS_URL,
    NATS_URL_ENV,
    REDIS_URL_ENV,
    Chosen,
    choose,
)
from services.client import Client
from services.runtime.codec import MAX_BYTES

DEFAULT_TIMEOUT = 5.0


def read_input(source: str, option: str) -> bytes:
    """The bytes of the file `source` (`-`: standard input) that `option` names, refused past the codec's size limit.

    At most one byte over the limit is read, so `/dev/zero` or a huge file is refused without filling memory.
    """
    size = ""
    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with open(source, "rb") as file:
                data = file.read(MAX_BYTES + 1)
                if len(data) > MAX_BYTES and stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                    size = f"{os.fstat(file.fileno()).st_size} bytes, "
    except OSError as error:
        raise CliError(f"{option}: cannot read it ({error.strerror or error})") from None
    if len(data) > MAX_BYTES:
        raise CliError(f"{option}: {size}over the {MAX_BYTES}-byte limit")
    return data


class CliError(Exception):
    """A refused or failed command: printed as `corral <command>: error: <message>`, exit status 1."""


class ConfigFileError(CliError):
    """A configuration file that cannot be used (`corral up --autoscaler FILE`): one line, exit status 2, as for a
    bad `CORRAL_*` variable."""


class UsageError(CliError):
    """A command line that parses but does not make sense: reported like argparse's errors, exit status 2."""


def add_connection_arguments(
    parser: argparse.ArgumentParser,
    *,
    service: str,
    timeout: float = DEFAULT_TIMEOUT,
    timeout_help: str = "how long to wait to connect and for each answer",
) -> None:
    """`--nats-url`, `--redis-url`, `--data-dir` (see `sources.choose`) and `--timeout` (what it bounds:
    `timeout_help`); `service` names what answers the command (for "did not answer" errors)."""
    group = parser.add_argument_group("connection (`corral config view` shows what is used and why)")
    group.add_argument(
        "--nats-url",
        type=types.url("nats_url"),
        metavar="URL",
        help=f"NATS server of the mesh (default: ${NATS_URL_ENV}, else the endpoints file of the `corral up` "
        f"in --data-dir, else {DEFAULT_NATS_URL})",
    )
    group.add_argument(
        "--redis-url",
        type=types.url("redis_url"),
        metavar="URL",
        help=f"Redis of the mesh, where the scheduler's snapshots are (for --at and why-placed; default: "
        f"${REDIS_URL_ENV}, else the endpoints file with its own NATS URL, else {DEFAULT_REDIS_URL})",
    )
    group.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"the data directory of the `corral up` whose endpoints file to read (default: ${DATA_DIR_ENV}, else "
        f"{DEFAULT_DATA_DIR})",
    )
    group.add_argument(
        "--timeout",
        type=types.seconds,
        default=timeout,
        metavar="SECONDS",
        help=f"{timeout_help} (default: %(default)s)",
    )
    parser.set_defaults(service=service)


def not_answering(args: argparse.Namespace, detail: str) -> CliError:
    """The error for a mesh that did not answer in time, naming the service, the URL and what to check."""
    return CliError(
        f"the {args.service} did not answer within {args.timeout:g}s ({detail}); "
        f"is `corral up` running, and is --nats-url ({args.nats_url}) or ${NATS_URL_ENV} right?"
    )


def not_found(kind: str, name: str) -> str:
    """kubectl's line for a name that is not there: `Error from server (NotFound): nodes "n2" not found`."""
    return f'Error from server (NotFound): {kind} "{name}" not found'


def chosen(args: argparse.Namespace, *, warn_always: bool = False) -> Chosen:
    """The mesh the command's flags, the environment and the endpoints file name (`args.nats_url` set to its NATS
    URL); an endpoints file that cannot be trusted is said on stderr when a default is taken in its stead (or
    always, with `warn_always`)."""
    found = choose(nats_url=args.nats_url, redis_url=args.redis_url, data_dir=args.data_dir)
    if found.warning and (found.defaulted or warn_always):
        instead = "; using the defaults" if found.defaulted else ""
        print(f"{args.parser.prog}: warning: {found.warning}{instead}", file=sys.stderr, flush=True)
    args.nats_url = found.nats_url.value
    return found


@contextlib.asynccontextmanager
async def connected(args: argparse.Namespace, *, name: str = "", quiet: bool = True) -> AsyncIterator[Client]:
    """A connected client for the mesh `chosen(args)` names, with `args.timeout`; connection failures become
    `CliError`.

    `quiet` keeps the bus's connection warnings (retries, reconnects) off stderr: a one-shot command reports
    failure once, in its own error; long-running agents pass `quiet=False` to see reconnects as they happen.
    """
    logging.getLogger("corral.bus").setLevel(logging.ERROR if quiet else logging.NOTSET)
    mesh = chosen(args)
    client = Client(
        mesh.nats_url.value, name=name or f"corral-{args.command}", timeout=args.timeout, redis_url=mesh.redis_url.value
    )
    try:
        await client.connect()  # UnavailableError after args.timeout: reported by main as one line
    except (nats.errors.Error, OSError) as error:
        raise not_answering(args, str(error)) from None
    try:
        yield client
    finally:
        with contextlib.suppress(TimeoutError):  # the connection closing never holds the command up for long
            await asyncio.wait_for(client.close(), STOP_GRACE_S)


STOP_GRACE_S = 5.0
"""How long a command that was told to stop waits for its tasks to end, and then for its connection to close."""


async def stop_tasks(*tasks: asyncio.Task[Any]) -> None:
    """Cancel `tasks` and wait for them to end, for at most `STOP_GRACE_S`: a command told to stop (Ctrl-C) ends
    even when a task's clean-up waits on the bus."""
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks, timeout=STOP_GRACE_S)


@contextlib.contextmanager
def stop_signals() -> Iterator[asyncio.Event]:
    """An event set by the first SIGINT or SIGTERM while inside (the running loop handles both signals)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    installed: list[signal.Signals] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signal support
            continue
        installed.append(signum)
    try:
        yield stop
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def say(text: str) -> None:
    """A line on stdout, flushed at once (long-running commands are often piped)."""
    print(text, flush=True)


def progress(text: str) -> None:
    """Progress on stderr, without a newline (the caller ends the line)."""
    print(text, end="", file=sys.stderr, flush=True)


def json_text(value: Any) -> str:
    """A msgspec value as indented JSON with sorted keys."""
    return msgspec.json.format(msgspec.json.encode(value, order="sorted"), indent=2).decode()
