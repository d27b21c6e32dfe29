"""Which departures leave nobody holding an origin's copies (nsqd/replication/departures.py)."""

from nsqpy.nsqd.replication.departures import Departures, successors


def test_successors_follow_the_order_of_names_and_wrap_around():
    members = {"a:1", "b:1", "c:1"}
    assert successors("a:1", members, 1) == ["b:1"]
    assert successors("c:1", members, 2) == ["a:1", "b:1"]
    assert successors("b:1", {"b:1"}, 1) == []


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watching(copies: int = 1) -> tuple[Departures, Clock]:
    clock = Clock()
    return Departures(copies=copies, grace=5, clock=clock), clock


def test_an_origin_that_leaves_with_its_only_replica_is_due_once_its_grace_passed():
    departures, clock = watching()
    departures.look({"a:1": 10, "b:1": 20, "c:1": 30})
    departures.look({"c:1": 30})
    assert departures.due() == []  # a takeover may still come
    clock.now = 5
    assert departures.due() == [("a:1", 10, ["b:1"])]  # b's replica, c, is still there
    assert departures.due() == []


def test_an_origin_whose_replica_lives_on_is_never_due():
    departures, clock = watching()
    departures.look({"a:1": 10, "b:1": 20, "c:1": 30})
    departures.look({"b:1": 20, "c:1": 30})  # a left; b, its replica, holds its copies
    for clock.now in (5, 20, 60):
        assert departures.due() == []
    departures.look({"c:1": 30})  # b goes long after: it had taken a over by then
    clock.now = 100
    assert departures.due() == []


def test_a_replica_whose_lease_ends_late_counts_as_gone_with_its_origin():
    """Each lease ends at its own moment, later still on a busy etcd."""
    departures, clock = watching()
    departures.look({"a:1": 10, "b:1": 20, "c:1": 30})
    departures.look({"b:1": 20, "c:1": 30})  # a's lease ended first
    clock.now = 8
    assert departures.due() == []
    departures.look({"c:1": 30})  # b's, three seconds past a's grace
    assert departures.due() == [("a:1", 10, ["b:1"])]


def test_a_replica_whose_lease_ends_a_moment_before_its_origins_counts_as_gone_with_it():
    departures, clock = watching()
    departures.look({"a:1": 10, "b:1": 20, "c:1": 30})
    departures.look({"a:1": 10, "c:1": 30})  # b, a's replica, went first
    departures.look({"c:1": 30})  # then a: its replica was b, not c
    clock.now = 5
    assert departures.due() == [("a:1", 10, ["b:1"])]


def test_with_three_copies_an_origin_is_lost_only_when_both_replicas_left():
    departures, clock = watching(copies=2)
    departures.look({"a:1": 1, "b:1": 2, "c:1": 3, "d:1": 4})
    departures.look({"c:1": 3, "d:1": 4})
    clock.now = 5
    assert departures.due() == []  # a's replicas are b and c: c is alive
    departures, clock = watching(copies=2)
    departures.look({"a:1": 1, "b:1": 2, "c:1": 3, "d:1": 4})
    departures.look({"d:1": 4})  # a, b and c at once: a's replicas b and c went with it
    clock.now = 5
    assert departures.due() == [("a:1", 1, ["b:1", "c:1"])]
