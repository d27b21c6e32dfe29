"""NSQ's error codes and the exception that carries one to an error frame."""

E_BAD_PROTOCOL = "E_BAD_PROTOCOL"
E_INVALID = "E_INVALID"
E_BAD_BODY = "E_BAD_BODY"
E_BAD_TOPIC = "E_BAD_TOPIC"
E_BAD_CHANNEL = "E_BAD_CHANNEL"
E_BAD_MESSAGE = "E_BAD_MESSAGE"
E_PUB_FAILED = "E_PUB_FAILED"
E_MPUB_FAILED = "E_MPUB_FAILED"
E_DPUB_FAILED = "E_DPUB_FAILED"
E_SUB_FAILED = "E_SUB_FAILED"
E_IDENTIFY_FAILED = "E_IDENTIFY_FAILED"
E_AUTH_DISABLED = "E_AUTH_DISABLED"
E_AUTH_FAILED = "E_AUTH_FAILED"
E_UNAUTHORIZED = "E_UNAUTHORIZED"
E_AUTH_FIRST = "E_AUTH_FIRST"
E_FIN_FAILED = "E_FIN_FAILED"
E_REQ_FAILED = "E_REQ_FAILED"
E_TOUCH_FAILED = "E_TOUCH_FAILED"
E_BAD_KEY = "E_BAD_KEY"  # beyond NSQ: a keyed publish's key (keyed.py)

#: The only errors after which nsqd keeps the connection open: a consumer
#: that raced a timeout must not lose its other in-flight messages.
NON_FATAL_CODES = frozenset({E_FIN_FAILED, E_REQ_FAILED, E_TOUCH_FAILED})


class ProtocolError(Exception):
    """An error that becomes an NSQ error frame ``CODE description``.

    ``fatal`` follows from the code: nsqd closes the connection after every
    error except the FIN/REQ/TOUCH failures.
    """

    def __init__(self, code: str, description: str):
        super().__init__(f"{code} {description}")
        self.code = code
        self.description = description

    @property
    def fatal(self) -> bool:
        return self.code not in NON_FATAL_CODES

    @property
    def refused_id(self) -> str | None:
        """The message id a FIN, REQ or TOUCH refusal names: nsqd words
        them ``FIN <id> failed <reason>``."""
        if self.code not in NON_FATAL_CODES:
            return None
        words = self.description.split(" ", 2)
        return words[1] if len(words) > 1 else None

    @property
    def frame_data(self) -> bytes:
        return f"{self.code} {self.description}".encode()


def parse_error_frame(data: bytes) -> ProtocolError:
    """Decode the body of an error frame (clients match on the code prefix)."""
    text = data.decode("utf-8", "replace")
    code, _, description = text.partition(" ")
    return ProtocolError(code, description)
