"""``nsqd``: parse NSQ's flags, run the daemon until SIGINT/SIGTERM (or export its data dir for Go's nsqd)."""

import sys

from ..nsqd.options import NsqdOptions
from ..nsqd.server import NSQD
from .run import daemon_main


def export_if_asked(options: NsqdOptions, log) -> int | None:
    if not options.export_for_go:
        return None
    from ..nsqd.go_export import export_for_go  # a one-off job: never on the way to listening

    return export_for_go(options, log)


def main(argv: list[str] | None = None) -> int:
    return daemon_main("nsqd", NsqdOptions, NSQD, sys.argv[1:] if argv is None else argv, export_if_asked)


if __name__ == "__main__":
    sys.exit(main())
