"""Dead-letter topics: where a channel sends a message it has delivered
``max_attempts`` times instead of delivering it once more.

Beyond NSQ (nsqio/nsq#974, #1309): in NSQ a message that always fails is
requeued forever unless every consumer counts attempts itself. Here a
channel with ``max_attempts`` > 0 publishes such a message, body unchanged,
to an ordinary topic (``<topic>.dead`` unless configured), which any
consumer, nsq_tail or nsqadmin reads like any other. Off by default
(``--max-attempts=0``), set per channel over HTTP, kept in nsqd.dat as
fields Go's nsqd ignores. Clients see nothing of it on the wire.
"""

from ..options import int_in_range
from ..protocol.names import is_ephemeral, is_valid_topic_name

DEAD_LETTER_SUFFIX = ".dead"
MAX_ATTEMPTS_LIMIT = 65535  # a message's attempts field is 16 bits


def default_dead_letter_topic(topic_name: str) -> str:
    return topic_name + DEAD_LETTER_SUFFIX


def parse_max_attempts(text: str) -> int:
    """``max_attempts`` as given over HTTP or in nsqd.dat; ``ValueError``
    unless an integer in [0, 65535] (0: off)."""
    return int_in_range("max_attempts", text, MAX_ATTEMPTS_LIMIT)


def is_valid_dead_letter_topic(name: str, source_topic: str) -> bool:
    """A durable topic with NSQ's name rules, other than the source itself."""
    return is_valid_topic_name(name) and not is_ephemeral(name) and name != source_topic
