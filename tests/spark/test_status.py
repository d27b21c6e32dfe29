"""``nsq_to_parquet``'s status line: lag is everything not acknowledged, and says when it cannot be known."""

import socket
import types

import pytest

from nsqpy.protocol import commands
from nsqpy.spark.archive import StatusLine
from tests.support.wire import WireConn, http_json, wait_until

from .conftest import channel_stats, publish

pytestmark = pytest.mark.spark

NO_PROGRESS = types.SimpleNamespace(recentProgress=[])


def _adjacent_free_ports() -> int:
    """A port P with P + 1 free too (NSQ's 4150/4151 layout)."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return port
    raise RuntimeError("no two adjacent free ports")


def _lag(options: dict) -> str:
    return StatusLine(options).render(NO_PROGRESS).split("lag ", 1)[1]


def test_lag_counts_ready_in_flight_and_deferred_from_the_tcp_address_alone(start_nsqd, topic):
    port = _adjacent_free_ports()
    nsqd = start_nsqd(f"--tcp-address=127.0.0.1:{port}", f"--http-address=127.0.0.1:{port + 1}")
    http_json("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=archive")
    publish(nsqd, topic, [b"m%d" % i for i in range(100)])
    with WireConn(nsqd.tcp_hostport) as held:
        held.subscribe(topic, "archive", rdy=30)
        held.messages(30)
        for i in range(5):
            held.send(commands.dpub(topic, 60000, b"later%d" % i))
            held.expect_ok()
        wait_until(lambda: channel_stats(nsqd, topic, "archive").get("deferred_count") == 5)
        options = {"topic": topic, "channel": "archive", "nsqd_tcp_addresses": nsqd.tcp_address}
        assert _lag(options) == "105"  # 70 ready + 30 in flight + 5 deferred

        nsqd.stop()
        assert _lag({**options, "nsqd_http_addresses": f"127.0.0.1:{port + 1}"}) == "unknown (nsqd not answering)"


def test_lag_is_unknown_with_the_reason_when_no_http_address_can_be_found(start_nsqd, topic):
    port = _adjacent_free_ports()
    nsqd = start_nsqd(f"--tcp-address=127.0.0.1:{port + 1}", f"--http-address=127.0.0.1:{port}")  # HTTP below TCP
    options = {"topic": topic, "channel": "archive", "nsqd_tcp_addresses": nsqd.tcp_address}
    assert _lag(options) == "unknown (give --nsqd-http-address)"
    assert _lag({**options, "nsqd_http_addresses": nsqd.http_address}) == "0"


def test_the_rate_is_the_runs_not_the_last_intervals():
    def report(batch, start, end):
        return {"batchId": batch, "numInputRows": end - start,
                "sources": [{"startOffset": None, "endOffset": None}]}
    now = [0.0]
    status = StatusLine({"topic": "t", "channel": "c"}, clock=lambda: now[0])
    now[0] = 10.0
    first = status.render(types.SimpleNamespace(recentProgress=[report(0, 0, 600), report(1, 600, 1000)]))
    assert first.startswith("batches 2, rows 1000 (100/s, last 100/s), lag ")
    now[0] = 20.0  # nothing more: the run's rate halves, the last interval's is 0
    assert status.render(types.SimpleNamespace(recentProgress=[])).startswith("batches 2, rows 1000 (50/s, last 0/s)")


def test_a_terminal_gets_a_progress_bar_with_what_is_left_and_a_running_batch():
    now = [0.0]
    status = StatusLine({"topic": "t", "channel": "c"}, clock=lambda: now[0], reader="log")
    running = {"isTriggerActive": True, "isDataAvailable": True}
    query = types.SimpleNamespace(recentProgress=[], lastProgress=None, status=running)
    assert status.bar(query) == "0 rows, 0/s, lag unknown (no batch yet), a batch running for 0s"
    now[0] = 30.0
    assert status.render(query).endswith("a batch running for 30s")
    report = {"batchId": 0, "numInputRows": 300_000, "sources": [{
        "startOffset": None, "endOffset": '{"offsets": {"n:4150": 300000}, "skipped": 0}',
        "latestOffset": '{"offsets": {"n:4150": 500000}}'}]}
    now[0] = 40.0
    done = types.SimpleNamespace(recentProgress=[report], lastProgress=report, status={"isTriggerActive": False})
    assert status.bar(done, width=10) == "[######....]  60% 300,000 of 500,000 rows, 30,000/s, 7s left"
