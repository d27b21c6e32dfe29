"""The headline from sampled stats, without daemons: rates are the last
interval's, a growing depth is called growing (with its net rate), depth
that is paused or that no consumer takes is left out and named, and the
jitter of a consumer that keeps up is not a backlog."""

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


def test_rates_are_the_last_intervals_like_the_charts_last_point():
    h = history()
    h.record(0.0, {("t", "c"): (0, 0, 0, 0, 0)})
    h.record(1.0, {("t", "c"): (84, 84, 0, 0, 0)})
    h.record(2.0, {("t", "c"): (168, 168, 0, 0, 0)})
    assert h.summary("t", "c")["growing"]
    h.record(3.0, {("t", "c"): (168, 168, 0, 0, 0)}, {("t", "c"): (0, 168)})  # publishing stopped
    summary = h.summary("t", "c")
    assert (summary["rate_in"], summary["rate_out"]) == (0, 0) == tuple(
        h.points("t", "c")[-1][key] for key in ("rate_in", "rate_out"))
    assert not summary["growing"] and drain_label(summary) == "no consumer"


def node_topic(channels: list[tuple[str, int, bool, int]], topic_paused: bool = False, topic_depth: int = 0) -> dict:
    """One nsqd's topic: channels as (name, depth, paused, consumers)."""
    return aggregate.topic_stats("a:1", "h", {
        "topic_name": "t", "depth": topic_depth, "message_count": 100, "paused": topic_paused,
        "channels": [{"channel_name": name, "depth": depth, "message_count": 100, "paused": paused,
                      "client_count": consumers}
                     for name, depth, paused, consumers in channels]})


def test_paused_depth_is_left_out_and_named():
    totals, stuck = tally([[node_topic([("live", 30, False, 1), ("held", 50, True, 1)])]])
    assert stuck == {("t",): (50, 0), ("t", "held"): (50, 0)}
    h = history()
    h.record(0.0, {("t",): (0, 100, 0, 0, 0)}, {("t",): (50, 0)})
    h.record(1.0, *tally([[node_topic([("live", 30, False, 1), ("held", 50, True, 1)])]]))
    summary = h.summary("t")
    assert summary["paused_depth"] == 50 and not summary["growing"]  # 50 waiting went to 30
    assert drain_label(summary).endswith("(not counting 50 paused)")
    h.record(2.0, *tally([[node_topic([("live", 0, False, 1), ("held", 50, True, 1)])]]))
    assert drain_label(h.summary("t")) == "paused"
    assert drain_label(h.summary("t", "held")) == "paused"
    assert drain_label(h.summary("t", "live")) == "now"


def test_a_paused_topic_holds_its_own_depth():
    _, stuck = tally([[node_topic([("c", 5, False, 1)], topic_paused=True, topic_depth=7)]])
    assert stuck == {("t",): (7, 0)}


def test_depth_no_consumer_takes_is_left_out_and_named():
    def sampled(live_depth: int) -> tuple[dict, dict]:
        return tally([[node_topic([("live", live_depth, False, 2), ("idle", 20, False, 0), ("held", 50, True, 0)])]])
    assert sampled(30)[1] == {("t",): (50, 20), ("t", "idle"): (0, 20), ("t", "held"): (50, 0)}
    h = history()
    h.record(0.0, *sampled(30))
    h.record(1.0, *sampled(20))  # live: 10 consumed, 20 to go
    assert drain_label(h.summary("t")) == "2s (not counting 50 paused, 20 with no consumer)"
    assert drain_label(h.summary("t", "idle")) == "no consumer"
    h.record(2.0, *sampled(0))
    assert drain_label(h.summary("t")) == "paused · no consumer"


def test_a_consumer_that_left_leaves_no_estimate_behind():
    h = history()
    h.record(0.0, {("t", "c"): (100, 100, 0, 0, 0)})
    h.record(1.0, {("t", "c"): (100, 90, 0, 0, 10)})  # consumed at 10/s
    h.record(2.0, {("t", "c"): (100, 85, 0, 0, 15)}, {("t", "c"): (0, 85)})  # then the consumer left
    summary = h.summary("t", "c")
    assert summary["rate_out"] == 5 and summary["drain_seconds"] == 0
    assert drain_label(summary) == "no consumer"


def test_a_topic_without_channels_keeps_its_depth_for_no_consumer():
    _, stuck = tally([[node_topic([], topic_depth=9)]])
    assert stuck == {("t",): (0, 9)}
