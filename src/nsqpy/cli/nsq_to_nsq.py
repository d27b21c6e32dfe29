"""``nsq_to_nsq``: republish topics to other nsqd, with NSQ's flags."""

import sys

from ..tools.app import run_tool
from ..tools.nsq_to_nsq import NsqToNsqOptions, run
from .flags import parse_options


def main(argv: list[str] | None = None) -> int:
    return run_tool("nsq_to_nsq", parse_options("nsq_to_nsq", NsqToNsqOptions, sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    sys.exit(main())
