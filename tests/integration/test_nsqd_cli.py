"""The nsqd executable: flags, config file, startup errors, signals, restart."""

import os
import re
import signal
import subprocess
import sys

import pytest

from nsqpy.protocol import commands as cmd
from nsqpy.localcluster import DaemonProcess, nsqd_process
from tests.support.wire import WireConn, http_json


def run_nsqd(*args, timeout=20, cwd=None):
    return subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqd", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)


def test_version_on_stdout():
    result = run_nsqd("--version")
    assert result.returncode == 0
    assert re.fullmatch(r"nsqd v1\.3\.0 \(built w/python\d+\.\d+\.\d+\)\n", result.stdout)
    assert run_nsqd("-version").stdout == result.stdout


def test_every_go_flag_style_is_accepted(tmp_path):
    daemon = DaemonProcess("nsqd", [
        "-tcp-address", "127.0.0.1:0", "--http-address=127.0.0.1:0", f"-data-path={tmp_path}",
        "--mem-queue-size", "7", "--snappy", "--deflate=false", "-msg-timeout=1m30s",
        "--e2e-processing-latency-percentile=0.99,0.95", "--lookupd-tcp-address=127.0.0.1:1",
        "--lookupd-tcp-address", "127.0.0.1:2",
    ])
    daemon.start()
    try:
        url = daemon.http_url
        assert http_json("GET", f"{url}/config/mem_queue_size")[1] == 7
        assert http_json("GET", f"{url}/config/deflate")[1] is False
        assert http_json("GET", f"{url}/config/snappy")[1] is True
        assert http_json("GET", f"{url}/config/msg_timeout")[1] == 90_000_000_000
        assert http_json("GET", f"{url}/config/e2e_processing_latency_percentiles")[1] == [0.99, 0.95]
        assert http_json("GET", f"{url}/config/nsqlookupd_tcp_addresses")[1] == ["127.0.0.1:1", "127.0.0.1:2"]
    finally:
        daemon.stop()


def test_config_file_with_flags_taking_precedence(tmp_path):
    config = tmp_path / "nsqd.cfg"
    config.write_text(
        'mem_queue_size = 123\nmax_rdy_count = 50\nmsg_timeout = "5s"\nsync_timeout = 500\n'
        'nsqlookupd_tcp_addresses = ["127.0.0.1:4160"]\nid = 7\nunknown_key = 1\n'
    )
    daemon = DaemonProcess("nsqd", ["--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0",
                                    f"--data-path={tmp_path}", f"--config={config}", "--max-rdy-count=60"])
    daemon.start()
    try:
        url = daemon.http_url
        assert http_json("GET", f"{url}/config/mem_queue_size")[1] == 123
        assert http_json("GET", f"{url}/config/max_rdy_count")[1] == 60
        assert http_json("GET", f"{url}/config/msg_timeout")[1] == 5_000_000_000
        assert http_json("GET", f"{url}/config/sync_timeout")[1] == 500_000_000
        assert http_json("GET", f"{url}/config/id")[1] == 7
        assert http_json("GET", f"{url}/config/nsqlookupd_tcp_addresses")[1] == ["127.0.0.1:4160"]
    finally:
        daemon.stop()


def test_bad_flags_fail_with_one_clear_line(tmp_path):
    for args, fragment in [
        (["--mem-queue-size=lots"], "--mem-queue-size: 'lots' is not a number"),
        (["--msg-timeout=soon"], "--msg-timeout: invalid duration 'soon'"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--log-level=loud"], "--log-level: 'loud' is not one of"),
    ]:
        result = run_nsqd(f"--data-path={tmp_path}", *args)
        assert result.returncode == 2, args
        assert fragment in result.stderr, result.stderr
    result = run_nsqd(f"--data-path={tmp_path}", "--node-id=5000", "--tcp-address=127.0.0.1:0",
                      "--http-address=127.0.0.1:0")
    assert result.returncode == 1
    assert "--node-id 5000 must be in [0,1024)" in result.stderr


def test_a_bad_flag_names_the_flag_once():
    result = run_nsqd("--mem-queue-size=lots")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "nsqd: --mem-queue-size: 'lots' is not a number (decimal digits only) (see nsqd --help)"]


