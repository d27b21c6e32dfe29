"""Moving messages between a node's own topics and what it was told by
others: adopting a dead origin's shadow, and letting go of what a
survivor took over."""

import asyncio
import time

from ..bounds import QueueFull
from ..message import Message
from ..topic import TopicExiting
from .shadow import SLICE, SLICE_BYTES, Shadow


async def adopt(nsqd, shadow: Shadow, replicate, adopted_before: set[tuple[str, bytes]]) -> int:
    """Every message of ``shadow`` into this nsqd's topics and channels,
    owed to the channels the origin still owed it to (or waiting in the
    topic, as it was there), deferred ones still deferred, channels paused
    as they were there, but for those in ``adopted_before`` ((topic, id)
    pairs: ids are unique per topic only, as in NSQ; the adopted ones are
    added to it). ``replicate`` (topic, messages, channels) gives adopted
    copies to this node's own peers. In slices of ``SLICE``, so that a
    big backlog blocks nothing (the shadow must be this caller's alone
    meanwhile). The keys of the origin's keyed publishes come along
    (``_adopt_keys``). -> how many messages were adopted."""
    adopted = 0
    for name, shadow_topic in shadow.topics.items():
        owed: list = []
        size = 0
        try:
            _prepare_topic(nsqd, name, shadow_topic)
            for entry in shadow_topic.owed():
                if (name, entry[0]) in adopted_before:
                    continue
                owed.append(entry)
                size += len(entry[1])
                if len(owed) == SLICE or size >= SLICE_BYTES:
                    adopted += _adopt_slice(nsqd, name, owed, replicate, adopted_before)
                    owed, size = [], 0
                    await asyncio.sleep(0)
            adopted += _adopt_slice(nsqd, name, owed, replicate, adopted_before)
            _adopt_keys(nsqd, name, shadow_topic)
        except (TopicExiting, QueueFull, OSError) as error:
            left = sum(1 for entry in shadow_topic.owed() if (name, entry[0]) not in adopted_before)
            nsqd.log.error("REPLICATION: TOPIC(%s): %d messages of %s epoch %d could not be taken over: %s",
                           name, left, shadow.origin, shadow.epoch, error or "exiting")
    return adopted


def _adopt_keys(nsqd, name: str, shadow_topic) -> None:
    """The origin's keys for the topic, once its messages are here (a key
    without its message would turn a retry into a loss), replicated on."""
    live = shadow_topic.live_keys()
    if not live:
        return
    topic = nsqd.get_topic(name)
    kept = topic.adopt_keys(live)
    if kept and nsqd.replication is not None:
        nsqd.replication.keyed(name, topic.publish_key_window, kept)


def _prepare_topic(nsqd, name: str, shadow_topic) -> None:
    """The topic and the channels the origin had, paused as they were
    there: the operator paused them at the origin, and its messages are
    delivered from here now."""
    topic = nsqd.get_topic(name)
    if "" in shadow_topic.paused and not topic.paused:
        topic.pause()
        nsqd.log.warning("REPLICATION: TOPIC(%s): paused, as it was where its messages come from", name)
    for channel_name in sorted(shadow_topic.channels):
        channel = topic.get_channel(channel_name)
        if channel_name in shadow_topic.paused and not channel.paused:
            channel.pause()
            nsqd.log.warning("REPLICATION: TOPIC(%s): CHANNEL(%s): paused, as it was where its messages come "
                             "from", name, channel_name)


def _adopt_slice(nsqd, name: str, owed: list, replicate, adopted_before: set) -> int:
    now = time.time()
    topic = nsqd.get_topic(name)
    waiting: list[Message] = []
    due: dict[str, list[Message]] = {}
    copies: dict[tuple, list[Message]] = {}  # what this node's peers get: per channels and timestamp
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
        copies.setdefault((tuple(sorted(channels)), timestamp), []).append(Message(message_id, body, timestamp))
    for channel_name, messages in due.items():
        topic.get_channel(channel_name).put_many(messages)
    for (channels, _), messages in copies.items():
        replicate(name, messages, channels)
    if waiting:  # published again into the topic, ids kept (replicated by the topic)
        topic.publish([m.body for m in waiting], waiting[0].timestamp, 0.0, [m.id for m in waiting])
    adopted_before.update((name, entry[0]) for entry in owed)
    return len(owed)


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
