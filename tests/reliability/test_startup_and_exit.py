"""Findings 8 to 11, found as a new user would: nothing acknowledged is lost
silently, bad startup settings are refused in one line, a cluster does not
outlive its terminal, and every executable answers --version."""

import contextlib
import importlib.metadata
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from nsqpy.localcluster import nsqd_process
from tests.support.processes import GroupProcess
from tests.support.wire import WireConn

pytestmark = pytest.mark.reliability


def run_nsqd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqd", "--tcp-address=127.0.0.1:0",
                           "--http-address=127.0.0.1:0", *args], capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def unwritable(path):
    """A directory nothing can write into, root included (chattr +i)."""
    if os.geteuid() != 0:
        os.chmod(path, 0o500)
        try:
            yield
        finally:
            os.chmod(path, 0o700)
        return
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("running as root on a file system without chattr +i")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_nsqd_refuses_a_data_path_it_cannot_write(tmp_path):
    with unwritable(tmp_path):
        result = run_nsqd(f"--data-path={tmp_path}")
    assert result.returncode == 1
    fatal = [line for line in result.stderr.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and "is not writable" in fatal[0] and "--data-path" in fatal[0]


def test_a_shutdown_that_loses_messages_says_how_many_and_fails(tmp_path, topic):
    daemon = nsqd_process(str(tmp_path)).start()
    try:
        with WireConn(daemon.tcp_hostport) as conn:
            for i in range(7):
                conn.publish(topic, b"%d" % i)
        with unwritable(tmp_path):
            code = daemon.stop()
    finally:
        daemon.kill()
    assert code == 1
    line = daemon.wait_for_log("could not be written")
    assert "7 messages could not be written" in line, daemon.output


@pytest.mark.parametrize("make_args, reason", [
    (lambda tmp: [f"--data-path={tmp / 'afile'}"], "is a file, not a directory"),
    (lambda tmp: [f"--data-path={tmp}", "--lookupd-tcp-address=nohostport"],
     "--lookupd-tcp-address 'nohostport' must be host:port"),
])
def test_bad_startup_settings_are_refused_in_one_line(tmp_path, make_args, reason):
    (tmp_path / "afile").write_text("")
    result = run_nsqd(*make_args(tmp_path))
    assert result.returncode == 1
    fatal = [line for line in result.stderr.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and reason in fatal[0], result.stderr


def test_a_bad_flag_is_the_one_line_a_person_sees(tmp_path):
    result = run_nsqd(f"--data-path={tmp_path}", "--mem-queue-size=lots")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "nsqd: --mem-queue-size: 'lots' is not a number (decimal digits only) (see nsqd --help)"]


def _cluster(tmp_path) -> tuple[GroupProcess, list[int]]:
    cluster = GroupProcess([sys.executable, "-m", "nsqpy.cli.nsqpy", "cluster", "--nsqd", "2", "--ephemeral-ports",
                            "--data-path", str(tmp_path)])
    cluster.wait_for("cluster up", timeout=60)
    pids = [int(match) for match in re.findall(r" pid (\d+)", cluster.output)]
    assert len(pids) == 4  # nsqlookupd, two nsqd, nsqadmin
    return cluster, pids


def _all_gone(pids: list[int], timeout: float = 40.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        alive.append(pid)
            except FileNotFoundError:
                pass
        if not alive:
            return True
        time.sleep(0.1)
    return False


def test_sighup_stops_the_whole_cluster(tmp_path):
    cluster, pids = _cluster(tmp_path)
    try:
        os.kill(cluster.process.pid, signal.SIGHUP)  # the terminal closed
        assert cluster.wait(30) == 0
        assert "cluster stopped" in cluster.output
        assert _all_gone(pids)
    finally:
        cluster.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_daemons_die_with_a_cluster_that_is_killed(tmp_path):
    cluster, pids = _cluster(tmp_path)
    try:
        os.kill(cluster.process.pid, signal.SIGKILL)  # no chance to stop anything itself
        cluster.wait(30)
        assert _all_gone(pids)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _executables() -> list[tuple[str, str]]:
    scripts = importlib.metadata.entry_points(group="console_scripts")
    found = []
    for script in scripts:
        module = script.value.split(":")[0]
        if module.startswith("nsqpy.") and importlib.util.find_spec(module) is not None:
            found.append((script.name, module))
    return sorted(found)


NSQ_SHAPED = re.compile(r"^(\S+) v1\.3\.0 \(built w/python\d+\.\d+\.\d+\)$")


@pytest.mark.parametrize("name, module", _executables())
def test_every_executable_answers_version(name, module):
    result = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    if name in ("nsqpy", "nsq_to_parquet"):
        assert line == f"{name} {importlib.metadata.version('nsqpy')}"
    else:
        assert NSQ_SHAPED.match(line) and line.startswith(f"{name} "), line
