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
from .message import Message

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


def settle_interrupted(nsqd) -> None:
    """After a crash in the middle of dead-lettering (at most one message:
    it is done in one go on the event loop), finish it exactly once.

    A channel names the record it is moving (on its disk queue or its
    deferred one) before it copies it (the copy keeps
    the message's id) and acknowledges it after. Found named at startup, before
    anything is delivered: if the copy was made, it is the newest record of the
    dead-letter topic (no channels then) or of some of its channels. Then the
    move is completed (channels that missed it get theirs) and the record is
    not delivered again; otherwise the record is read again and dead-lettered
    as usual."""
    for channel in list(nsqd.channels()):
        for disk, message_id in channel.interrupted_moves():
            target = nsqd.get_topic(channel.dead_letter_topic)
            copy = _newest_if(target.queue, message_id)
            if copy is None:
                arrived = {name: _newest_if(each.queue, message_id) for name, each in target.channels.items()}
                copy = next((record for record in arrived.values() if record is not None), None)
                if copy is not None:
                    for name, record in arrived.items():
                        if record is None:
                            target.channels[name].queue.put(Message.decode(copy))
            channel.settle_move(disk, copy is not None)
            nsqd.log.warning("TOPIC(%s): CHANNEL(%s): dead-lettering of %s was cut short by a crash; %s",
                             channel.topic.name, channel.name, message_id.decode("ascii", "replace"),
                             "completed now" if copy is not None else "it will be done again")

def _newest_if(queue, message_id: bytes) -> bytes | None:
    """The newest record on ``queue``'s disk if it is the message ``message_id``."""
    newest = queue.disk.last_record() if queue.disk is not None else None
    return newest if newest is not None and Message.decode(newest).id == message_id else None
