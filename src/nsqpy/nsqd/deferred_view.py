"""``GET /channel/deferred``: what a channel holds deferred, without
touching it.

Beyond NSQ (nsqio/nsq#848): deferred messages (a DPUB, or a REQ with a
delay) are invisible in NSQ until they come due. The listing reads the
channel's heap in due order and changes nothing: no attempt is counted, no
due time moves, and the messages come due exactly as they would have.
"""

import base64

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000


def deferred_listing(channel, limit: int, include_body: bool) -> dict:
    """The ``limit`` messages due soonest. Times are unix nanoseconds, as in
    NSQ's messages; ``body`` (base64, the body being bytes) only on request."""
    messages = []
    for due_at, message in channel.peek_deferred(limit):
        entry = {
            "id": message.id.decode("ascii", "replace"),
            "due_at": int(due_at * 1e9),
            "attempts": message.attempts,
            "timestamp": message.timestamp,
            "body_size": len(message.body),
        }
        if include_body:
            entry["body"] = base64.b64encode(message.body).decode("ascii")
        messages.append(entry)
    return {"topic_name": channel.topic.name, "channel_name": channel.name,
            "deferred_count": channel.deferred_count, "messages": messages}
