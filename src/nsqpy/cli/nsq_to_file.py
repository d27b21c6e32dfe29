"""``nsq_to_file``: archive topics to files, with NSQ's flags."""

import sys

from ..tools.app import run_tool
from ..tools.nsq_to_file import NsqToFileOptions, run
from .flags import parse_options


def main(argv: list[str] | None = None) -> int:
    return run_tool("nsq_to_file", parse_options("nsq_to_file", NsqToFileOptions, sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    sys.exit(main())
