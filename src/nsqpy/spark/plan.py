"""How the executors reader cuts a micro-batch into partitions, and the offsets that record it.

nsqd has no offsets, so the plan itself is the offset: ``{"batch": n,
"plan": [[nsqd_tcp_address, max_messages], ...]}`` names the batch (its
partitions' log files carry that number) and what each partition may read.
Spark keeps the end offset in its checkpoint before any task runs, so a
task retried, or a batch run again after a restart, gets the very same
partitions and finds their logs. Nothing here touches the network, so the
rules are tested without Spark or nsqd.
"""

import math

from .options import OptionError


def initial_offset() -> dict:
    return {"batch": 0, "plan": []}


def batch_number(offset: dict) -> int:
    try:
        return int(offset["batch"])
    except (KeyError, TypeError, ValueError):
        raise OptionError(f"not an offset of the executors reader: {offset!r} (this checkpoint was written "
                          f"by the driver reader: use reader=driver, or a new checkpoint)") from None


def next_offset(start: dict, plan: list[tuple[str, int]]) -> dict:
    """The end offset of the batch after ``start``, or ``start`` when the plan is empty."""
    if not plan:
        return start
    return {"batch": batch_number(start) + 1, "plan": [[address, count] for address, count in plan]}


def split(count: int, per_partition: int) -> list[int]:
    """``count`` in as few near-equal parts as keep each within ``per_partition``."""
    if count <= 0:
        return []
    parts = math.ceil(count / per_partition)
    size, extra = divmod(count, parts)
    return [size + 1] * extra + [size] * (parts - extra)


def plan_batch(backlogs: dict[str, int], per_batch: int, per_partition: int) -> list[tuple[str, int]]:
    """Partitions for the messages waiting on each node (by TCP address): all of
    them when they fit in ``per_batch``, else each node's share in proportion
    to its backlog."""
    waiting = {address: count for address, count in backlogs.items() if count > 0}
    total = sum(waiting.values())
    if total > per_batch:
        waiting = {address: count * per_batch // total for address, count in waiting.items()}
        # the rounding remainder goes to the nodes with most waiting, one each
        short = per_batch - sum(waiting.values())
        for address in sorted(waiting, key=waiting.get, reverse=True)[:short]:
            waiting[address] += 1
    return [(address, size) for address, count in waiting.items() for size in split(count, per_partition)]
