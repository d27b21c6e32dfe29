"""A FIFO of byte records in NSQ's go-diskqueue format, so a data directory
moves between NSQ's nsqd and ours.

Files in ``data_path``:

* ``<name>.diskqueue.<NNNNNN>.dat``: back-to-back ``[int32 BE length][payload]``
  records; a new file is started before a record would push the current one
  past ``max_bytes_per_file``.
* ``<name>.diskqueue.meta.dat``: ``"<depth>\\n<readFileNum>,<readPos>\\n<writeFileNum>,<writePos>\\n"``,
  replaced atomically (temp file, fsync, rename).

The queue does its I/O synchronously; the owner decides when to ``sync()``
(every ``sync_every`` operations here, and on a timer it runs itself).
"""

import logging
import os
import struct

from ..atomicfile import write_atomically

_LENGTH = struct.Struct(">i")

log = logging.getLogger("nsqpy.diskqueue")


class CorruptionSkipped(Exception):
    """Raised inside the queue only; the bad file is renamed and reading goes on."""


class DiskQueue:
    def __init__(
        self,
        name: str,
        data_path: str,
        *,
        max_bytes_per_file: int,
        min_msg_size: int,
        max_msg_size: int,
        sync_every: int,
        logger: logging.Logger | None = None,
    ):
        self.name = name
        self.data_path = data_path
        self.max_bytes_per_file = max_bytes_per_file
        self.min_msg_size = min_msg_size
        self.max_msg_size = max_msg_size
        self.sync_every = max(1, sync_every)
        self.log = logger or log

        self.depth = 0
        self.read_file_num = 0
        self.read_pos = 0
        self.write_file_num = 0
        self.write_pos = 0

        self._writer = None
        self._reader = None
        self._read_file_size = -1  # size of a read file older than the write file
        self._unsynced_ops = 0
        self.unsynced_writes = 0  # records written since the last fsync: lost by a crash
        self._closed = False
        self._load_metadata()

    # --- paths ----------------------------------------------------------

    def file_name(self, number: int) -> str:
        return os.path.join(self.data_path, f"{self.name}.diskqueue.{number:06d}.dat")

    @property
    def metadata_file_name(self) -> str:
        return os.path.join(self.data_path, f"{self.name}.diskqueue.meta.dat")

    # --- public API -------------------------------------------------------

    def __len__(self) -> int:
        return self.depth

    @property
    def needs_sync(self) -> bool:
        return self._unsynced_ops > 0

    def put(self, data: bytes) -> None:
        """Append one record. Raises ``OSError`` when the disk refuses it; the
        queue is left as it was before the call."""
        size = len(data)
        if not self.min_msg_size <= size <= self.max_msg_size:
            raise ValueError(f"invalid record size {size}")
        if self.write_pos > 0 and self.write_pos + 4 + size > self.max_bytes_per_file:
            self._roll_write_file()
        writer = self._writer
        if writer is None:
            writer = self._writer = self._open_append(self.file_name(self.write_file_num))
            writer.seek(self.write_pos)
        try:
            writer.write(_LENGTH.pack(size) + data)
            writer.flush()
        except OSError:
            # leave the file where the last good record ended
            self._close_writer(truncate_to=self.write_pos)
            raise
        self.write_pos += 4 + size
        self.depth += 1
        self.unsynced_writes += 1
        self._count_op()

    def get(self) -> bytes | None:
        """Pop the oldest record, or None when the queue is empty."""
        while self.depth > 0:
            if self.read_file_num == self.write_file_num and self.read_pos >= self.write_pos:
                # everything written has been read: the depth was wrong (a skipped
                # bad file held records), not the data
                self.log.error("diskqueue(%s): depth %d but nothing left to read; corrected to 0",
                               self.name, self.depth)
                self.depth = 0
                break
            try:
                return self._read_one()
            except CorruptionSkipped:
                continue
        return None

    def sync(self) -> None:
        if self._writer is not None:
            self._writer.flush()
            os.fsync(self._writer.fileno())
        self._write_metadata()
        self._unsynced_ops = 0
        self.unsynced_writes = 0

    def empty(self) -> None:
        """Drop every record; files are removed and numbering moves on."""
        self._close_reader()
        self._close_writer()
        for number in range(self.read_file_num, self.write_file_num + 1):
            self._remove(self.file_name(number))
        self.write_file_num += 1
        self.write_pos = 0
        self.read_file_num = self.write_file_num
        self.read_pos = 0
        self.depth = 0
        self.sync()

    def delete(self) -> None:
        self.empty()
        self._remove(self.metadata_file_name)
        self._closed = True

    def close(self) -> None:
        if self._closed:
            return
        self.sync()
        self._close_reader()
        self._close_writer()
        self._closed = True

    # --- internals ----------------------------------------------------------

    def _count_op(self) -> None:
        self._unsynced_ops += 1
        if self._unsynced_ops >= self.sync_every:
            self.sync()

    def _open_append(self, path: str):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        return os.fdopen(fd, "wb")

    def _roll_write_file(self) -> None:
        if self._writer is not None:
            self._writer.flush()
            os.fsync(self._writer.fileno())
        self._close_writer()
        self.write_file_num += 1
        self.write_pos = 0
        self._write_metadata()

    def _close_writer(self, truncate_to: int | None = None) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            if truncate_to is not None:
                writer.truncate(truncate_to)
            writer.close()
        except OSError:
            pass

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _read_one(self) -> bytes:
        reader = self._reader
        if reader is None:
            path = self.file_name(self.read_file_num)
            try:
                reader = open(path, "rb")
            except FileNotFoundError:
                self._skip_file(f"missing {path}")
            reader.seek(self.read_pos)
            self._reader = reader
            self._read_file_size = (
                os.fstat(reader.fileno()).st_size if self.read_file_num < self.write_file_num else -1
            )
        header = reader.read(4)
        if len(header) < 4:
            self._skip_file(f"truncated record header at {self.read_pos}")
        size = _LENGTH.unpack(header)[0]
        if not self.min_msg_size <= size <= self.max_msg_size:
            self._skip_file(f"invalid record size {size} at {self.read_pos}")
        data = reader.read(size)
        if len(data) < size:
            self._skip_file(f"truncated record at {self.read_pos}")
        self.read_pos += 4 + size
        self.depth -= 1
        try:
            if 0 <= self._read_file_size <= self.read_pos:
                self._finish_read_file()
            self._count_op()
        except OSError as error:
            # the record is already taken: hand it out; the next sync records the read
            self.log.error("diskqueue(%s): sync after read failed: %s", self.name, error)
        return data

    def _finish_read_file(self) -> None:
        self._close_reader()
        self._remove(self.file_name(self.read_file_num))
        self.read_file_num += 1
        self.read_pos = 0

    def _skip_file(self, reason: str):
        """Set a bad read file aside as ``.bad`` and go on with the next one."""
        path = self.file_name(self.read_file_num)
        self._close_reader()
        if os.path.exists(path):
            os.replace(path, path + ".bad")
        self.log.error("diskqueue(%s): %s in %s; renamed it .bad and skipped it", self.name, reason, path)
        if self.read_file_num == self.write_file_num:
            self._close_writer()
            self.write_file_num += 1
            self.write_pos = 0
        self.read_file_num += 1
        self.read_pos = 0
        if self.read_file_num == self.write_file_num and self.write_pos == 0:
            self.depth = 0
        raise CorruptionSkipped(reason)

    def _remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def _load_metadata(self) -> None:
        try:
            with open(self.metadata_file_name) as f:
                text = f.read()
        except FileNotFoundError:
            return
        try:
            depth_line, read_line, write_line = text.split("\n")[:3]
            self.depth = int(depth_line)
            self.read_file_num, self.read_pos = map(int, read_line.split(","))
            self.write_file_num, self.write_pos = map(int, write_line.split(","))
        except ValueError:
            self.log.error("diskqueue(%s): unreadable metadata %r; starting empty", self.name, text[:80])
            self.depth = self.read_file_num = self.read_pos = self.write_file_num = self.write_pos = 0
            return
        try:
            size = os.stat(self.file_name(self.write_file_num)).st_size
        except FileNotFoundError:
            size = 0
        if size > self.write_pos:
            # bytes past the last recorded write: never acknowledged, start a fresh file
            self.log.warning(
                "diskqueue(%s): %s is %d bytes, metadata says %d; continuing in a new file",
                self.name, self.file_name(self.write_file_num), size, self.write_pos,
            )
            self.write_file_num += 1
            self.write_pos = 0

    def _write_metadata(self) -> None:
        text = f"{self.depth}\n{self.read_file_num},{self.read_pos}\n{self.write_file_num},{self.write_pos}\n"
        write_atomically(self.metadata_file_name, text.encode())
