"""Replace a small file so that a crash leaves either the old or the new one."""

import os
import random


def write_atomically(path: str, data: bytes, durable: bool = True) -> None:
    """Write to ``<path>.<random>.tmp`` (mode 0600), fsync, rename over ``path``,
    then fsync the directory so the rename itself is durable. Without
    ``durable``, no fsync: a crash of the process still leaves one whole
    file or the other, a power loss may leave neither."""
    tmp = f"{path}.{random.getrandbits(31)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if not durable:
        return
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
