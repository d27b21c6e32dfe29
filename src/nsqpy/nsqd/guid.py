"""Message IDs: NSQ's 64-bit time/node/sequence layout as 16 hex characters.

``((ts - EPOCH) << 22) | (node_id << 12) | sequence`` with ``ts`` in units of
2**20 ns. NSQ sleeps when the clock goes back or the 12-bit sequence runs
out; this generator instead borrows the next time unit, so IDs stay unique
and increasing without ever blocking the event loop.
"""

import time

EPOCH = 1288834974288
SEQUENCE_MASK = 0xFFF


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
        ids = []
        while count:
            first = self.sequence + 1
            if first > SEQUENCE_MASK:
                self.last_ts += 1
                first = 0
            last = min(first + count, SEQUENCE_MASK + 1)
            base = ((self.last_ts - EPOCH) << 22) | self.node_bits
            ids += [b"%016x" % (base | sequence) for sequence in range(first, last)]
            count -= last - first
            self.sequence = last - 1
        return ids
