"""nsqd killed (kill -9) and restarted while the archive query runs and a
producer publishes: every acknowledged message is archived, none twice,
with either reader. nsqd keeps its data dir and addresses (a supervisor
restarting it), and runs with --mem-queue-size=0 at its default sync
settings: what it received since its last sync is in the page cache, and the
FINs it confirmed were written where a crash of the process cannot lose them."""

import collections
import threading
import time

import pytest

from nsqpy.protocol import commands as cmd
from nsqpy.spark.archive import drain_file, start_archive, stop_gracefully
from tests.support.wire import Closed, WireConn

from .conftest import bodies_other_readers_see, channel_stats

pytestmark = pytest.mark.spark

ROUNDS = 3


def publish_until(stop: threading.Event, address_of, topic: str, acked: list, sent: list) -> None:
    """PUB one at a time, about 1,000 a second, through nsqd's restarts."""
    index = 0
    while not stop.is_set():
        try:
            with WireConn(address_of(), timeout=2) as c:
                while not stop.is_set():
                    body = f"{topic}-{index:07d}".encode()
                    sent.append(body)
                    index += 1
                    c.send(cmd.pub(topic, body))
                    c.expect_ok()
                    acked.append(body)
                    time.sleep(0.001)
        except (Closed, OSError, TimeoutError, AssertionError):
            time.sleep(0.05)  # nsqd is down: try again until it is back


@pytest.mark.parametrize("reader", ["driver", "executors"])
def test_nsqd_killed_and_restarted_three_times_archives_every_message_once(spark, start_nsqd, topic, tmp_path,
                                                                         reader):
    data = tmp_path / "nsqd"
    flags = ("--mem-queue-size=0", "--max-rdy-count=20000")
    nsqd = start_nsqd(*flags, data_path=data)
    addresses = (f"--tcp-address={nsqd.tcp_address}", f"--http-address={nsqd.http_address}")
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    acked: list[bytes] = []
    sent: list[bytes] = []
    stop = threading.Event()
    producer = threading.Thread(target=publish_until, args=(stop, lambda: nsqd.tcp_hostport, topic, acked, sent))
    producer.start()
    try:
        query = start_archive(spark, {"topic": topic, "channel": "archive", "reader": reader,
                                      "nsqd_tcp_addresses": nsqd.tcp_address,
                                      "nsqd_http_addresses": nsqd.http_address,
                                      "max_messages_per_batch": "2000"}, out, checkpoint,
                              trigger="200 milliseconds")
        for _ in range(ROUNDS):
            before = len(acked)
            deadline = time.monotonic() + 60
            while len(acked) < before + 1500:  # a second and a half of publishing, however slow the machine
                assert query.isActive and time.monotonic() < deadline, f"stalled: {query.exception()}"
                time.sleep(0.1)
            nsqd.process.kill()
            nsqd.process.wait(10)
            nsqd = start_nsqd(*flags, *addresses, data_path=data)
    finally:
        stop.set()
        producer.join(30)
    deadline = time.monotonic() + 90
    while True:
        stats = channel_stats(nsqd, topic, "archive")
        if not stats.get("depth", 1) and not stats.get("in_flight_count", 1) and not query.lastProgress["numInputRows"]:
            break
        assert query.isActive and time.monotonic() < deadline, f"not drained: {stats} {query.exception()}"
        time.sleep(0.2)
    assert stop_gracefully(query, drain_file(checkpoint))
    archived = bodies_other_readers_see(out)
    twice = [body for body, count in collections.Counter(archived).items() if count > 1]
    assert not twice, f"{len(twice)} of {len(archived)} archived twice, e.g. {twice[:3]}"
    missing = set(acked) - set(archived)
    assert not missing, f"{len(missing)} acknowledged messages not archived, e.g. {sorted(missing)[:3]}"
    assert set(archived) <= set(sent)
