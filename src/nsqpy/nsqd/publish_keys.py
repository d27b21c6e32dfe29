"""What a topic remembers of its keyed publishes (protocol/keyed.py).

Each key a topic queued a message for is kept for the topic's window
(``--publish-key-window``, 2m by default, ``publish_key_window`` per topic
over ``/topic/config``): a repeat within it is answered OK and queued
nowhere. The window is counted on the wall clock from the first publish,
since it must hold across restarts; a repeat does not extend it.

Keys are written to ``<data-path>/<topic>.keys``, one line
``<accepted unix ms> <key>`` each, after their messages' own records and
before the answers are sent. In durable mode (``--sync-every=1``) a
keyed publish's key lines are written the moment its messages are, before
their fsync (which nsqd holds back for it: diskqueue/synchold.py), and
fsynced themselves after them, at the end of the loop's turn: a kill -9
finds a message written without its key only within those few
instructions, where a retry of the unanswered publish would be queued
again. Otherwise keys are written at the end of the turn that accepted
them (dirty.py), as a topic log's records are. So a key
that was answered OK is on disk whenever its message is. The file is
rewritten with only the live keys once it holds twice as many lines as
there are.
An ephemeral topic keeps its keys in memory only, as it keeps its messages.

A topic holds at most ``--max-publish-keys`` keys within its window; a
keyed publish of a new key beyond that is refused (E_PUB_FAILED, HTTP 503
``KEYS_FULL``) rather than forgetting a key early: a refused keyed publish
is safe to retry, while a forgotten key lets a repeat through.
"""

import os
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from ..atomicfile import write_atomically
from ..options import duration_in_range
from ..protocol.keyed import key_problem

KEYS_SUFFIX: Final = ".keys"
MAX_WINDOW: Final = 7 * 24 * 3600.0
MAX_KEYS: Final = 1 << 32
_REWRITE_AT_LEAST: Final = 10_000  # lines in the file before it is worth rewriting


