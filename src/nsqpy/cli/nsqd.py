"""``nsqd``: parse NSQ's flags, run the daemon until SIGINT/SIGTERM."""

import sys

from .. import __version__, version_line
from ..logs import setup_logging
from ..nsqd.options import NsqdOptions
from ..errors import StartupError
from ..nsqd.server import NSQD
from .flags import parse_options
from .run import run_daemon


def main(argv: list[str] | None = None) -> int:
    options, show_version = parse_options("nsqd", NsqdOptions, sys.argv[1:] if argv is None else argv)
    if show_version:
        print(version_line("nsqd"))
        return 0
    log = setup_logging("nsqd", options.log_prefix, options.log_level)
    log.info("%s (nsqpy %s)", version_line("nsqd"), __version__)
    log.info("ID: %d", options.node_id)
    try:
        daemon = NSQD(options, log)
    except StartupError as error:
        log.critical("%s", error)
        return 1
    return run_daemon(daemon, log)


if __name__ == "__main__":
    sys.exit(main())
