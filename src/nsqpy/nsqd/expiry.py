"""Message TTL: a message older than its channel's TTL (by its publish
timestamp) is not delivered; it is dropped or dead-lettered.

Beyond NSQ (nsqio/nsq#302, #1396): NSQ delivers a message however stale.
Here a topic has a TTL and an action (``--message-ttl`` and
``--expire-action`` by default, ``POST /topic/config`` per topic), and a
channel may override the TTL (``POST /channel/config``). The check is made
when a message is about to be delivered, against one clock reading per
dispatch, so it costs a comparison per message and nothing when off.
Expired messages are counted per channel in ``/stats`` and ``/metrics``.
"""

EXPIRE_ACTIONS = ("drop", "dead-letter")
MAX_TTL_MS = 10 * 365 * 24 * 3600 * 1000  # ten years: far beyond any sensible TTL, well within int64 ns


def parse_ttl_ms(text: str) -> int:
    """A TTL in milliseconds as given over HTTP or in nsqd.dat (0: none);
    ``ValueError`` unless an integer in [0, ten years]."""
    value = int(text)
    if not 0 <= value <= MAX_TTL_MS:
        raise ValueError(f"ttl_ms {value} must be in [0, {MAX_TTL_MS}]")
    return value


def parse_expire_action(text: str) -> str:
    if text not in EXPIRE_ACTIONS:
        raise ValueError(f"expire_action {text!r} must be one of {', '.join(EXPIRE_ACTIONS)}")
    return text
