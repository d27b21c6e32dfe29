"""``nsq_stat``: a channel's rates and depths every interval, with NSQ's flags."""

import sys

from ..tools.app import run_tool
from ..tools.nsq_stat import StatOptions, run
from .flags import parse_options


def main(argv: list[str] | None = None) -> int:
    return run_tool("nsq_stat", parse_options("nsq_stat", StatOptions, sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    sys.exit(main())
