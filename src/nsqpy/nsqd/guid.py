"""Message IDs: NSQ's 64-bit time/node/sequence layout as 16 hex characters.

``((ts - EPOCH) << 22) | (node_id << 12) | sequence`` with ``ts`` in units of
2**20 ns. NSQ sleeps when the clock goes back or the 12-bit sequence runs
out; this generator instead borrows the next time unit, so IDs stay unique
and increasing without ever blocking the event loop.
"""

import time

EPOCH = 1288834974288
SEQUENCE_BITS = 12
SEQUENCE_MASK = (1 << SEQUENCE_BITS) - 1
# the sequence is the last 3 of the 16 hex digits: an id is the 13 digits its
# batch shares plus one of these (a concatenation, not a formatting, per id)
_SEQUENCE_HEX = [b"%03x" % sequence for sequence in range(SEQUENCE_MASK + 1)]


class GuidFactory:
    __slots__ = ("node_bits", "last_ts", "sequence")

    def __init__(self, node_id: int):
        self.node_bits = (node_id & 0x3FF) << 12
        self.last_ts = 0
        self.sequence = 0

    def new_ids(self, count: int) -> list[bytes]:
        ts = time.time_ns() >> 20
        if ts > self.last_ts:
            self.last_ts, self.sequence = ts, -1
        ids: list[bytes] = []
        while count:
            first = self.sequence + 1
            if first > SEQUENCE_MASK:
                self.last_ts += 1
                first = 0
            last = min(first + count, SEQUENCE_MASK + 1)
            shared = b"%013x" % ((((self.last_ts - EPOCH) << 22) | self.node_bits) >> SEQUENCE_BITS)
            ids += map(shared.__add__, _SEQUENCE_HEX[first:last])
            count -= last - first
            self.sequence = last - 1
        return ids
