"""A publish as nsqd takes it, whichever protocol brought it: into the
topic of that name (made on first use), a disk that refuses making nsqd
unhealthy until a publish succeeds again, and what its answer must wait for.

Compiled with the rest of the message path (setup.py): a crowd of
publishers with one PUB in flight each comes through here once per
message, and each Python step here is paid that often.
"""

import time
from collections.abc import Callable
from typing import Any

from .topic import Topic


def publish(nsqd: Any, topic_name: str, bodies: list[bytes], defer: float = 0.0,
            ids: list[bytes] | None = None) -> tuple:
    """-> what waits for the end of the turn's write (``_publish``)."""
    return _publish(nsqd, topic_name, lambda topic: topic.publish(bodies, time.time_ns(), defer, ids))


def publish_mpub(nsqd: Any, topic_name: str, body: bytes, count: int) -> tuple:
    """An MPUB's validated body, queued as it is (``Topic.publish_mpub``)."""
    return _publish(nsqd, topic_name, lambda topic: topic.publish_mpub(body, count, time.time_ns()))


def publish_keyed(nsqd: Any, topic_name: str, keys: list[bytes], bodies: list[bytes], defer: float = 0.0) -> tuple:
    """Keyed publishes (``Topic.publish_keyed``); -> as ``_publish``."""
    return _publish(nsqd, topic_name, lambda topic: topic.publish_keyed(keys, bodies, time.time_ns(), defer))


def _publish(nsqd: Any, topic_name: str, put: Callable[[Topic], None]) -> tuple:
    """``put(topic)``. -> what waits for the end of this turn's write
    (``DirtyWriters.answered_before_write``): the topic's log with its records, its
    publish keys with theirs; usually nothing."""
    topic = nsqd.topics.get(topic_name)
    try:
        if topic is None:
            topic = nsqd.get_topic(topic_name)
        put(topic)
    except OSError as error:
        nsqd.health_error = str(error)
        nsqd.log.error("TOPIC(%s): failed to put messages: %s", topic_name, error)
        raise
    if nsqd.health_error is not None:
        nsqd.health_error = None
    waiting: tuple = ()
    topic_log = topic.topic_log
    if topic_log is not None and topic_log.waiting:
        waiting = (topic_log,)
    keys = topic.publish_keys
    if keys is not None and keys.waiting:
        waiting += (keys,)
    return waiting
