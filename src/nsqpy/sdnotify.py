"""systemd's readiness protocol, for daemons run by a ``Type=notify`` unit.

systemd names a datagram socket in ``NOTIFY_SOCKET``; a daemon sends
``READY=1`` once it serves (listening, nsqd's data loaded and its
nsqlookupd registration begun), so units ordered after it start when it
can take their connections, and ``STOPPING=1`` when a signal begins its
shutdown (nsqd may take a while to write its queues to disk). Anything else
that runs a daemon sets no such variable, and nothing is sent.
"""

import contextlib
import os
import socket

SOCKET_ENV = "NOTIFY_SOCKET"


def notify(state: str) -> None:
    """Send ``state`` to the service manager, if there is one; a daemon
    never fails because it cannot be reached."""
    address = os.environ.get(SOCKET_ENV)
    if not address:
        return
    if address.startswith("@"):  # Linux's abstract namespace
        address = "\0" + address[1:]
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(state.encode(), address)
