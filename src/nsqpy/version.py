"""nsqpy's version and the version lines its programs print.

A module of its own: the package's ``__init__`` names the client (its lazy
attributes), and a daemon asking for its version line never goes near it."""

import sys

__version__ = "0.1.0"


def version_line(program: str) -> str:
    """``nsqd v1.3.0 (built w/python3.11.7)``: NSQ's shape, which tools parse.
    The version is the NSQ release whose protocol we speak."""
    from .protocol import NSQ_VERSION

    v = sys.version_info
    return f"{program} v{NSQ_VERSION} (built w/python{v.major}.{v.minor}.{v.micro})"


def nsqpy_version_line(program: str) -> str:
    """``nsqpy 0.1.0``: nsqpy's own commands report nsqpy's version
    (NSQ-shaped daemons and tools keep NSQ's line, which clients parse)."""
    return f"{program} {__version__}"