def test_host_and_a_bad_port_is_refused_not_made_a_socket_file(tmp_path):
    """NSQ reads 127.0.0.1:notaport as TCP (an unknown port); a unix socket's
    path has a / (or no : at all, as nsqd.sock)."""
    result = run_nsqd("--tcp-address=127.0.0.1:notaport", "--http-address=127.0.0.1:0",
                      f"--data-path={tmp_path}", cwd=tmp_path)
    assert result.returncode == 1
    fatal = [line for line in result.stderr.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and "listening" not in result.stderr, result.stderr
    assert fatal[0].endswith("FATAL: TCP: '127.0.0.1:notaport': port 'notaport' is not a number; "
                             "check --tcp-address (a unix socket's path has a /)"), fatal
    assert not (tmp_path / "127.0.0.1:notaport").exists()


def test_second_nsqd_on_the_same_data_path_refuses_to_start(tmp_path):
    first = nsqd_process(str(tmp_path)).start()
    try:
        result = run_nsqd("--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0", f"--data-path={tmp_path}")
        assert result.returncode == 1
        lines = [line for line in result.stderr.splitlines() if "FATAL" in line]
        assert len(lines) == 1
        assert "in use by another nsqd" in lines[0] and "--data-path" in lines[0]
    finally:
        first.stop()


def test_occupied_port_is_one_clear_line(tmp_path):
    first = nsqd_process(str(tmp_path / "a")).start()
    try:
        result = run_nsqd(f"--tcp-address={first.tcp_address}", "--http-address=127.0.0.1:0",
                          f"--data-path={tmp_path / 'b'}")
        assert result.returncode == 1
        assert f"TCP: listen ({first.tcp_address}) failed: address already in use" in result.stderr
        assert "Traceback" not in result.stderr
    finally:
        first.stop()


def test_sigint_and_sigterm_shut_down_cleanly_and_keep_the_pid(tmp_path):
    for sig in (signal.SIGTERM, signal.SIGINT):
        daemon = nsqd_process(str(tmp_path)).start()
        pid = daemon.process.pid
        # the process we started is the daemon itself (no wrapper in between)
        assert os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python")
        daemon.process.send_signal(sig)
        assert daemon.process.wait(15) == 0
        assert "exiting" in daemon.output


def test_messages_and_topics_survive_a_clean_restart(tmp_path):
    daemon = nsqd_process(str(tmp_path)).start()
    with WireConn(daemon.tcp_hostport) as c:
        c.send(cmd.mpub("kept", [b"1", b"2", b"3"]))
        c.expect_ok()
        c.subscribe("kept", "ch", rdy=1)
        in_flight = c.message()
        c.send(cmd.dpub("kept", 60_000, b"deferred"))
        c.expect_ok()
        assert http_json("POST", f"{daemon.http_url}/channel/pause?topic=kept&channel=ch")[0] == 200
    daemon.stop()
    assert (tmp_path / "nsqd.dat").exists()

    daemon = nsqd_process(str(tmp_path)).start()
    try:
        _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic=kept")
        (channel,) = stats["topics"][0]["channels"]
        assert channel["paused"] is True
        assert channel["depth"] == 4  # queued + in flight + deferred, all back
        http_json("POST", f"{daemon.http_url}/channel/unpause?topic=kept&channel=ch")
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("kept", "ch", rdy=10)
            messages = c.messages(4)
            assert sorted(m.body for m in messages) == [b"1", b"2", b"3", b"deferred"]
            redelivered = [m for m in messages if m.id == in_flight.id]
            assert redelivered[0].attempts == 2
    finally:
        daemon.stop()


@pytest.mark.parametrize("name", ["nsqd.sock", "nsqd:1.sock"])
def test_listens_on_a_unix_socket(tmp_path, name):
    import socket as socket_module

    path = str(tmp_path / name)  # a path with a / is a path, a : in it too
    daemon = DaemonProcess("nsqd", [f"--tcp-address={path}", "--http-address=127.0.0.1:0",
                                    f"--data-path={tmp_path}"])
    daemon.start()
    try:
        assert daemon.tcp_address == path
        _, info = http_json("GET", f"{daemon.http_url}/info")
        assert info["tcp_port"] == -1
        sock = socket_module.socket(socket_module.AF_UNIX)
        sock.connect(path)
        sock.sendall(b"  V2" + cmd.pub("unix", b"x"))
        assert sock.recv(10) == b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
        sock.close()
    finally:
        daemon.stop()
