"""Reading a retained topic by offset: the ``nsq`` source's log reader
(``reader=log``, chosen by itself when the topic is retained on every nsqd
it is read from), streaming and batch, as Spark reads Kafka.

A retained topic's nsqd keeps every message in a log addressed by offsets
(nsqd's ``/topic/offsets`` and ``/topic/read``). So the driver only plans:
a micro-batch is, per nsqd node, an offset range from where the last batch
ended to where the log ends now (capped by ``maxOffsetsPerTrigger``, or by
``max_messages_per_batch`` when only that is given), cut
into partitions of about ``max_messages_per_partition``; Spark's tasks read
their ranges over HTTP (``logread.py``). Offsets live in Spark's
checkpoint, as ``{"offsets": {"<nsqd tcp address>": offset, ...},
"skipped": n}``. No channel, no FIN, no write-ahead log: a retried task, or a
batch run again after a restart, reads the same range again. So with an
exactly-once sink (the file sink; ``foreachBatch`` keyed by batch id) every
message is written exactly once, by construction.

A node found later (through nsqlookupd) joins at its earliest offset, read
from the next batch on; a node gone keeps its offset in the checkpoint and
is read again from there when it comes back. Offsets removed by retention
before they were read fail the query (``failOnDataLoss``, the default), in
one line naming node, topic and range, or are skipped and counted in the
offsets' ``skipped``, which the query's progress shows.
"""

import dataclasses
import json
import logging
import math

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from . import drain
from .backlog import Node, find_nodes
from .logread import LogGone, NotRetained, RangeReader, log_schema, offsets
from .options import LogPoint, OptionError, SourceOptions

log = logging.getLogger("nsqpy.spark")

EARLIEST, LATEST = -2, -1  # in startingOffsets and endingOffsets JSON, as Kafka's source writes them


@dataclasses.dataclass(frozen=True)
class LogPartition(InputPartition):
    """Offsets [``start``, ``end``) of the topic's log on one nsqd."""
    node: str  # its TCP address: the offsets' key
    http_address: str
    start: int
    end: int


def nodes_of(options: SourceOptions) -> list[Node]:
    return find_nodes(options.nsqd_tcp_addresses, options.nsqd_http_addresses, options.lookupd_http_addresses,
                      options.topic)


def not_retained_on(options: SourceOptions) -> str | None:
    """Why the topic cannot be read by offset (a node that keeps no log for
    it, or whose HTTP API cannot be found), or None when every node does."""
    nodes = nodes_of(options)
    if not nodes:
        return f"no nsqd has topic {options.topic} yet"
    for node in nodes:
        if node.http_address is None:
            return f"the HTTP API of nsqd {node.tcp_address} cannot be found (give nsqd_http_addresses)"
        try:
            offsets(node.http_address, options.topic)
        except NotRetained:
            return (f"topic {options.topic} is not retained on nsqd {node.tcp_address}: POST "
                    f"/topic/config?topic={options.topic}&retention=24h on each nsqd (or start nsqd with --retention)")
        except OSError as error:
            return f"nsqd {node.tcp_address} does not answer ({error})"
    return None


def choose_reader(options: SourceOptions) -> str:
    """The reader asked for; without one, the log reader when the topic is
    retained on every nsqd, else the driver reader. ``reader=log`` on a
    topic that is not retained everywhere is an ``OptionError``, and so are
    the log reader's options given to a channel reader, which would ignore
    them."""
    if options.reader in ("driver", "executors"):
        refuse_log_options(options, f"reader={options.reader} reads the topic through a channel")
        return options.reader
    reason = not_retained_on(options)
    if reason is None:
        return "log"
    if options.reader == "log":
        raise OptionError(f"option reader=log: {reason}")
    refuse_log_options(options, reason)
    return "driver"


def refuse_log_options(options: SourceOptions, reason: str) -> None:
    """A start or an end asked of a topic read through a channel would be
    ignored (a channel hands over what it holds): ``OptionError`` naming
    them and ``reason``, why the topic is not read by offset."""
    if options.log.given:
        names = ", ".join(options.log.given)
        raise OptionError(f"option {names} needs a retained topic, read by offset (docs/retention.md), and "
                          f"{reason}; a plain topic is read through a channel, from what it holds: leave {names} "
                          f"out{'' if options.channel else ' and give a channel'}")


