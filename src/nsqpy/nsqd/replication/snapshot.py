"""What this nsqd still owes, as ``P`` records for a peer that has no copy
of it: a new successor (the one before it died or another member joined
between), or every successor after this node kept its messages across a
restart under a new epoch.

Every message queued (memory and disk), in flight and deferred is
copied; the disk's records are read without being taken.
"""

from ...protocol.commands import encode_mpub_body
from ...protocol.replication import published_record
from .shadow import SLICE, SLICE_BYTES


def owed_records(nsqd) -> list[tuple[bytes, int]]:
    """(record, message count) for every message queued, in flight or
    deferred, each owed to the channels that hold it; one record per
    set of channels and timestamp (an MPUB's messages stay together)."""
    now = nsqd.loop.time()  # deferred messages are due on the loop's clock
    records = []
    for topic in list(nsqd.topics.values()):
        waiting = topic.queue.queued()
        records.extend(_records(topic.name, waiting, ()))
        owed: dict[bytes, tuple] = {}  # id -> (message, channels, due)
        for channel in topic.channels.values():
            held = [(m, 0.0) for m in channel.queue.queued() + channel.in_flight.messages()]
            held += [(m, due) for due, _, m in channel.deferred]
            for message, due in held:
                entry = owed.get(message.id)
                if entry is None:
                    owed[message.id] = (message, [channel.name], due)
                else:
                    entry[1].append(channel.name)
        groups: dict[tuple, list] = {}
        for message, channels, due in owed.values():
            if due:
                defer_ms = max(0, int((due - now) * 1000))
                records.append((published_record(topic.name, message.timestamp, defer_ms, [message.id],
                                                 encode_mpub_body([message.body]), tuple(sorted(channels))), 1))
            else:
                groups.setdefault((tuple(sorted(channels)), message.timestamp), []).append(message)
        for (channels, _), messages in groups.items():
            records.extend(_records(topic.name, messages, channels))
    return records


def _records(topic: str, messages: list, channels: tuple[str, ...]) -> list[tuple[bytes, int]]:
    """Records for ``messages`` (of one timestamp, but those waiting in a
    topic, which keep the first one's), each of at most SLICE messages and
    about SLICE_BYTES: each fits a REPL batch."""
    found = []
    start = size = 0
    for end, message in enumerate(messages, 1):
        size += len(message.body)
        if end - start == SLICE or size >= SLICE_BYTES or end == len(messages):
            chunk = messages[start:end]
            found.append((published_record(topic, chunk[0].timestamp, 0, [m.id for m in chunk],
                                           encode_mpub_body([m.body for m in chunk]), channels), len(chunk)))
            start, size = end, 0
    return found
