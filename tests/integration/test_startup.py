"""Starting fast without changing what a daemon promises: every listener is
bound before any is announced, a request sent the moment the ``listening
on`` lines are out is answered, and the heavy libraries (aiohttp, the
Prometheus client, cramjam) are not on the way to those lines."""

import socket
import subprocess
import sys
import urllib.request

import pytest

from nsqpy.localcluster import DaemonProcess, nsqd_process
from tests.support.wire import http

DEFERRED = ("aiohttp", "prometheus_client", "cramjam", "yarl", "multidict")


@pytest.mark.parametrize("program", ["nsqd", "nsqlookupd"])
def test_the_entry_point_does_not_import_what_only_serving_needs(program):
    code = (f"import sys, nsqpy.cli.{program}; "
            f"print(' '.join(m for m in {DEFERRED!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_the_client_and_the_spark_source_load_aiohttp_only_to_ask_nsqlookupd():
    """Each of Spark's Python workers that reads nsqd imports the source and
    the client, as does every tool given nsqd's address: aiohttp would be a
    sixth of a second of each such start."""
    code = ("import sys, nsqpy.client, nsqpy.spark.source, nsqpy.spark.partitioned; "
            "print('aiohttp' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


#: what a plain start must not load before its listening lines: the HTTP API
#: and the Prometheus client come after them, the rest only when asked for
NOT_BEFORE_LISTENING = {
    "nsqd": (*DEFERRED, "nsqpy.nsqd.http", "nsqpy.topiclog", "nsqpy.nsqd.go_export", "nsqpy.nsqd.statsd"),
    "nsqlookupd": (*DEFERRED, "nsqpy.nsqlookupd.http"),
}


def _imported(lines) -> list[str]:
    """The modules ``-X importtime`` reported in ``lines``, in the order they finished."""
    return [line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")]


@pytest.mark.parametrize("program", ["nsqd", "nsqlookupd"])
def test_serving_code_loads_after_the_listening_lines_and_prometheus_with_the_first_scrape(
        program, tmp_path):
    """``-X importtime`` reports each import on stderr as it finishes, in
    order with the daemon's log lines."""
    args = ["-X", "importtime", "-m", f"nsqpy.cli.{program}", *_args(program, tmp_path, "127.0.0.1:0")]
    daemon = DaemonProcess(program, args, executable=sys.executable).start()
    try:
        lines = list(daemon.log_lines)
        first_listening = next(i for i, line in enumerate(lines) if "listening on" in line)
        before = _imported(lines[:first_listening])
        assert f"nsqpy.{program}.server" in before  # the imports are being reported
        assert [name for name in NOT_BEFORE_LISTENING[program] if name in before] == []
        assert http("GET", f"{daemon.http_url}/ping")[0] == 200
        daemon.wait_for_log(rf"\| +nsqpy\.{program}\.http$")  # the whole HTTP API is imported by now
        assert "prometheus_client" not in _imported(daemon.log_lines)
        assert http("GET", f"{daemon.http_url}/metrics")[0] == 200
        daemon.wait_for_log(r"\| +prometheus_client$")
    finally:
        assert daemon.stop() == 0


def _args(program: str, tmp_path, http_address: str) -> list[str]:
    args = ["--tcp-address=127.0.0.1:0", f"--http-address={http_address}"]
    return args + [f"--data-path={tmp_path}"] if program == "nsqd" else args


@pytest.mark.parametrize("program", ["nsqd", "nsqlookupd"])
def test_a_busy_http_port_is_refused_before_any_listening_line(program, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", f"nsqpy.cli.{program}",
                                 *_args(program, tmp_path, f"127.0.0.1:{port}")],
                                capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert "listening on" not in result.stderr
    fatal = [line for line in result.stderr.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and "address already in use" in fatal[0] and "--http-address" in fatal[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("program", ["nsqd", "nsqlookupd"])
def test_a_request_sent_as_soon_as_the_lines_are_out_is_answered(program, tmp_path):
    daemon = DaemonProcess(program, _args(program, tmp_path, "127.0.0.1:0"))
    daemon.start()
    try:
        with urllib.request.urlopen(f"{daemon.http_url}/ping", timeout=10) as response:
            assert response.status == 200 and response.read() == b"OK"
        with socket.create_connection(daemon.tcp_hostport, timeout=10):
            pass
    finally:
        assert daemon.stop() == 0


def test_a_busy_port_is_refused_before_the_data_dir_is_loaded(tmp_path):
    with nsqd_process(str(tmp_path)) as daemon:
        assert http("POST", f"{daemon.http_url}/topic/create?topic=kept")[0] == 200
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqd", f"--tcp-address={busy.getsockname()[0]}:"
                                 f"{busy.getsockname()[1]}", "--http-address=127.0.0.1:0", f"--data-path={tmp_path}"],
                                capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert "TOPIC(kept)" not in result.stderr  # nothing loaded before the one line that matters
    assert "address already in use" in result.stderr
