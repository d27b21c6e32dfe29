"""Shadows on disk, for ``--replication-ack=disk``: a peer answers a
``REPL`` batch once the batch is in its log and fsynced, so a publish is
acknowledged once R disks hold it, and a peer that restarts (kill -9, a
power cut) comes back with every copy it acknowledged.

One append-only file per origin and epoch under ``<data-path>/replication``,
named ``<host>_<port>.<epoch>.log``, of ``[uint32 size][REPL payload]``
frames, replayed in order at startup (the shadow's own rules rebuild it).
Every batch that arrives in one event-loop turn shares one fsync, run off
the loop. A log whose shadow has emptied, or grown to many times what it
holds, is rewritten as the records that rebuild the shadow, atomically; a
shadow that ends (taken over, kept by its origin, handed over) takes its
log with it.
"""

import asyncio
import os
import struct

from ...atomicfile import write_atomically

_FRAME = struct.Struct(">I")
REWRITE_BYTES = 64 * 1024 * 1024  # a log is rewritten past this, and past twice its size after the last


def _name(origin: str, epoch: int) -> str:
    """``origin`` is a ``host:port`` (Replicator.receive checks it): no
    separator, no ``..`` to leave the directory."""
    return f"{origin.replace(':', '_')}.{epoch}.log"


def _fsync_all(fds: list[int]) -> None:
    for fd in fds:
        os.fsync(fd)


class ShadowLogs:
    def __init__(self, data_path: str, loop: asyncio.AbstractEventLoop):
        self.directory = os.path.join(data_path, "replication")
        self.loop = loop
        self._files: dict[tuple[str, int], object] = {}
        self._sizes: dict[tuple[str, int], int] = {}
        self._rewritten: dict[tuple[str, int], int] = {}  # a log's size right after its last rewrite
        self._dirty: set[tuple[str, int]] = set()
        self._waiting: list[asyncio.Future] = []
        self._syncing = False
        self._to_close: list = []  # files replaced while an fsync ran

    def load(self) -> list[tuple[str, int, list[bytes]]]:
        """Every log in the directory: (origin, epoch, payloads in order).
        A frame cut short by a crash ends its log (it was never answered)."""
        found = []
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return found
        for name in names:
            stem, dot, suffix = name.rpartition(".")
            origin_part, _, epoch = stem.rpartition(".")
            if suffix != "log" or not dot or not epoch.isdigit():
                continue
            host, _, port = origin_part.rpartition("_")
            payloads = []
            path = os.path.join(self.directory, name)
            with open(path, "rb") as f:
                data = f.read()
            pos = 0
            while pos + _FRAME.size <= len(data):
                (size,) = _FRAME.unpack_from(data, pos)
                if pos + _FRAME.size + size > len(data):
                    break
                payloads.append(data[pos + _FRAME.size:pos + _FRAME.size + size])
                pos += _FRAME.size + size
            if pos < len(data):  # the end of a frame a crash cut: appends go after the last whole one
                os.truncate(path, pos)
            found.append((f"{host}:{port}", int(epoch), payloads))
            self._sizes[(f"{host}:{port}", int(epoch))] = pos
        return found

    def append(self, origin: str, epoch: int, payload: bytes) -> asyncio.Future:
        """-> resolves once ``payload`` is fsynced (with the rest of this turn's)."""
        key = (origin, epoch)
        f = self._files.get(key)
        if f is None:
            os.makedirs(self.directory, exist_ok=True)
            f = self._files[key] = open(os.path.join(self.directory, _name(origin, epoch)), "ab")
        f.write(_FRAME.pack(len(payload)) + payload)
        self._sizes[key] = self._sizes.get(key, 0) + _FRAME.size + len(payload)
        self._dirty.add(key)
        waiter = self.loop.create_future()
        self._waiting.append(waiter)
        if not self._syncing:
            self._syncing = True
            self.loop.create_task(self._sync())
        return waiter

    async def _sync(self) -> None:
        await asyncio.sleep(0)  # the rest of this turn's batches share the fsync
        while self._waiting:
            waiting, self._waiting = self._waiting, []
            files = [self._files[key] for key in self._dirty]
            self._dirty = set()
            try:
                for f in files:
                    f.flush()  # type: ignore[attr-defined]
                await self.loop.run_in_executor(None, _fsync_all, [f.fileno() for f in files])  # type: ignore[attr-defined]
            except OSError as error:
                for waiter in waiting:
                    if not waiter.done():
                        waiter.set_exception(error)
                continue
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_result(None)
        self._syncing = False
        for f in self._to_close:
            f.close()
        self._to_close = []

    def size(self, origin: str, epoch: int) -> int:
        return self._sizes.get((origin, epoch), 0)

    def rewrite_threshold(self, origin: str, epoch: int) -> int:
        """Past this size the log is rewritten."""
        return max(REWRITE_BYTES, 2 * self._rewritten.get((origin, epoch), 0))

    def rewrite(self, origin: str, epoch: int, payload: bytes) -> None:
        """Replace the log with one frame: ``payload`` rebuilds the shadow."""
        key = (origin, epoch)
        self._release(self._files.pop(key, None))
        self._dirty.discard(key)
        os.makedirs(self.directory, exist_ok=True)
        write_atomically(os.path.join(self.directory, _name(origin, epoch)), _FRAME.pack(len(payload)) + payload)
        self._sizes[key] = self._rewritten[key] = _FRAME.size + len(payload)

    def remove(self, origin: str, epoch: int) -> None:
        key = (origin, epoch)
        self._release(self._files.pop(key, None))
        self._sizes.pop(key, None)
        self._rewritten.pop(key, None)
        self._dirty.discard(key)
        try:
            os.remove(os.path.join(self.directory, _name(origin, epoch)))
        except FileNotFoundError:
            pass

    def _release(self, f) -> None:
        """Closed now, or after the fsync that may be running on it."""
        if f is None:
            return
        if self._syncing:
            self._to_close.append(f)
        else:
            f.close()

    def close(self) -> None:
        for f in self._files.values():
            f.close()  # type: ignore[attr-defined]
        self._files.clear()