class KeysRefused(Exception):
    """A keyed publish this topic cannot take: its window is off, or full."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def parse_key_window(text: str) -> float:
    """A window as given to the flag or over HTTP (Go duration; 0: keys off)."""
    return duration_in_range("publish key window", text, MAX_WINDOW, "168h")


def keys_path(data_path: str, topic_name: str) -> str:
    return os.path.join(data_path, topic_name + KEYS_SUFFIX)


class PublishKeys:
    """One topic's keys within its window, and their file."""

    def __init__(self, name: str, path: str | None, window: Callable[[], float], max_keys: int, sync: bool,
                 clock: Callable[[], float] = time.time):
        self.topic_name = name
        self.name = f"{name}{KEYS_SUFFIX}"  # in nsqd's log lines about its file
        self.path = path  # None: memory only (an ephemeral topic)
        self.window = window  # seconds, read at each use: /topic/config may change it
        self.max_keys = max_keys
        self.sync = sync
        self.clock = clock
        self.on_pending: Callable[["PublishKeys"], None] = lambda keys: None
        self.repeats = 0  # publishes answered OK without queuing, since the start
        self._accepted: OrderedDict[bytes, int] = OrderedDict()  # key -> accepted at (unix ms), oldest first
        self._unwritten: list[bytes] = []
        self._unsynced = False  # written since the last fsync (durable mode)
        self._lines = 0  # in the file
        self._fd = -1  # the file, open for appending once written to
        if path is not None:
            self._load(path)

    def __len__(self) -> int:
        return len(self._accepted)

    def fresh(self, keys: list[bytes]) -> list[int]:
        """The indexes of ``keys`` to queue: each key not remembered, once
        (a key twice in one KMPUB is queued once). Raises ``KeysRefused``."""
        window = self.window()
        if len(keys) == 1 and window > 0:  # a KPUB's repeat needs no expiry first
            at = self._accepted.get(keys[0])
            if at is not None and at > round((self.clock() - window) * 1000):
                self.repeats += 1
                return []
        if window <= 0:
            raise KeysRefused("KEYS_OFF", f"topic {self.topic_name} takes no keyed publishes "
                                          "(its publish key window is 0)")
        self._expire(window)
        accepted = self._accepted
        seen: set[bytes] = set()
        fresh = []
        for index, key in enumerate(keys):
            if key not in accepted and key not in seen:
                seen.add(key)
                fresh.append(index)
        self.repeats += len(keys) - len(fresh)
        if fresh and len(accepted) + len(fresh) > self.max_keys:
            raise KeysRefused("KEYS_FULL", f"topic {self.topic_name} holds {len(accepted)} publish "
                                           f"keys within its window (--max-publish-keys {self.max_keys}); "
                                           "retry once older keys leave it")
        return fresh

    def remember(self, keys: list[bytes]) -> int:
        """``keys`` were queued (``fresh`` said so): kept from now on, and on
        disk before this turn's answers are sent. -> when (unix ms)."""
        now = round(self.clock() * 1000)
        accepted = self._accepted
        for key in keys:
            accepted[key] = now
            accepted.move_to_end(key)  # one whose window ended, still held behind a later one
        if self.path is not None:
            stamp = b"%d " % now
            self._write_later([stamp + key + b"\n" for key in keys])
            if self.sync:  # durable mode: before the messages' held fsync (see above)
                try:
                    self._write()
                except OSError:
                    pass  # they stay waiting: the turn's flush tries again, and a failure there is answered
        return now

    def adopt(self, keys) -> list[tuple[int, bytes]]:
        """A dead node's keys for this topic, taken over with its messages
        (replication/): each one still in the window and not held here is
        kept with the time it was first accepted. -> those kept."""
        horizon = round((self.clock() - self.window()) * 1000)
        accepted = self._accepted
        kept = [(at, key) for at, key in keys if at > horizon and key not in accepted]
        for at, key in kept:
            accepted[key] = at
        if kept and self.path is not None:
            self._write_later([b"%d %s\n" % (at, key) for at, key in kept])
        return kept

    def held(self) -> list[tuple[int, bytes]]:
        """Every key in the window, with when it was accepted (unix ms)."""
        self._expire(self.window())
        return [(at, key) for key, at in self._accepted.items()]

    def _write_later(self, lines: list[bytes]) -> None:
        if not self.waiting:
            self.on_pending(self)
        self._unwritten += lines

    def flush(self) -> None:
        """Write, and in durable mode fsync, the keys remembered in this turn
        (dirty.py). Raises ``OSError``; the keys stay in memory
        and wait for the next."""
        if self.path is None:
            return
        if self._unwritten:
            self._write()
        if self._unsynced:
            os.fsync(self._fd)
            self._unsynced = False

    def _write(self) -> None:
        if self._lines >= _REWRITE_AT_LEAST:
            self._expire(self.window())
            if self._lines >= 2 * len(self._accepted):
                self._rewrite()
                return
        if self._fd < 0:
            assert self.path is not None
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(self._fd, b"".join(self._unwritten))
        self._unsynced = self.sync
        self._lines += len(self._unwritten)
        self._unwritten = []

    @property
    def waiting(self) -> bool:
        """Keys remembered in this turn wait for its end to be written or fsynced."""
        return bool(self._unwritten) or self._unsynced

    def discard(self) -> None:
        """The topic is deleted: nothing more is written (its file is removed by nsqd)."""
        self._accepted.clear()
        self._unwritten = []
        self._unsynced = False
        self._close_file()
        self.path = None

    def close(self) -> None:
        """What waits is written (``flush``), and the file let go."""
        try:
            self.flush()
        finally:
            self._close_file()

    def _close_file(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _rewrite(self) -> None:
        assert self.path is not None  # only a topic with a file rewrites it
        lines = [b"%d %s\n" % (accepted, key) for key, accepted in self._accepted.items()]
        self._close_file()  # the file is replaced: later writes go to the new one
        write_atomically(self.path, b"".join(lines), durable=self.sync)
        self._lines = len(lines)
        self._unwritten = []
        self._unsynced = False

    def _expire(self, window: float) -> None:
        horizon = round((self.clock() - window) * 1000)
        accepted = self._accepted
        while accepted and next(iter(accepted.values())) <= horizon:
            accepted.popitem(last=False)

    def _load(self, path: str) -> None:
        """The keys of the file still in the window. A line cut by a crash
        (no newline) or not of this format is skipped: its publish was never
        answered."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        lines = data.split(b"\n")
        cut = lines.pop()  # after the last newline: empty, or a line cut short
        if cut:  # gone, so that the next line written starts a line of its own
            os.truncate(path, len(data) - len(cut))
        accepted = self._accepted
        for line in lines:
            stamp, _, key = line.partition(b" ")
            if stamp.isdigit() and key_problem(key) is None:
                accepted[key] = int(stamp)
                accepted.move_to_end(key)  # accepted again after its window ended
        self._lines = len(lines)
        self._expire(self.window())
