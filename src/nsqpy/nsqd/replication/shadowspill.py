"""The bodies of a peer's older copies, on disk: what a peer holds for an
origin costs it memory as the origin's own queues do, up to
``--mem-queue-size`` messages per topic, the rest in files
(shadow.py decides which).

A memory extension, not a record of anything: ``--replication-ack=disk``'s
shadow log is what survives a crash (shadowlog.py). One spill per shadow,
in segment files of SEGMENT_BYTES under ``<data-path>/replication/spill``,
written without fsync; a segment goes once no copy still held has its body
there, and every one when the shadow ends. A start removes what an earlier
run left.
"""

import itertools
import os
import shutil

SEGMENT_BYTES = 64 * 1024 * 1024

_serial = itertools.count(1)  # two shadows of one epoch (one set aside, one new) spill apart


def clear(directory: str) -> None:
    """What a previous run left: its shadows are rebuilt from their logs, or gone."""
    shutil.rmtree(directory, ignore_errors=True)


class Spill:
    def __init__(self, directory: str, origin: str, epoch: int):
        self.directory = directory
        self._stem = f"{origin.replace(':', '_')}.{epoch}.{next(_serial)}"
        self._fds: dict[int, int] = {}  # segment -> its file, open for reading and appending
        self._segment = 0
        self._size = 0  # of the current segment
        self.rolled = False  # a new segment was started: older ones may be let go (keep)

    @property
    def bytes(self) -> int:
        """On disk, in all segments."""
        return sum(os.fstat(fd).st_size for fd in self._fds.values())

    def write(self, bodies: list[bytes]) -> list[tuple[int, int, int]]:
        """``bodies`` appended in one write -> (segment, offset, size) of
        each; raises OSError (a full disk) with nothing of them written."""
        if self._size >= SEGMENT_BYTES:
            self._segment += 1
            self._size = 0
            self.rolled = True
        fd = self._fds.get(self._segment)
        if fd is None:
            os.makedirs(self.directory, exist_ok=True)
            fd = self._fds[self._segment] = os.open(self._path(self._segment),
                                                    os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        data = memoryview(b"".join(bodies))
        written = 0
        try:
            while written < len(data):
                written += os.write(fd, data[written:])
        except OSError:
            os.ftruncate(fd, self._size)
            raise
        places = []
        offset = self._size
        for body in bodies:
            places.append((self._segment, offset, len(body)))
            offset += len(body)
        self._size = offset
        return places

    def read(self, place: tuple[int, int, int]) -> bytes:
        segment, offset, size = place
        return os.pread(self._fds[segment], size, offset)

    def keep(self, segments: set[int]) -> None:
        """Only ``segments`` (and the one being written) hold bodies still owed."""
        self.rolled = False
        for segment in [s for s in self._fds if s not in segments and s != self._segment]:
            self._drop(segment)

    def remove(self) -> None:
        for segment in list(self._fds):
            self._drop(segment)

    def _drop(self, segment: int) -> None:
        os.close(self._fds.pop(segment))
        try:
            os.remove(self._path(segment))
        except FileNotFoundError:
            pass

    def _path(self, segment: int) -> str:
        return os.path.join(self.directory, f"{self._stem}.{segment:06d}.spill")
