"""Finding 3: every listener of every daemon takes the system's backlog, so a
burst of 2,000 connects is queued by the kernel instead of retried after a
dropped SYN (one second each)."""

import pytest

from tests.reliability.probes import hostport_of, simultaneous_connects

pytestmark = pytest.mark.reliability

CONNECTS = 2000


@pytest.fixture
def nsqd_with_https(start_nsqd, certs):
    return start_nsqd(f"--tls-cert={certs.server_cert}", f"--tls-key={certs.server_key}")


@pytest.mark.parametrize("listener", ["TCP", "HTTP", "HTTPS"])
def test_nsqd_accepts_2000_simultaneous_connects_within_a_second(nsqd_with_https, listener):
    nsqd_with_https.wait_for_log("HTTPS: listening on")
    address = nsqd_with_https.addresses[listener]
    elapsed, established = simultaneous_connects(hostport_of(address), CONNECTS)
    print(f"nsqd {listener}: {CONNECTS} connects in {elapsed:.3f}s")
    assert established == CONNECTS
    assert elapsed < 1.0


@pytest.mark.parametrize("listener", ["TCP", "HTTP"])
def test_nsqlookupd_accepts_2000_simultaneous_connects_within_a_second(start_lookupd, listener):
    lookupd = start_lookupd()
    elapsed, established = simultaneous_connects(hostport_of(lookupd.addresses[listener]), CONNECTS)
    print(f"nsqlookupd {listener}: {CONNECTS} connects in {elapsed:.3f}s")
    assert established == CONNECTS
    assert elapsed < 1.0
