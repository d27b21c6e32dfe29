"""nsqpy: the NSQ realtime distributed messaging platform, wire-compatible with NSQ."""

import os
import sys

__version__ = "0.1.0"

from . import _pure  # NSQPY_PURE=1, or a stale compiled build: the .py files run

if os.environ.get("NSQPY_PURE"):
    _pure.install()
elif (_stale := _pure.stale_source()) is not None:
    print(f"nsqpy: {_stale} changed after it was compiled: running pure Python until it is rebuilt"
          " (make test, make run or pip install -e .)", file=sys.stderr)
    _pure.install()


def version_line(program: str) -> str:
    """``nsqd v1.3.0 (built w/python3.11.7)``: NSQ's shape, which tools parse.
    The version is the NSQ release whose protocol we speak."""
    from .protocol import NSQ_VERSION

    v = sys.version_info
    return f"{program} v{NSQ_VERSION} (built w/python{v.major}.{v.minor}.{v.micro})"


_CLIENT_NAMES = {"Config", "Consumer", "Message", "Producer", "SyncProducer"}


def __getattr__(name: str):
    """``nsqpy.Producer`` and friends, imported on first use so the daemons
    never load the client."""
    if name in _CLIENT_NAMES:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'nsqpy' has no attribute {name!r}")
