"""nsqpy: the NSQ realtime distributed messaging platform, wire-compatible with NSQ."""

import os
import sys

from . import _pure  # NSQPY_PURE=1, or a stale compiled build: the .py files run
from .version import __version__

if os.environ.get("NSQPY_PURE"):
    _pure.install()
elif (_stale := _pure.stale_source()) is not None:
    print(f"nsqpy: {_stale} changed after it was compiled: running pure Python until it is rebuilt"
          " (make test, make run or pip install -e .)", file=sys.stderr)
    _pure.install()


__all__ = ["__version__", "Config", "Consumer", "Message", "Producer", "SyncProducer"]
_CLIENT_NAMES = __all__[1:]

TYPE_CHECKING = False  # true to type checkers, without importing typing
if TYPE_CHECKING:
    from .client import Config, Consumer, Message, Producer, SyncProducer


def __getattr__(name: str) -> object:
    """``nsqpy.Producer`` and friends, imported on first use so the daemons
    never load the client."""
    if name in _CLIENT_NAMES:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'nsqpy' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The client's names too, so that ``help(nsqpy)`` shows them."""
    return sorted({*globals(), *_CLIENT_NAMES})
