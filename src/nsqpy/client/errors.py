"""What the client raises. Errors nsqd sends are ``nsqpy.protocol.errors.ProtocolError``
(``.code`` is NSQ's, e.g. ``E_BAD_TOPIC``)."""

from ..protocol.errors import ProtocolError  # noqa: F401 - re-exported for users


class NSQError(Exception):
    """Base of the client's own errors."""


class ConnectionClosedError(NSQError):
    """The connection to nsqd closed (or could not be made) before an answer came."""


class StoppedError(NSQError):
    """The Producer or Consumer was stopped."""


class NoNodeAvailableError(ConnectionClosedError):
    """A Producer over many nsqd found no node that accepted a publish in time;
    the message names each node's last error."""
