"""A daemon that dies with the process supervising it.

``localcluster`` starts daemons (``nsqpy cluster``, the tests, the
benchmarks) with the supervisor's pid in ``PARENT_ENV``; the daemon's first
act is ``follow_parent()``. Kept apart from ``localcluster`` so that a
daemon's startup imports nothing more than this.
"""

import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
PARENT_ENV = "NSQPY_DIE_WITH_PARENT"  # the supervisor's pid, for follow_parent()


def follow_parent() -> None:
    """Called first thing by a daemon that ``DaemonProcess`` started: from
    now on it gets SIGTERM when its supervisor dies, however it dies (SIGKILL
    included), so no daemon outlives it holding the ports; if the supervisor
    is already gone, exit. Linux only (PR_SET_PDEATHSIG); a no-op elsewhere
    and for a daemon started by anything else.

    The daemon asks for the signal itself: a ``preexec_fn`` would do it in the
    forked child, but Popen with a ``preexec_fn`` from a thread other than the
    main one leaves an embedding PySpark driver unable to find its Python
    data sources."""
    parent = os.environ.pop(PARENT_ENV, None)
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(parent):
        os._exit(1)
