"""What the client raises: one hierarchy, under ``NSQError``.

nsqd's refusals are ``ProtocolError`` (``.code`` is NSQ's, e.g.
``E_BAD_TOPIC``), which is both an ``NSQError`` and the protocol package's
``ProtocolError``, so either ``except`` catches it. Arguments refused before
anything is sent are ``InvalidArgumentError``, both an ``NSQError`` and a
``ValueError`` (what the client raised for them before).
"""

from ..protocol import errors as protocol_errors
from ..protocol import names


class NSQError(Exception):
    """Base of everything the client raises."""


class InvalidArgumentError(NSQError, ValueError):
    """An argument the client refuses before sending anything (a topic or
    channel name, a publish key, an address, a count out of range)."""


def check_name(kind: str, name: object) -> None:
    """``protocol.names.check_name`` ("topic", "channel"), raising the
    client's ``InvalidArgumentError``."""
    try:
        names.check_name(kind, name)
    except ValueError as error:
        raise InvalidArgumentError(str(error)) from None


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
