"""The optional key a publisher puts before each body, for consumers that deduplicate.

NSQ delivers at least once, and two publishers of nsqpy make copies on
purpose or by retry: a Producer with ``replicas`` sends each message to
several nsqd, and a Spark sink task that fails part-way is run again. Both
can start every body with a key line, ``<a>:<b>:<c>\\n`` (three decimal
numbers: the Producer's id, its call and the message's index in the call; or
the sink's batch, partition and row), the same on every copy. A consumer
that knows the framing (the client's ``Consumer(dedup=...)``, the Spark
source's ``dedup_key`` column) strips it and drops the copies; one that does
not sees the key as the first line of the body.
"""


def with_key(a: int, b: int, c: int, body: bytes) -> bytes:
    return b"%d:%d:%d\n" % (a, b, c) + body


def split_key(body: bytes) -> tuple[str | None, bytes]:
    """``(key, body)``; the key is None when the body does not start with one."""
    head, newline, rest = body.partition(b"\n")
    parts = head.split(b":")
    if newline and len(parts) == 3 and all(part.isdigit() for part in parts):
        return head.decode("ascii"), rest
    return None, body
