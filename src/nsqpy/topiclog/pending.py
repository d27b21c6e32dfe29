"""The records a topic log has accepted and not yet written: the next
chunk (protocol/logchunk.py), built as publishes arrive.

This is the one part of a retained topic that costs per message on the
publish path, so it is plain typed Python that mypyc compiles (setup.py):
an MPUB's bodies are cut from the buffer they arrived in and their ends
counted in one pass, into lists the chunk's arrays are made from at once.
"""

from array import array

from ..protocol import logchunk
from ..protocol.commands import int32_at


class Pending:
    __slots__ = ("ids", "timestamps", "ends", "bodies", "flags")

    def __init__(self) -> None:
        self.flags = 0  # the chunk's (logchunk.DEFERRED: a deferred publish alone)
        self.ids: list[bytes] = []
        self.timestamps: list[int] = []
        self.ends: list[int] = [0]  # running ends of the bodies, from 0
        self.bodies: list[bytes] = []

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def body_bytes(self) -> int:
        return self.ends[-1]

    def add(self, ids: list[bytes], bodies: list[bytes], timestamp: int) -> None:
        ends = self.ends
        total = ends[-1]
        for body in bodies:
            total += len(body)
            ends.append(total)
        self.bodies.extend(bodies)
        self.ids.extend(ids)
        self.timestamps.extend([timestamp] * len(ids))

    def add_mpub(self, payload: bytes, count: int, timestamp: int, ids: list[bytes]) -> None:
        """An MPUB's validated body, ``[count]([size][body])*``."""
        ends = self.ends
        bodies = self.bodies
        total = ends[-1]
        pos = 4
        for _ in range(count):
            start = pos + 4
            pos = start + int32_at(payload, pos)
            bodies.append(payload[start:pos])
            total += pos - start
            ends.append(total)
        self.ids.extend(ids)
        self.timestamps.extend([timestamp] * count)

    def drop_last(self, count: int) -> None:
        """The last ``count`` records go unwritten (their publish was refused)."""
        del self.ids[-count:]
        del self.timestamps[-count:]
        del self.ends[-count:]
        del self.bodies[-count:]

    def chunk(self, first_offset: int) -> bytes:
        return logchunk.encode(first_offset, array("q", self.timestamps), self.ids, array("i", self.ends),
                               self.bodies, self.flags)
