"""The life of a utility: checks, logging, one event loop, a graceful stop.

A tool is ``async def run(options, stop, log) -> int``; ``stop`` is set by
SIGINT or SIGTERM (and by the tool itself when it is done). A ``ToolError``
anywhere becomes one line on stderr and exit code 1, as NSQ's tools
``log.Fatal`` with a reason rather than a stack (a ``UsageError``: exit
code 2, as for a bad flag).
"""

import asyncio
import logging
import os
import signal
import sys

from ..net import peer_host_port
from ..options import option_specs
from ..version import __version__, version_line
from ..eventloop import new_event_loop
from ..logs import setup_logging
from ..protocol import NSQ_VERSION


class ToolError(Exception):
    """Something the operator can fix (a flag, an address, a path): one line."""

    status = 1


class UsageError(ToolError):
    """A flag's value no run could accept: exit code 2, as argparse's for a bad flag."""

    status = 2


def user_agent(program: str) -> str:
    """What the tool tells nsqd (go-nsq's tools say ``<tool>/<version> go-nsq/<version>``)."""
    return f"{program}/{NSQ_VERSION} nsqpy/{__version__}"


def setup_tool_logging(program: str, level: str = "info", prefix: str | None = None) -> logging.Logger:
    """NSQ-shaped lines on stderr for the tool and for the client it runs on."""
    log = setup_logging(program, f"[{program}] " if prefix is None else prefix, level)
    client_log = logging.getLogger("nsqpy.client")
    client_log.handlers[:] = log.handlers
    client_log.setLevel(log.level)
    client_log.propagate = False
    return log


def check_addresses(options) -> None:
    """Every address a tool is given to reach (the flags that list them:
    ``--nsqd-tcp-address``, ``--lookupd-http-address``...) is ``host:port``
    (an HTTP one may start with ``http://`` or ``https://``): refused in
    one line before anything starts, not by a traceback at the first connect."""
    for spec in option_specs(type(options)):
        if not spec.field.endswith("_addresses"):
            continue
        for address in getattr(options, spec.field):
            hostport = address.split("://", 1)[1] if "_http_" in spec.field and "://" in address else address
            try:
                peer_host_port(hostport.rstrip("/"))
            except ValueError as error:
                raise UsageError(f"--{spec.flag}: {error} (e.g. {example_address(spec.field)})") from None


def example_address(field: str) -> str:
    """An address of the kind a flag wants, on NSQ's default ports: the
    example must not send a person to another daemon's or protocol's port."""
    if "lookupd_http" in field:
        return "127.0.0.1:4161"
    return "127.0.0.1:4151" if "_http_" in field else "127.0.0.1:4150"


def run_tool(program: str, parsed, run) -> int:
    """``parsed`` is what ``cli.flags.parse_options`` returned: (options, show_version)."""
    options, show_version = parsed
    if show_version:
        print(version_line(program))
        return 0
    try:
        check_addresses(options)
    except UsageError as error:
        print(f"{program}: {error}", file=sys.stderr, flush=True)
        return error.status
    log = setup_tool_logging(program, getattr(options, "log_level", "info"),
                             getattr(options, "log_prefix", None))
    loop = new_event_loop()
    asyncio.set_event_loop(loop)

    async def main() -> int:
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await run(options, stop, log)

    try:
        return loop.run_until_complete(main())
    except ToolError as error:
        print(f"{program}: {error}", file=sys.stderr, flush=True)
        return error.status
    except BrokenPipeError:  # `| head` has read enough: end quietly
        silence_stdout()
        return 0
    finally:
        loop.close()


def silence_stdout() -> None:
    """Point stdout at /dev/null once its reader left, so that Python's
    final flush does not complain about the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
