from nsqpy.nsqd.latency import LatencyWindow, summarize
from nsqpy.nsqd.statsd import host_key, pack, prefix


def test_quantiles_over_samples():
    window = LatencyWindow(600, [0.5, 0.99, 1.0])
    for value in range(1, 1001):
        window.add(value)
    result = summarize([window], [0.5, 0.99, 1.0])
    assert result["count"] == 1000
    assert [(p["quantile"], p["value"]) for p in result["percentiles"]] == [(1.0, 1000), (0.99, 990), (0.5, 500)]


def test_memory_is_bounded_by_the_reservoir():
    window = LatencyWindow(600, [0.5], max_samples=100)
    for value in range(100_000):
        window.add(value)
    count, samples = window.samples()
    assert count == 100_000 and len(samples) == 100
    assert 20_000 < summarize([window], [0.5])["percentiles"][0]["value"] < 80_000


def test_not_configured_is_nsqs_empty_shape():
    assert summarize([], []) == {"count": 0, "percentiles": None}


def test_statsd_naming_and_packing():
    assert host_key("10.0.0.1", 4151) == "10_0_0_1_4151"
    assert prefix("nsq.%s", "h_1") == "nsq.h_1."
    assert prefix("custom", "h") == "custom."
    packets = pack(["a" * 60, "b" * 60, "c" * 60], 130)
    assert packets == [("a" * 60 + "\n" + "b" * 60 + "\n").encode(), ("c" * 60 + "\n").encode()]
