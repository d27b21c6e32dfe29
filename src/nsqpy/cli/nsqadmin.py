"""``nsqadmin``: parse NSQ's flags, serve the web UI until SIGINT/SIGTERM."""

import sys

from ..nsqadmin.options import NsqadminOptions
from ..nsqadmin.server import NSQAdmin
from .run import daemon_main


def main(argv: list[str] | None = None) -> int:
    return daemon_main("nsqadmin", NsqadminOptions, NSQAdmin, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
