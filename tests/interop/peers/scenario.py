"""The scenario every third-party peer plays against our nsqd.

Publish with PUB, MPUB and DPUB; consume everything; REQ one message once
(with the client's backoff); TOUCH one message past the server's 2 s
msg_timeout; print what arrived as JSON on stdout. The 2 s leave a peer
slowed down by a busy machine time to answer every message before nsqd
redelivers it, and the touches 1.5 s to spare each.
"""

import json
import sys
import time

PUBS = [f"p-{i}".encode() for i in range(10)]
MPUBS = [f"m-{i}".encode() for i in range(10)]
DEFERRED = b"deferred"
REQUEUE_ME = b"req-me"
TOUCH_ME = b"touch-me"
ALL = set(PUBS + MPUBS + [DEFERRED, REQUEUE_ME, TOUCH_ME])
DEFER_MS = 500
TOUCH_EVERY = 0.5  # seconds; the server's msg_timeout is 2 s
TOUCH_HOLD = 2.6  # seconds the touched message is held in all: past the timeout


class Record:
    """What a peer saw, with first-delivery attempts per body."""

    def __init__(self):
        self.deliveries: dict[str, list[int]] = {}
        self.finished: set[bytes] = set()
        self.started = time.monotonic()
        self.deferred_after = None

    def delivered(self, body: bytes, attempts: int) -> None:
        self.deliveries.setdefault(body.decode(), []).append(attempts)
        if body == DEFERRED and self.deferred_after is None:
            self.deferred_after = time.monotonic() - self.started

    def finish(self, body: bytes) -> None:
        self.finished.add(body)

    @property
    def done(self) -> bool:
        return self.finished >= ALL

    def report(self) -> None:
        json.dump({"deliveries": self.deliveries, "finished": sorted(b.decode() for b in self.finished),
                   "deferred_after": self.deferred_after}, sys.stdout)
        sys.stdout.flush()
