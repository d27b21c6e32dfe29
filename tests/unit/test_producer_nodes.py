"""The Producer's choice of nsqd node: strategies, stickiness, failures, retry delays."""

import pytest

from nsqpy.client.nodes import MAX_RETRY_DELAY, MIN_RETRY_DELAY, NodePool, retry_delay

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls

NODES = ["a:4150", "b:4150", "c:4150"]


def chosen(pool, times, topic="t", exclude=()):
    return [pool.choose(topic, exclude).address for _ in range(times)]


def test_round_robin_takes_every_healthy_node_in_turn():
    picks = chosen(NodePool(NODES), 9)
    assert sorted(picks) == sorted(NODES * 3)
    assert all(picks[i] != picks[i + 1] for i in range(8))


def test_a_failed_node_is_skipped_until_it_succeeds_again():
    pool = NodePool(NODES)
    b = pool.nodes["b:4150"]
    pool.failed(b, "connection refused")
    assert "b:4150" not in chosen(pool, 6)
    assert not b.up and b.last_error == "connection refused"
    pool.succeeded(b)
    assert "b:4150" in chosen(pool, 3)
    assert b.failures == 0


def test_retry_delay_doubles_with_failures_in_a_row_up_to_a_ceiling():
    pool = NodePool(NODES)
    node = pool.nodes["a:4150"]
    delays = [pool.failed(node, "down") for _ in range(10)]
    assert delays[:3] == [MIN_RETRY_DELAY, 2 * MIN_RETRY_DELAY, 4 * MIN_RETRY_DELAY]
    assert delays[-1] == MAX_RETRY_DELAY == retry_delay(100) == retry_delay(5000)  # hours down: no overflow
    assert delays == sorted(delays)


def test_least_pending_steers_around_a_slow_node():
    pool = NodePool(NODES, strategy="least-pending")
    pool.nodes["a:4150"].pending = 50
    pool.nodes["b:4150"].pending = 3
    assert set(chosen(pool, 5)) == {"c:4150"}
    pool.nodes["c:4150"].pending = 3
    assert set(chosen(pool, 6)) == {"b:4150", "c:4150"}  # equals in turn


def test_exclude_leaves_out_nodes_already_holding_a_copy():
    pool = NodePool(NODES)
    taken = {pool.nodes["a:4150"], pool.nodes["b:4150"]}
    assert set(chosen(pool, 4, exclude=taken)) == {"c:4150"}
    taken.add(pool.nodes["c:4150"])
    assert pool.choose("t", taken) is None


@pytest.mark.parametrize("replicas", [2, 3])
def test_the_copies_of_publishes_with_replicas_spread_evenly(replicas):
    """Each copy of a publish takes the next node not holding one: every
    node holds replicas/3 of the copies (34/66/100 of 100 before, with 2)."""
    pool = NodePool(NODES)
    held = dict.fromkeys(NODES, 0)
    for _ in range(99):
        taken: set = set()
        for _ in range(replicas):
            node = pool.choose("t", taken)
            taken.add(node)
            held[node.address] += 1
    assert sorted(held.values()) == [99 * replicas // 3] * 3


def test_a_node_that_is_down_leaves_its_share_to_all_the_others():
    pool = NodePool(["a:4150", "b:4150", "c:4150", "d:4150"])
    pool.failed(pool.nodes["b:4150"], "down")
    picks = chosen(pool, 30)
    assert sorted(picks.count(address) for address in ("a:4150", "c:4150", "d:4150")) == [10, 10, 10]


def test_sticky_keeps_a_topic_on_its_node_while_it_is_up():
    pool = NodePool(NODES, sticky=True)
    first = pool.choose("orders").address
    assert set(chosen(pool, 5, "orders")) == {first}
    others = {pool.choose("events").address for _ in range(5)}
    assert len(others) == 1  # each topic sticks, to whichever node it got
    pool.failed(pool.nodes[first], "gone")
    moved = pool.choose("orders").address
    assert moved != first and set(chosen(pool, 4, "orders")) == {moved}
    pool.succeeded(pool.nodes[first])
    assert pool.choose("orders").address == moved  # no flapping back


def test_following_nsqlookupd_adds_and_removes_nodes():
    pool = NodePool(["a:4150"], sticky=True)
    a = pool.nodes["a:4150"]
    assert pool.choose("t") is a
    gone = pool.set_addresses(["b:4150", "c:4150", "b:4150"])
    assert gone == [a] and list(pool.nodes) == ["b:4150", "c:4150"]
    assert pool.choose("t").address in {"b:4150", "c:4150"}
    kept = pool.nodes["b:4150"]
    pool.set_addresses(["b:4150"])
    assert pool.nodes["b:4150"] is kept  # its health and counts carry on


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="round-robin, least-pending"):
        NodePool(NODES, strategy="random")
