"""The time to drain from sampled stats, without daemons: a growing depth is
called growing (with its net rate), paused depth is left out and named, and
the jitter of a consumer that keeps up is not a backlog."""

import logging

from nsqpy.nsqadmin import aggregate
from nsqpy.nsqadmin.figures import drain_label
from nsqpy.nsqadmin.history import StatsHistory, tally


def history(interval: float = 1.0) -> StatsHistory:
    return StatsHistory(cluster=None, interval=interval, retention=60.0, log=logging.getLogger("test"))


def test_a_depth_that_grows_has_no_time_to_drain():
    h = history()
    #                                message_count, depth, in_flight, deferred, out
    h.record(0.0, {("t", "c"): (0, 0, 0, 0, 0)})
    h.record(1.0, {("t", "c"): (6, 4, 0, 0, 2)})
    h.record(2.0, {("t", "c"): (12, 8, 0, 0, 4)})  # in 6/s, out 2/s
    summary = h.summary("t", "c")
    assert summary["growing"] and summary["net_rate"] == 4.0 and summary["drain_seconds"] is None
    assert drain_label(summary) == "growing (+4.0/s)"


def test_a_shrinking_depth_drains_at_the_pace_going_out():
    h = history()
    h.record(0.0, {("t", "c"): (100, 100, 0, 0, 0)})
    h.record(1.0, {("t", "c"): (100, 90, 0, 0, 10)})
    summary = h.summary("t", "c")
    assert not summary["growing"] and summary["net_rate"] == -10.0
    assert drain_label(summary) == "9s"


def test_jitter_smaller_than_an_interval_of_consumption_is_not_growth():
    h = history(interval=5.0)
    h.record(0.0, {("t", "c"): (0, 0, 0, 0, 0)})
    h.record(5.0, {("t", "c"): (500, 3, 0, 0, 497)})  # 100/s out, 3 waiting for a moment
    summary = h.summary("t", "c")
    assert summary["net_rate"] > 0 and not summary["growing"]
    assert drain_label(summary) == "< 1s"


def node_topic(channels: list[tuple[str, int, bool]], topic_paused: bool = False, topic_depth: int = 0) -> dict:
    """One nsqd's topic: channels as (name, depth, paused)."""
    return aggregate.topic_stats("a:1", "h", {
        "topic_name": "t", "depth": topic_depth, "message_count": 100, "paused": topic_paused,
        "channels": [{"channel_name": name, "depth": depth, "message_count": 100, "paused": paused}
                     for name, depth, paused in channels]})


def test_paused_depth_is_left_out_and_named():
    totals, paused = tally([[node_topic([("live", 30, False), ("held", 50, True)])]])
    assert paused == {("t",): 50, ("t", "held"): 50}
    h = history()
    h.record(0.0, {("t",): (0, 100, 0, 0, 0)}, {("t",): 50})
    h.record(1.0, *tally([[node_topic([("live", 30, False), ("held", 50, True)])]]))
    summary = h.summary("t")
    assert summary["paused_depth"] == 50 and not summary["growing"]  # 50 waiting went to 30
    assert drain_label(summary).endswith("(not counting 50 paused)")
    h.record(2.0, *tally([[node_topic([("live", 0, False), ("held", 50, True)])]]))
    assert drain_label(h.summary("t")) == "paused"
    assert drain_label(h.summary("t", "held")) == "paused"
    assert drain_label(h.summary("t", "live")) == "now"


def test_a_paused_topic_holds_its_own_depth():
    _, paused = tally([[node_topic([("c", 5, False)], topic_paused=True, topic_depth=7)]])
    assert paused == {("t",): 7}
