"""A publish as nsqd takes it, whichever protocol brought it: into the
topic of that name (made on first use), a disk that refuses making nsqd
unhealthy until a publish succeeds again, and what its answer must wait for.

Compiled with the rest of the message path (setup.py): a crowd of
publishers with one PUB in flight each comes through here once per
message, and each Python step here is paid that often.
"""

from collections.abc import Callable
from time import time_ns
from typing import Any

from .topic import Topic


def publish(nsqd: Any, topic_name: str, bodies: list[bytes], defer: float = 0.0,
            ids: list[bytes] | None = None) -> tuple:
    """-> what waits for the end of the turn's write (``_accepted``)."""
    return _into(nsqd, _topic(nsqd, topic_name), Topic.publish, (bodies, time_ns(), defer, ids))


def publish_pub(nsqd: Any, topic_name: str, body: bytes) -> tuple:
    """A PUB over TCP: into its topic's batch for this loop turn when the
    topic takes one (``Topic.publish_in_turn``), the topic then waiting
    with the turn's writes; else as ``publish``."""
    topic = _topic(nsqd, topic_name)
    if topic.publish_in_turn(body):
        return _accepted(nsqd, topic, (topic,))
    return _into(nsqd, topic, Topic.publish, ([body], time_ns(), 0.0, None))


def publish_mpub(nsqd: Any, topic_name: str, body: bytes, count: int) -> tuple:
    """An MPUB's validated body, queued as it is (``Topic.publish_mpub``)."""
    return _into(nsqd, _topic(nsqd, topic_name), Topic.publish_mpub, (body, count, time_ns()))


def publish_keyed(nsqd: Any, topic_name: str, keys: list[bytes], bodies: list[bytes], defer: float = 0.0) -> tuple:
    """Keyed publishes (``Topic.publish_keyed``); -> as ``publish``."""
    return _into(nsqd, _topic(nsqd, topic_name), Topic.publish_keyed, (keys, bodies, time_ns(), defer))


def _into(nsqd: Any, topic: Topic, put: Callable[..., None], args: tuple) -> tuple:
    """``put(topic, *args)``, a method of the topic and its arguments (no
    closure per publish). -> as ``_accepted``."""
    try:
        put(topic, *args)
    except OSError as error:
        raise _refused(nsqd, topic.name, error)
    return _accepted(nsqd, topic)


def _topic(nsqd: Any, topic_name: str) -> Topic:
    """The topic of that name, made on first use (a disk may refuse its queue or log)."""
    topics: dict[str, Topic] = nsqd.topics
    topic = topics.get(topic_name)
    if topic is not None:
        return topic
    try:
        return nsqd.get_topic(topic_name)
    except OSError as error:
        raise _refused(nsqd, topic_name, error)


def _refused(nsqd: Any, topic_name: str, error: OSError) -> OSError:
    """nsqd is unhealthy until a publish succeeds again; -> ``error``, to raise."""
    nsqd.health_error = str(error)
    nsqd.log.error("TOPIC(%s): failed to put messages: %s", topic_name, error)
    return error


def _accepted(nsqd: Any, topic: Topic, waiting: tuple = ()) -> tuple:
    """nsqd is healthy again. -> what waits for the end of this turn's write
    (``DirtyWriters.answered_before_write``): ``waiting``, the topic's log
    with its records, its publish keys with theirs; usually nothing."""
    if nsqd.health_error is not None:
        nsqd.health_error = None
    topic_log = topic.topic_log
    if topic_log is not None and topic_log.waiting:
        waiting += (topic_log,)
    keys = topic.publish_keys
    if keys is not None and keys.waiting:
        waiting += (keys,)
    return waiting
