import re

import pytest

from nsqpy.testing import nsqd_process


@pytest.fixture
def start_nsqd(tmp_path):
    """Start nsqd subprocesses (stopped at teardown, even on failure)."""
    started = []

    def start(*extra: str, data_path=None):
        path = data_path or tmp_path / f"nsqd{len(started)}"
        path.mkdir(exist_ok=True)
        daemon = nsqd_process(str(path), *extra)
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        try:
            daemon.stop()
        finally:
            daemon.kill()


@pytest.fixture
def nsqd(start_nsqd):
    return start_nsqd()


@pytest.fixture(scope="module")
def shared_nsqd(tmp_path_factory):
    """One nsqd for a module of tests that each use their own topic names."""
    daemon = nsqd_process(str(tmp_path_factory.mktemp("nsqd")), "--msg-timeout=2s").start()
    yield daemon
    try:
        daemon.stop()
    finally:
        daemon.kill()


_names = iter(range(1 << 30))


@pytest.fixture
def topic(request):
    """A topic name no other test uses."""
    return re.sub(r"[^.a-zA-Z0-9_-]", "_", f"t{next(_names)}_{request.node.name}")[:64]
