"""Which departures leave nobody holding an origin's copies (nsqd/replication/departures.py)."""

from nsqpy.nsqd.replication.departures import Departures, successors


def test_successors_follow_the_order_of_names_and_wrap_around():
    members = {"a:1", "b:1", "c:1"}
    assert successors("a:1", members, 1) == ["b:1"]
    assert successors("c:1", members, 2) == ["a:1", "b:1"]
    assert successors("b:1", {"b:1"}, 1) == []


def test_an_origin_that_leaves_with_its_only_replica_is_due_once():
    departures = Departures(copies=1, grace=0)
    departures.look({"a:1": 10, "b:1": 20, "c:1": 30})
    departures.look({"c:1": 30})
    assert departures.due() == [("a:1", 10, ["b:1"])]  # b's replica, c, is still there
    assert departures.due() == []


def test_an_origin_whose_replica_lives_on_or_restarted_is_not_due_twice():
    departures = Departures(copies=1, grace=0)
    departures.look({"a:1": 10, "b:1": 20, "c:1": 30})
    departures.look({"b:1": 20, "c:1": 30})  # a left; b, its replica, holds its copies
    assert departures.due() == []
    departures.look({"b:1": 21, "c:1": 30})  # b restarted under a new epoch: c holds its copies
    assert departures.due() == []


def test_a_replica_whose_lease_ends_a_moment_after_its_origins_counts_as_gone_with_it():
    departures = Departures(copies=1, grace=0)
    departures.look({"a:1": 10, "b:1": 20, "c:1": 30})
    departures.look({"b:1": 20, "c:1": 30})  # a's lease ended first
    departures.look({"c:1": 30})  # b's at the next look
    assert departures.due() == [("a:1", 10, ["b:1"])]


def test_with_three_copies_an_origin_is_lost_only_when_both_replicas_left():
    departures = Departures(copies=2, grace=0)
    departures.look({"a:1": 1, "b:1": 2, "c:1": 3, "d:1": 4})
    departures.look({"c:1": 3, "d:1": 4})
    assert departures.due() == []  # a's replicas are b and c: c is alive
    departures.look({"a:1": 5, "b:1": 6, "c:1": 3, "d:1": 4})
    departures.look({"d:1": 4})  # a, b and c at once: a's replicas b and c went with it
    assert departures.due() == [("a:1", 5, ["b:1", "c:1"])]
