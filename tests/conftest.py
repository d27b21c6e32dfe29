import contextlib
import itertools
import os
import re
import subprocess

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


#: Every JVM the tests start (Spark sessions, nsq_to_parquet runs, a Connect
#: server, the standalone cluster's master and workers) compiles with C1 only:
#: a test's JVM lives seconds to a minute, where C2's compiler threads cost
#: the two cores more than its faster code gives back (the Spark tests run a
#: quarter faster so). bench/ measures with the JVM's defaults.
for _variable in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    os.environ.setdefault(_variable, "-XX:TieredStopAtLevel=1")

_names = iter(range(1 << 30))

#: Folders whose tests take tens of seconds each (JVMs, package builds, etcd
#: clusters): collected first, so the tail of a run is short tests.
SLOW_FIRST = ("tests/spark/", "tests/packaging/", "tests/replication/")


def pytest_collection_modifyitems(items):
    """``make test`` spreads the tests over pytest-xdist workers with
    ``--dist worksteal``: each worker starts on its own slice of the
    collection and idle workers take from the others. With the slow tests
    first, they fill the first slice: its worker runs them from the start
    while the others run short tests and then take the slow ones still
    waiting, so the workers finish together; in folder order they come
    last, where one two-minute Spark test can keep a worker busy long after
    the others are done. Handing every worker slow tests at once (``--dist
    load``) puts several JVMs and package builds on the two cores together,
    and the run was longer."""
    def slow_first(item) -> int:
        path = item.nodeid
        return next((rank for rank, folder in enumerate(SLOW_FIRST) if path.startswith(folder)), len(SLOW_FIRST))

    items.sort(key=slow_first)


@pytest.fixture
def topic(request):
    """A topic name no other test uses."""
    return re.sub(r"[^.a-zA-Z0-9_-]", "_", f"t{next(_names)}_{request.node.name}")[:64]


@pytest.fixture
def start_lookupd():
    """Start nsqlookupd subprocesses (stopped at teardown, even on failure)."""
    with contextlib.ExitStack() as running:
        yield lambda *extra: running.enter_context(nsqlookupd_process(*extra))


@pytest.fixture
def small_filesystem(tmp_path):
    """A real 1 MiB filesystem (tmpfs), so the disk really fills."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
                            capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
