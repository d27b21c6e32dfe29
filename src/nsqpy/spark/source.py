"""Reading a topic's channel as a streaming DataFrame: the ``nsq`` source.

A driver-side reader (PySpark's ``SimpleDataSourceStreamReader``): one
consumer in Spark's driver-side reader process receives the messages,
``read(start)`` cuts them into micro-batches as Arrow record batches, and
every message stays in flight at nsqd until its batch has committed.

When to FIN comes from the engine's order of calls (default micro-batch
engine, not asynchronous progress tracking): ``read(end of batch N)`` is
asked only once ``commits/N`` is durable in the checkpoint, so batch N is
FINished there; ``commit(end)`` does the same for anything older, as a
backstop. A driver that dies before that loses nothing: its connections
close and nsqd redelivers (at-least-once).

This is ``reader=driver``, the default: no storage shared with the
executors is needed, and one process reads every message. The other reader,
``reader=executors`` (``partitioned.py``), reads on the tasks.
"""

import logging
import os
from collections import deque

from pyspark.sql.datasource import SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import (BinaryType, IntegerType, StringType, StructField, StructType,
                               TimestampType)

from .backlog import channel_backlog, find_http_addresses, held_elsewhere
from . import drain
from .chunks import count, message_ids, redelivered_ids, to_record_batch
from .fetcher import Fetcher
from .ledger import Batch, Ledger, offset, position
from .options import SourceOptions
from .wal import WriteAheadLog

log = logging.getLogger("nsqpy.spark")

#: Committed batches whose ids a redelivery is checked against (``_copies``)
_COMMITTED_KEPT = 2

_COLUMNS = [("id", StringType()), ("body", BinaryType()), ("timestamp", TimestampType()),
            ("attempts", IntegerType()), ("topic", StringType()), ("nsqd_address", StringType())]


def source_schema(dedup_key: bool) -> StructType:
    """``id`` string, ``body`` binary, ``timestamp`` timestamp, ``attempts`` int,
    ``topic`` string, ``nsqd_address`` string (and ``dedup_key`` string)."""
    columns = _COLUMNS + [("dedup_key", StringType())] if dedup_key else _COLUMNS
    return StructType([StructField(name, kind, nullable=True) for name, kind in columns])


class NSQStreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """Built twice by Spark: in the driver-side reader process, and cloudpickled
    for executors (which only replay through ``readBetweenOffsets``). So
    ``__init__`` keeps options only; the consumer starts on the first read."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self.schema = source_schema(options.dedup_key)
        self._fetcher = None
        self._ledger = Ledger()
        self._wal = WriteAheadLog(options.wal_path) if options.wal_path else None
        # ids of messages in committed batches that could not be FINished (their
        # connection closed, or the driver restarted): their redeliveries are dropped
        self._delivered: set[str] = set()
        self._committed: deque[list[list[bytes]]] = deque(maxlen=_COMMITTED_KEPT)  # the ids of each, by chunk
        self._copies_dropped: set[str] = set()  # since the last _settle (see _copies)
        self._available_now = False
        self._left: int | None = None  # under availableNow: how many more messages to read
        self._draining = False

    # --- Spark's calls -------------------------------------------------------------------

    def initialOffset(self) -> dict:
        return offset(0)

    def prepareForTriggerAvailableNow(self) -> None:
        """Read what the channel holds now: its depth at nsqd and what other
        consumers hold in flight (when nsqd's HTTP address is known), and in
        any case stop once nothing new arrives for ``idle_timeout`` seconds.
        Messages held elsewhere count: given back while the run reads, they
        are part of what it must archive, not a reason to leave as many
        others unread."""
        self._available_now = True
        options = self.options
        addresses = find_http_addresses(options.nsqd_http_addresses, options.lookupd_http_addresses,
                                        options.nsqd_tcp_addresses, options.topic)
        if addresses:
            ready = channel_backlog(addresses, options.topic, options.channel)
            held = held_elsewhere(addresses, options.topic, options.channel, options.config.client_id)
            self._left = ready + held
            log.info("nsq source: available now: %d messages in %s/%s, %d of them in flight to other consumers",
                     self._left, options.topic, options.channel, held)

    def read(self, start: dict):
        begin = position(start)
        again = self._ledger.starting_at(begin)
        if again is not None:
            return iter([again.rows]), offset(again.end)
        if self._fetcher is None:
            self._fetcher = Fetcher(self.options)
            self._recover_log(begin)
        self._settle(begin)
        if self._draining or self._drain_requested():
            return iter([]), start
        chunks = self._take()
        taken = count(chunks)
        if not taken:
            return iter([]), start
        end = begin + taken
        rows = to_record_batch(chunks, self.options.topic, self.schema, self.options.dedup_key)
        if self._wal is not None:
            self._wal.write(begin, end, rows)
        self._ledger.add(Batch(begin, end, chunks, rows))
        if self._left is not None:
            self._left -= taken
        return iter([rows]), offset(end)

    def readBetweenOffsets(self, start: dict, end: dict):
        """Spark replaying a batch after a restart (possibly on an executor):
        exact from the write-ahead log, otherwise empty (nsqd redelivers)."""
        begin, finish = position(start), position(end)
        if begin == finish:
            return iter([])  # a batch of nothing (a fresh, empty channel): nothing to say
        if self._wal is None:
            log.warning("nsq source: batch [%d, %d) replayed empty (no walPath); nsqd redelivers its "
                        "messages in a later batch", begin, finish)
            return iter([])
        rows = self._wal.read_between(begin, finish)
        if rows is None:
            log.warning("nsq source: batch [%d, %d) is not in the write-ahead log at %s; replayed empty",
                        begin, finish, self._wal.path)
            return iter([])
        return iter(rows)

    def commit(self, end: dict) -> None:
        if self._fetcher is not None:
            self._settle(position(end))

    def stop(self) -> None:
        if self._fetcher is not None:
            self._fetcher.close()
            self._fetcher = None

    # --- the bookkeeping ------------------------------------------------------------------

    def _settle(self, committed: int) -> None:
        """FIN every batch that ends at or before ``committed``; forget its log
        entry. A message whose connection closed meanwhile cannot be FINished,
        nor one that timed out at nsqd (its FIN is refused, seen here one
        read later): nsqd delivers it again, and that copy is dropped."""
        released = self._ledger.release_through(committed)
        if released:
            self._committed.append([chunk.ids for chunk in released])
        orphans = self._fetcher.finish(released)
        if orphans:
            self._delivered.update(message_ids(orphans))
            log.warning("nsq source: %d archived messages lost their connection before FIN; their "
                        "redeliveries will be dropped", count(orphans))
        # a copy that nsqd had finished already (see _copies) has its FIN refused: no copy of it comes
        refused = self._fetcher.refused() - self._copies_dropped
        self._copies_dropped = set()
        if refused:
            self._delivered.update(refused)
            log.warning("nsq source: nsqd refused the FINs of %d archived messages (they had timed out); their "
                        "redeliveries will be dropped", len(refused))
        if self._wal is not None:
            self._wal.remove(keep=lambda start, end: end > committed)

    def _recover_log(self, committed: int) -> None:
        """After a restart: batches logged up to ``committed`` reached the sink
        but may never have been FINished, so their redeliveries are dropped;
        batches logged past it never committed, and nsqd redelivers them."""
        if self._wal is None:
            return
        self._delivered = self._wal.ids_through(committed)
        self._wal.remove(keep=lambda start, end: False)
        if self._delivered:
            log.warning("nsq source: %d messages committed before a restart will be dropped if redelivered",
                        len(self._delivered))

    def _take(self) -> list:
        """The next batch's chunks, without copies of what was archived already."""
        options = self.options
        limit = options.max_messages_per_batch
        if self._left is not None:
            limit = min(limit, self._left)
            if limit <= 0:
                return []
        first_wait = options.idle_timeout if self._available_now else options.batch_wait
        while True:
            chunks = self._fetcher.take(limit, first_wait, options.batch_wait)
            copies = self._copies(chunks)
            archived = self._delivered | copies if copies else self._delivered
            if not archived or not chunks:
                return chunks
            chunks, dropped = self._fetcher.drop(chunks, archived)
            if dropped:
                self._delivered.difference_update(dropped)
                self._copies_dropped.update(copies.intersection(dropped))
                if self._left is not None:
                    self._left -= len(dropped)
                    limit = min(limit, self._left)
            if chunks or limit <= 0:
                return chunks

    def _copies(self, chunks) -> set[str]:
        """Ids among ``chunks`` of messages a recent batch committed: a
        message that timed out while its batch was held (its TOUCHes late)
        comes again, and when the copy came on the same connection the
        batch's FIN finished the copy instead of being refused. Looked for
        only among redeliveries (``attempts`` > 1), which are few."""
        again = redelivered_ids(chunks) if self._committed else set()
        if not again:
            return again
        committed = {message_id.decode("ascii") for batch in self._committed for ids in batch for message_id in ids}
        return again & committed

    def _drain_requested(self) -> bool:
        """A graceful stop asked through ``drain_file``: answer what is committed
        (done by now), give back what is not in a batch, close once nsqd has
        confirmed every answer, say how that went, read no more."""
        drain_file = self.options.drain_file
        if not drain_file or not os.path.exists(drain_file):
            return False
        self._draining = True
        stopped = self._fetcher.stop()
        drain.write_report(drain_file, stopped.released, stopped.unconfirmed)
        return True
