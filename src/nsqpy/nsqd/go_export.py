"""``nsqd --export-for-go``: make a data directory that NSQ's own nsqd
loads with nothing lost, then exit.

NSQ's nsqd reads each topic's and channel's go-diskqueue files and
``nsqd.dat``, which nsqpy writes as it does. What it never reads:

* where durable mode (--mem-queue-size=0) keeps deferred messages, a
  channel's ``<topic>:<channel>#deferred`` queue. The export moves every
  deferred message into its channel's ordinary queue, as NSQ's own clean
  shutdown writes its deferred messages into the channel's backend: NSQ
  then delivers them at once, their delay forgotten.
* a retained topic's log (``<topic>.log/``), where a channel that replays
  or lags reads what it has yet to queue, from its cursor on (in durable
  mode every channel: topiclog/cursor.py), and where a topic with no
  channel keeps its backlog (replay.py). The export writes
  those records into the channel's or the topic's queue (a deferred
  publish among them is delivered at once), then removes the cursor or
  the backlog mark.

Each batch is fsynced in its new queue before what it came from lets go of
it, so a crash during the export delivers some twice, never none.

What NSQ's nsqd reads again (at least once, as NSQ always delivers): messages
FINished out of order and the attempts counted since they were written,
which nsqpy keeps in its journals (diskqueue/journal.py) and NSQ does not know.
"""

import logging
import os
from itertools import islice

from ..protocol.logchunk import DEFERRED, CorruptChunk
from . import metadata
from .options import NsqdOptions
from .replay import WINDOW_BYTES, chunk_messages
from .replay_position import CURSOR_SUFFIX, read_cursor
from .retention import LOG_SUFFIX
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
        copied = _export_logs(options, data_path, log)
    finally:
        os.close(lock)
    log.info("EXPORT: %d deferred messages of %d channels moved, %d log records into queues; NSQ's nsqd can "
             "load %s", moved, len(channels), copied, data_path)
    return 0


def _export_logs(options: NsqdOptions, data_path: str, log: logging.Logger) -> int:
    """What each retained topic's log holds for its channels (listed in
    nsqd.dat, as a start makes them) and for its first channel, into their
    queues. -> records written."""
    from ..topiclog import TopicLog
    from ..topiclog.cursor import cursor_files, remove_cursor, saved_position

    copied = 0
    for topic, channels in ((entry[0], {channel[0] for channel in entry[-1]})
                            for entry in metadata.read(data_path, log)):
        directory = os.path.join(data_path, topic + LOG_SUFFIX)
        if not os.path.isdir(directory):
            continue
        topic_log = TopicLog(directory, segment_bytes=options.max_bytes_per_file, sync_every=options.sync_every,
                             logger=log)
        try:
            for channel in sorted(channels):
                replay = os.path.join(directory, channel + CURSOR_SUFFIX)
                if os.path.exists(replay):
                    position: tuple[int, int] | None = read_cursor(replay)
                else:  # durable mode's cursor (topiclog/cursor.py), if the channel has one
                    position = saved_position(directory, channel)
                    if position is None and os.path.exists(cursor_files(directory, channel)[0]):
                        log.error("EXPORT: %s:%s: its cursor file cannot be read; what it had yet to hand "
                                  "out stays in %s only", topic, channel, directory)
                if position is None:
                    continue
                copied += _copy_log(options, data_path, topic_log, f"{topic}:{channel}", *position, log)
                if os.path.exists(replay):
                    os.remove(replay)
                remove_cursor(directory, channel)
            if topic_log.backlog_from is not None:
                copied += _copy_log(options, data_path, topic_log, topic, topic_log.backlog_from, topic_log.latest,
                                    log)
                topic_log.take_backlog()
        finally:
            topic_log.close()
    return copied


def _copy_log(options: NsqdOptions, data_path: str, topic_log, queue_name: str, offset: int, live_from: int,
              log: logging.Logger) -> int:
    """The log's records from ``offset`` to its end into ``queue_name``'s
    queue, but the deferred publishes from ``live_from`` on (the channel
    got those live, in its deferred queue). -> records written."""
    queue = open_disk_queue(options, data_path, queue_name, log)
    copied = 0
    try:
        offset = max(offset, topic_log.earliest)
        while offset < topic_log.latest:
            try:
                chunks, next_offset = topic_log.records(offset, None, WINDOW_BYTES)
            except CorruptChunk as error:
                next_offset = topic_log.segment_end(offset)
                log.error("EXPORT: %s: offsets %d to %d skipped: %s", queue_name, offset, next_offset - 1, error)
                offset = next_offset
                continue
            records = [message.encode() for chunk in chunks
                       if not (chunk.flags & DEFERRED and chunk.first_offset >= live_from)
                       for message in chunk_messages(chunk)]
            if records:
                queue.put_many(records)
                queue.sync()
            copied += len(records)
            offset = next_offset
    finally:
        queue.close()
    if copied:
        log.info("EXPORT: %s: %d log records into its queue", queue_name, copied)
    return copied


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
