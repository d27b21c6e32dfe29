"""Moving messages between a node's own topics and what it was told by
others: adopting a dead origin's shadow, and letting go of what a
survivor took over."""

import time

from ..bounds import QueueFull
from ..message import Message
from ..topic import TopicExiting
from .shadow import Shadow


def adopt(nsqd, shadow: Shadow, replicate, adopted_before: set[tuple[str, bytes]]) -> int:
    """Every message of ``shadow`` into this nsqd's topics and channels,
    owed to the channels the origin still owed it to (or waiting in the
    topic, as it was there), deferred ones still deferred, a topic or
    channel made here for them paused as it was there, but for those
    in ``adopted_before`` ((topic, id) pairs: ids are unique per topic
    only, as in NSQ; the adopted ones are added to it). ``replicate``
    (topic, message, channels) gives each adopted copy to this node's own
    peers. -> how many messages were adopted."""
    adopted = 0
    for name, shadow_topic in shadow.topics.items():
        owed = [entry for entry in shadow_topic.owed() if (name, entry[0]) not in adopted_before]
        if not owed:
            continue
        try:
            _adopt_topic(nsqd, name, shadow_topic, owed, replicate)
        except (TopicExiting, QueueFull, OSError) as error:
            nsqd.log.error("REPLICATION: TOPIC(%s): %d messages of %s epoch %d could not be taken over: %s",
                           name, len(owed), shadow.origin, shadow.epoch, error or "exiting")
            continue
        adopted_before.update((name, entry[0]) for entry in owed)
        adopted += len(owed)
    return adopted


def _adopt_topic(nsqd, name: str, shadow_topic, owed: list, replicate) -> None:
    now = time.time()
    new_topic = name not in nsqd.topics
    topic = nsqd.get_topic(name)
    if new_topic and "" in shadow_topic.paused:
        topic.pause()
    for channel_name in sorted(shadow_topic.channels):
        if channel_name not in topic.channels and channel_name in shadow_topic.paused:
            topic.get_channel(channel_name).pause()  # paused where it was, not here: paused here too
        topic.get_channel(channel_name)
    waiting: list[Message] = []
    due: dict[str, list[Message]] = {}
    for message_id, body, timestamp, deliver_at, channels in owed:
        if channels is None:
            waiting.append(Message(message_id, body, timestamp))
            continue
        for channel_name in channels:
            copy = Message(message_id, body, timestamp)
            if deliver_at > now:
                topic.get_channel(channel_name).put_deferred(copy, deliver_at - now)
            else:
                due.setdefault(channel_name, []).append(copy)
        replicate(name, Message(message_id, body, timestamp), tuple(sorted(channels)))
    for channel_name, messages in due.items():
        topic.get_channel(channel_name).put_many(messages)
    if waiting:  # published again into the topic, ids kept (replicated by the topic)
        topic.publish([m.body for m in waiting], waiting[0].timestamp, 0.0, [m.id for m in waiting])


def let_go(nsqd) -> int:
    """Everything this node holds was taken over by a survivor while it
    was away (frozen, or cut off from etcd past its lease): dropped, so
    that only the survivor delivers it. -> messages dropped."""
    dropped = 0
    for topic in list(nsqd.topics.values()):
        dropped += topic.depth
        topic.empty()
        for channel in list(topic.channels.values()):
            dropped += channel.depth + channel.in_flight_count + channel.deferred_count
            channel.empty()
    return dropped
