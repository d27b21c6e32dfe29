"""The figures nsqadmin computes from nsqd's stats, checked by hand: e2e
percentiles merged over nodes, and rates and drain time from samples."""

import logging

from nsqpy.nsqadmin import aggregate
from nsqpy.nsqadmin.history import StatsHistory, totals_by_key


def raw_channel(name, depth, count, percentiles=None, latency_count=0):
    return {"channel_name": name, "depth": depth, "backend_depth": 1, "in_flight_count": 2, "deferred_count": 0,
            "message_count": count, "requeue_count": 1, "timeout_count": 0, "client_count": 0, "clients": [],
            "paused": False, "e2e_processing_latency": {"count": latency_count, "percentiles": percentiles}}


def test_e2e_percentiles_merge_weighted_by_count():
    a = aggregate.channel_stats("a:1", "ha", "t", raw_channel("c", 5, 10, [{"quantile": 0.99, "value": 100}], 1))
    b = aggregate.channel_stats("b:1", "hb", "t", raw_channel("c", 7, 20, [{"quantile": 0.99, "value": 400},
                                                                          {"quantile": 0.5, "value": 50}], 3))
    merged = aggregate.aggregate_channel("t", "c", [b, a])
    assert [n["node"] for n in merged["nodes"]] == ["a:1", "b:1"]
    assert (merged["depth"], merged["memory_depth"], merged["backend_depth"]) == (12, 10, 2)
    assert (merged["message_count"], merged["in_flight_count"], merged["requeue_count"]) == (30, 4, 2)
    latency = merged["e2e_processing_latency"]
    assert (latency["count"], latency["host"], latency["topic"], latency["channel"]) == (4, "*", "t", "c")
    p99, p50 = latency["percentiles"]
    assert p99["quantile"] == 0.99 and p99["min"] == 100 and p99["max"] == 400
    assert p99["average"] == (100 * 1 + 400 * 3) / 4 and p99["count"] == 4
    assert p50 == {"quantile": 0.5, "value": 50, "min": 50, "max": 50, "average": 50, "count": 3}


def test_no_percentiles_stay_null():
    one = aggregate.topic_stats("a:1", "h", {"topic_name": "t", "depth": 0, "backend_depth": 0, "message_count": 0,
                                             "channels": [], "paused": True,
                                             "e2e_processing_latency": {"count": 0, "percentiles": None}})
    topic = aggregate.aggregate_topic("t", [one])
    assert topic["e2e_processing_latency"]["percentiles"] is None and topic["paused"] is True


def test_rates_drain_time_and_counter_reset():
    history = StatsHistory(cluster=None, interval=1.0, retention=60.0, log=logging.getLogger("test"))
    #                    message_count, depth, in_flight, deferred, out
    history.record(100.0, {("t", "c"): (100, 100, 0, 0, 0)})
    history.record(101.0, {("t", "c"): (150, 130, 10, 0, 10)})  # +50 in, 10 finished
    history.record(102.0, {("t", "c"): (150, 100, 0, 0, 50)})   # 40 more finished
    summary = history.summary("t", "c")
    assert summary["depth"] == 100 and summary["rate_out"] == 40 and summary["drain_seconds"] == 2.5
    history.record(103.0, {("t", "c"): (5, 5, 0, 0, 0)})        # nsqd restarted: counters start again
    points = history.points("t", "c")
    assert [(p["rate_in"], p["rate_out"]) for p in points] == [(50, 10), (0, 40), (0, 0)]
    summary = history.summary("t", "c")
    assert summary["depth"] == 5 and summary["rate_out"] == 0 and summary["drain_seconds"] is None
    history.record(104.0, {})  # the channel is gone
    assert history.points("t", "c") == [] and history.summary("t", "c")["depth"] is None


def test_topic_totals_count_what_waits_in_its_channels():
    node = [aggregate.topic_stats("a:1", "h", {
        "topic_name": "t", "depth": 4, "backend_depth": 0, "message_count": 30,
        "channels": [raw_channel("c1", 6, 20), raw_channel("c2", 1, 30)]})]
    totals = totals_by_key([node, node])
    # per node: c1 holds 6 + 2 in flight, finished 12; c2 holds 1 + 2, finished 27
    assert totals[("t", "c1")] == (40, 12, 4, 0, 24)
    assert totals[("t",)] == (60, 2 * (4 + 6 + 1), 8, 0, 2 * (12 + 27))


def test_retention_bounds_the_samples():
    history = StatsHistory(cluster=None, interval=1.0, retention=5.0, log=logging.getLogger("test"))
    for second in range(100):
        history.record(float(second), {("t",): (second, 0, 0, 0, 0)})
    assert len(history.points("t")) == 5
