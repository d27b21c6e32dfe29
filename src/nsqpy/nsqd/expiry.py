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

from ..options import int_in_range, one_of

EXPIRE_ACTIONS = ("drop", "dead-letter")
MAX_TTL_MS = 10 * 365 * 24 * 3600 * 1000  # ten years: far beyond any sensible TTL, well within int64 ns


def parse_ttl_ms(text: str) -> int:
    """A TTL in milliseconds as given over HTTP or in nsqd.dat (0: none);
    ``ValueError`` unless an integer in [0, ten years]."""
    return int_in_range("ttl_ms", text, MAX_TTL_MS)


def parse_expire_action(text: str) -> str:
    return one_of("expire_action", text, EXPIRE_ACTIONS)
