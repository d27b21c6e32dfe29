"""Reading a channel on the executors: the ``nsq`` source with ``reader=executors``.

The driver only plans. For each micro-batch it asks every nsqd how many
messages wait for the channel (``/stats``) and cuts them into partitions,
several per node when one node has much waiting (``plan.py``); Spark's
tasks then read the partitions in parallel, each with its own connections
to its nsqd. So reading grows with the executors and the nodes, where the
driver reader (``source.py``) passes every message through one process.

nsqd cannot replay, so a task FINishes nothing before its rows are durable
where the batch can be read again: it receives its share, writes the rows
to the partition log (``wal.PartitionLog``, under ``walPath``), then
FINishes them and waits until nsqd confirms (CLS, CLOSE_WAIT). A task that
finds its partition's file (Spark retried it, or runs the batch again after
a restart from the checkpoint) returns those rows and does not touch nsqd;
one that finds none reads nsqd, since nothing of it was FINished. The log
of a batch is deleted once the batch commits (Spark's default micro-batch
engine: asynchronous progress tracking commits out of that order).

The guarantee, with Spark's default micro-batch engine and an idempotent
sink (the file sink; ``foreachBatch`` keyed by batch id): every message is
archived exactly once through task retries, executor and driver kills,
``query.stop()``, Ctrl-C and nsqd restarts. When nsqd does not confirm a
partition's FINs (its connection drops, or its task dies, after the log
write; or it refuses them, the messages having timed out first), nsqd
delivers those messages again, and later partitions drop the
redeliveries: the log names them (unconfirmed, then in ``watch/`` for
``wal.WATCH_SECONDS`` once the batch commits). So a copy appears only when a
redelivery comes later than that or the log is lost, or when a connection
drops between a partition's receiving a message and logging it and another
partition archives the redelivery before that log is written. A copy has
the same ``id`` (the dedup column) and a higher ``attempts``.

``walPath`` must be storage every executor sees (a shared mount, HDFS,
S3); ``start_archive`` puts it under the checkpoint. Speculative execution
(``spark.speculation``, off by default) must stay off: two live attempts of
one partition would both read nsqd.
"""

import dataclasses
import gc
import logging
import time

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from ..client import NSQError
from . import drain
from .chunks import count, to_record_batch
from .backlog import find_nodes, held_elsewhere, node_backlog
from .fetcher import Fetcher
from .options import SourceOptions
from .plan import batch_number, initial_offset, next_offset, plan_batch
from .source import source_schema
from .wal import PartitionLog

log = logging.getLogger("nsqpy.spark")


def _spare_the_worker_full_collections() -> None:
    """PySpark's reused Python worker runs a full ``gc.collect()`` after every
    task, whose cost grows with every object the process holds: the modules
    of PySpark, PyArrow, pandas and the client, about 60 ms a task here.
    Freezing what exists at a task's start (modules and the worker's own
    state, which live as long as the process) leaves the collection only
    what tasks make. Once per process: later tasks find the flag set."""
    global _FROZEN
    if not _FROZEN:
        gc.freeze()
        _FROZEN = True


_FROZEN = False


@dataclasses.dataclass(frozen=True)
class NSQPartition(InputPartition):
    """What one task reads: up to ``max_messages`` from one nsqd, logged as (``batch``, ``index``)."""
    batch: int
    index: int
    nsqd_tcp_address: str
    max_messages: int


class NSQPartitionedReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Built in the driver's reader process and cloudpickled to the tasks,
    which only call ``read(partition)``: it holds options and plain state."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self.schema = source_schema(options.dedup_key)
        self._left: dict[str, int] | None = None  # under availableNow: what each node may still give
        self._uncounted: set[int] = set()  # batches this run planned whose reads are not yet counted

    # --- the driver: planning and committing ---------------------------------------------

    def initialOffset(self) -> dict:
        return initial_offset()

    def prepareForTriggerAvailableNow(self) -> None:
        """Read what waits now: each node's depth when the query starts, and
        what other consumers hold in flight there, which a batch reads once
        it is given back (the driver reader's ``prepareForTriggerAvailableNow``)."""
        self._left = self._backlogs(held_too=True)
        log.info("nsq source: available now: %d messages in %s/%s", sum(self._left.values()),
                 self.options.topic, self.options.channel)

    def latestOffset(self, start: dict, limit) -> dict:
        """The next batch's plan from what waits at each node (the read limit
        is ``max_messages_per_batch``, as for the driver reader). Asked only
        once the batch ending at ``start`` has committed, so its log goes
        here: ``commit()`` is not called for the last batch of a run."""
        self._count_reads(start)
        self._settle(batch_number(start))
        if self._drain_requested():
            return start
        backlogs = self._backlogs()
        if self._left is not None:
            backlogs = {address: min(waiting, self._left.get(address, 0)) for address, waiting in backlogs.items()}
        plan = plan_batch(backlogs, self.options.max_messages_per_batch, self.options.max_messages_per_partition)
        if self._left is not None:
            for address, planned in plan:
                self._left[address] -= planned
        end = next_offset(start, plan)
        if end is not start:
            self._uncounted.add(batch_number(end))
        return end

    def partitions(self, start: dict, end: dict):
        if batch_number(end) == batch_number(start):
            return []
        return [NSQPartition(batch_number(end), index, address, count)
                for index, (address, count) in enumerate(end["plan"])]

    def commit(self, end: dict) -> None:
        self._count_reads(end)
        self._settle(batch_number(end))

    def _count_reads(self, end: dict) -> None:
        """Under availableNow, what a partition of a committed batch did not
        receive goes back to what its node may still give, for a later
        batch: a task that got nothing within ``idle_timeout`` (a machine
        busy enough, or another consumer holding the messages that long)
        would otherwise end the run with its share unread. Counted once,
        from the partitions' logs, before they are settled away. A batch
        that received nothing at all gives nothing back (a paused channel
        would plan the same batch for ever), so every batch that does
        brings the run closer to its end."""
        batch = batch_number(end)
        if self._left is None or batch not in self._uncounted:
            return
        self._uncounted.discard(batch)
        logged = PartitionLog(self.options.wal_path).rows_logged(batch)
        if not any(logged.values()):
            return
        for index, (address, planned) in enumerate(end["plan"]):
            unread = planned - logged.get(index, 0)
            if unread > 0:
                self._left[address] = self._left.get(address, 0) + unread
                log.info("nsq source: batch %d partition %d received %d of %d; a later batch reads the rest",
                         batch, index, planned - unread, planned)

    def _settle(self, committed: int) -> None:
        watched = PartitionLog(self.options.wal_path).settle(committed, time.time())
        if watched:
            log.warning("nsq source: nsqd did not confirm the FINs of %d archived messages; their "
                        "redeliveries will be dropped", watched)

    def _backlogs(self, held_too: bool = False) -> dict[str, int]:
        """Messages waiting at each node (``held_too``: and those in flight to
        other consumers); a node whose HTTP API does not answer (or is
        unknown) gives nothing this batch."""
        options = self.options
        backlogs = {}
        for node in find_nodes(options.nsqd_tcp_addresses, options.nsqd_http_addresses,
                               options.lookupd_http_addresses, options.topic):
            count = node_backlog(node.http_address, options.topic, options.channel) if node.http_address else None
            if count is not None and held_too:
                count += held_elsewhere([node.http_address], options.topic, options.channel,
                                        options.config.client_id)
            if count is None:
                log.warning("nsq source: cannot ask nsqd %s how much waits (HTTP address %s); not read this "
                            "batch", node.tcp_address, node.http_address or "unknown")
            backlogs[node.tcp_address] = count or 0
        return backlogs

    def _drain_requested(self) -> bool:
        """A graceful stop: nothing is held between batches (each task
        answered its own messages, and what nsqd did not confirm is in the
        log, whose redeliveries are dropped)."""
        return drain.stop_reading(self.options.drain_file)

    # --- a task: reading one partition ---------------------------------------------------

    def read(self, partition: NSQPartition):
        _spare_the_worker_full_collections()
        partition_log = PartitionLog(self.options.wal_path)
        logged = partition_log.read(partition.batch, partition.index)
        if logged is not None:
            log.info("nsq source: batch %d partition %d replayed from the log", partition.batch, partition.index)
            return iter(logged)
        rows = self._receive(partition, partition_log)
        return iter([rows] if rows is not None else [])

    def _receive(self, partition: NSQPartition, partition_log: PartitionLog):
        """Receive, log, then FIN and wait for nsqd's confirmation. An nsqd
        that cannot be reached gives nothing (and loses nothing)."""
        options = self.options
        try:
            fetcher = Fetcher(dataclasses.replace(
                options, nsqd_tcp_addresses=(partition.nsqd_tcp_address,), lookupd_http_addresses=(),
                config=dataclasses.replace(options.config, max_in_flight=partition.max_messages)))
        except NSQError as error:  # gone since the plan: its messages wait there for a later batch
            log.warning("nsq source: batch %d partition %d reads nothing: %s", partition.batch, partition.index,
                        error)
            return None
        try:
            chunks = self._take(fetcher, partition.max_messages)
            fetcher.pause()
            chunks = self._drop_redeliveries(chunks, fetcher, partition_log)
            rows = None
            if chunks:
                rows = to_record_batch(chunks, options.topic, self.schema, options.dedup_key)
                partition_log.write(partition.batch, partition.index, rows)
            orphans = fetcher.finish(chunks)
            stopped = fetcher.stop()
            if chunks and not orphans and not stopped.unconfirmed:
                partition_log.confirm(partition.batch, partition.index)
            return rows
        finally:
            fetcher.close()

    def _take(self, fetcher: Fetcher, wanted: int) -> list:
        """The partition's share: a take ends early when every connection is
        full while the last arrivals are still being handed over, so take
        again until the share is in or nothing more comes for ``batch_wait``."""
        options = self.options
        chunks = fetcher.take(wanted, options.idle_timeout, options.batch_wait)
        taken = count(chunks)
        while chunks and taken < wanted:
            more = fetcher.take(wanted - taken, options.batch_wait, options.batch_wait)
            if not more:
                break
            chunks += more
            taken += count(more)
        return chunks

    @staticmethod
    def _drop_redeliveries(chunks, fetcher: Fetcher, partition_log: PartitionLog) -> list:
        """FIN, unarchived, the messages an unconfirmed partition archived already."""
        if not chunks:
            return chunks
        archived = partition_log.unconfirmed_ids()
        if not archived:
            return chunks
        chunks, dropped = fetcher.drop(chunks, archived)
        if dropped:
            log.warning("nsq source: dropped %d redeliveries of archived messages", len(dropped))
        return chunks
