"""Moving messages between a node's own topics and what it was told by
others: adopting a dead origin's shadow, and letting go of what a
survivor took over."""

import time

from ..message import Message
from .shadow import Shadow


def adopt(nsqd, shadow: Shadow, replicate) -> int:
    """Every message of ``shadow`` into this nsqd's topics and channels,
    owed to the channels the origin still owed it to (or waiting in the
    topic, as it was there), deferred ones still deferred. ``replicate``
    (topic, messages, channels) gives the adopted copies to this node's
    own peers. -> how many messages were adopted."""
    adopted = 0
    now = time.time()
    for name, shadow_topic in shadow.topics.items():
        if not shadow_topic.messages:
            continue
        topic = nsqd.get_topic(name)
        for channel_name in sorted(shadow_topic.channels):
            topic.get_channel(channel_name)
        waiting = []
        owed: dict[str, list] = {}
        for message in shadow_topic.messages.values():
            if message.owed is None:
                waiting.append(message)
            else:
                for channel_name in message.owed:
                    owed.setdefault(channel_name, []).append(message)
                replicate(name, [message], tuple(sorted(message.owed)))
            adopted += 1
        for channel_name, messages in owed.items():
            channel = topic.get_channel(channel_name)
            now_due = []
            for message in messages:
                copy = Message(message.id, message.body, message.timestamp)
                if message.deliver_at > now:
                    channel.put_deferred(copy, message.deliver_at - now)
                else:
                    now_due.append(copy)
            if now_due:
                channel.put_many(now_due)
        if waiting:  # published again into the topic, ids kept (replicated by the topic)
            topic.publish([m.body for m in waiting], waiting[0].timestamp, 0.0, [m.id for m in waiting])
    return adopted


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
