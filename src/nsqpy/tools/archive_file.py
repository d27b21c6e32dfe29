"""The file nsq_to_file is writing, with NSQ's names, rotation and moves.

Blocking I/O, driven from one worker thread per topic. The name comes from
``--filename-format`` (``<TOPIC>``, ``<HOST>``, ``<PID>`` filled once;
``<DATETIME>`` at each open; ``<REV>`` as ``-000000``, counting up past
names already taken). ``sync()`` is the only point after which what was
written may be acknowledged: it ends the gzip member (one member per sync,
so a crash leaves every synced member whole) and fsyncs. A write or sync
that fails truncates the file back to its last synced length, so nothing
half-written stays behind. ``close()`` syncs, then moves the file from the
work dir to the output dir by link and unlink: an existing file is never
overwritten, the next free ``<REV>`` is taken instead.
"""

import dataclasses
import os
import socket
import time
import zlib

GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib writes the gzip header and trailer itself


@dataclasses.dataclass(frozen=True)
class FileSettings:
    output_dir: str
    work_dir: str
    datetime_format: str
    gzip: bool = False
    gzip_level: int = 6
    rotate_size: int = 0
    rotate_interval: float = 0.0


def filename_template(filename_format: str, topic: str, host_identifier: str, settings: FileSettings) -> str:
    """Everything but ``<DATETIME>`` and ``<REV>`` filled in; ValueError when
    ``<REV>`` is needed (gzip, rotation, a separate work dir) and missing."""
    hostname = socket.gethostname()
    short_host = hostname.split(".")[0]
    host = short_host
    if host_identifier:
        host = host_identifier.replace("<SHORT_HOST>", short_host).replace("<HOSTNAME>", hostname)
    template = filename_format
    if settings.gzip or settings.rotate_size > 0 or settings.rotate_interval > 0 \
            or settings.work_dir != settings.output_dir:
        if "<REV>" not in template:
            raise ValueError("missing <REV> in --filename-format when gzip, rotation, or work dir enabled")
    else:
        template = template.replace("<REV>", "")
    template = template.replace("<TOPIC>", topic).replace("<HOST>", host).replace("<PID>", str(os.getpid()))
    if settings.gzip and not template.endswith(".gz"):
        template += ".gz"
    return template


def with_rev(name: str, rev: int) -> str:
    return name.replace("<REV>", f"-{rev:06d}")


class ArchiveFile:
    def __init__(self, template: str, settings: FileSettings, log, label: str):
        self.template = template
        self.settings = settings
        self.log = log
        self.label = label  # "[topic/channel]" for log lines
        self.path: str | None = None  # open in the work dir
        self.filename = ""  # the template with <DATETIME> filled, <REV> not
        self.rev = 0
        self.size = 0  # bytes written, uncompressed (what --rotate-size counts)
        self._fd: int | None = None
        self._opened_at = 0.0
        self._synced_length = 0
        self._member = None  # the gzip member being written

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def current_filename(self, now: float) -> str:
        return self.template.replace("<DATETIME>", time.strftime(self.settings.datetime_format, time.localtime(now)))

    def needs_rotation(self, now: float) -> bool:
        settings = self.settings
        if self._fd is None:
            return True
        if self.current_filename(now) != self.filename:
            self.log.info("%s new filename %s, rotating...", self.label, self.current_filename(now))
            return True
        if settings.rotate_interval > 0 and now - self._opened_at > settings.rotate_interval:
            self.log.info("%s %.1fs since last open, rotating...", self.label, now - self._opened_at)
            return True
        if settings.rotate_size > 0 and self.size > settings.rotate_size:
            self.log.info("%s %s currently %d bytes (> %d), rotating...", self.label, self.path, self.size,
                          settings.rotate_size)
            return True
        return False

    def rotate(self, now: float) -> None:
        self.close()
        filename = self.current_filename(now)
        self.rev = 0 if filename != self.filename else self.rev + 1
        self.filename = filename
        self._opened_at = now
        settings = self.settings
        exclusive = settings.gzip or settings.rotate_interval > 0
        flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_APPEND)
        while True:
            relative = with_rev(filename, self.rev)
            path = os.path.join(settings.work_dir, relative)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            if settings.work_dir != settings.output_dir:
                finished = os.path.join(settings.output_dir, relative)
                os.makedirs(os.path.dirname(finished) or ".", exist_ok=True)
                if os.path.exists(finished):
                    self.log.warning("%s output file already exists: %s", self.label, finished)
                    self.rev += 1
                    continue
            try:
                self._fd = os.open(path, flags, 0o666)
            except FileExistsError:
                self.log.warning("%s working file already exists: %s", self.label, path)
                self.rev += 1
                continue
            break
        self.path = path
        self.log.info("%s opening %s", self.label, path)
        self.size = self._synced_length = os.fstat(self._fd).st_size

    def write(self, data: bytes) -> None:
        try:
            if self.settings.gzip:
                if self._member is None:
                    self._member = zlib.compressobj(self.settings.gzip_level, zlib.DEFLATED, GZIP_WBITS)
                self._write_all(self._member.compress(data))
            else:
                self._write_all(data)
        except OSError:
            self._undo()
            raise
        self.size += len(data)

    def sync(self) -> None:
        if self._fd is None:
            return
        try:
            if self._member is not None:
                self._write_all(self._member.flush())
                self._member = None
            os.fsync(self._fd)
        except OSError:
            self._undo()
            raise
        self._synced_length = os.lseek(self._fd, 0, os.SEEK_END)

    def close(self) -> None:
        """Sync, close, and move out of the work dir (a no-op when closed)."""
        if self._fd is None:
            return
        try:
            self.sync()
        finally:
            os.close(self._fd)
            self._fd = None
        self.log.info("%s closed %s", self.label, self.path)
        if self.settings.work_dir != self.settings.output_dir:
            self._move_to_output()

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def _undo(self) -> None:
        """Back to the last synced length: a failed write leaves no torn record
        (nor a torn gzip member) after the last acknowledged one."""
        self._member = None
        try:
            os.ftruncate(self._fd, self._synced_length)
        except OSError:
            pass

    def _move_to_output(self) -> None:
        settings = self.settings
        source = self.path
        for rev in range(self.rev, self.rev + 1_000_000):
            target = os.path.join(settings.output_dir, with_rev(self.filename, rev))
            if rev == self.rev:
                self.log.info("%s moving finished file %s to %s", self.label, source, target)
            try:
                os.link(source, target)
            except FileExistsError:
                self.log.warning("%s destination file already exists: %s", self.label, target)
                continue
            os.unlink(source)
            return
