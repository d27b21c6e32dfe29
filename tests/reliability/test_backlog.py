"""Finding 3: every listener of every daemon takes the system's backlog, so a
burst of 2,000 connects is queued by the kernel instead of retried after a
dropped SYN (one second each). The daemon is stopped (SIGSTOP) during the
burst, as a busy one would be: only the listen backlog can hold the
connections then.

"Within a second" is checked where it is decided, not on the clock (a busy
machine may take that long just to open 2,000 sockets): no connect had a SYN
sent again, which the kernel does only after one second without an answer."""

import contextlib
import os
import signal

import pytest

from tests.reliability.probes import hostport_of, simultaneous_connects

pytestmark = pytest.mark.reliability

CONNECTS = 2000


@contextlib.contextmanager
def frozen(daemon):
    os.kill(daemon.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(daemon.process.pid, signal.SIGCONT)


@pytest.fixture
def nsqd_with_https(start_nsqd, certs):
    return start_nsqd(f"--tls-cert={certs.server_cert}", f"--tls-key={certs.server_key}")


@pytest.mark.parametrize("listener", ["TCP", "HTTP", "HTTPS"])
def test_nsqd_accepts_2000_simultaneous_connects_within_a_second(nsqd_with_https, listener):
    nsqd_with_https.wait_for_log("HTTPS: listening on")
    address = nsqd_with_https.addresses[listener]
    with frozen(nsqd_with_https):
        elapsed, established, retried = simultaneous_connects(hostport_of(address), CONNECTS, timeout=10.0)
    print(f"nsqd {listener}: {CONNECTS} connects in {elapsed:.3f}s, {retried} SYN retried")
    assert established == CONNECTS
    assert retried == 0


@pytest.mark.parametrize("listener", ["TCP", "HTTP"])
def test_nsqlookupd_accepts_2000_simultaneous_connects_within_a_second(start_lookupd, listener):
    lookupd = start_lookupd()
    with frozen(lookupd):
        elapsed, established, retried = simultaneous_connects(hostport_of(lookupd.addresses[listener]), CONNECTS,
                                                              timeout=10.0)
    print(f"nsqlookupd {listener}: {CONNECTS} connects in {elapsed:.3f}s, {retried} SYN retried")
    assert established == CONNECTS
    assert retried == 0
