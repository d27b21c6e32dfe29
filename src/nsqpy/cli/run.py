"""Run a daemon on one event loop (uvloop when installed) until a signal."""

import asyncio
import gc
import signal

from ..errors import StartupError
from ..eventloop import new_event_loop
from ..logs import setup_logging
from ..sdnotify import notify
from ..supervision import follow_parent
from ..version import __version__, version_line
from .flags import parse_options


def tune_gc() -> None:
    """A daemon keeps millions of queued messages alive. With CPython's default
    thresholds the cyclic collector re-walks them constantly (measured: keeping
    3M messages took 2.5 s instead of 0.86 s), and messages form no cycles. So:
    collect the young generation per 100k allocations, and freeze what startup
    created. Set here, by the process owner, never by the library."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)


def run_daemon(daemon, log) -> int:
    """``daemon`` has ``async start()`` and ``async stop()``; a StartupError
    from start() is logged as one line and exits 1; stop() may return a
    non-zero exit status (nsqd: messages it could not persist)."""
    tune_gc()
    loop = new_event_loop()
    asyncio.set_event_loop(loop)

    async def serve() -> int:
        # handlers first: a signal that arrives while starting still stops cleanly
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await daemon.start()
        except StartupError as error:  # one line for the operator, not a traceback
            log.critical("%s", error)
            return 1
        notify("READY=1")
        await stop.wait()
        notify("STOPPING=1")
        log.info("received signal, shutting down")
        return await daemon.stop() or 0

    try:
        return loop.run_until_complete(serve())
    finally:
        loop.close()


def daemon_main(program: str, options_class, daemon_class, argv: list[str], one_shot=None) -> int:
    """The whole life of a daemon executable: flags, logging, run, exit code.
    ``one_shot(options, log)`` may do a job in place of running the daemon
    (nsqd --export-for-go): its exit status, or None to run as usual."""
    follow_parent()
    options, show_version = parse_options(program, options_class, argv)
    if show_version:
        print(version_line(program))
        return 0
    log = setup_logging(program, options.log_prefix, options.log_level)
    log.info("%s (nsqpy %s)", version_line(program), __version__)
    if one_shot is not None:
        try:
            status = one_shot(options, log)
        except StartupError as error:
            log.critical("%s", error)
            return 1
        if status is not None:
            return status
    try:
        daemon = daemon_class(options, log)
    except StartupError as error:
        log.critical("%s", error)
        return 1
    return run_daemon(daemon, log)
