"""Where nsqd keeps its queues: the data directory's lock and the shape of
every disk queue in it. Shared by the daemon and ``nsqd --export-for-go``,
which must open the same files the same way."""

import errno
import fcntl
import logging
import os
from typing import Final

from ..diskqueue import DiskQueue
from ..errors import StartupError
from ..protocol.message import MESSAGE_HEADER_SIZE
from .options import NsqdOptions

DEFERRED_SUFFIX: Final = "#deferred"  # <topic>:<channel>#deferred: a channel's deferred messages
DUE_SIZE: Final = 8  # the due time (int64 unix ns) before each deferred record


def lock_data_path(path: str) -> int:
    """Exclusive flock on the data directory itself, as NSQ takes it, so two
    daemons (ours or NSQ's) never share one. -> the descriptor holding it."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise StartupError(f"--data-path {path} is a file, not a directory; choose a directory")
    try:
        os.makedirs(path, exist_ok=True)
        fd = os.open(path, os.O_RDONLY)
    except OSError as error:
        raise StartupError(f"--data-path {path}: {error.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(fd)
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise StartupError(
                f"--data-path {path} is in use by another nsqd; stop it or choose another --data-path"
            ) from None
        raise StartupError(f"--data-path {path}: cannot lock: {error.strerror}") from None
    return fd


def open_disk_queue(options: NsqdOptions, data_path: str, name: str, logger: logging.Logger,
                    deferred: bool = False) -> DiskQueue:
    """A topic's or channel's disk queue (``deferred``: a channel's deferred one)."""
    header = MESSAGE_HEADER_SIZE + (DUE_SIZE if deferred else 0)
    return DiskQueue(name + DEFERRED_SUFFIX if deferred else name, data_path,
                     max_bytes_per_file=options.max_bytes_per_file, min_msg_size=header,
                     max_msg_size=options.max_msg_size + header, sync_every=options.sync_every, logger=logger)
