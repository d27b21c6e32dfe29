"""Fixtures for nsqadmin's tests: a real cluster shared by a module (one
nsqlookupd, two nsqd registered with it), nsqadmin over it, raw consumers,
and a notification sink. Every process stops at teardown, even on failure."""

import contextlib

import pytest

from tests.support.wire import WireConn

from tests.nsqadmin.helpers import NotificationSink, nsqadmin_process, start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with contextlib.ExitStack() as stack:
        yield start_cluster(stack, tmp_path_factory.mktemp("cluster"))


@pytest.fixture
def start_admin():
    """Start nsqadmin subprocesses (stopped at teardown, even on failure)."""
    with contextlib.ExitStack() as running:
        yield lambda *args: running.enter_context(nsqadmin_process(*args))


@pytest.fixture(scope="module")
def admin(cluster):
    """nsqadmin over the module's cluster, sampling stats every 200 ms. Its
    requests to the daemons may take 10 s (a busy machine) before it reports
    a node as not answering."""
    with nsqadmin_process(f"--lookupd-http-address={cluster.lookupd.http_address}",
                          "--history-interval=200ms", "--http-client-request-timeout=10s") as process:
        yield process


@pytest.fixture
def consumer(cluster):
    """Subscribe a raw V2 consumer: consumer(index, topic, channel, **identify) -> WireConn."""
    with contextlib.ExitStack() as open_connections:
        def subscribe(index: int, topic: str, channel: str, rdy: int = 0, **identify) -> WireConn:
            conn = open_connections.enter_context(WireConn(cluster.nsqds[index].tcp_hostport))
            conn.identify(**identify)
            conn.subscribe(topic, channel, rdy)
            return conn
        yield subscribe


@pytest.fixture
def notifications():
    sink = NotificationSink()
    try:
        yield sink
    finally:
        sink.stop()
