"""The consumer's RDY and backoff decisions against go-nsq's rules, with a fake clock."""

import random

import pytest

from nsqpy.client.config import Config
from nsqpy.client.flow import NOTHING, FlowController

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def controller(clock=None, **config):
    return FlowController(Config(**config), clock or Clock(), random.Random(7))


def test_max_in_flight_is_shared_out_and_never_exceeded():
    flow = controller(max_in_flight=10)
    assert flow.added("a", 2500).rdy == [("a", 10)]
    decisions = flow.added("b", 2500)
    assert decisions.rdy == [("a", 5), ("b", 5)]  # the older one lowered first
    flow.added("c", 2500)
    assert flow.ready_counts() == {"a": 3, "b": 3, "c": 3}
    assert sum(flow.ready_counts().values()) <= 10


def test_rdy_is_capped_by_nsqds_max_rdy_count_and_sent_only_on_change():
    flow = controller(max_in_flight=5000)
    assert flow.added("a", 200).rdy == [("a", 200)]
    assert flow.set_max_in_flight(4000) is NOTHING  # still capped at 200: nothing to send


def test_removing_a_connection_gives_its_share_to_the_others():
    flow = controller(max_in_flight=10)
    flow.added("a", 2500)
    flow.added("b", 2500)
    assert flow.removed("b").rdy == [("a", 10)]
    assert flow.removed("unknown") is NOTHING


def test_zero_max_in_flight_pauses_and_a_closing_connection_gets_no_rdy():
    flow = controller(max_in_flight=4)
    flow.added("a", 2500)
    flow.added("b", 2500)
    assert flow.set_max_in_flight(0).rdy == [("a", 0), ("b", 0)]
    flow.closing("a")
    assert flow.set_max_in_flight(4).rdy == [("b", 2)]


def test_more_connections_than_max_in_flight_rotates_rdy_1_to_idle_ones():
    clock = Clock()
    flow = controller(clock, max_in_flight=1, low_rdy_idle_timeout=2)
    for key in "abc":
        flow.added(key, 2500)
    assert sum(flow.ready_counts().values()) == 1
    holder = next(k for k, v in flow.ready_counts().items() if v == 1)
    flow.received(holder)
    assert flow.tick() is NOTHING  # not idle long enough yet
    clock.now += 3
    decisions = flow.tick()
    assert (holder, 0) in decisions.rdy
    assert sum(flow.ready_counts().values()) == 1  # the one RDY moved on
    served = set()
    for _ in range(30):
        clock.now += 3
        flow.tick()
        served |= {k for k, v in flow.ready_counts().items() if v}
    assert served == {"a", "b", "c"}  # every nsqd gets its turn


def test_a_busy_connection_keeps_its_rdy_until_low_rdy_timeout():
    clock = Clock()
    flow = controller(clock, max_in_flight=1, low_rdy_idle_timeout=2, low_rdy_timeout=5)
    flow.added("a", 2500)
    flow.added("b", 2500)
    holder = next(k for k, v in flow.ready_counts().items() if v == 1)
    for _ in range(4):
        clock.now += 1
        flow.received(holder)
        assert flow.tick() is NOTHING
    clock.now += 2
    flow.received(holder)
    assert (holder, 0) in flow.tick().rdy  # held RDY for more than low_rdy_timeout


def test_failures_back_off_exponentially_then_test_with_rdy_1():
    flow = controller(max_in_flight=10, backoff_multiplier=1, max_backoff_duration=120)
    flow.added("a", 2500)
    flow.added("b", 2500)
    for _ in range(3):
        flow.received("a")
    decisions = flow.requeued("a", backoff=True)
    assert decisions.rdy == [("a", 0), ("b", 0)] and decisions.wake_in == 2  # 1 * 2**1
    assert flow.requeued("a", backoff=True) is NOTHING  # one result per backoff window
    test = flow.backoff_ended()
    assert len(test.rdy) == 1 and test.rdy[0][1] == 1
    assert flow.requeued("a", backoff=True).wake_in == 4  # level 2
    flow.backoff_ended()
    assert flow.finished("a").wake_in == 2  # a success lowers the level: level 1 again
    flow.backoff_ended()
    resumed = flow.finished("a")
    assert flow.backoff_level == 0 and resumed.wake_in is None
    assert sorted(resumed.rdy) == [("a", 5), ("b", 5)]  # everyone gets its share back


def test_requeue_without_backoff_changes_nothing_and_the_level_is_capped():
    flow = controller(max_in_flight=2, backoff_multiplier=1, max_backoff_duration=8)
    flow.added("a", 2500)
    flow.received("a")
    assert flow.requeued("a", backoff=False) is NOTHING
    levels = []
    for _ in range(6):
        decisions = flow.requeued("a", backoff=True)
        levels.append(flow.backoff_level)
        assert decisions.wake_in <= 8
        flow.backoff_ended()
    assert levels == [1, 2, 3, 3, 3, 3]  # 2**4 = 16 > 8: no higher


def test_a_zero_multiplier_backs_off_for_nothing_however_many_failures():
    flow = controller(max_in_flight=2, backoff_multiplier=0.0)
    flow.added("a", 2500)
    for _ in range(2000):  # the level rises each time (0 s is below any maximum), past 2**1024
        flow.received("a")
        assert flow.requeued("a", backoff=True).wake_in == 0
        flow.backoff_ended()


def test_backoff_disabled_by_zero_max_backoff_duration():
    flow = controller(max_in_flight=2, max_backoff_duration=0)
    flow.added("a", 2500)
    assert flow.requeued("a", backoff=True) is NOTHING and flow.backoff_level == 0


def test_starved_and_saturated_follow_in_flight_against_rdy():
    flow = controller(max_in_flight=20)
    flow.added("a", 2500)
    flow.added("b", 2500)
    assert not flow.is_starved() and not flow.is_saturated()
    for _ in range(9):
        flow.received("a")
    assert flow.is_starved() and not flow.is_saturated()  # 9 >= 0.85 * 10
    for _ in range(10):
        flow.received("b")
    flow.received("a")
    assert flow.is_saturated() and flow.in_flight == 20
    flow.finished("a", count=10)
    assert flow.in_flight == 10 and not flow.is_saturated()


def test_after_stop_no_rdy_is_decided():
    flow = controller(max_in_flight=4)
    flow.added("a", 2500)
    flow.stop()
    assert flow.added("b", 2500) is NOTHING
    assert flow.requeued("a", backoff=True) is NOTHING
    assert flow.tick() is NOTHING


@pytest.mark.parametrize("max_in_flight, connections, share", [(100, 3, 33), (2, 3, 1), (1, 1, 1), (7, 2, 3)])
def test_per_connection_share_is_go_nsqs_formula(max_in_flight, connections, share):
    flow = controller(max_in_flight=max_in_flight)
    for i in range(connections):
        flow.added(i, 2500)
    assert max(flow.ready_counts().values()) == share
    assert sum(flow.ready_counts().values()) <= max_in_flight
