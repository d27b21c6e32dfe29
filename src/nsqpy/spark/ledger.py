"""Which messages belong to which micro-batch, and when each may be FINished.

The source's offsets count messages: a batch is the half-open range
``[start, end)`` of that count, and an offset is ``{"messages": n}`` (one key,
so Spark's comparison of offsets as JSON strings is stable). A batch's
messages stay in flight at nsqd until Spark says the batch is committed;
then, and only then, they are FINished. Nothing here touches the network,
so the rules are tested without Spark or nsqd.
"""

from dataclasses import dataclass, field


def offset(position: int) -> dict:
    return {"messages": position}


def position(offset: dict) -> int:
    try:
        return int(offset["messages"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"not an nsq source offset: {offset!r}") from None


@dataclass
class Batch:
    start: int
    end: int
    messages: list = field(repr=False)
    rows: object = field(default=None, repr=False)  # what read() returned, served again if asked


class Ledger:
    """The batches handed to Spark and not yet committed, oldest first."""

    def __init__(self):
        self._batches: list[Batch] = []

    def __len__(self) -> int:
        return len(self._batches)

    def add(self, batch: Batch) -> None:
        if batch.end <= batch.start:
            raise ValueError(f"an empty batch has no place in the ledger: {batch}")
        if self._batches and batch.start < self._batches[-1].end:
            raise ValueError(f"batch {batch} overlaps the last one held ({self._batches[-1]})")
        self._batches.append(batch)

    def starting_at(self, start: int) -> Batch | None:
        """The batch already handed out from ``start``: Spark asking again gets
        the same messages and the same end, never new ones."""
        for batch in self._batches:
            if batch.start == start:
                return batch
        return None

    def release_through(self, committed: int) -> list:
        """Forget every batch ending at or before ``committed`` and return its
        messages: they are safely in the sink and may be FINished."""
        done = [batch for batch in self._batches if batch.end <= committed]
        self._batches = [batch for batch in self._batches if batch.end > committed]
        return [message for batch in done for message in batch.messages]
