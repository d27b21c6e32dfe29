"""The reliability suite: hostile and heavy load against real daemons on
loopback. Every loop is bounded in count and time; every daemon is stopped by
its fixture."""

import resource

import pytest

from tests.support.certs import make_certs


@pytest.fixture(scope="session", autouse=True)
def enough_descriptors():
    """Thousands of client sockets, in this process and in the daemons it starts."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, 16384) if hard != resource.RLIM_INFINITY else 16384
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def assert_no_traceback(daemon) -> None:
    output = daemon.output
    at = output.find("Traceback")
    assert at < 0, output[max(at - 300, 0):at + 3000]
