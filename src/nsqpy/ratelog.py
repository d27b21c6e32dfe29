"""One recurring problem, one log line now and then: a flood of bad input
(thousands of messages a filter cannot read) costs a line every few
seconds, not a line each, yet the first one is logged at once and none is
forgotten (the next line says how many were not logged)."""

import time

DEFAULT_INTERVAL = 10.0
LONGEST_DETAIL = 256  # characters of a message body in a log line


class RateLimitedLog:
    def __init__(self, log, interval: float = DEFAULT_INTERVAL, clock=time.monotonic):
        self._log = log
        self._interval = interval
        self._clock = clock
        self._next = 0.0  # when a line may be logged again
        self._unlogged = 0

    def error(self, message: str) -> None:
        now = self._clock()
        if now < self._next:
            self._unlogged += 1
            return
        if self._unlogged:
            message += f" ({self._unlogged} more like it not logged since the last)"
        self._log.error("%s", message)
        self._next = now + self._interval
        self._unlogged = 0


def shown(body: bytes) -> str:
    """A message body as a log line can hold it: text, cut short."""
    text = body[:LONGEST_DETAIL].decode("utf-8", errors="replace")
    return text + "..." if len(body) > LONGEST_DETAIL else text
