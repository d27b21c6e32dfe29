"""``nsqlookupd``: parse NSQ's flags, run the daemon until SIGINT/SIGTERM."""

import sys

from ..nsqlookupd.options import NsqlookupdOptions
from ..nsqlookupd.server import NSQLookupd
from .run import daemon_main


def main(argv: list[str] | None = None) -> int:
    return daemon_main("nsqlookupd", NsqlookupdOptions, NSQLookupd, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
