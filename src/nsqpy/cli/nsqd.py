"""``nsqd``: parse NSQ's flags, run the daemon until SIGINT/SIGTERM."""

import sys

from ..nsqd.options import NsqdOptions
from ..nsqd.server import NSQD
from .run import daemon_main


def main(argv: list[str] | None = None) -> int:
    return daemon_main("nsqd", NsqdOptions, NSQD, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
