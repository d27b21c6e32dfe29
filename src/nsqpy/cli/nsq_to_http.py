"""``nsq_to_http``: an HTTP request per message of a topic, with NSQ's flags."""

import sys

from ..tools.app import run_tool
from ..tools.nsq_to_http import NsqToHttpOptions, run
from .flags import parse_options


def main(argv: list[str] | None = None) -> int:
    return run_tool("nsq_to_http", parse_options("nsq_to_http", NsqToHttpOptions, sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    sys.exit(main())
