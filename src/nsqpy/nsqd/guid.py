"""Message IDs: NSQ's 64-bit time/node/sequence layout as 16 hex characters.

``((ts - EPOCH) << 22) | (node_id << 12) | sequence`` with ``ts`` in units of
2**20 ns. NSQ sleeps when the clock goes back or the 12-bit sequence runs
out; this generator instead borrows the next time unit, so IDs stay unique
and increasing without ever blocking the event loop.

A publish reserves its ids (``GuidFactory.reserve``) and each is made when
its message is: an MPUB's messages wait in their queue as the one buffer
they arrived in (batch.py), and their ids wait with them.
"""

from time import time_ns
from typing import Final

EPOCH: Final = 1288834974288
SEQUENCE_BITS: Final = 12
SEQUENCE_MASK: Final = (1 << SEQUENCE_BITS) - 1
# the sequence is the last 3 of the 16 hex digits: an id is the 13 digits its
# time unit shares plus one of these (a concatenation, not a formatting, per id)
_SEQUENCE_HEX: Final = [b"%03x" % sequence for sequence in range(SEQUENCE_MASK + 1)]


def time_unit_prefix(ts: int, node_bits: int) -> bytes:
    """The 13 hex digits every id of time unit ``ts`` made on this node shares."""
    return b"%013x" % ((((ts - EPOCH) << 22) | node_bits) >> SEQUENCE_BITS)


class IdSequence:
    """Consecutive ids from ``(ts, sequence)`` on, made one at a time.
    ``prefix`` is ``time_unit_prefix(ts, node_bits)``, which the factory
    formats once per time unit."""

    __slots__ = ("node_bits", "ts", "sequence", "prefix")

    def __init__(self, node_bits: int, ts: int, sequence: int, prefix: bytes):
        self.node_bits = node_bits
        self.ts = ts
        self.sequence = sequence  # past SEQUENCE_MASK: the next id starts the next time unit
        self.prefix = prefix

    def _next_time_unit(self) -> None:
        self.ts += 1
        self.sequence = 0
        self.prefix = time_unit_prefix(self.ts, self.node_bits)

    def next(self) -> bytes:
        if self.sequence > SEQUENCE_MASK:
            self._next_time_unit()
        sequence = self.sequence
        self.sequence = sequence + 1
        return self.prefix + _SEQUENCE_HEX[sequence]

    def take(self, count: int) -> list[bytes]:
        ids: list[bytes] = []
        while count:
            if self.sequence > SEQUENCE_MASK:
                self._next_time_unit()
            last = min(self.sequence + count, SEQUENCE_MASK + 1)
            prefix = self.prefix
            for sequence in range(self.sequence, last):
                ids.append(prefix + _SEQUENCE_HEX[sequence])
            count -= last - self.sequence
            self.sequence = last
        return ids

    def copy(self) -> "IdSequence":
        return IdSequence(self.node_bits, self.ts, self.sequence, self.prefix)


class GuidFactory:
    __slots__ = ("node_bits", "last_ts", "sequence", "_prefix_ts", "_prefix")

    def __init__(self, node_id: int):
        self.node_bits = (node_id & 0x3FF) << 12
        self.last_ts = 0
        self.sequence = 0
        self._prefix_ts = -1  # the time unit whose prefix _prefix is
        self._prefix = b""

    def reserve(self, count: int) -> IdSequence:
        """The next ``count`` ids, to be made by the sequence returned."""
        first = self._next_sequence()
        ids = IdSequence(self.node_bits, self.last_ts, first, self._prefix)
        last = first + count - 1
        self.last_ts += last >> SEQUENCE_BITS
        self.sequence = last & SEQUENCE_MASK
        return ids

    def new_ids(self, count: int) -> list[bytes]:
        if count == 1:
            return [self.new_id()]
        return self.reserve(count).take(count)

    def new_id(self) -> bytes:
        """The id ``reserve(1)`` would give, made without a sequence object:
        a PUB's, the commonest publish."""
        sequence = self._next_sequence()
        self.sequence = sequence
        return self._prefix + _SEQUENCE_HEX[sequence]

    def _next_sequence(self) -> int:
        """The sequence of the next id in time unit ``last_ts``, which this
        moves to now's, or to the next one when the sequence ran out; its
        prefix is formatted once per time unit, not once per publish."""
        ts = time_ns() >> 20
        if ts > self.last_ts:
            self.last_ts, self.sequence = ts, -1
        sequence = self.sequence + 1
        if sequence > SEQUENCE_MASK:  # borrow the next time unit
            self.last_ts += 1
            sequence = 0
        if self.last_ts != self._prefix_ts:
            self._prefix_ts = self.last_ts
            self._prefix = time_unit_prefix(self.last_ts, self.node_bits)
        return sequence
