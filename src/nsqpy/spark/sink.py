"""Writing a DataFrame to a topic: ``df.write.format("nsq")`` and ``writeStream``.

Each Spark task publishes its rows' ``body`` column (binary or string) to
one nsqd, MPUB-batched and pipelined; when that node fails, to the other
addresses given (the client's Producer over many nodes). A publish that no
node accepts fails the task with the reason, so the batch fails and Spark
(or the restarted query) runs it again: delivery is at-least-once, and
``dedup_key`` lets consumers drop the copies a retry makes.

With ``publish_keys`` (or ``key_column``) every row is a keyed publish
(protocol/keyed.py) and nsqd itself drops what a retry sends again, within
its window: exactly once. A derived key is ``<prefix>:<batch>:<partition>:<row>``,
the prefix being the streaming query's id (kept in its checkpoint) or the
``key_prefix`` a batch write is given; it names the same row only if the
task run again sees the same rows in the same order (a deterministic
input, such as the nsq source's log reader by offsets, or files; not the
channel readers). ``key_column`` takes each row's key from a column instead.
"""

import asyncio
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from ..client.errors import NSQError, ProtocolError
from ..client.producer import Producer
from ..protocol.dedupkey import with_key
from ..protocol.keyed import key_problem
from .options import OptionError, SinkOptions

_PIPELINE = 4  # MPUBs awaiting nsqd's answer at once, per task


class PublishError(RuntimeError):
    """nsqd refused or did not answer a publish; the task fails and is retried."""


@dataclass
class Published(WriterCommitMessage):
    partition: int
    messages: int


def check_columns(schema: StructType, options: SinkOptions) -> None:
    for column in ("body", options.key_column) if options.key_column else ("body",):
        if column not in schema.fieldNames():
            raise OptionError(f"the nsq sink publishes a column named {column}; the DataFrame has "
                              f"{schema.fieldNames()}")
        kind = schema[column].dataType
        if not isinstance(kind, (BinaryType, StringType)):
            raise OptionError(f"the {column} column must be binary or string, not {kind.simpleString()}")


def _chunks(rows, max_messages: int, max_bytes: int):
    """MPUB batches of ``(body, key)`` rows: at most ``max_messages`` and about ``max_bytes`` each."""
    chunk, size = [], 0
    for row in rows:
        if chunk and (len(chunk) >= max_messages or size + len(row[0]) > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(row)
        size += len(row[0]) + 4
    if chunk:
        yield chunk


async def publish_all(options: SinkOptions, addresses: list[str], rows) -> int:
    """Publish every ``(body, key)`` row (key None: not keyed) to the first
    of ``addresses``, the others taking over if it fails; return how many,
    or raise PublishError."""
    sent = 0
    address = addresses[0] if len(addresses) == 1 else ", ".join(addresses)
    async with Producer(addresses, options.config, sticky=True) as producer:
        pending: set[asyncio.Task] = set()
        try:
            async with asyncio.timeout(options.publish_timeout):
                for chunk in _chunks(rows, options.mpub_max_messages, options.mpub_max_bytes):
                    if len(pending) >= _PIPELINE:
                        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                        sent += sum(task.result() for task in done)
                    pending.add(asyncio.create_task(_mpub(producer, options.topic, chunk)))
                for task in pending:
                    sent += await task
        except (NSQError, ProtocolError, OSError, TimeoutError) as error:
            for task in pending:
                task.cancel()
            reason = str(error) or f"no answer in {options.publish_timeout}s"
            raise PublishError(f"publishing to topic {options.topic!r} at nsqd {address} failed after "
                               f"{sent} messages: {reason}") from None
    return sent


async def _mpub(producer: Producer, topic: str, chunk: list[tuple[bytes, bytes | None]]) -> int:
    keys = [key for _, key in chunk]
    await producer.multi_publish(topic, [body for body, _ in chunk], keys=None if keys[0] is None else keys)
    return len(chunk)


def _as_bytes(value, what: str) -> bytes:
    if value is None:
        raise PublishError(f"{what} is null")
    return value.encode("utf-8") if isinstance(value, str) else value


class _Publishing:
    """What the batch and the streaming writer share: one task's publish."""

    def __init__(self, options: SinkOptions, schema: StructType):
        check_columns(schema, options)
        self.options = options

    def _rows(self, record_batches, prefix: str, batch_id: int, partition: int):
        """``(body, key)`` per row; the key None when the write is not keyed."""
        options = self.options
        derived = options.publish_keys and not options.key_column
        index = 0
        for record_batch in record_batches:
            bodies = record_batch.column("body").to_pylist()
            keys = record_batch.column(options.key_column).to_pylist() if options.key_column else None
            for position, body in enumerate(bodies):
                body = _as_bytes(body, f"row {index} of partition {partition}'s body")
                key = None
                if keys is not None:
                    key = _as_bytes(keys[position], f"row {index} of partition {partition}'s key")
                elif derived:
                    key = b"%s:%d:%d:%d" % (prefix.encode("ascii"), batch_id, partition, index)
                if key is not None and key_problem(key) is not None:
                    raise PublishError(f"row {index} of partition {partition}: publish key {key!r} "
                                       f"{key_problem(key)}")
                yield (with_key(batch_id, partition, index, body) if options.dedup_key else body), key
                index += 1

    def write(self, iterator) -> Published:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        batch_id = self.options.batch_id
        prefix = self.options.key_prefix
        if context is not None and context.getLocalProperty("streaming.sql.batchId") is not None:
            batch_id = int(context.getLocalProperty("streaming.sql.batchId"))
            prefix = prefix or context.getLocalProperty("sql.streaming.queryId") or ""
        addresses = self.options.nsqd_tcp_addresses
        first = partition % len(addresses)  # tasks spread over the nodes; each stays on its own while it is up
        return Published(partition, asyncio.run(publish_all(self.options, addresses[first:] + addresses[:first],
                                                            self._rows(iterator, prefix, batch_id, partition))))


class NSQWriter(_Publishing, DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType):
        super().__init__(options, schema)
        if options.publish_keys and not options.key_column and not options.key_prefix:
            raise OptionError("publish_keys on a batch write needs key_prefix (the same when the write is run "
                              "again), or key_column")


class NSQStreamWriter(_Publishing, DataSourceStreamArrowWriter):
    def commit(self, messages, batchId: int) -> None:
        """Nothing to do: every task's messages are in nsqd once it succeeded."""

    def abort(self, messages, batchId: int) -> None:
        """Nothing to undo: what was published stays published (with keys,
        the batch run again publishes the same keys, and nsqd drops them)."""
