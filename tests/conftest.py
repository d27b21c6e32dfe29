import contextlib
import itertools
import re

import pytest

from nsqpy.localcluster import nsqd_process, nsqlookupd_process


@pytest.fixture
def start_nsqd(tmp_path):
    """Start nsqd subprocesses (stopped at teardown, even on failure)."""
    with contextlib.ExitStack() as running:
        count = itertools.count()

        def start(*extra: str, data_path=None):
            path = data_path or tmp_path / f"nsqd{next(count)}"
            path.mkdir(exist_ok=True)
            return running.enter_context(nsqd_process(str(path), *extra))

        yield start


@pytest.fixture
def nsqd(start_nsqd):
    return start_nsqd()


@pytest.fixture(scope="module")
def shared_nsqd(tmp_path_factory):
    """One nsqd for a module of tests that each use their own topic names."""
    with nsqd_process(str(tmp_path_factory.mktemp("nsqd")), "--msg-timeout=2s") as daemon:
        yield daemon


_names = iter(range(1 << 30))


def pytest_collection_modifyitems(items):
    """``make test`` runs two pytest-xdist workers (``--dist loadgroup``):
    most tests wait on daemons, not on a core. The tests that share the
    local Spark session run on one worker, so one JVM serves them all; the
    reliability tests (thousands of sockets, fuzzing, heavy load) run one
    after another, so no two of them load the machine at once."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark-session"))
        elif item.get_closest_marker("reliability"):
            item.add_marker(pytest.mark.xdist_group("reliability"))


@pytest.fixture
def topic(request):
    """A topic name no other test uses."""
    return re.sub(r"[^.a-zA-Z0-9_-]", "_", f"t{next(_names)}_{request.node.name}")[:64]


@pytest.fixture
def start_lookupd():
    """Start nsqlookupd subprocesses (stopped at teardown, even on failure)."""
    with contextlib.ExitStack() as running:
        yield lambda *extra: running.enter_context(nsqlookupd_process(*extra))
