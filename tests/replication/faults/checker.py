"""What became of every acknowledged body, per channel: delivered, lost
(acknowledged and never delivered: the number that must be 0), delivered
twice (the same body more than once, acknowledged or not) and delivered
by two nodes (the same body from two different nsqd: a takeover's
redelivery, or a node that kept delivering what a survivor took over)."""

import collections
from dataclasses import dataclass, fields

from .bodies import topic_of
from .publishers import Ack

#: a channel's deliveries: (topic index, [(body, node name)])
Deliveries = tuple[int, list[tuple[str, str]]]


@dataclass
class Row:
    channel: str
    acknowledged: int
    delivered: int
    lost: int
    delivered_twice: int
    by_two_nodes: int


def tally(acks: list[Ack], channels: dict[str, Deliveries], node_of=lambda name: name) -> list[Row]:
    """``node_of``: the node a name belongs to (a node brought back under
    another port has two names and is one nsqd)."""
    acked = collections.defaultdict(set)
    for ack in acks:
        acked[topic_of(ack.body)].add(ack.body)
    rows = []
    for channel, (topic, deliveries) in channels.items():
        times = collections.Counter(body for body, _ in deliveries)
        nodes = collections.defaultdict(set)
        for body, name in deliveries:
            nodes[body].add(node_of(name))
        wanted = acked[topic]
        delivered = len(wanted & times.keys())
        rows.append(Row(channel, len(wanted), delivered, len(wanted) - delivered,
                        sum(1 for count in times.values() if count > 1),
                        sum(1 for holders in nodes.values() if len(holders) > 1)))
    return rows


def total(rows: list[Row], name: str = "total") -> Row:
    return Row(name, *(sum(getattr(row, field.name) for row in rows) for field in fields(Row)[1:]))


def table(rows: list[Row]) -> str:
    """The rows and their total, aligned, one line each."""
    heading = [field.name.replace("_", " ") for field in fields(Row)]
    lines = [[str(getattr(row, field.name)) for field in fields(Row)] for row in [*rows, total(rows)]]
    widths = [max(len(cell) for cell in column) for column in zip(heading, *lines)]
    return "\n".join("  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                               for i, (cell, width) in enumerate(zip(line, widths)))
                     for line in [heading, *lines])
