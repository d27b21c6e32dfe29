"""The optional key the sink puts before each body, for consumers that deduplicate.

A sink task that fails part-way is retried by Spark and publishes its rows
again: NSQ delivers at least once. With ``dedup_key`` the sink starts every
body with ``<batch id>:<partition>:<index>\\n``, the same on every retry of
that row, and the source (also with ``dedup_key``) moves it into a
``dedup_key`` column, so ``dropDuplicates(["dedup_key"])`` or an idempotent
sink removes the copies.
"""


def with_key(batch_id: int, partition: int, index: int, body: bytes) -> bytes:
    return b"%d:%d:%d\n" % (batch_id, partition, index) + body


def split_key(body: bytes) -> tuple[str | None, bytes]:
    """``(key, body)``; the key is None when the body does not start with one."""
    head, newline, rest = body.partition(b"\n")
    parts = head.split(b":")
    if newline and len(parts) == 3 and all(part.isdigit() for part in parts):
        return head.decode("ascii"), rest
    return None, body
