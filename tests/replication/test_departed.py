"""A replicated nsqd remembers the members that left while it watched
(its /stats ``replication.departed``): when, who owns what they had
accepted now, and how many of their messages it adopted itself."""

import time

import pytest

from tests.replication.conftest import LOOKS, killed_holding
from tests.support.wire import wait_until

pytestmark = pytest.mark.replication

TAKEOVER_WINDOW = 60  # the dead node's lease (3s), the next looks at the members, the adoption


def departure(cluster, index: int, node: str, epoch: int) -> dict | None:
    """What node ``index`` says of ``node``'s ``epoch``, once it saw it leave."""
    return next((d for d in cluster.stats(index)["replication"]["departed"]
                 if d["node"] == node and d["epoch"] == epoch), None)


def test_a_killed_nsqd_is_listed_with_the_survivor_that_took_it_over(replicated, topic):
    cluster = replicated()
    cluster.wait_connected()
    killed_at = time.time()
    dead, epoch = killed_holding(cluster, 1, topic)

    def taken_over() -> bool:
        seen = [departure(cluster, index, dead.tcp_address, epoch) for index in (0, 2)]
        return all(d is not None and d["taken_over_by"] for d in seen) and any(d["messages_adopted"] for d in seen)
    wait_until(taken_over, timeout=TAKEOVER_WINDOW, interval=0.2)

    seen = {index: departure(cluster, index, dead.tcp_address, epoch) for index in (0, 2)}
    owner = next(index for index, d in seen.items() if d["messages_adopted"])
    assert seen[owner]["messages_adopted"] == 100
    assert {d["taken_over_by"] for d in seen.values()} == {cluster.nsqds[owner].tcp_address}
    assert seen[2 if owner == 0 else 0]["messages_adopted"] == 0
    for d in seen.values():
        assert killed_at < d["left_at"] < time.time()


def test_a_clean_stop_is_a_departure_its_node_kept(replicated, topic):
    cluster = replicated()
    cluster.wait_connected()
    time.sleep(LOOKS)
    stopped = cluster.nsqds[1]
    epoch = cluster.stats(1)["replication"]["epoch"]
    assert stopped.stop() == 0

    def kept() -> bool:
        seen = [departure(cluster, index, stopped.tcp_address, epoch) for index in (0, 2)]
        return all(d is not None and d["taken_over_by"] for d in seen)
    wait_until(kept, timeout=TAKEOVER_WINDOW, interval=0.2)
    for index in (0, 2):
        assert departure(cluster, index, stopped.tcp_address, epoch)["taken_over_by"] == stopped.tcp_address