def refuse_stream_ends(options: SourceOptions) -> None:
    """``endingOffsets`` and ``endingTimestamp`` bound batch reads; a
    stream given them would read on past them: ``OptionError``."""
    ending = [name for name in options.log.given if name.startswith("ending")]
    if ending:
        raise OptionError(f"option {', '.join(ending)}: a stream has no end, it reads on as each log grows: "
                          f"give {'them' if len(ending) > 1 else 'it'} to a batch read (spark.read), or stop a "
                          f"stream where the logs end as it starts with trigger(availableNow=True)")


class LogPlanner:
    """The driver's view of every node's log: where ranges start and end."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self.http: dict[str, str] = {}  # node -> its HTTP address, as last found

    def extents(self) -> dict[str, dict]:
        """Each reachable node's log extent; a node that does not answer (or
        keeps no log now) is left out of this batch, with a warning."""
        found = {}
        for node in nodes_of(self.options):
            if node.http_address is None:
                continue
            try:
                found[node.tcp_address] = offsets(node.http_address, self.options.topic)
            except (NotRetained, OSError) as error:
                log.warning("nsq log reader: nsqd %s is not read this batch: %s", node.tcp_address, error)
                continue
            self.http[node.tcp_address] = node.http_address
        return found

    def points(self, extents: dict[str, dict], point: LogPoint, default: str) -> dict[str, int]:
        """Each node's offset for ``<edge>Offsets`` (``default`` when not
        given) or ``<edge>Timestamp`` (Unix ms, over the offsets). JSON
        naming a node that is not read is an ``OptionError``: its offset
        would start or end nothing."""
        if point.timestamp is not None:
            return {node: self._offset_at(node, point) for node in extents}
        text = point.offsets or default
        given = {} if text in ("earliest", "latest") else json.loads(text)
        absent = sorted(set(given) - set(extents))
        if absent:
            raise OptionError(f"option {point.edge}Offsets names nsqd {', '.join(absent)}, which keeps no log of "
                              f"topic {self.options.topic} read here (the nsqd read, by TCP address: "
                              f"{', '.join(sorted(extents)) or 'none'})")
        chosen = {}
        for node, extent in extents.items():
            value = given.get(node, EARLIEST if text == "earliest" else LATEST)
            chosen[node] = {EARLIEST: extent["earliest_offset"], LATEST: extent["latest_offset"]}.get(value, value)
        return chosen

    def _offset_at(self, node: str, point: LogPoint) -> int:
        """The node's first offset at or after the point's time (its log's
        end for a time no record has reached, the future included)."""
        try:
            return offsets(self.http[node], self.options.topic, point.timestamp)["offset_at_time"]
        except NotRetained as error:
            raise OptionError(f"option {point.edge}Timestamp={point.timestamp}: nsqd {node} refused it: "
                              f"{error}") from None

    def http_address(self, node: str) -> str:
        if node not in self.http:
            self.extents()
        if node not in self.http:
            raise OSError(f"nsq log reader: nsqd {node} cannot be found (nsqlookupd no longer lists it)")
        return self.http[node]

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[LogPartition]:
        """Every node's range [start, end), cut into partitions of about
        ``max_messages_per_partition`` (more when ``minPartitions`` asks)."""
        ranges = [(node, start.get(node, stop), stop) for node, stop in sorted(end.items())]
        ranges = [(node, first, stop) for node, first, stop in ranges if stop > first]
        total = sum(stop - first for _, first, stop in ranges)
        per_partition = self.options.max_messages_per_partition
        minimum = self.options.log.min_partitions
        found = []
        for node, first, stop in ranges:
            size = stop - first
            pieces = max(math.ceil(size / per_partition), math.ceil(minimum * size / total) if minimum else 1)
            pieces = min(pieces, size)
            bounds = [first + size * piece // pieces for piece in range(pieces + 1)]
            http_address = self.http_address(node)
            found += [LogPartition(node, http_address, low, high) for low, high in zip(bounds, bounds[1:])]
        return found


def read_partition(options: SourceOptions, partition: InputPartition):
    """A task's range as record batches. PySpark hands a batch read that
    planned no partition one plain ``InputPartition``: nothing to read."""
    if not isinstance(partition, LogPartition):
        return iter([])
    reader = RangeReader(partition.http_address, partition.node, options.topic, log_schema(options.dedup_key),
                         dedup_key=options.dedup_key, fail_on_data_loss=options.log.fail_on_data_loss,
                         wait=options.log.read_timeout, auth_secret=options.config.auth_secret)
    return reader.batches(partition.start, partition.end)


class NSQLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Built in the driver's reader process and cloudpickled to the tasks,
    which only call ``read(partition)``. An end given to a stream is
    refused here, failing the query as it starts: ``load()`` asks only for
    the schema, the same for a stream and a batch read."""

    def __init__(self, options: SourceOptions):
        refuse_stream_ends(options)
        self.options = options
        self.planner = LogPlanner(options)
        self._target: dict[str, int] | None = None  # under availableNow: where each node's log ended at the start
        self._latest: dict[str, int] = {}

    def initialOffset(self) -> dict:
        return {"offsets": self.planner.points(self.planner.extents(), self.options.log.starting, "latest"),
                "skipped": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {node: extent["latest_offset"] for node, extent in self.planner.extents().items()}
        log.info("nsq log reader: available now: up to offsets %s of %s", self._target, self.options.topic)

    def latestOffset(self, start: dict, limit) -> dict:
        if drain.stop_reading(self.options.drain_file):  # a graceful stop: nothing is held, nothing more read
            return start
        extents = self.planner.extents()
        positions = dict(start["offsets"])
        skipped = start.get("skipped", 0)
        ends = dict(positions)
        for node, extent in extents.items():
            if node not in positions:  # a node found since: read from its earliest, from the next batch on
                ends[node] = extent["earliest_offset"]
                continue
            position, earliest = positions[node], extent["earliest_offset"]
            if position < earliest:  # counted once: the cap below starts from the earliest
                skipped += self._lost(node, position, earliest)
                positions[node] = position = earliest
            stop = extent["latest_offset"]
            if stop < position:  # offsets the query read exist no more (a log deleted, or cut after a crash)
                raise LogGone(f"nsqd {node} now ends topic {self.options.topic}'s log at offset {stop}, before "
                              f"offset {position} the query has read to: its log was deleted or cut; start a new "
                              f"checkpoint to read it again")
            if self._target is not None:
                stop = min(stop, self._target.get(node, position))
            ends[node] = max(stop, position)
        self._latest = {node: extent["latest_offset"] for node, extent in extents.items()}
        return {"offsets": self._capped(positions, ends), "skipped": skipped}

    def _lost(self, node: str, position: int, earliest: int) -> int:
        message = (f"offsets {position}-{earliest - 1} of topic {self.options.topic} on nsqd {node} were removed "
                   f"by retention before they were read")
        if self.options.log.fail_on_data_loss:
            raise LogGone(f"{message} (failOnDataLoss=true; set it false to skip them)")
        log.warning("nsq log reader: skipping %s", message)
        return earliest - position

    def _capped(self, positions: dict[str, int], ends: dict[str, int]) -> dict[str, int]:
        """At most ``maxOffsetsPerTrigger`` in all, shared by the nodes in
        proportion to what each has waiting (each that has some gets one)."""
        cap = self.options.log.max_offsets_per_trigger
        waiting = {node: ends[node] - positions[node] for node in positions if node in ends}
        total = sum(waiting.values())
        if not cap or total <= cap:
            return ends
        capped = dict(ends)
        for node, count in waiting.items():
            if count > 0:
                capped[node] = positions[node] + max(1, cap * count // total)
        return capped

    def partitions(self, start: dict, end: dict):
        return self.planner.partitions(start["offsets"], end["offsets"])

    def read(self, partition: LogPartition):
        return read_partition(self.options, partition)

    def commit(self, end: dict) -> None:
        pass  # nothing is held between batches: the next one starts where this one ended

    def reportLatestOffset(self):
        return {"offsets": self._latest} if self._latest else None


class NSQLogBatchReader(DataSourceReader):
    """``spark.read.format("nsq")``: the records between ``startingOffsets``
    (or ``startingTimestamp``) and ``endingOffsets`` (or
    ``endingTimestamp``) as a plain DataFrame."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self.planner = LogPlanner(options)

    def partitions(self):
        extents = self.planner.extents()
        start = self.planner.points(extents, self.options.log.starting, "earliest")
        end = self.planner.points(extents, self.options.log.ending, "latest")
        for node, position in start.items():
            earliest = extents[node]["earliest_offset"]
            if position < earliest and end[node] > position and self.options.log.fail_on_data_loss:
                raise LogGone(f"offsets {position}-{earliest - 1} of topic {self.options.topic} on nsqd {node} "
                              f"were removed by retention (failOnDataLoss=true; set it false to skip them)")
        return self.planner.partitions(start, end)

    def read(self, partition: LogPartition):
        return read_partition(self.options, partition)
