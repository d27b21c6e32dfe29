"""What the client raises: one hierarchy, under ``NSQError``.

nsqd's refusals are ``ProtocolError`` (``.code`` is NSQ's, e.g.
``E_BAD_TOPIC``), which is both an ``NSQError`` and the protocol package's
``ProtocolError``, so either ``except`` catches it.
"""

from ..protocol import errors as protocol_errors


class NSQError(Exception):
    """Base of everything the client raises."""


class ProtocolError(NSQError, protocol_errors.ProtocolError):
    """nsqd answered with an error frame."""

    @classmethod
    def from_frame(cls, data: bytes) -> "ProtocolError":
        """The error an error frame's payload (``E_CODE description``) names."""
        error = protocol_errors.parse_error_frame(data)
        return cls(error.code, error.description)


class ConnectionClosedError(NSQError):
    """The connection to nsqd closed (or could not be made, or timed out) before an answer came."""


class StoppedError(NSQError):
    """The Producer or Consumer was stopped."""


class NoNodeAvailableError(ConnectionClosedError):
    """A Producer over many nsqd found no node that accepted a publish in time;
    the message names each node's last error."""
