"""``nsq_tail``: print a topic's messages to stdout, with NSQ's flags."""

import sys

from ..tools.app import run_tool
from ..tools.nsq_tail import TailOptions, run
from .flags import parse_options


def main(argv: list[str] | None = None) -> int:
    return run_tool("nsq_tail", parse_options("nsq_tail", TailOptions, sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    sys.exit(main())
