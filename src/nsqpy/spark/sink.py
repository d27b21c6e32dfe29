"""Writing a DataFrame to a topic: ``df.write.format("nsq")`` and ``writeStream``.

Each Spark task publishes its rows' ``body`` column (binary or string) to
one nsqd, MPUB-batched and pipelined; when that node fails, to the other
addresses given (the client's Producer over many nodes). A publish that no
node accepts fails the task with the reason, so the batch fails and Spark
(or the restarted query) runs it again: delivery is at-least-once, and
``dedup_key`` lets consumers drop the copies a retry makes.
"""

import asyncio
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from ..client.errors import NSQError, ProtocolError
from ..client.producer import Producer
from ..protocol.dedupkey import with_key
from .options import OptionError, SinkOptions

_PIPELINE = 4  # MPUBs awaiting nsqd's answer at once, per task


class PublishError(RuntimeError):
    """nsqd refused or did not answer a publish; the task fails and is retried."""


@dataclass
class Published(WriterCommitMessage):
    partition: int
    messages: int


def check_body_column(schema: StructType) -> None:
    if "body" not in schema.fieldNames():
        raise OptionError(f"the nsq sink publishes a column named body; the DataFrame has {schema.fieldNames()}")
    kind = schema["body"].dataType
    if not isinstance(kind, (BinaryType, StringType)):
        raise OptionError(f"the body column must be binary or string, not {kind.simpleString()}")


def _chunks(bodies, max_messages: int, max_bytes: int):
    """MPUB bodies: at most ``max_messages`` and about ``max_bytes`` each."""
    chunk, size = [], 0
    for body in bodies:
        if chunk and (len(chunk) >= max_messages or size + len(body) > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(body)
        size += len(body) + 4
    if chunk:
        yield chunk


async def publish_all(options: SinkOptions, addresses: list[str], bodies) -> int:
    """Publish every body to the first of ``addresses``, the others taking
    over if it fails; return how many, or raise PublishError."""
    sent = 0
    address = addresses[0] if len(addresses) == 1 else ", ".join(addresses)
    async with Producer(addresses, options.config, sticky=True) as producer:
        pending: set[asyncio.Task] = set()
        try:
            async with asyncio.timeout(options.publish_timeout):
                for chunk in _chunks(bodies, options.mpub_max_messages, options.mpub_max_bytes):
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


async def _mpub(producer: Producer, topic: str, chunk: list[bytes]) -> int:
    await producer.multi_publish(topic, chunk)
    return len(chunk)


class _Publishing:
    """What the batch and the streaming writer share: one task's publish."""

    def __init__(self, options: SinkOptions, schema: StructType):
        check_body_column(schema)
        self.options = options

    def _bodies(self, record_batches, batch_id: int, partition: int):
        index = 0
        for record_batch in record_batches:
            for body in record_batch.column("body").to_pylist():
                if body is None:
                    raise PublishError(f"row {index} of partition {partition} has a null body")
                if isinstance(body, str):
                    body = body.encode("utf-8")
                yield with_key(batch_id, partition, index, body) if self.options.dedup_key else body
                index += 1

    def write(self, iterator) -> Published:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        batch_id = self.options.batch_id
        if context is not None and context.getLocalProperty("streaming.sql.batchId") is not None:
            batch_id = int(context.getLocalProperty("streaming.sql.batchId"))
        addresses = self.options.nsqd_tcp_addresses
        first = partition % len(addresses)  # tasks spread over the nodes; each stays on its own while it is up
        return Published(partition, asyncio.run(publish_all(self.options, addresses[first:] + addresses[:first],
                                                            self._bodies(iterator, batch_id, partition))))


class NSQWriter(_Publishing, DataSourceArrowWriter):
    pass


class NSQStreamWriter(_Publishing, DataSourceStreamArrowWriter):
    def commit(self, messages, batchId: int) -> None:
        """Nothing to do: every task's messages are in nsqd once it succeeded."""

    def abort(self, messages, batchId: int) -> None:
        """Nothing to undo: what was published stays published (at-least-once)."""
