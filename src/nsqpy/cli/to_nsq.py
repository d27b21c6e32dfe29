"""``to_nsq``: publish stdin to a topic, one message per line, with NSQ's flags."""

import sys

from ..tools.app import run_tool
from ..tools.to_nsq import ToNsqOptions, run
from .flags import parse_options


def main(argv: list[str] | None = None) -> int:
    return run_tool("to_nsq", parse_options("to_nsq", ToNsqOptions, sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    sys.exit(main())
