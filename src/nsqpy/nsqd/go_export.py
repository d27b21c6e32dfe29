"""``nsqd --export-for-go``: make a data directory that NSQ's own nsqd
loads with nothing lost, then exit.

NSQ's nsqd reads each topic's and channel's go-diskqueue files and
``nsqd.dat``, which nsqpy writes as it does. What it never reads is where
durable mode (--mem-queue-size=0) keeps deferred messages: a channel's
``<topic>:<channel>#deferred`` queue. So the export moves every deferred
message into its channel's ordinary queue, as NSQ's own clean shutdown
writes its deferred messages into the channel's backend: NSQ then delivers
them at once, their delay forgotten. Each batch is fsynced in the channel's
queue before it leaves the deferred one, so a crash during the export
delivers some twice, never none.

What NSQ's nsqd reads again (at least once, as NSQ always delivers): messages
FINished out of order and the attempts counted since they were written,
which nsqpy keeps in its journals (diskqueue/journal.py) and NSQ does not know.
"""

import logging
import os
from itertools import islice

from .options import NsqdOptions
from .storage import DEFERRED_SUFFIX, DUE_SIZE, lock_data_path, open_disk_queue

BATCH = 10_000
_META_SUFFIX = DEFERRED_SUFFIX + ".diskqueue.meta.dat"


def export_for_go(options: NsqdOptions, log: logging.Logger) -> int:
    """Move every deferred message into its channel's queue. -> exit status."""
    data_path = options.data_path or os.getcwd()
    lock = lock_data_path(data_path)
    try:
        moved = 0
        channels = sorted(name[:-len(_META_SUFFIX)] for name in os.listdir(data_path) if name.endswith(_META_SUFFIX))
        for channel in channels:
            count = _move_deferred(options, data_path, channel, log)
            if count:
                log.info("EXPORT: %s: %d deferred messages into the channel's queue", channel, count)
            moved += count
    finally:
        os.close(lock)
    log.info("EXPORT: %d deferred messages of %d channels moved; NSQ's nsqd can load %s", moved, len(channels),
             data_path)
    return 0


def _move_deferred(options: NsqdOptions, data_path: str, channel: str, log: logging.Logger) -> int:
    deferred = open_disk_queue(options, data_path, channel, log, deferred=True)
    queue = open_disk_queue(options, data_path, channel, log)
    moved = 0
    try:
        while True:
            taken = list(islice(iter(deferred.get_with_token, None), BATCH))
            if not taken:
                break
            queue.put_many([record[DUE_SIZE:] for record, _ in taken])
            queue.sync()
            for _, token in taken:
                deferred.ack(token)
            deferred.sync()
            moved += len(taken)
        deferred.delete()
    finally:
        queue.close()
        deferred.close()
    return moved
